//! Opening a partition directory after a clean stop or a crash.
//!
//! Sealed segments open from their saved index (summary + entries); if that file is
//! missing or fails its CRC, the segment is scanned. The active (last) segment is always
//! scanned: every batch's CRC-32C is checked and offsets must continue densely; padding
//! inside a block is skipped (the padding rule, `storage` module comment); the first bad
//! or torn batch, or zeros at a block boundary, end the log and the file is truncated at
//! the end of the last good batch (an O_DIRECT writer then continues after padding, so
//! the block holding that batch is never rewritten). Files open in the log's write mode
//! whichever mode wrote them: the format is the same.
//! A sealed segment scanned for lack of an index may have been compacted, so there
//! offsets must only increase. Leftovers of an interrupted clean (`*.log.cleaned`) are
//! deleted before anything is opened.
//!
//! After an unclean shutdown (no clean-shutdown marker, `clean_shutdown.rs`) with
//! `LogConfig::verify_sealed_after_unclean_shutdown`, every sealed segment the writer
//! synced whole is read and checked by the same scan, index or not; the first bad batch
//! (or data ending before its index says) is `SealedOpen::Damaged`, and `Log::open` cuts
//! the log there (`truncate::cut_damaged_sealed`).
use std::path::Path;

use std::rc::Rc;

use super::file::SegmentFile;

use super::batch_reader::{BatchReader, ReadStop};
use super::dma::{open_segment, remove_file};
use super::index::{OffsetIndex, TimeIndex};
use super::segment::{index_path, log_file_name, snapshot_path, time_index_path, Segment, SegmentSummary};
use super::{after_padding, Result, StorageError, WriteMode};
use crate::record::BatchHeader;

/// Bytes read at a time while scanning a segment.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

pub struct ScanOutcome {
    pub segment: Segment,
    /// Headers of every valid batch, in order (used to rebuild producer state).
    pub batches: Vec<BatchHeader>,
    /// Bytes cut off the end (torn write, corruption or zero padding past the data).
    pub truncated_bytes: u64,
}

/// What `open_sealed` found.
pub enum SealedOpen {
    /// The segment, whole.
    Whole(Segment),
    /// The segment was never synced whole and a crash cut it: scanned as an active
    /// segment (its bad tail cut); the log ends in it.
    LostTail(ScanOutcome),
    /// Verified after an unclean shutdown (`LogConfig::verify_sealed_after_unclean_shutdown`)
    /// and found damaged at `position`: `outcome` holds the whole batches before it. The
    /// file is not cut yet: the caller removes the later segments first
    /// (`truncate::cut_damaged_sealed`), so a crash never leaves a gap.
    Damaged { outcome: ScanOutcome, position: u64, detail: String },
}

/// Opens a sealed segment, from its saved index when that is intact. `next_base` is the
/// next segment's base: this one's offsets end below it. Without an index, a segment
/// the writer synced whole (`sealed_was_synced`) is scanned as sealed (damage is
/// corruption, gaps are compaction's); one it never synced (a roll does not wait for the
/// sync, and a crash came first) is scanned as the active segment is. `verify` (after an
/// unclean shutdown): a segment synced whole is read and checked batch by batch even with
/// an index, and damage is `SealedOpen::Damaged` rather than an error.
pub async fn open_sealed(dir: &Path, base: i64, next_base: i64, index_interval_bytes: usize, mode: WriteMode, verify: bool) -> Result<SealedOpen> {
    let file = open_segment(&dir.join(log_file_name(base)), mode).await?;
    let file_size = file.file_size().await?;
    let indexed = match (OffsetIndex::load(&index_path(dir, base)).await, TimeIndex::load(&time_index_path(dir, base)).await) {
        (Some((summary, index)), Some(time_index)) => {
            let summary = SegmentSummary::decode(&summary);
            // Verified, a file shorter than its index says is damage (found below), not a
            // reason to scan without the index (which would take the loss for compaction).
            (summary.next_offset >= base && summary.next_offset <= next_base && (verify || summary.size <= file_size)).then_some((summary, index, time_index))
        }
        _ => None,
    };
    if let Some((summary, index, time_index)) = indexed {
        if verify {
            // Every byte is read and checked; the saved index stays (a scan rebuilds the same).
            let scanned = scan_batches(dir, base, file.clone(), index_interval_bytes, Some(next_base)).await?;
            let end = scanned.segment.written();
            let next = scanned.segment.next_offset();
            let damage = scanned.damage.clone().or_else(|| {
                // The data ends before the index says (a lost or zeroed tail, cut on a batch
                // boundary). The index's size is the end of the last batch, or of the
                // padding after it (O_DIRECT; its next offset then is the last batch's:
                // only a compacted segment's may lie beyond, and its size is exact).
                let whole = end == summary.size || (after_padding(end) == summary.size && next == summary.next_offset);
                (end < summary.size && !whole)
                    .then(|| format!("data ends at position {end} (offset {next}), its index says {} (offset {})", summary.size, summary.next_offset))
            });
            if let Some(detail) = damage {
                return Ok(SealedOpen::Damaged { position: end, detail, outcome: scanned.into_outcome(dir, base, false).await? });
            }
        }
        let mut seg = Segment::opened(dir, base, file, summary, index, time_index, crate::runtime::now_ms());
        seg.sealed = true;
        seg.indexes_saved = true;
        return Ok(SealedOpen::Whole(seg));
    }
    if !sealed_was_synced(dir, next_base).await {
        let outcome = scan(dir, base, file, index_interval_bytes, None).await?;
        if outcome.truncated_bytes == 0 && outcome.segment.next_offset() == next_base {
            let mut seg = outcome.segment;
            seg.sealed = true;
            return Ok(SealedOpen::Whole(seg));
        }
        return Ok(SealedOpen::LostTail(outcome));
    }
    tracing::warn!(dir = %dir.display(), base, "index of a sealed segment is missing or corrupt; scanning it");
    if verify {
        let scanned = scan_batches(dir, base, file, index_interval_bytes, Some(next_base)).await?;
        if let Some(detail) = scanned.damage.clone() {
            let position = scanned.segment.written();
            return Ok(SealedOpen::Damaged { position, detail, outcome: scanned.into_outcome(dir, base, false).await? });
        }
        let mut outcome = scanned.into_outcome(dir, base, false).await?;
        outcome.segment.sealed = true;
        return Ok(SealedOpen::Whole(outcome.segment));
    }
    // A sealed segment may have been compacted: offsets grow but may skip.
    let mut outcome = scan(dir, base, file, index_interval_bytes, Some(next_base)).await?;
    outcome.segment.sealed = true;
    Ok(SealedOpen::Whole(outcome.segment))
}

/// Removes a segment's files (indexes, seal snapshot, then the log): recovery drops
/// segments that follow a lost tail, truncation those above the cut. The log file goes
/// last, so a crash in between leaves a segment that is scanned, never a stale index
/// that a later segment of the same base could pick up.
pub async fn remove_segment_files(dir: &Path, base: i64) -> Result<()> {
    remove_file(&index_path(dir, base)).await?;
    remove_file(&time_index_path(dir, base)).await?;
    remove_file(&snapshot_path(dir, base)).await?;
    remove_file(&dir.join(log_file_name(base))).await
}

/// True when the segment ending at `next_base` was synced whole: the writer saved its
/// seal snapshot (`<next_base>.snapshot`), which it does only after that sync.
pub async fn sealed_was_synced(dir: &Path, next_base: i64) -> bool {
    let path = snapshot_path(dir, next_base);
    glommio::executor().spawn_blocking(move || path.exists()).await
}

/// Scans the active segment, validating every batch, and truncates a bad tail.
/// `indexes_listed`: whether its index files may exist (false when the directory's listing
/// showed neither: no removal is tried).
pub async fn open_active(dir: &Path, base: i64, index_interval_bytes: usize, mode: WriteMode, indexes_listed: bool) -> Result<ScanOutcome> {
    let file = open_segment(&dir.join(log_file_name(base)), mode).await?;
    // Indexes of the active segment are rebuilt, never trusted.
    if indexes_listed {
        super::dma::remove_file(&index_path(dir, base)).await?;
        super::dma::remove_file(&time_index_path(dir, base)).await?;
    }
    // The active segment is never compacted: its offsets must be dense.
    scan(dir, base, file, index_interval_bytes, None).await
}

/// Scans a segment from its start. `sealed`: a sealed segment scanned for lack of an
/// index; it was fdatasync'ed whole before the next segment's file was created (see
/// `Partition::roll`), so damage in it is corruption, not a torn tail: it is reported
/// (`StorageError::Corrupt`, the partition does not open) rather than truncated, which
/// would silently drop acknowledged records and leave a gap before the next segment.
/// Its offsets may skip (compaction) and end below `next_base`; the active segment's must
/// be dense.
async fn scan(dir: &Path, base: i64, file: Rc<SegmentFile>, index_interval_bytes: usize, next_base: Option<i64>) -> Result<ScanOutcome> {
    let sealed = next_base.is_some();
    let scanned = scan_batches(dir, base, file, index_interval_bytes, next_base).await?;
    if let Some(detail) = &scanned.damage {
        if sealed {
            tracing::error!(dir = %dir.display(), base, detail = %detail,
                "corrupt sealed segment; not opening the partition: restore the segment (or move it aside, losing its records) and restart");
            return Err(StorageError::Corrupt { what: format!("sealed segment {}", dir.join(log_file_name(base)).display()), detail: detail.clone() });
        }
        tracing::warn!(dir = %dir.display(), base, detail = %detail, "invalid batch in the active segment; truncating the log here");
    }
    scanned.into_outcome(dir, base, true).await
}

/// What one scan of a segment found (`scan_batches`).
pub struct Scanned {
    /// The segment as scanned: its indexes and written end cover the whole valid batches.
    segment: Segment,
    batches: Vec<BatchHeader>,
    file_size: u64,
    /// The first bad batch (or misplaced offset), if the scan stopped at one.
    pub damage: Option<String>,
}

impl Scanned {
    /// The outcome as a segment ending after the last valid batch; `cut_file`: the file
    /// is cut there now (else the caller cuts it, in its own order).
    async fn into_outcome(self, dir: &Path, base: i64, cut_file: bool) -> Result<ScanOutcome> {
        let Scanned { mut segment, batches, file_size, .. } = self;
        let valid_end = segment.written();
        let truncated_bytes = file_size.saturating_sub(valid_end);
        if cut_file && truncated_bytes > 0 {
            segment.file.truncate(valid_end).await?;
        }
        let summary = SegmentSummary { size: valid_end, ..segment.summary() };
        let index = std::mem::take(&mut segment.index);
        let time_index = std::mem::take(&mut segment.time_index);
        let file = segment.file.clone();
        let segment = Segment::opened(dir, base, file, summary, index, time_index, crate::runtime::now_ms());
        Ok(ScanOutcome { segment, batches, truncated_bytes })
    }
}

/// Reads a segment from its start, checking every batch (the one scan recovery and
/// sealed-segment verification share): the reader stops at the end, the zero padding, a
/// torn batch or an invalid one (framing, magic, CRC-32C, counts); this stops at an
/// offset out of place too (`next_base` given: offsets may skip but stay below it; else
/// they must be dense). Nothing is cut here.
pub async fn scan_batches(dir: &Path, base: i64, file: Rc<SegmentFile>, index_interval_bytes: usize, next_base: Option<i64>) -> Result<Scanned> {
    let file_size = file.file_size().await?;
    let mut seg = Segment::empty(dir, base, file, crate::runtime::now_ms());
    let mut batches = Vec::new();
    let mut reader = BatchReader::new(seg.file.clone(), 0, file_size, SCAN_CHUNK_BYTES);
    let mut misplaced = None;
    'scan: loop {
        let chunk = reader.next_chunk().await?;
        if chunk.is_empty() {
            break;
        }
        let chunk_start = reader.chunk_start();
        for (header, batch) in chunk {
            let offset_ok = if let Some(next_base) = next_base {
                header.base_offset >= seg.next_offset() && header.last_offset() < next_base
            } else {
                header.base_offset == seg.next_offset()
            };
            if !offset_ok {
                misplaced = Some((seg.size(), header.base_offset));
                break 'scan;
            }
            if chunk_start > seg.size() {
                // Padding before this chunk (the reader skipped it): the batch follows it.
                seg.skip_padding_to(chunk_start);
            }
            seg.index_existing(&header, batch.len(), index_interval_bytes);
            batches.push(header);
        }
    }
    let damage = match (misplaced, reader.stop()) {
        (Some((position, offset)), _) => Some(format!("batch at position {position} has offset {offset} out of place")),
        (None, Some(ReadStop::Invalid { position, error } | ReadStop::Torn { position, error })) => Some(format!("bad batch at position {position}: {error}")),
        _ => None,
    };
    Ok(Scanned { segment: seg, batches, file_size, damage })
}
