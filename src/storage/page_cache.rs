//! Page-cache recycling for page-cache segments (`flush = never`).
//!
//! Why: left alone, the kernel keeps every written page cached until memory runs out, so
//! a broker writing at disk speed keeps taking fresh pages. Fresh pages are not free:
//! the dirty pages pile up until the kernel throttles writers in large bursts, and on a
//! VM whose free memory is handed back to the host (virtio-balloon free page reporting)
//! every fresh page faults on the host as well. Measured on the bench VM (6 GiB of 64 KiB
//! writes, `benches/page_cache_recycling.py`): plain buffered writes fall from
//! ~3 GB/s to ~260 MB/s after the first 2 GiB; starting writeback early alone does not
//! help (~250 MB/s); starting writeback early AND dropping written-back ranges beyond a
//! budget holds ~1.4–1.6 GB/s, because the same pages are reused.
//! In the broker (W1-like 15 s produce, `page_cache_bytes_per_shard` 0 against 2 GiB,
//! two runs each): about the same mean throughput, but produce p99.99 650–710 ms → ~33 ms
//! and max 0.8–1.1 s → 37–52 ms, and no collapse in the later seconds.
//!
//! What it does: each page-cache segment starts writeback (`sync_file_range(WRITE)`,
//! on the executor's blocking thread: it blocks while the device queue is full, see
//! `off_shard`) of every `WRITEBACK_WINDOW_BYTES` it has written, and hands the range to
//! its shard's [`PageCacheBudget`]. When the ranges handed over exceed the budget, the
//! oldest are dropped from the cache (`posix_fadvise(DONTNEED)`; pages still dirty or
//! under writeback are skipped by the kernel, never lost). Reads of dropped ranges go to
//! the disk with read-ahead (the file is advised sequential); recent data also sits in the
//! batch cache. Durability is unchanged: this never waits for or replaces fdatasync.
//!
//! One budget per shard (thread-local, like the fault injector): the shard's partitions
//! share it, oldest range first, whatever partition wrote it. Budget 0 = off (the kernel
//! decides, as with Apache Kafka).
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::rc::{Rc, Weak};

/// Writeback is started for every this many bytes a segment has written (and the range
/// is then charged to the budget). Large enough that the syscalls cost nothing per byte,
/// small enough that the dirty data of one partition stays well below the kernel's
/// background-writeback threshold.
pub const WRITEBACK_WINDOW_BYTES: u64 = 8 << 20;

thread_local! {
    /// This shard's budget (None: recycling off).
    static SHARD_BUDGET: RefCell<Option<Rc<PageCacheBudget>>> = const { RefCell::new(None) };
}

/// Sets the budget of the page-cache segments opened on this thread (this shard) from
/// now on; 0 turns recycling off.
pub fn set_shard_page_cache_budget(bytes: u64) {
    let budget = (bytes > 0).then(|| Rc::new(PageCacheBudget::new(bytes)));
    SHARD_BUDGET.with(|b| *b.borrow_mut() = budget);
}

/// The tracker a newly opened page-cache segment with descriptor `fd` uses, if this shard
/// recycles.
pub(super) fn track(fd: RawFd) -> Option<Rc<CachedFile>> {
    SHARD_BUDGET.with(|b| b.borrow().clone()).map(|budget| {
        Rc::new(CachedFile { fd, written_back_to: Cell::new(0), written_to: Cell::new(0), budget })
    })
}

/// A written range of one file, charged to the budget until dropped.
struct CachedRange {
    /// Dead once the file is closed: its descriptor is then never touched again.
    file: Weak<CachedFile>,
    start: u64,
    end: u64,
}

/// The written bytes a shard leaves in the page cache (see the module comment).
pub struct PageCacheBudget {
    limit_bytes: u64,
    charged_bytes: Cell<u64>,
    ranges: RefCell<VecDeque<CachedRange>>,
    dropped_bytes: Cell<u64>,
}

impl PageCacheBudget {
    fn new(limit_bytes: u64) -> PageCacheBudget {
        PageCacheBudget { limit_bytes, charged_bytes: Cell::new(0), ranges: RefCell::new(VecDeque::new()), dropped_bytes: Cell::new(0) }
    }

    /// Charges `[start, end)` of `file`, then drops the oldest ranges beyond the limit.
    fn charge(&self, file: &Rc<CachedFile>, start: u64, end: u64) {
        debug_assert!(start < end);
        self.ranges.borrow_mut().push_back(CachedRange { file: Rc::downgrade(file), start, end });
        self.charged_bytes.set(self.charged_bytes.get() + (end - start));
        while self.charged_bytes.get() > self.limit_bytes {
            let Some(oldest) = self.ranges.borrow_mut().pop_front() else { break };
            let len = oldest.end - oldest.start;
            self.charged_bytes.set(self.charged_bytes.get() - len);
            // A closed file's pages went with it (or belong to the kernel now).
            if let Some(f) = oldest.file.upgrade() {
                f.drop_from_cache(oldest.start, oldest.end);
                self.dropped_bytes.set(self.dropped_bytes.get() + len);
            }
        }
        // Invariant: what is charged is exactly the ranges still queued, within the limit.
        debug_assert!(self.charged_bytes.get() <= self.limit_bytes);
    }
}

/// One page-cache segment's progress (owned by its `SegmentFile`: dropped with it, so a
/// queued range of a closed file cannot reach a reused descriptor).
pub struct CachedFile {
    fd: RawFd,
    /// Writeback was started (and the budget charged) for `[0, written_back_to)`.
    written_back_to: Cell<u64>,
    /// The file's bytes end here (as far as this tracker saw writes).
    written_to: Cell<u64>,
    budget: Rc<PageCacheBudget>,
}

impl CachedFile {
    /// A write ending at `end` completed: start writeback of each whole window behind it.
    pub(super) fn wrote(self: &Rc<Self>, end: u64) {
        self.written_to.set(self.written_to.get().max(end));
        let from = self.written_back_to.get();
        if end >= from + WRITEBACK_WINDOW_BYTES {
            self.write_back(from, end);
        }
    }

    /// An fdatasync completed: everything written is clean; charge the rest.
    pub(super) fn synced(self: &Rc<Self>) {
        let (from, to) = (self.written_back_to.get(), self.written_to.get());
        if to > from {
            self.charge(from, to);
        }
    }

    /// The file was cut to `size`: forget progress beyond it.
    pub(super) fn truncated(&self, size: u64) {
        self.written_to.set(self.written_to.get().min(size));
        self.written_back_to.set(self.written_back_to.get().min(size));
    }

    fn write_back(self: &Rc<Self>, from: u64, to: u64) {
        // Only starts writeback of the range (SYNC_FILE_RANGE_WRITE waits for nothing
        // already under way); a failure is harmless (fdatasync still covers the data).
        off_shard(self.fd, move |fd| {
            // SAFETY: `fd` is the caller's own duplicate, open for the call (`off_shard`).
            let rc = unsafe { libc::sync_file_range(fd, from as i64, (to - from) as i64, libc::SYNC_FILE_RANGE_WRITE) };
            if rc != 0 {
                tracing::debug!(error = %std::io::Error::last_os_error(), "sync_file_range failed; the kernel writes back on its own");
            }
        });
        self.charge(from, to);
    }

    fn charge(self: &Rc<Self>, from: u64, to: u64) {
        self.written_back_to.set(to);
        self.budget.charge(self, from, to);
    }

    fn drop_from_cache(&self, start: u64, end: u64) {
        // DONTNEED drops only clean pages (dirty ones, or ones still under writeback, stay).
        off_shard(self.fd, move |fd| {
            // SAFETY: `fd` is the caller's own duplicate, open for the call (`off_shard`).
            let rc = unsafe { libc::posix_fadvise(fd, start as i64, (end - start) as i64, libc::POSIX_FADV_DONTNEED) };
            if rc != 0 {
                tracing::debug!(rc, "posix_fadvise(DONTNEED) failed; the pages stay cached");
            }
        });
    }
}

/// Runs `call` on a duplicate of `fd` on the executor's blocking thread, never on the
/// shard: sync_file_range blocks while the device queue is full (measured under W3, 50
/// MB/s: produce p99 14-20 ms and p99.9 44-46 ms with the calls on the shard thread,
/// 0.8 / 1.4-1.8 ms with recycling off), and a shard that blocks delays every request it
/// holds. The duplicate keeps the file open until the call is done, so a segment closed
/// meanwhile (or its descriptor number reused) is never touched. Best effort: without a
/// duplicate the call is skipped (the kernel then writes back and evicts on its own).
fn off_shard(fd: RawFd, call: impl FnOnce(RawFd) + Send + 'static) {
    // SAFETY: `fd` is open (the tracker lives inside the file that owns it); dup returns
    // a new descriptor this function owns, or -1.
    let dup = unsafe { libc::dup(fd) };
    if dup < 0 {
        return;
    }
    let blocking = glommio::executor().spawn_blocking(move || {
        call(dup);
        // SAFETY: `dup` is ours and closed once.
        unsafe { libc::close(dup) };
    });
    glommio::spawn_local(blocking).detach();
}

/// What this shard's budget holds and has dropped (for tests).
#[cfg(test)]
fn shard_page_cache_stats() -> Option<(u64, u64)> {
    SHARD_BUDGET.with(|b| b.borrow().as_ref().map(|b| (b.charged_bytes.get(), b.dropped_bytes.get())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::file::{FileRole, SegmentFile};
    use crate::storage::testing::run;
    use crate::storage::WriteMode;

    const MIB: u64 = 1 << 20;

    /// Pages of `[start, end)` of `path` resident in the page cache (mincore).
    fn resident_pages(path: &std::path::Path, start: u64, end: u64) -> usize {
        let file = std::fs::File::open(path).expect("open");
        let len = (end - start) as usize;
        // SAFETY: a private read-only mapping of an open file, unmapped below; mincore
        // only reports residency into `vec` (one byte per page).
        unsafe {
            let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file), start as i64);
            assert_ne!(addr, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(4096)];
            assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
            libc::munmap(addr, len);
            vec.iter().filter(|&&b| b & 1 == 1).count()
        }
    }

    async fn write_mib(f: &SegmentFile, at_mib: u64, count: u64, byte: u8) {
        for i in 0..count {
            let mut buf = f.alloc_write_buffer(MIB as usize);
            buf.as_bytes_mut().fill(byte);
            f.write_at(buf, (at_mib + i) * MIB).await.expect("write");
        }
    }

    #[test]
    fn written_back_ranges_beyond_the_budget_leave_the_page_cache_and_read_back_from_disk() {
        run(|dir| async move {
            set_shard_page_cache_budget(WRITEBACK_WINDOW_BYTES);
            let path = dir.join("00000000000000000000.log");
            let f = SegmentFile::open_rw_as(&path, FileRole::Segment, WriteMode::PageCache).await.expect("open");
            // The first window: writeback starts and it is charged, within the budget.
            write_mib(&f, 0, 8, 0xA1).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 0)));
            // Clean it, so the kernel can drop it when asked (dirty pages are skipped).
            f.fdatasync().await.expect("sync");
            assert!(resident_pages(&path, 0, 8 * MIB) > 0, "written pages start cached");
            // The second window exceeds the budget: the first is dropped from the cache.
            write_mib(&f, 8, 8, 0xB2).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 8 * MIB)));
            // The drop runs off the shard (`off_shard`): wait for it, within a generous bound.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while resident_pages(&path, 0, 8 * MIB) > 0 && std::time::Instant::now() < deadline {
                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert_eq!(resident_pages(&path, 0, 8 * MIB), 0, "the oldest window left the page cache");
            assert!(resident_pages(&path, 8 * MIB, 16 * MIB) > 0, "the newest window stays cached");
            // Dropped bytes are still the file's bytes (clean pages go, data stays).
            let back = f.read_bytes(MIB, 4096).await.expect("read");
            assert!(back.iter().all(|&b| b == 0xA1));
            // A partial window is charged at fdatasync (the roll's sync of a sealed segment).
            write_mib(&f, 16, 3, 0xC3).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 8 * MIB)), "no whole window yet");
            f.fdatasync().await.expect("sync");
            assert_eq!(shard_page_cache_stats(), Some((3 * MIB, 16 * MIB)), "charged 3 MiB, dropped the 8 MiB window before");
            set_shard_page_cache_budget(0);
        });
    }

    #[test]
    fn a_closed_files_ranges_are_discharged_without_touching_its_descriptor() {
        run(|dir| async move {
            set_shard_page_cache_budget(WRITEBACK_WINDOW_BYTES);
            let first = SegmentFile::open_rw_as(&dir.join("a.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&first, 0, 8, 1).await;
            drop(first);
            let second = SegmentFile::open_rw_as(&dir.join("b.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&second, 0, 8, 2).await;
            // The closed file's window left the budget but counts as nothing dropped.
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 0)));
            set_shard_page_cache_budget(0);
            // Budget off: page-cache files are not tracked.
            let third = SegmentFile::open_rw_as(&dir.join("c.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&third, 0, 8, 3).await;
            assert_eq!(shard_page_cache_stats(), None);
        });
    }
}
