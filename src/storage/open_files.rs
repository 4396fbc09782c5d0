//! The shard's descriptor budget for segment files.
//!
//! Why: every partition keeps at least its active segment open, so a broker holding more
//! partitions than its open-files limit allows (a hard RLIMIT_NOFILE of 20,000 on the
//! bench machine, with 100k partitions wanted: issue 29's W12) would fail to open the rest
//! with EMFILE. Kafka has the same limit and leaves it to the operator's `ulimit`; here
//! each shard keeps at most `limit` segment descriptors open and closes the least
//! recently used idle ones beyond it. A closed `SegmentFile` reopens on its next
//! operation (`file.rs`), so an idle partition costs no descriptor.
//!
//! What it tracks: segment files without a fault injector (`SegmentFile::closable`). A
//! file is idle when no operation holds its open descriptor (each operation holds it for
//! its duration), so closing never cuts an operation short; a page-cache file's unsynced
//! bytes stay in the page cache (the inode's), and its next fdatasync on a new descriptor
//! covers them (and reports a writeback error not yet seen, as Linux does for a new
//! descriptor since 4.13).
//!
//! Cost: nothing per operation beyond a counter; the budget acts once the opens since its
//! last round pass `limit`, and a round closes down to `limit - limit / 8`, so rounds
//! (a sort of the open files) come at most once per `limit / 8` opens.
//!
//! One budget per shard (thread-local, like the page-cache budget). No limit (the default,
//! and in tests that do not set one) = never close.
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use super::file::SegmentFile;

thread_local! {
    static SHARD_BUDGET: DescriptorBudget = DescriptorBudget::new();
}

/// Sets this shard's budget: at most `limit` segment descriptors open (None: no limit).
pub fn set_shard_open_segment_files(limit: Option<usize>) {
    SHARD_BUDGET.with(|b| b.limit.set(limit.map(|l| l.max(MIN_LIMIT))));
}

/// Below this a shard would reopen its hot files all the time.
const MIN_LIMIT: usize = 64;

/// Segment descriptors this shard holds open now, and how many it closed for the budget
/// since it started (for metrics and tests).
pub fn shard_open_segment_files() -> (usize, u64) {
    SHARD_BUDGET.with(|b| (b.open_now(), b.closed.get()))
}

/// A use of an open file: the shard-wide clock that orders files by recency.
pub(super) fn tick() -> u64 {
    SHARD_BUDGET.with(|b| {
        let t = b.clock.get() + 1;
        b.clock.set(t);
        t
    })
}

/// `file` opened (or reopened) a descriptor: tracked, and the budget enforced.
pub(super) fn opened(file: &Rc<SegmentFile>) {
    SHARD_BUDGET.with(|b| b.opened(file));
}

struct DescriptorBudget {
    limit: Cell<Option<usize>>,
    /// Every closable file that opened a descriptor since the last round (and those open
    /// then); dead or closed entries leave at the next round.
    files: RefCell<Vec<Weak<SegmentFile>>>,
    clock: Cell<u64>,
    closed: Cell<u64>,
}

impl DescriptorBudget {
    fn new() -> DescriptorBudget {
        DescriptorBudget { limit: Cell::new(None), files: RefCell::new(Vec::new()), clock: Cell::new(0), closed: Cell::new(0) }
    }

    fn open_now(&self) -> usize {
        self.files.borrow().iter().filter_map(Weak::upgrade).map(|f| f.descriptors()).sum()
    }

    fn opened(&self, file: &Rc<SegmentFile>) {
        let len = {
            let mut files = self.files.borrow_mut();
            files.push(Rc::downgrade(file));
            files.len()
        };
        match self.limit.get() {
            Some(limit) if len > limit => self.round(limit),
            Some(_) => {}
            // No limit: only counted (the gauge); dropped files are forgotten whenever
            // the list doubles, so it stays within twice the files alive.
            None if len >= 64 && len.is_power_of_two() => self.files.borrow_mut().retain(|w| w.upgrade().is_some_and(|f| f.descriptors() > 0)),
            None => {}
        }
    }

    /// Forgets dead and closed files, then closes the least recently used idle ones until
    /// `limit - limit / 8` descriptors are open (fewer if too many are busy).
    fn round(&self, limit: usize) {
        let mut open: Vec<(u64, Rc<SegmentFile>)> = {
            let mut files = self.files.borrow_mut();
            let live: Vec<Rc<SegmentFile>> = files.drain(..).filter_map(|w| w.upgrade()).filter(|f| f.descriptors() > 0).collect();
            files.extend(live.iter().map(Rc::downgrade));
            live.into_iter().map(|f| (f.last_used(), f)).collect()
        };
        let mut descriptors: usize = open.iter().map(|(_, f)| f.descriptors()).sum();
        let target = limit - limit / 8;
        if descriptors <= limit {
            return;
        }
        open.sort_unstable_by_key(|(used, _)| *used);
        let mut closed = 0u64;
        for (_, f) in &open {
            if descriptors <= target {
                break;
            }
            let n = f.descriptors();
            if f.close_if_idle() {
                descriptors -= n;
                closed += 1;
            }
        }
        self.closed.set(self.closed.get() + closed);
        self.files.borrow_mut().retain(|w| w.upgrade().is_some_and(|f| f.descriptors() > 0));
        // Invariant: the budget holds unless more files than it are busy at once.
        debug_assert!(descriptors <= target || open.iter().filter(|(_, f)| f.descriptors() > 0).all(|(_, f)| f.is_busy()));
        if descriptors > limit {
            tracing::warn!(open = descriptors, limit, "more segment files busy at once than the shard's descriptor budget");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::file::FileRole;
    use crate::storage::testing::run;
    use crate::storage::WriteMode;

    /// Opens `count` segments of kind `mode` in `dir`, each holding its own 4 KiB of byte `i`.
    async fn segments(dir: &std::path::Path, mode: WriteMode, count: usize) -> Vec<Rc<SegmentFile>> {
        let mut files = Vec::new();
        for i in 0..count {
            let f = SegmentFile::open_rw_as(&dir.join(format!("{mode:?}-{i}.log")), FileRole::Segment, mode).await.expect("open");
            let mut buf = f.alloc_write_buffer(4096);
            buf.as_bytes_mut().fill(i as u8);
            assert_eq!(f.write_at(buf, 0).await.expect("write"), 4096);
            files.push(f);
        }
        files
    }

    #[test]
    fn a_shard_keeps_its_segment_descriptors_within_the_budget_and_closed_files_reopen_intact() {
        run(|dir| async move {
            set_shard_open_segment_files(Some(MIN_LIMIT));
            for mode in [WriteMode::PageCache, WriteMode::Direct] {
                let files = segments(&dir, mode, 5 * MIN_LIMIT).await;
                let (open, closed) = shard_open_segment_files();
                assert!(open <= MIN_LIMIT, "{mode:?}: {open} descriptors open over a budget of {MIN_LIMIT}");
                assert!(closed > 0, "{mode:?}: the budget closed idle files");
                assert!(files.iter().filter(|f| f.descriptors() == 0).count() >= 4 * MIN_LIMIT - MIN_LIMIT / 8);
                // Every file, closed or not, reads back its own bytes, takes another write
                // and syncs (each reopening as needed), and the budget still holds.
                for (i, f) in files.iter().enumerate() {
                    assert_eq!(f.read_bytes(0, 4096).await.expect("read").as_ref(), &[i as u8; 4096][..], "{mode:?} file {i}");
                    let mut buf = f.alloc_write_buffer(4096);
                    buf.as_bytes_mut().fill(!(i as u8));
                    f.write_at(buf, 4096).await.expect("write after reopen");
                    f.fdatasync().await.expect("sync after reopen");
                    assert_eq!(f.file_size().await.expect("size"), 8192);
                }
                assert!(shard_open_segment_files().0 <= MIN_LIMIT);
                for i in 0..files.len() {
                    let disk = std::fs::read(dir.join(format!("{mode:?}-{i}.log"))).expect("read the file");
                    assert_eq!(disk.len(), 8192);
                    assert!(disk[..4096].iter().all(|&b| b == i as u8) && disk[4096..].iter().all(|&b| b == !(i as u8)), "{mode:?} file {i} on disk");
                }
            }
        });
    }

    #[test]
    fn without_a_budget_files_stay_open_and_are_counted() {
        run(|dir| async move {
            set_shard_open_segment_files(None);
            let files = segments(&dir, WriteMode::PageCache, 3 * MIN_LIMIT).await;
            assert_eq!(shard_open_segment_files(), (3 * MIN_LIMIT, 0));
            assert!(files.iter().all(|f| f.descriptors() == 1));
            drop(files);
            assert_eq!(shard_open_segment_files().0, 0, "closed files are not counted");
        });
    }
}
