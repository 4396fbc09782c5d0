//! Truncation (replication, issue 12): a follower cuts its divergent tail
//! (`LogWriter::truncate_to`, Kafka's `UnifiedLog.truncateTo`), or drops everything and
//! starts over at the leader's log start (`LogWriter::truncate_fully_and_start_at`); and
//! recovery cuts the log at a damaged sealed segment (`cut_damaged_sealed`).
//!
//! `truncate_to(offset)`: the batch holding `offset` and everything after it go; the log
//! ends at that batch's base (at `offset` on a batch boundary). It pauses the writer
//! (every appended byte written, no write, fdatasync or index save in flight, none
//! started until it ends) and keeps the cleaner from swapping segments meanwhile, finds
//! the batch by a short scan from the offset index, then applies the cut in memory all at
//! once (segments above leave the log; the cut segment forgets its tail, indexes, batch
//! cache, written/synced offsets and largest timestamp follow; see `Log::apply_truncation`)
//! and last on disk. The cut segment, when sealed and not emptied, stays sealed and a new
//! empty active segment starts at the new end: it may be a compacted segment whose
//! offsets skip, which recovery accepts in a sealed segment only. O_DIRECT segments need
//! no tail block re-read: the writer never rewrites a block holding written data, so the
//! next write starts after padding at the cut (`after_padding`), and the hole between
//! reads as that padding.
//!
//! On-disk order, so that a crash at any point leaves the old log or a dense prefix of
//! it (never a gap, never a stale index taken for a new segment's): the segments above go
//! highest first, each durable (directory fsync) before the next; the cut segment's saved
//! indexes go; its file is cut and fdatasync'ed with every file still holding unsynced
//! writes; then, for a segment that stays sealed, its new indexes and the new active
//! segment's file. A crash before the cut is durable reopens the segment as the last,
//! scanned like any active segment. A disk error half-way takes the log offline (as a
//! failed fdatasync does) until a restart re-validates it.
//!
//! Waiters (`Durable`) for offsets above the new end fail with `StorageError::Truncated`
//! (nothing there was acknowledged: the writer is idle, so every earlier waiter was
//! answered). Callers hold the partition's append lock and cut the layer above's state
//! (producer state, leader-epoch cache, high watermark, snapshots at offsets above the
//! end) themselves; storage deletes the segments' own files and seal snapshots.
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::batch_reader::{BatchReader, ReadStop};
use super::dma::{open_segment, remove_file, sync_dir};
use super::file::SegmentFile;
use super::log::Log;
use super::log_writer::LogWriter;
use super::recovery::remove_segment_files;
use super::segment::{index_path, log_file_name, snapshot_path, time_index_path, Segment};
use super::{Result, StorageError, WriteMode};

/// Bytes read at a time while looking for the cut (about two index intervals are read).
const CUT_SCAN_CHUNK_BYTES: usize = 64 << 10;

/// Where to look for the batch holding the truncation offset (`Log::truncation_plan`).
pub(super) struct TruncationPlan {
    /// The segment holding the offset.
    pub(super) base: i64,
    pub(super) file: Rc<SegmentFile>,
    /// Scan start: a batch boundary (an indexed batch) and that batch's offset.
    pub(super) scan_from: u64,
    pub(super) scan_from_offset: i64,
    /// End of the segment's whole written batches.
    pub(super) end: u64,
    /// Largest (timestamp, offset) of the batches before `scan_from`.
    pub(super) max_before: (i64, i64),
    pub(super) sealed: bool,
    pub(super) next_offset: i64,
}

/// The cut `find_cut` found.
pub(super) struct Cut {
    /// The offset asked for.
    pub(super) offset: i64,
    /// File position of the first batch that goes (the segment keeps the bytes before).
    pub(super) position: u64,
    /// The log end after the cut.
    pub(super) new_end: i64,
    /// Largest (timestamp, offset) of the batches the segment keeps.
    pub(super) max_timestamp: (i64, i64),
    /// The cut segment is sealed and keeps batches: it stays sealed.
    pub(super) keep_sealed: bool,
}

/// Holds `Log::set_truncating` (no cleaner swap starts) for the length of a truncation.
struct TruncationClaim {
    log: Rc<RefCell<Log>>,
}

impl TruncationClaim {
    async fn take(log: &Rc<RefCell<Log>>) -> TruncationClaim {
        // A swap in flight is a rename and a directory fsync: short; wait it out.
        while log.borrow().swap_in_progress() {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        log.borrow_mut().set_truncating(true);
        TruncationClaim { log: log.clone() }
    }
}

impl Drop for TruncationClaim {
    fn drop(&mut self) {
        self.log.borrow_mut().set_truncating(false);
    }
}

impl LogWriter {
    /// Kafka's truncateTo: the batch holding `offset` and everything after it go (see the
    /// module comment); returns the new log end offset, durable on disk. Nothing to do
    /// (the current end) when `offset` is at or past the end;
    /// `StorageError::OffsetOutOfRange` below the log start offset. The end may fall below
    /// the log start when the batch holding it straddles it; the log start follows.
    pub async fn truncate_to(self: &Rc<Self>, offset: i64) -> Result<i64> {
        let _paused = self.pause().await?;
        let log = self.log().clone();
        let _claim = TruncationClaim::take(&log).await;
        let (dir, mode) = (log.borrow().dir().to_path_buf(), log.borrow().write_mode());
        // Retention may move the log start (never past the end) while the cut is looked
        // for: plan again then.
        let (plan, cut, removed, start_before) = loop {
            let (start, end) = {
                let l = log.borrow();
                l.check_online()?;
                (l.log_start_offset(), l.next_offset())
            };
            if offset < start {
                return Err(StorageError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: end });
            }
            if offset >= end {
                return Ok(end);
            }
            let plan = log.borrow().truncation_plan(offset).ok_or_else(|| StorageError::Corrupt {
                what: format!("log {}", dir.display()),
                detail: format!("no segment holds offset {offset} in [{start}, {end})"),
            })?;
            let cut = find_cut(&plan, offset, self.name()).await?;
            // A segment that stays sealed gets a fresh handle: a clean that read it before
            // the cut then fails to swap its old copy in (`Log::begin_swap` checks the file).
            let fresh = match cut.keep_sealed {
                true => Some(open_segment(&dir.join(log_file_name(plan.base)), plan.file.mode()).await?),
                false => None,
            };
            let applied = log.borrow_mut().apply_truncation(&plan, &cut, fresh);
            if let Some(removed) = applied {
                break (plan, cut, removed, start);
            }
        };
        let (topic, partition) = self.name();
        tracing::info!(topic, partition, offset, log_end_offset = cut.new_end, segments_removed = removed.len(), "truncated the log");
        let on_disk = async {
            remove_top_down(&dir, removed).await?;
            if plan.sealed {
                // They describe the segment's old end.
                remove_file(&index_path(&dir, plan.base)).await?;
                remove_file(&time_index_path(&dir, plan.base)).await?;
            }
            let file = log.borrow().segment(plan.base).map(|s| s.file.clone()).ok_or(StorageError::Closed)?;
            file.truncate(cut.position).await?;
            // Everything kept is synced, so the cut and what precedes it survive together.
            let mut files = log.borrow_mut().take_unsynced_files();
            if !files.iter().any(|f| Rc::ptr_eq(f, &file)) {
                files.push(file);
            }
            for f in files {
                f.fdatasync().await?;
            }
            sync_dir(&dir).await?;
            log.borrow_mut().mark_synced_after_cut();
            if cut.keep_sealed {
                let file = create_segment_file(&dir, cut.new_end, mode).await?;
                log.borrow_mut().add_active_after_cut(file, crate::runtime::now_ms());
                // The cut segment's new indexes (it is sealed, written and synced).
                self.save_sealed().await;
            }
            let start = log.borrow().log_start_offset();
            if start != start_before {
                Log::save_log_start_offset(&dir, start).await?;
            }
            Ok::<(), StorageError>(())
        }
        .await;
        if let Err(e) = on_disk {
            self.offline_after_failed("truncating the log", &e);
            return Err(e);
        }
        self.after_truncation(cut.new_end, cut.new_end, &StorageError::Truncated { log_end_offset: cut.new_end });
        Ok(cut.new_end)
    }

    /// Kafka's truncateFullyAndStartAt: every segment goes and the log starts over, empty,
    /// at `offset` (log start = log end = `offset`, saved), whatever it held before (a
    /// follower whose fetch offset fell below the leader's log start). Durable on return.
    pub async fn truncate_fully_and_start_at(self: &Rc<Self>, offset: i64) -> Result<()> {
        let _paused = self.pause().await?;
        let log = self.log().clone();
        let _claim = TruncationClaim::take(&log).await;
        let (dir, mode, bases) = {
            let l = log.borrow();
            l.check_online()?;
            if offset < 0 {
                return Err(StorageError::OffsetOutOfRange { offset, log_start_offset: l.log_start_offset(), log_end_offset: l.next_offset() });
            }
            (l.dir().to_path_buf(), l.write_mode(), l.segment_bases())
        };
        // The log start first: a crash from here on reopens what is left of the old log
        // (a dense prefix, as segments go highest first) with its start clamped to it, or
        // an empty log at `offset` (`Log::open` starts a log without segments there).
        let on_disk = async {
            Log::save_log_start_offset(&dir, offset).await?;
            for &b in bases.iter().rev() {
                remove_segment_files(&dir, b).await?;
                sync_dir(&dir).await?;
            }
            create_segment_file(&dir, offset, mode).await
        }
        .await;
        let file = match on_disk {
            Ok(file) => file,
            Err(e) => {
                self.offline_after_failed("truncating the log fully", &e);
                return Err(e);
            }
        };
        let old = log.borrow_mut().reset_to(offset, file);
        let (topic, partition) = self.name();
        tracing::info!(topic, partition, offset, segments_removed = old.len(), "truncated the log fully; it starts over");
        drop(old);
        // Every waiter was for the old log.
        self.after_truncation(offset, i64::MIN, &StorageError::Truncated { log_end_offset: offset });
        Ok(())
    }
}

/// Scans the cut segment from the plan's start for the first batch ending at or after
/// `offset`. Damage before it (a bad batch) cuts there instead, with a warning.
async fn find_cut(plan: &TruncationPlan, offset: i64, (topic, partition): (&str, i32)) -> Result<Cut> {
    let mut reader = BatchReader::new(plan.file.clone(), plan.scan_from, plan.end, CUT_SCAN_CHUNK_BYTES);
    let mut max = plan.max_before;
    // The end of the batches kept so far: position, next offset.
    let (mut kept_end, mut kept_next) = (plan.scan_from, plan.scan_from_offset);
    let found = 'scan: loop {
        let chunk = reader.next_chunk().await?;
        if chunk.is_empty() {
            break None;
        }
        // The batches of one chunk are contiguous (padding only comes between chunks).
        let mut pos = reader.chunk_start();
        for (h, bytes) in chunk {
            if h.last_offset() >= offset {
                // A batch boundary: `offset` itself, or inside this batch (its base), or
                // in a gap compaction left before it.
                break 'scan Some((pos, offset.min(h.base_offset)));
            }
            if h.max_timestamp > max.0 {
                max = (h.max_timestamp, h.base_offset);
            }
            pos += bytes.len() as u64;
            (kept_end, kept_next) = (pos, h.last_offset() + 1);
        }
    };
    let (position, new_end) = match (found, reader.stop()) {
        (Some(at), _) => at,
        (None, Some(ReadStop::Torn { position, error } | ReadStop::Invalid { position, error })) => {
            tracing::warn!(topic, partition, offset, position, error = %error, file = %log_file_name(plan.base),
                "bad batch below the truncation offset; cutting there");
            (kept_end, kept_next)
        }
        // Every batch read ends below `offset`: a gap at the end of a compacted sealed
        // segment (the end stays within it), else the end of the data read.
        (None, _) if plan.sealed => (kept_end, offset.min(plan.next_offset)),
        (None, _) => (kept_end, kept_next),
    };
    if position == 0 {
        // Nothing kept: the emptied segment is the active one, dense from its base.
        return Ok(Cut { offset, position, new_end: plan.base, max_timestamp: (-1, -1), keep_sealed: false });
    }
    Ok(Cut { offset, position, new_end, max_timestamp: max, keep_sealed: plan.sealed })
}

/// Removes `removed` (ascending) from disk, highest first, each durable before the next:
/// a crash leaves a dense prefix of the segments.
async fn remove_top_down(dir: &Path, removed: Vec<Segment>) -> Result<()> {
    let bases: Vec<i64> = removed.iter().map(|s| s.base_offset).collect();
    // Reads still holding a file keep it open (and readable) until they finish.
    drop(removed);
    for &b in bases.iter().rev() {
        remove_segment_files(dir, b).await?;
        sync_dir(dir).await?;
    }
    Ok(())
}

/// Creates the file of a new empty segment at `base` (first removing any file a crash
/// left under its name that could be taken for its own) and syncs the directory.
async fn create_segment_file(dir: &Path, base: i64, mode: WriteMode) -> Result<Rc<SegmentFile>> {
    remove_file(&index_path(dir, base)).await?;
    remove_file(&time_index_path(dir, base)).await?;
    remove_file(&snapshot_path(dir, base)).await?;
    let path = dir.join(log_file_name(base));
    let file = open_segment(&path, mode).await?;
    if file.file_size().await? > 0 {
        file.truncate(0).await?;
        file.fdatasync().await?;
    }
    sync_dir(dir).await?;
    Ok(file)
}

/// Recovery (`Log::open`, after an unclean shutdown): `seg` is a sealed segment verified
/// and found damaged; it holds the whole batches before the first bad one, its file not
/// cut yet. The segments after it (`later`, ascending, the active one included) are
/// removed first, highest first; then the file is cut and synced. Returns the segment and
/// the new empty active segment after it — or the segment alone, emptied, as the active
/// one when nothing before the damage was valid.
pub(super) async fn cut_damaged_sealed(dir: &Path, mut seg: Segment, later: &[i64], mode: WriteMode) -> Result<(Segment, Option<Segment>)> {
    for &b in later.iter().rev() {
        remove_segment_files(dir, b).await?;
        sync_dir(dir).await?;
    }
    let base = seg.base_offset;
    remove_file(&index_path(dir, base)).await?;
    remove_file(&time_index_path(dir, base)).await?;
    let position = seg.written();
    seg.file.truncate(position).await?;
    seg.file.fdatasync().await?;
    sync_dir(dir).await?;
    if position == 0 {
        return Ok((seg, None));
    }
    let end = seg.next_offset();
    let max = (seg.max_timestamp(), seg.offset_of_max_timestamp());
    // Sealed, ending exactly at the cut (it may be compacted: only a sealed segment's
    // offsets may skip).
    seg.cut_to(position, end, max, false);
    match seg.save_indexes().await {
        Ok(()) => seg.indexes_saved = true,
        // The writer saves them once it syncs (`Log::sealed_needing_indexes`).
        Err(e) => tracing::warn!(dir = %dir.display(), base, error = %e, "could not save the indexes of a cut segment"),
    }
    let file = create_segment_file(dir, end, mode).await?;
    let active = Segment::empty(dir, end, file, crate::runtime::now_ms());
    Ok((seg, Some(active)))
}
