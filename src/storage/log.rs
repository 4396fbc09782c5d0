//! The log of one partition: its segments, log start offset and batch cache.
//!
//! `Log` is plain state with no awaits inside; its writer (`log_writer.rs`: write jobs,
//! syncs, index saves) and the owning partition (segment creation, retention, cleaning)
//! drive I/O around it, so no `RefCell` borrow is ever held across an await.
//!
//! Offsets: `append` takes batches at exactly `next_offset()` (dense, strictly
//! increasing; asserted); `written_offset() <= next_offset()` always, and only the
//! writer's completed writes move `written_offset()` forward, over the contiguous prefix
//! of completed writes (several may be in flight; see `segment.rs`).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::file::SegmentFile;
use crate::runtime::file_slice::FileSlice;
use bytes::{Bytes, BytesMut};

use super::batch_cache::{BatchCache, CachedBatch};
use super::dir_survey::DirSurvey;
use super::dma::{sync_dir, write_checked_file};
use super::recovery::{open_active, open_sealed, remove_segment_files, ScanOutcome, SealedOpen};
use super::segment::{index_file_name, log_file_name, time_index_file_name, SealSnapshot, Segment, WriteJob};
use super::truncate::{Cut, TruncationPlan};
use super::{LogConfig, Result, StorageError};
use crate::record::BatchHeader;

const LOG_START_MAGIC: u32 = 0x534c_4c53; // "SLLS"
const LOG_START_VERSION: u16 = 1;
pub(super) const LOG_START_FILE: &str = "log-start-offset";

pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    cache: BatchCache,
    /// Offsets below this are on disk and fdatasync'ed. Never moves past a failed
    /// fdatasync (invariant 8: `offline` is set then, and `mark_synced` refuses).
    synced_offset: i64,
    /// Why the log went offline: an fdatasync failed. Sticky until the broker restarts
    /// (recovery re-validates what is on disk).
    offline: Option<String>,
    /// Segments written since the last sync.
    unsynced: Vec<i64>,
    /// Compaction: offsets below this are in segments the cleaner already cleaned
    /// (Kafka's cleaner checkpoint); sealed bytes above it are "dirty".
    first_dirty_offset: i64,
    /// A clean pass is running (one at a time per log).
    cleaner_running: bool,
    /// The cleaner met damaged data here; it leaves this log alone (Kafka marks such a
    /// partition uncleanable) until the broker restarts.
    uncleanable: bool,
    /// Base of the segment whose files the cleaner is swapping; retention leaves it
    /// (and everything after it) alone until the swap is done.
    swapping: Option<i64>,
    /// A truncation is running (`truncate.rs`): the cleaner may not start a swap.
    truncating: bool,
    /// See `marker_taken_unsynced`.
    marker_taken_unsynced: bool,
}

/// What `Log::open` found.
pub struct OpenedLog {
    pub log: Log,
    /// Valid batches of the active segment, in order.
    pub active_batches: Vec<BatchHeader>,
    pub truncated_bytes: u64,
    /// The directory's survey, holding what the log did not read (`DirSurvey`).
    pub survey: DirSurvey,
}

/// Where to read a fetch from disk.
pub struct DiskRead {
    /// Base offset of the segment read.
    pub base_offset: i64,
    pub file: Rc<SegmentFile>,
    pub position: u64,
    /// End of the bytes on disk in this segment.
    pub end: u64,
}

impl Log {
    pub async fn open(dir: &Path, config: LogConfig) -> Result<OpenedLog> {
        let mut opened = Self::open_surveyed(super::dir_survey::survey(dir).await?, config).await?;
        if opened.log.marker_taken_unsynced() {
            super::clean_shutdown::sync_taken_marker(dir).await?;
            opened.log.mark_marker_taken_synced();
        }
        Ok(opened)
    }

    /// `open` of the directory `survey` looked at; the survey comes back in `OpenedLog`
    /// holding the files the log did not read (the partition's checkpoints).
    pub async fn open_surveyed(mut survey: DirSurvey, config: LogConfig) -> Result<OpenedLog> {
        let dir = &survey.dir().to_path_buf();
        if survey.listing.leftovers_removed > 0 {
            tracing::info!(dir = %dir.display(), files = survey.listing.leftovers_removed, "removed files of an interrupted log clean or segment deletion");
        }
        let bases = std::mem::take(&mut survey.listing.bases);
        let checkpoint = survey
            .checked_file(LOG_START_FILE, LOG_START_MAGIC, LOG_START_VERSION)
            .await
            .unwrap_or(None)
            .and_then(|p| p.get(..8).map(|b| i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])));
        // Taken by now; a crash once that is synced counts as unclean.
        let clean = super::clean_shutdown::take_surveyed_marker(&mut survey).await?;
        let marker_taken_unsynced = survey.marker_taken_unsynced;
        let verify = config.verify_sealed_after_unclean_shutdown && !clean;
        if verify && bases.len() > 1 {
            tracing::info!(dir = %dir.display(), sealed = bases.len() - 1, "no clean-shutdown marker: verifying the sealed segments");
        }
        let mut segments = BTreeMap::new();
        let mut active_batches = Vec::new();
        let mut truncated_bytes = 0;
        let mode = config.write_mode;
        if let Some((&last, sealed)) = bases.split_last() {
            let mut cut_short = None;
            for (i, &base) in sealed.iter().enumerate() {
                let next_base = bases[i + 1];
                match open_sealed(dir, base, next_base, config.index_interval_bytes, mode, verify).await? {
                    SealedOpen::Whole(seg) => {
                        segments.insert(base, seg);
                    }
                    SealedOpen::LostTail(outcome) => {
                        // A crash cut a sealed segment the writer had not synced yet. Later
                        // segments hold nothing synced either (one sync covers every file
                        // written before it), so the log ends in this one and continues
                        // densely from there.
                        tracing::warn!(dir = %dir.display(), base, end = outcome.segment.next_offset(), next_base,
                            "a crash cut an unsynced sealed segment; dropping the later segments");
                        for &later in bases[i + 1..].iter().rev() {
                            remove_segment_files(dir, later).await?;
                        }
                        cut_short = Some((base, outcome));
                        break;
                    }
                    SealedOpen::Damaged { outcome, position, detail } => {
                        tracing::warn!(file = %dir.join(log_file_name(base)).display(), offset = outcome.segment.next_offset(),
                            position, detail = %detail, later_segments = bases.len() - i - 1,
                            "damaged sealed segment after an unclean shutdown: the log is cut at its first bad batch \
                             (later segments removed; a replica refetches them from its leader)");
                        let cut_bytes = outcome.truncated_bytes;
                        let (seg, active) = super::truncate::cut_damaged_sealed(dir, outcome.segment, &bases[i + 1..], mode).await?;
                        truncated_bytes += cut_bytes;
                        let active = match active {
                            Some(active) => {
                                segments.insert(base, seg);
                                active
                            }
                            // Nothing valid in it: it is the (empty) active segment.
                            None => seg,
                        };
                        let outcome = ScanOutcome { segment: active, batches: Vec::new(), truncated_bytes: 0 };
                        cut_short = Some((outcome.segment.base_offset, outcome));
                        break;
                    }
                }
            }
            let (active, outcome) = match cut_short {
                Some(found) => found,
                None => {
                    let listed = survey.listing.contains(&index_file_name(last)) || survey.listing.contains(&time_index_file_name(last));
                    (last, open_active(dir, last, config.index_interval_bytes, mode, listed).await?)
                }
            };
            active_batches = outcome.batches;
            truncated_bytes += outcome.truncated_bytes;
            segments.insert(active, outcome.segment);
        } else {
            // A log truncated fully (`truncate_fully_and_start_at`) whose first segment a
            // crash kept from being created starts at its saved log start.
            let start = checkpoint.unwrap_or(0).max(0);
            let file = super::dma::open_segment(&dir.join(log_file_name(start)), mode).await?;
            // The segment's directory entry is durable before anything is written in it.
            sync_dir(dir).await?;
            segments.insert(start, Segment::empty(dir, start, file, crate::runtime::now_ms()));
        }
        let first_base = segments.keys().next().copied().unwrap_or(0);
        let first_dirty_offset = match survey.listing.contains(super::compaction::CHECKPOINT_FILE) {
            true => super::compaction::load_checkpoint(dir).await.unwrap_or(0),
            false => 0,
        };
        let mut log = Log {
            dir: dir.to_path_buf(),
            cache: BatchCache::new(config.cache_bytes),
            config,
            segments,
            log_start_offset: first_base,
            synced_offset: 0,
            offline: None,
            unsynced: Vec::new(),
            first_dirty_offset,
            cleaner_running: false,
            uncleanable: false,
            swapping: None,
            truncating: false,
            marker_taken_unsynced,
        };
        let end = log.next_offset();
        log.log_start_offset = checkpoint.unwrap_or(first_base).clamp(first_base, end);
        log.synced_offset = end;
        // A truncation may have left the cleaner's checkpoint past the end.
        log.first_dirty_offset = log.first_dirty_offset.min(end);
        Ok(OpenedLog { log, active_batches, truncated_bytes, survey })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The open took the clean-shutdown marker (`dir_survey`) and that is not durable yet:
    /// nothing may write to the log until the owner syncs it (one `syncfs` for a batch of
    /// opens) and calls `mark_marker_taken_synced`. Otherwise a crash could leave the
    /// clean marker over a log that changed, and the next open would trust its sealed
    /// segments unread.
    pub fn marker_taken_unsynced(&self) -> bool {
        self.marker_taken_unsynced
    }

    pub fn mark_marker_taken_synced(&mut self) {
        self.marker_taken_unsynced = false;
    }

    /// Invariant: a log is changed only once its marker's removal is durable.
    fn assert_changeable(&self) {
        debug_assert!(!self.marker_taken_unsynced, "{}: changed before the clean-shutdown marker's taking was synced", self.dir.display());
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: LogConfig) {
        self.cache.set_budget(config.cache_bytes);
        self.config = config;
    }

    /// Changes only the batch cache budget (the shard splits its budget over partitions).
    pub fn set_cache_budget(&mut self, bytes: usize) {
        self.config.cache_bytes = bytes;
        self.cache.set_budget(bytes);
    }

    fn active(&self) -> &Segment {
        // Invariant: a log always has at least one segment (open creates one).
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }

    /// The log end offset: next offset to assign.
    pub fn next_offset(&self) -> i64 {
        self.active().next_offset()
    }

    /// Offsets below this are on disk (the write completed).
    pub fn written_offset(&self) -> i64 {
        // Segments are written in order, so the first one with unwritten data bounds it.
        for seg in self.segments.values() {
            if seg.written_next_offset() < seg.next_offset() {
                return seg.written_next_offset();
            }
        }
        self.next_offset()
    }

    pub fn synced_offset(&self) -> i64 {
        self.synced_offset
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// True when a batch of `len` bytes must go into a new segment.
    pub fn should_roll(&self, len: usize, now_ms: i64) -> bool {
        let a = self.active();
        a.size() > 0
            && (a.size() + len as u64 > self.config.segment_bytes
                || now_ms - a.created_ms >= self.config.segment_ms
                || a.next_offset() - a.base_offset >= i64::from(u32::MAX) - i64::from(i32::MAX))
    }

    /// Path of the segment a roll would create now.
    pub fn next_segment_path(&self) -> PathBuf {
        self.dir.join(log_file_name(self.next_offset()))
    }

    /// Seals the active segment and makes `file` (created at `next_segment_path`, its
    /// directory entry not synced yet) active. `snapshot` is saved as `<base>.snapshot`
    /// once the sealed segment is synced (by the writer, off the append path).
    pub fn roll(&mut self, file: Rc<SegmentFile>, now_ms: i64, snapshot: Option<SealSnapshot>) {
        self.assert_changeable();
        let base = self.next_offset();
        let sealed = self.active_mut();
        sealed.sealed = true;
        sealed.release_stage();
        sealed.snapshot = snapshot;
        let mut seg = Segment::empty(&self.dir, base, file, now_ms);
        seg.dir_synced = false;
        self.segments.insert(base, seg);
    }

    /// How new segments are written (from the config; a change applies at the next roll).
    pub fn write_mode(&self) -> super::WriteMode {
        self.config.write_mode
    }

    /// Copies `src` (the next batch to append) into the active segment's stage buffer:
    /// the one copy of a produced batch (`segment.rs`). Patch the bytes, then `append`
    /// them frozen.
    pub fn stage_batch(&mut self, src: &[u8]) -> BytesMut {
        self.active_mut().stage(src)
    }

    /// Appends a batch (base offset already assigned = `next_offset()`).
    pub fn append(&mut self, header: &BatchHeader, batch: Bytes) {
        self.assert_changeable();
        // Strictly increasing; dense on a leader (it assigns `next_offset()`: asserted in
        // `Partition::append`). A follower copies its leader's batches as they are, and a
        // compacted leader's cleaned segments skip the offsets of removed batches.
        assert!(header.base_offset >= self.next_offset(), "offsets are strictly increasing");
        let interval = self.config.index_interval_bytes;
        self.active_mut().append(header, batch.clone(), interval);
        self.cache.push(CachedBatch { base_offset: header.base_offset, last_offset: header.last_offset(), bytes: batch });
    }

    /// The writes to start now, oldest segment first. A segment's partial O_DIRECT tail
    /// is written (padded) once nothing else of it is in flight, so data never waits in
    /// memory while its device is idle. A newer segment is written only once the older
    /// ones are fully written (a failed write then never leaves a hole between segments).
    /// Appends the jobs to `jobs` (the writer's reused list: no allocation per pass).
    pub fn take_writes(&mut self, jobs: &mut Vec<(i64, WriteJob)>) {
        for (&base, seg) in self.segments.iter_mut() {
            while let Some(job) = seg.take_write(seg.writes_in_flight() == 0 || seg.sealed) {
                jobs.push((base, job));
            }
            if !seg.is_fully_written() {
                break;
            }
        }
    }

    /// Writes in flight over all segments.
    pub fn writes_in_flight(&self) -> usize {
        self.segments.values().map(|s| s.writes_in_flight()).sum()
    }

    pub fn has_pending_writes(&self) -> bool {
        self.segments.values().any(|s| s.has_pending())
    }

    pub fn complete_write(&mut self, base: i64, end: u64) {
        if let Some(seg) = self.segments.get_mut(&base) {
            seg.complete_write(end);
            if !self.unsynced.contains(&base) {
                self.unsynced.push(base);
            }
        }
    }

    /// A write failed: drop every appended batch not on disk. Returns the segments
    /// created after the failure point (empty on disk; the caller deletes their files,
    /// so recovery never sees a gap in base offsets), and the (file, logical end) of each
    /// segment that lost staged bytes: a failed write may have left some of them in the
    /// file past that end, which the caller trims (see `LogWriter::on_write_failure`).
    pub fn rollback_unwritten(&mut self) -> (Vec<Segment>, Vec<(Rc<SegmentFile>, u64)>) {
        let trims: Vec<(Rc<SegmentFile>, u64)> = self.segments.values().filter(|s| s.has_unwritten()).map(|s| (s.file.clone(), s.written())).collect();
        // Writes go oldest segment first (`take_writes`), so everything after the first
        // segment with unwritten bytes was never written at all.
        let first_unwritten = self.segments.values().find(|s| !s.is_fully_written()).map(|s| s.base_offset);
        let mut removed = Vec::new();
        if let Some(first) = first_unwritten {
            let later: Vec<i64> = self.segments.range(first + 1..).map(|(&b, _)| b).collect();
            for b in later {
                if let Some(seg) = self.segments.remove(&b) {
                    assert_eq!(seg.written(), 0, "a segment after an unwritten one has nothing on disk");
                    removed.push(seg);
                }
            }
        }
        for seg in self.segments.values_mut() {
            seg.rollback_unwritten();
        }
        let active = self.active_mut();
        active.sealed = false;
        // Its seal snapshot described an end that no longer exists.
        active.snapshot = None;
        let end = self.next_offset();
        self.cache.truncate_from(end);
        (removed, trims)
    }

    /// Files to fdatasync now; call `mark_synced(offset)` once they all are.
    pub fn take_unsynced_files(&mut self) -> Vec<Rc<SegmentFile>> {
        let bases = std::mem::take(&mut self.unsynced);
        bases.iter().filter_map(|b| self.segments.get(b)).map(|s| s.file.clone()).collect()
    }

    /// Segments whose directory entry is not synced yet (a roll created them).
    pub fn segments_needing_dir_sync(&self) -> Vec<i64> {
        self.segments.values().filter(|s| !s.dir_synced).map(|s| s.base_offset).collect()
    }

    /// The directory was synced after the files of segments `bases` were created.
    pub fn mark_dir_synced(&mut self, bases: &[i64]) {
        for b in bases {
            if let Some(s) = self.segments.get_mut(b) {
                s.dir_synced = true;
            }
        }
    }

    pub fn mark_synced(&mut self, offset: i64) {
        // Invariant 8: after a failed fdatasync nothing more is ever reported durable.
        assert!(self.offline.is_none(), "mark_synced on a log whose fdatasync failed");
        self.synced_offset = self.synced_offset.max(offset);
    }

    /// An fdatasync failed: the log stops serving and never reports more synced data.
    pub fn set_offline(&mut self, reason: String) {
        if self.offline.is_none() {
            self.offline = Some(reason);
        }
    }

    /// `StorageError::Offline` once an fdatasync failed.
    pub fn check_online(&self) -> Result<()> {
        match &self.offline {
            None => Ok(()),
            Some(reason) => Err(StorageError::Offline { reason: reason.clone() }),
        }
    }

    pub fn is_offline(&self) -> bool {
        self.offline.is_some()
    }

    /// Sealed segments fully written and synced whose indexes are not saved yet.
    pub fn sealed_needing_indexes(&self) -> Vec<i64> {
        self.segments
            .values()
            .filter(|s| s.sealed && !s.indexes_saved && s.is_fully_written() && s.next_offset() <= self.synced_offset)
            .map(|s| s.base_offset)
            .collect()
    }

    pub fn segment(&self, base: i64) -> Option<&Segment> {
        self.segments.get(&base)
    }

    pub fn mark_indexes_saved(&mut self, base: i64) {
        if let Some(s) = self.segments.get_mut(&base) {
            s.indexes_saved = true;
        }
    }

    /// Serves from the cache when it covers `offset`.
    pub fn read_cached(&self, offset: i64, max_offset: i64, max_bytes: usize, min_one_batch: bool, out: &mut crate::record::BatchList) -> Option<usize> {
        self.cache.read(offset, max_offset, max_bytes, min_one_batch, out)
    }

    /// Where on disk to start reading for the first batch holding an offset >= `offset`:
    /// the segment holding `offset`, or the next one when `offset` falls in a gap
    /// compaction left at a segment's end (or below the first segment's base).
    pub fn locate(&self, offset: i64) -> Option<DiskRead> {
        let seg = self.segment_for(offset)?;
        Some(DiskRead { base_offset: seg.base_offset, file: seg.file.clone(), position: seg.position_for(offset), end: seg.written() })
    }

    /// The written batches from `offset` on, below `max_offset`, at most `max_bytes`, as
    /// a slice of their segment file to send with `sendfile` (`runtime/file_slice.rs`), when
    /// that is possible without reading them: a page-cache segment, a batch indexed at
    /// exactly `offset` (a consumer that read up to an indexed batch start before: where
    /// every read ends, see `chunk_end`), an end on a written batch boundary within the
    /// limits (the segment's written end or an indexed batch start), and every page of
    /// the range in the page cache now. `None` otherwise: the caller reads (and copies).
    /// Whole batches only, within one segment, possibly fewer bytes than `max_bytes`
    /// allows (up to one index interval less): a consumer reads on from where it ends.
    pub fn file_slice(&self, offset: i64, max_offset: i64, max_bytes: usize) -> Option<FileSlice> {
        let seg = self.segment_for(offset)?;
        let fd = seg.file.shared_fd()?;
        let start = seg.indexed_position_of(offset)?;
        let end = seg.written_batches_end(start, start.saturating_add(max_bytes as u64), max_offset)?;
        debug_assert!(end > start && end - start <= max_bytes as u64);
        if !crate::runtime::file_slice::is_cached(std::os::fd::AsRawFd::as_raw_fd(&*fd), start, end - start) {
            return None;
        }
        Some(FileSlice::new(fd, start, (end - start) as usize))
    }

    /// The segment holding `offset`, or the first after it (compaction may have removed
    /// the offsets at a segment's end).
    fn segment_for(&self, offset: i64) -> Option<&Segment> {
        let from = self.segments.range(..=offset).next_back().map(|(&b, _)| b).unwrap_or(i64::MIN);
        self.segments.range(from..).map(|(_, s)| s).find(|s| offset < s.next_offset())
    }

    /// Where a read of at most `max_len` bytes from `position` of the segment with base
    /// `base_offset` should end so that it holds whole batches only: the last indexed
    /// batch start inside the range (the offset index has one at least every
    /// `index_interval_bytes`), or `position + max_len` when none is (a batch larger than
    /// the range; `BatchReader` then reads it whole). A fetch read that ended anywhere else
    /// would keep the cut tail of the next batch alive with the batches it returns (each
    /// is a view of the read buffer) and read that tail twice; with batches near the chunk
    /// size, that doubled the memory of large fetches. Only a hint: if the segment was
    /// replaced meanwhile (compaction, deletion), a cut read is still handled.
    pub fn chunk_end(&self, base_offset: i64, position: u64, max_len: usize) -> u64 {
        let limit = position.saturating_add(max_len as u64);
        self.segments.get(&base_offset).and_then(|s| s.batch_start_in(position, limit)).unwrap_or(limit)
    }

    /// The segment after the one with base `base_offset`, read from its start (a read
    /// that found nothing at or after its offset in a compacted segment continues here).
    pub fn locate_after(&self, base_offset: i64) -> Option<DiskRead> {
        let (_, seg) = self.segments.range(base_offset.saturating_add(1)..).next()?;
        Some(DiskRead { base_offset: seg.base_offset, file: seg.file.clone(), position: 0, end: seg.written() })
    }

    /// Segments to scan (in order) for the first timestamp >= `timestamp`:
    /// (file, start position, end, segment base).
    pub fn timestamp_scan_plan(&self, timestamp: i64) -> Vec<DiskRead> {
        self.segments
            .values()
            .filter(|s| s.max_timestamp() >= timestamp && s.written() > 0)
            .map(|s| DiskRead { base_offset: s.base_offset, file: s.file.clone(), position: s.position_for_timestamp(timestamp), end: s.written() })
            .collect()
    }

    /// (max timestamp, base offset of the batch holding it) over the whole log.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.segments.values().filter(|s| s.offset_of_max_timestamp() >= 0).map(|s| (s.max_timestamp(), s.offset_of_max_timestamp())).fold(
            None,
            |acc: Option<(i64, i64)>, x| match acc {
                Some(a) if a.0 >= x.0 => Some(a),
                _ => Some(x),
            },
        )
    }

    /// Moves the log start offset forward (DeleteRecords, retention) and returns the
    /// segments now wholly below it, removed from the log; the caller deletes their files.
    pub fn advance_log_start(&mut self, offset: i64) -> Vec<Segment> {
        self.assert_changeable();
        assert!(offset <= self.next_offset(), "log start offset cannot pass the log end");
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
        }
        self.cache.evict_below(self.log_start_offset);
        let mut removed = Vec::new();
        while self.segments.len() > 1 {
            let first = match self.segments.values().next() {
                Some(s) => s,
                None => break,
            };
            // Only sealed segments that are fully synced are removed, and not one whose
            // cleaned copy is being swapped in (the next call removes it).
            if first.next_offset() <= self.log_start_offset
                && first.sealed
                && first.next_offset() <= self.synced_offset
                && self.swapping != Some(first.base_offset)
            {
                let base = first.base_offset;
                if let Some(s) = self.segments.remove(&base) {
                    removed.push(s);
                }
            } else {
                break;
            }
        }
        removed
    }

    pub async fn save_log_start_offset(dir: &Path, offset: i64) -> Result<()> {
        write_checked_file(&dir.join(LOG_START_FILE), LOG_START_MAGIC, LOG_START_VERSION, &offset.to_be_bytes()).await
    }

    /// Retention: the new log start offset that time and size limits ask for (never
    /// touching the active segment), or None.
    pub fn retention_target(&self, now_ms: i64) -> Option<i64> {
        // cleanup.policy=compact alone: records live until compaction supersedes them.
        if !self.config.delete {
            return None;
        }
        let mut target = None;
        let sealed: Vec<&Segment> = self.segments.values().filter(|s| s.sealed).collect();
        if self.config.retention_ms >= 0 {
            for s in &sealed {
                // A segment compaction emptied holds nothing to keep.
                if s.size() == 0 || (s.max_timestamp() >= 0 && now_ms - s.max_timestamp() > self.config.retention_ms) {
                    target = Some(s.next_offset());
                } else {
                    break;
                }
            }
        }
        if self.config.retention_bytes >= 0 {
            let mut size = self.size_bytes() as i64;
            for s in &sealed {
                if size - s.size() as i64 >= self.config.retention_bytes {
                    size -= s.size() as i64;
                    target = Some(target.unwrap_or(i64::MIN).max(s.next_offset()));
                } else {
                    break;
                }
            }
        }
        target.filter(|&t| t > self.log_start_offset)
    }

    /// Sealed segments whose data is synced and whose indexes and seal snapshot are
    /// saved (what tiered storage may upload): (base offset, next segment's base, size in
    /// bytes), in offset order.
    pub fn sealed_and_saved(&self) -> Vec<(i64, i64, u64)> {
        self.segments.values().filter(|s| s.sealed && s.indexes_saved).map(|s| (s.base_offset, s.next_offset(), s.size())).collect()
    }

    /// Bytes of the segments holding offsets above `offset` (what only the local log
    /// has, for a tiered log whose remote copy ends at `offset`).
    pub fn bytes_above(&self, offset: i64) -> u64 {
        self.segments.values().filter(|s| s.next_offset() > offset + 1).map(|s| s.size()).sum()
    }

    /// All segment files, for deleting the whole log.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    /// A sealed segment wholly below `written` still waits for its indexes and seal
    /// snapshot to be saved (the writer syncs, then saves them). Allocates nothing: the
    /// writer asks on every pass.
    pub fn has_unsaved_sealed(&self, written: i64) -> bool {
        self.segments.len() > 1 && self.segments.values().any(|s| s.sealed && !s.indexes_saved && s.next_offset() <= written)
    }
}

/// Compaction support (the cleaner in partition/cleaner.rs drives it; see compaction.rs).
impl Log {
    pub fn first_dirty_offset(&self) -> i64 {
        self.first_dirty_offset
    }

    pub fn set_first_dirty_offset(&mut self, offset: i64) {
        // Never past the end: a clean that read segments a truncation then cut ends late.
        self.first_dirty_offset = self.first_dirty_offset.max(offset).min(self.next_offset());
    }

    pub fn is_uncleanable(&self) -> bool {
        self.uncleanable
    }

    pub fn mark_uncleanable(&mut self) {
        self.uncleanable = true;
    }

    /// Claims the cleaner for this log; false when a clean is already running.
    pub fn begin_clean(&mut self) -> bool {
        self.assert_changeable();
        !std::mem::replace(&mut self.cleaner_running, true)
    }

    pub fn end_clean(&mut self) {
        assert!(self.swapping.is_none(), "a clean ends after its last swap");
        self.cleaner_running = false;
    }

    /// Sealed segments the cleaner may rewrite: fully written and synced, indexes saved
    /// (so no index save of the log writer is in flight for them).
    fn cleanable(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values().filter(|s| s.sealed && s.indexes_saved && s.is_fully_written() && s.next_offset() <= self.synced_offset)
    }

    /// Kafka's cleanable ratio: dirty bytes ÷ all bytes, over sealed segments. None when
    /// there is nothing sealed to clean.
    pub fn dirty_ratio(&self) -> Option<f64> {
        let (mut dirty, mut total) = (0u64, 0u64);
        for s in self.cleanable() {
            total += s.size();
            if s.next_offset() > self.first_dirty_offset {
                dirty += s.size();
            }
        }
        (total > 0).then(|| dirty as f64 / total as f64)
    }

    /// (base, file, end position, next offset, created ms) of every cleanable segment.
    pub fn cleanable_segments(&self) -> Vec<(i64, Rc<SegmentFile>, u64, i64, i64)> {
        self.cleanable().map(|s| (s.base_offset, s.file.clone(), s.size(), s.next_offset(), s.created_ms)).collect()
    }

    /// Every segment's bytes on disk now, oldest first: what the key map is built from.
    pub fn disk_reads(&self) -> Vec<DiskRead> {
        self.segments.values().map(|s| DiskRead { base_offset: s.base_offset, file: s.file.clone(), position: 0, end: s.written() }).collect()
    }

    /// Marks segment `base` as being swapped; false if it is gone or no longer the file
    /// the cleaner read (retention removed it meanwhile).
    pub fn begin_swap(&mut self, base: i64, read_file: &Rc<SegmentFile>) -> bool {
        assert!(self.swapping.is_none(), "one swap at a time");
        // A truncation cuts or removes segments: a cleaned copy of one would bring its old
        // end back (the cleaner drops its work when refused).
        let same = !self.truncating && self.segments.get(&base).is_some_and(|s| Rc::ptr_eq(&s.file, read_file) && s.sealed);
        if same {
            self.swapping = Some(base);
        }
        same
    }

    /// Installs the cleaned segment in place of the original (whose file, if a read
    /// still holds it, stays open and readable until that read drops it), and drops
    /// cached batches of the cleaned range so the cache never serves removed batches.
    pub fn install_cleaned(&mut self, cleaned: Segment) {
        let base = cleaned.base_offset;
        assert_eq!(self.swapping, Some(base), "install only the segment being swapped");
        let old = self.segments.get(&base).map(|s| (s.next_offset(), s.sealed));
        assert_eq!(old, Some((cleaned.next_offset(), true)), "a cleaned segment replaces a sealed one with the same end");
        self.cache.evict_below(cleaned.next_offset());
        self.segments.insert(base, cleaned);
    }

    /// Removes the segment being swapped when cleaning left it empty, unless it is the
    /// first segment (its base is what recovery takes as the log start). Reads skip the
    /// offset gap this leaves, as they skip gaps inside segments.
    pub fn remove_swapped_if_empty(&mut self, cleaned: &Segment) -> Option<Segment> {
        let base = cleaned.base_offset;
        assert_eq!(self.swapping, Some(base), "remove only the segment being swapped");
        let first = self.segments.keys().next().copied();
        if cleaned.size() > 0 || first == Some(base) {
            return None;
        }
        self.cache.evict_below(cleaned.next_offset());
        self.segments.remove(&base)
    }

    pub fn end_swap(&mut self) {
        self.swapping = None;
    }
}

/// Truncation support (`truncate.rs` drives it; these touch the log's private state).
impl Log {
    /// The cleaner is swapping a segment's files now (a truncation waits for the swap).
    pub fn swap_in_progress(&self) -> bool {
        self.swapping.is_some()
    }

    /// A truncation starts (no swap may start until it ends) or ends.
    pub(super) fn set_truncating(&mut self, on: bool) {
        self.assert_changeable();
        assert!(!on || self.swapping.is_none(), "a truncation starts with no swap in flight");
        self.truncating = on;
    }

    /// Where the batch holding `offset` is to be looked for: the segment holding
    /// `offset` (the last one whose base is at or below it) and its scan start.
    pub(super) fn truncation_plan(&self, offset: i64) -> Option<TruncationPlan> {
        let (&base, seg) = self.segments.range(..=offset).next_back()?;
        let (scan_from, scan_from_offset, max_before) = seg.cut_scan_start(offset);
        Some(TruncationPlan {
            base,
            file: seg.file.clone(),
            scan_from,
            scan_from_offset,
            end: seg.written(),
            max_before,
            sealed: seg.sealed,
            next_offset: seg.next_offset(),
        })
    }

    /// Applies `cut` (found by scanning `plan`) in memory, all at once: the segments above
    /// the cut segment leave the log (returned, for the caller to delete their files), the
    /// cut segment keeps its batches below the cut — sealed still with `fresh` as its file
    /// when `cut.keep_sealed` (the caller then adds the active segment after it), else as
    /// the active segment — and the cache, synced offset, log start and the cleaner's
    /// first dirty offset are bounded by the new end. None when the plan went stale while
    /// it was scanned (the segment was replaced, or the log start passed the cut): plan
    /// again.
    pub(super) fn apply_truncation(&mut self, plan: &TruncationPlan, cut: &Cut, fresh: Option<Rc<SegmentFile>>) -> Option<Vec<Segment>> {
        assert!(self.truncating && self.writes_in_flight() == 0 && !self.has_pending_writes(), "truncation runs on a quiet log");
        let same = self.segments.get(&plan.base).is_some_and(|s| Rc::ptr_eq(&s.file, &plan.file) && s.written() == plan.end);
        if !same || cut.offset < self.log_start_offset {
            return None;
        }
        let removed: Vec<Segment> = self.segments.split_off(&(plan.base + 1)).into_values().collect();
        let seg = self.segments.get_mut(&plan.base)?;
        seg.cut_to(cut.position, cut.new_end, cut.max_timestamp, !cut.keep_sealed);
        if let Some(file) = fresh {
            assert!(cut.keep_sealed, "only a segment that stays sealed gets a fresh handle");
            seg.file = file;
        }
        self.cache.truncate_from(cut.new_end);
        let segments = &self.segments;
        self.unsynced.retain(|b| segments.contains_key(b));
        self.synced_offset = self.synced_offset.min(cut.new_end);
        self.log_start_offset = self.log_start_offset.min(cut.new_end);
        self.first_dirty_offset = self.first_dirty_offset.min(cut.new_end);
        debug_assert_eq!(self.next_offset(), cut.new_end);
        Some(removed)
    }

    /// After a cut that kept the last segment sealed: the empty active segment at the log
    /// end, its file created and its directory entry synced by the caller.
    pub(super) fn add_active_after_cut(&mut self, file: Rc<SegmentFile>, now_ms: i64) {
        let base = self.next_offset();
        assert!(self.active().sealed && !self.segments.contains_key(&base), "a new active segment follows a sealed one");
        self.segments.insert(base, Segment::empty(&self.dir, base, file, now_ms));
    }

    /// Everything below the cut is synced (the truncation synced every file it kept).
    pub(super) fn mark_synced_after_cut(&mut self) {
        if self.offline.is_none() {
            self.synced_offset = self.next_offset();
        }
    }

    /// `truncate_fully_and_start_at`: every segment leaves the log (returned; the caller
    /// already deleted their files) and an empty one at `offset` (`file`, synced in the
    /// directory) takes over; the log starts and ends at `offset`.
    pub(super) fn reset_to(&mut self, offset: i64, file: Rc<SegmentFile>) -> Vec<Segment> {
        assert!(self.truncating && self.writes_in_flight() == 0 && !self.has_pending_writes(), "truncation runs on a quiet log");
        let old = std::mem::take(&mut self.segments);
        self.segments.insert(offset, Segment::empty(&self.dir, offset, file, crate::runtime::now_ms()));
        self.cache = BatchCache::new(self.config.cache_bytes);
        self.unsynced.clear();
        self.log_start_offset = offset;
        self.synced_offset = offset;
        self.first_dirty_offset = offset;
        old.into_values().collect()
    }
}
