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
//! `off_shard`) of every `WRITEBACK_WINDOW_BYTES` it has written, up to the last whole
//! page (see `written_back_end`), and hands the range to its shard's
//! [`PageCacheBudget`]. When the ranges handed over exceed the budget, the oldest are
//! dropped from the cache (`posix_fadvise(DONTNEED)`, in runs of up to
//! `DROP_RUN_BYTES`; pages still dirty or under writeback are skipped by the kernel,
//! never lost). Reads of dropped ranges go to
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
/// is then charged to the budget). Small, because each writeback holds locks of the file
/// the next append needs (ext4: the inode's `i_data_sem` while it allocates the delayed
/// blocks, which may wait on reading a block bitmap; the folios it submits), and a small
/// range holds them briefly. Measured under a W3-like load (50 MB/s, 6 partitions, 16 KiB
/// batches, 20 s, release, quiet machine; `benches/w3_page_cache.sh`, figures in
/// `benches/results/w3_page_cache/20261201-writeback-window.txt`): produce p99.9 22-46 ms
/// with 8 MiB windows ending at the write position, 1.4-1.8 ms with 1 MiB windows ending
/// at the last whole page, as low as with no writeback at all; W1-like throughput within
/// the noise (a few %). Still large enough that the syscalls cost nothing per byte.
pub const WRITEBACK_WINDOW_BYTES: u64 = 1 << 20;

/// The page size writeback stops at (see `written_back_end`). 4 KiB on x86-64 and the
/// common arm64 kernels; a larger real page only means the partial page is written back
/// sometimes, which is safe (just slower).
const PAGE_BYTES: u64 = 4096;

/// Adjacent written-back ranges of one file are charged as one range up to this size, so
/// dropping them costs one `posix_fadvise` per this many bytes, not one per window.
const DROP_RUN_BYTES: u64 = 8 << 20;

/// Where writeback of a file written up to `end` stops: the start of the page holding
/// `end`. The partial page at the write position is the next append's page; writing it
/// back makes that append wait for it (its folio lock: seen in `__filemap_get_folio`
/// under W3) and, on ext4, probably also gives it allocated blocks, so the append would
/// extend the on-disk size through the journal instead of as a delayed allocation.
fn written_back_end(end: u64) -> u64 {
    end - end % PAGE_BYTES
}

/// Writebacks (sync_file_range calls) a shard has handed to its blocking thread and not
/// seen finish. While this many are out, a file that completes a window does not start
/// another: its next call then covers everything since its last. Small windows would
/// otherwise queue up behind a saturated device (each call waits in the block layer's
/// writeback throttle) at hundreds per second, and the drops queued behind them would come
/// late; with the limit, windows grow by themselves when the device is the bottleneck.
const MAX_WRITEBACKS_IN_FLIGHT: u32 = 2;

thread_local! {
    /// This shard's budget (None: recycling off).
    static SHARD_BUDGET: RefCell<Option<Rc<PageCacheBudget>>> = const { RefCell::new(None) };
    /// This shard's writebacks in flight (see MAX_WRITEBACKS_IN_FLIGHT).
    static WRITEBACKS_IN_FLIGHT: Cell<u32> = const { Cell::new(0) };
}

/// Sets the budget of the page-cache segments opened on this thread (this shard) from
/// now on; 0 turns recycling off.
pub fn set_shard_page_cache_budget(bytes: u64) {
    let budget = (bytes > 0).then(|| Rc::new(PageCacheBudget::new(bytes)));
    SHARD_BUDGET.with(|b| *b.borrow_mut() = budget);
}

/// The tracker a newly opened page-cache segment with descriptor `fd` uses, if this shard
/// recycles; `progress` is what a previous descriptor's tracker reached
/// (`CachedFile::progress`; zeros for a new file).
pub(super) fn track(fd: RawFd, progress: (u64, u64)) -> Option<Rc<CachedFile>> {
    let (written_back_to, written_to) = progress;
    SHARD_BUDGET
        .with(|b| b.borrow().clone())
        .map(|budget| Rc::new(CachedFile { fd, written_back_to: Cell::new(written_back_to), written_to: Cell::new(written_to), budget }))
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
        {
            let mut ranges = self.ranges.borrow_mut();
            match ranges.back_mut() {
                // Invariant: a run is one file's contiguous bytes, at most DROP_RUN_BYTES.
                // (A dead file's run is never extended: a new file may sit at its old address.)
                Some(last)
                    if last.end == start
                        && last.end - last.start + (end - start) <= DROP_RUN_BYTES
                        && last.file.strong_count() > 0
                        && std::ptr::eq(last.file.as_ptr(), Rc::as_ptr(file)) =>
                {
                    last.end = end;
                }
                _ => ranges.push_back(CachedRange { file: Rc::downgrade(file), start, end }),
            }
        }
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
        let (from, to) = (self.written_back_to.get(), written_back_end(end));
        if to >= from + WRITEBACK_WINDOW_BYTES && WRITEBACKS_IN_FLIGHT.get() < MAX_WRITEBACKS_IN_FLIGHT {
            self.write_back(from, to);
        }
    }

    /// An fdatasync completed: everything written is clean; charge the rest.
    pub(super) fn synced(self: &Rc<Self>) {
        let (from, to) = (self.written_back_to.get(), self.written_to.get());
        if to > from {
            self.charge(from, to);
        }
    }

    /// `(written_back_to, written_to)`, for the tracker of the file's next descriptor
    /// when the shard's descriptor budget closes this one (`open_files.rs`).
    pub(super) fn progress(&self) -> (u64, u64) {
        (self.written_back_to.get(), self.written_to.get())
    }

    /// The file was cut to `size`: forget progress beyond it.
    pub(super) fn truncated(&self, size: u64) {
        self.written_to.set(self.written_to.get().min(size));
        self.written_back_to.set(self.written_back_to.get().min(size));
    }

    fn write_back(self: &Rc<Self>, from: u64, to: u64) {
        // Only starts writeback of the range (SYNC_FILE_RANGE_WRITE waits for nothing
        // already under way); a failure is harmless (fdatasync still covers the data).
        // Counted before the call is handed over: `done` may run as soon as the spawned
        // task is first polled, before `off_shard` returns.
        let in_flight = WRITEBACKS_IN_FLIGHT.get() + 1;
        debug_assert!(in_flight <= MAX_WRITEBACKS_IN_FLIGHT);
        WRITEBACKS_IN_FLIGHT.set(in_flight);
        let handed_over = std::time::Instant::now();
        let started = off_shard(
            self.fd,
            move |fd| {
                // SAFETY: `fd` is the caller's own duplicate, open for the call (`off_shard`).
                let rc = unsafe { libc::sync_file_range(fd, from as i64, (to - from) as i64, libc::SYNC_FILE_RANGE_WRITE) };
                if rc != 0 {
                    tracing::debug!(error = %std::io::Error::last_os_error(), "sync_file_range failed; the kernel writes back on its own");
                }
            },
            move || {
                WRITEBACKS_IN_FLIGHT.set(WRITEBACKS_IN_FLIGHT.get() - 1);
                crate::metrics::with(|m| m.writeback.record(handed_over.elapsed()));
            },
        );
        if !started {
            WRITEBACKS_IN_FLIGHT.set(WRITEBACKS_IN_FLIGHT.get() - 1);
        }
        self.charge(from, to);
    }

    fn charge(self: &Rc<Self>, from: u64, to: u64) {
        self.written_back_to.set(to);
        self.budget.charge(self, from, to);
    }

    fn drop_from_cache(&self, start: u64, end: u64) {
        // DONTNEED drops only clean pages (dirty ones, or ones still under writeback, stay).
        off_shard(
            self.fd,
            move |fd| {
                // SAFETY: `fd` is the caller's own duplicate, open for the call (`off_shard`).
                let rc = unsafe { libc::posix_fadvise(fd, start as i64, (end - start) as i64, libc::POSIX_FADV_DONTNEED) };
                if rc != 0 {
                    tracing::debug!(rc, "posix_fadvise(DONTNEED) failed; the pages stay cached");
                }
            },
            || {},
        );
    }
}

/// Runs `call` on a duplicate of `fd` on the executor's blocking thread, never on the
/// shard: sync_file_range blocks while the device queue is full (measured under W3, 50
/// MB/s: produce p99 14-20 ms and p99.9 44-46 ms with the calls on the shard thread,
/// 0.8 / 1.4-1.8 ms with recycling off), and a shard that blocks delays every request it
/// holds. The duplicate keeps the file open until the call is done, so a segment closed
/// meanwhile (or its descriptor number reused) is never touched. Best effort: without a
/// duplicate the call is skipped (the kernel then writes back and evicts on its own).
/// `done` runs on the shard once the call returned; false if the call was skipped (and
/// `done` with it).
fn off_shard(fd: RawFd, call: impl FnOnce(RawFd) + Send + 'static, done: impl FnOnce() + 'static) -> bool {
    // SAFETY: `fd` is open (the tracker lives inside the file that owns it); dup returns
    // a new descriptor this function owns, or -1.
    let dup = unsafe { libc::dup(fd) };
    if dup < 0 {
        return false;
    }
    let blocking = glommio::executor().spawn_blocking(move || {
        call(dup);
        // SAFETY: `dup` is ours and closed once.
        unsafe { libc::close(dup) };
    });
    glommio::spawn_local(async move {
        blocking.await;
        done();
    })
    .detach();
    true
}

/// This shard's writebacks in flight (for tests).
#[cfg(test)]
fn writebacks_in_flight() -> u32 {
    WRITEBACKS_IN_FLIGHT.get()
}

/// What this shard's budget holds and has dropped (for tests).
#[cfg(test)]
fn shard_page_cache_stats() -> Option<(u64, u64)> {
    SHARD_BUDGET.with(|b| b.borrow().as_ref().map(|b| (b.charged_bytes.get(), b.dropped_bytes.get())))
}

/// The charged runs of this shard's budget, oldest first (for tests).
#[cfg(test)]
fn shard_page_cache_runs() -> Vec<(u64, u64)> {
    SHARD_BUDGET.with(|b| b.borrow().as_ref().map(|b| b.ranges.borrow().iter().map(|r| (r.start, r.end)).collect()).unwrap_or_default())
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
            let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, std::os::fd::AsRawFd::as_raw_fd(&file), start as i64);
            assert_ne!(addr, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(4096)];
            assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
            libc::munmap(addr, len);
            vec.iter().filter(|&&b| b & 1 == 1).count()
        }
    }

    async fn write_mib(f: &SegmentFile, at_mib: u64, count: u64, byte: u8) {
        for i in 0..count {
            write_bytes(f, (at_mib + i) * MIB, MIB, byte).await;
        }
    }

    /// Writes, then waits for the shard's writebacks to finish: a window completed while
    /// MAX_WRITEBACKS_IN_FLIGHT are out waits for the next, and these tests count windows.
    async fn write_bytes(f: &SegmentFile, at: u64, len: u64, byte: u8) {
        let mut buf = f.alloc_write_buffer(len as usize);
        buf.as_bytes_mut().fill(byte);
        f.write_at(buf, at).await.expect("write");
        while writebacks_in_flight() > 0 {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[test]
    fn written_back_ranges_beyond_the_budget_leave_the_page_cache_and_read_back_from_disk() {
        run(|dir| async move {
            set_shard_page_cache_budget(DROP_RUN_BYTES);
            let path = dir.join("00000000000000000000.log");
            let f = SegmentFile::open_rw_as(&path, FileRole::Segment, WriteMode::PageCache).await.expect("open");
            // Eight windows: writeback starts for each, charged as one run within the budget.
            write_mib(&f, 0, 8, 0xA1).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 0)));
            assert_eq!(shard_page_cache_runs(), vec![(0, 8 * MIB)]);
            // Clean it, so the kernel can drop it when asked (dirty pages are skipped).
            f.fdatasync().await.expect("sync");
            assert!(resident_pages(&path, 0, 8 * MIB) > 0, "written pages start cached");
            // The next run exceeds the budget: the first is dropped from the cache.
            write_mib(&f, 8, 8, 0xB2).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 8 * MIB)));
            // The drop runs off the shard (`off_shard`): wait for it, within a generous bound.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while resident_pages(&path, 0, 8 * MIB) > 0 && std::time::Instant::now() < deadline {
                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert_eq!(resident_pages(&path, 0, 8 * MIB), 0, "the oldest run left the page cache");
            assert!(resident_pages(&path, 8 * MIB, 16 * MIB) > 0, "the newest run stays cached");
            // Dropped bytes are still the file's bytes (clean pages go, data stays).
            let back = f.read_bytes(MIB, 4096).await.expect("read");
            assert!(back.iter().all(|&b| b == 0xA1));
            // Less than a window is charged at fdatasync (the roll's sync of a sealed segment).
            write_bytes(&f, 16 * MIB, MIB / 2, 0xC3).await;
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 8 * MIB)), "no whole window yet");
            f.fdatasync().await.expect("sync");
            assert_eq!(shard_page_cache_stats(), Some((MIB / 2, 16 * MIB)), "charged 512 KiB, dropped the run before");
            set_shard_page_cache_budget(0);
        });
    }

    #[test]
    fn writeback_stops_before_the_page_the_next_append_writes() {
        run(|dir| async move {
            set_shard_page_cache_budget(64 * MIB);
            let f = SegmentFile::open_rw_as(&dir.join("a.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            // Appends of odd sizes (a seeded sequence): what is written back (charged) always
            // ends on a page boundary at or below the write position, and falls behind it by
            // less than a window plus a page.
            let (mut end, mut seed) = (0u64, 0x9E37_79B9_7F4A_7C15u64);
            for _ in 0..200 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let len = 1 + seed % (300 << 10);
                write_bytes(&f, end, len, 0x5A).await;
                end += len;
                let (charged, dropped) = shard_page_cache_stats().expect("budget");
                let written_back = charged + dropped;
                assert_eq!(written_back % PAGE_BYTES, 0, "written back to {written_back}, a partial page (end {end})");
                assert!(written_back <= end - end % PAGE_BYTES, "written back {written_back} beyond the last whole page of {end}");
                assert!(end - written_back < WRITEBACK_WINDOW_BYTES + PAGE_BYTES, "writeback lags: {written_back} of {end}");
            }
            // Adjacent windows of the file are one run each up to DROP_RUN_BYTES.
            let runs = shard_page_cache_runs();
            assert!(runs.windows(2).all(|w| w[0].1 == w[1].0), "runs are contiguous: {runs:?}");
            assert!(runs.iter().all(|r| r.1 - r.0 <= DROP_RUN_BYTES), "runs at most {DROP_RUN_BYTES}: {runs:?}");
            assert!(runs.len() as u64 <= end / DROP_RUN_BYTES + 2, "windows merged into runs: {} runs for {end} bytes", runs.len());
            // A sync charges the rest, the partial page too (it is clean now).
            f.fdatasync().await.expect("sync");
            assert_eq!(shard_page_cache_stats().map(|(c, d)| c + d), Some(end));
            set_shard_page_cache_budget(0);
        });
    }

    #[test]
    fn a_closed_files_ranges_are_discharged_without_touching_its_descriptor() {
        run(|dir| async move {
            set_shard_page_cache_budget(DROP_RUN_BYTES);
            let first = SegmentFile::open_rw_as(&dir.join("a.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&first, 0, 8, 1).await;
            drop(first);
            let second = SegmentFile::open_rw_as(&dir.join("b.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&second, 0, 8, 2).await;
            // The closed file's run left the budget but counts as nothing dropped.
            assert_eq!(shard_page_cache_stats(), Some((8 * MIB, 0)));
            set_shard_page_cache_budget(0);
            // Budget off: page-cache files are not tracked.
            let third = SegmentFile::open_rw_as(&dir.join("c.log"), FileRole::Segment, WriteMode::PageCache).await.expect("open");
            write_mib(&third, 0, 8, 3).await;
            assert_eq!(shard_page_cache_stats(), None);
        });
    }
}
