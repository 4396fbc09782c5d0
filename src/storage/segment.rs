//! One segment: the `<base>.log` file plus its in-memory indexes.
//!
//! Writes use O_DIRECT, so they must cover whole blocks at aligned positions. Appends
//! go to `pending` (the batch bytes, not copied); a write job copies the last partial
//! block already on disk (`head`) plus the pending batches into one aligned DMA buffer,
//! zero-pads it and writes it at `align_down(written)`. The padding is overwritten by
//! the next job; recovery treats a zero length field as the end of the data.
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use glommio::io::DmaBuffer;

use super::file::SegmentFile;

use super::index::{OffsetIndex, TimeIndex, SUMMARY_LEN};
use super::{Result, StorageError};
use crate::record::BatchHeader;

pub fn log_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

pub fn index_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{base_offset:020}.index"))
}

pub fn time_index_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{base_offset:020}.timeindex"))
}

/// The `<base>.snapshot` file the partition keeps next to a segment (its producer state
/// as of the segment's base). Storage does not read it; it deletes it with the segment.
pub fn snapshot_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{base_offset:020}.snapshot"))
}

/// What a sealed segment needs to open without a scan (stored in its index file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub size: u64,
    pub next_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
}

impl SegmentSummary {
    pub fn encode(&self) -> [u8; SUMMARY_LEN] {
        let mut b = [0u8; SUMMARY_LEN];
        b[0..8].copy_from_slice(&self.size.to_be_bytes());
        b[8..16].copy_from_slice(&self.next_offset.to_be_bytes());
        b[16..24].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[24..32].copy_from_slice(&self.offset_of_max_timestamp.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; SUMMARY_LEN]) -> SegmentSummary {
        let g = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            a
        };
        SegmentSummary {
            size: u64::from_be_bytes(g(0)),
            next_offset: i64::from_be_bytes(g(8)),
            max_timestamp: i64::from_be_bytes(g(16)),
            offset_of_max_timestamp: i64::from_be_bytes(g(24)),
        }
    }
}

/// One aligned write handed to the device; see the module comment.
pub struct WriteJob {
    pub file: Rc<SegmentFile>,
    /// Taken by the writer (`write_at` consumes it); the rest of the job is kept to
    /// complete the write.
    pub buf: Option<DmaBuffer>,
    pub pos: u64,
    /// Logical end of the segment once this write completes.
    end: u64,
    next_offset: i64,
    max_timestamp: (i64, i64),
    new_head: Vec<u8>,
}


pub struct Segment {
    pub base_offset: i64,
    pub file: Rc<SegmentFile>,
    pub dir: PathBuf,
    /// Logical bytes appended (written or pending).
    size: u64,
    /// Bytes whose write completed.
    written: u64,
    /// Copy of bytes [align_down(written), written): rewritten with the next job.
    head: Vec<u8>,
    pending: Vec<Bytes>,
    pending_bytes: usize,
    write_in_flight: bool,
    next_offset: i64,
    written_next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    written_max_timestamp: (i64, i64),
    pub created_ms: i64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    bytes_since_index: usize,
    /// A newer segment exists; this one takes no more appends.
    pub sealed: bool,
    /// Its indexes (with the summary) are on disk.
    pub indexes_saved: bool,
}

impl Segment {
    /// A segment whose first `size` bytes are valid and on disk; `head_block` holds the
    /// bytes from `align_down(size)` to `size`.
    #[allow(clippy::too_many_arguments)]
    pub fn opened(
        dir: &Path,
        base_offset: i64,
        file: Rc<SegmentFile>,
        summary: SegmentSummary,
        head_block: Vec<u8>,
        index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: i64,
    ) -> Segment {
        debug_assert_eq!(file.align_down(summary.size) + head_block.len() as u64, summary.size);
        Segment {
            base_offset,
            file,
            dir: dir.to_path_buf(),
            size: summary.size,
            written: summary.size,
            head: head_block,
            pending: Vec::new(),
            pending_bytes: 0,
            write_in_flight: false,
            next_offset: summary.next_offset,
            written_next_offset: summary.next_offset,
            max_timestamp: summary.max_timestamp,
            offset_of_max_timestamp: summary.offset_of_max_timestamp,
            written_max_timestamp: (summary.max_timestamp, summary.offset_of_max_timestamp),
            created_ms,
            index,
            time_index,
            bytes_since_index: 0,
            sealed: false,
            indexes_saved: false,
        }
    }

    pub fn empty(dir: &Path, base_offset: i64, file: Rc<SegmentFile>, now_ms: i64) -> Segment {
        let summary = SegmentSummary { size: 0, next_offset: base_offset, max_timestamp: -1, offset_of_max_timestamp: -1 };
        Segment::opened(dir, base_offset, file, summary, Vec::new(), OffsetIndex::default(), TimeIndex::default(), now_ms)
    }

    /// Turns the scratch segment the cleaner built (every batch tracked with
    /// `index_existing`, all of it on disk) into the sealed segment that replaces the
    /// original. `next_offset` is the original's end: compaction never moves it, so the
    /// next segment's base stays adjacent even when the last records were removed.
    pub fn cleaned(mut scratch: Segment, next_offset: i64, head_block: Vec<u8>) -> Segment {
        assert!(next_offset >= scratch.next_offset, "a cleaned segment ends where the original did");
        assert_eq!(scratch.written, scratch.size, "a cleaned segment is fully written");
        debug_assert_eq!(scratch.file.align_down(scratch.size) + head_block.len() as u64, scratch.size);
        scratch.next_offset = next_offset;
        scratch.written_next_offset = next_offset;
        scratch.head = head_block;
        scratch.sealed = true;
        // The cleaner saves them itself; the log writer must not race it.
        scratch.indexes_saved = true;
        scratch
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn written_next_offset(&self) -> i64 {
        self.written_next_offset
    }

    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    pub fn summary(&self) -> SegmentSummary {
        SegmentSummary {
            size: self.size,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
        }
    }

    fn relative(&self, offset: i64) -> u32 {
        let rel = offset - self.base_offset;
        assert!((0..=i64::from(u32::MAX)).contains(&rel), "offset {offset} outside segment {}", self.base_offset);
        rel as u32
    }

    /// Records a batch that is already on disk at the current end (recovery scan).
    pub fn index_existing(&mut self, header: &BatchHeader, len: usize, index_interval_bytes: usize) {
        self.track(header, len, index_interval_bytes);
        self.size += len as u64;
        self.written = self.size;
        self.written_next_offset = self.next_offset;
        self.written_max_timestamp = (self.max_timestamp, self.offset_of_max_timestamp);
    }

    fn track(&mut self, header: &BatchHeader, len: usize, index_interval_bytes: usize) {
        // Appends are dense (Log::append asserts it); a cleaned segment has gaps where
        // compaction removed records, but offsets still only grow.
        assert!(header.base_offset >= self.next_offset, "offsets in a segment increase");
        let rel = self.relative(header.base_offset);
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        if self.index.is_empty() || self.bytes_since_index >= index_interval_bytes {
            self.index.push(rel, self.size as u32);
            if self.offset_of_max_timestamp >= self.base_offset {
                let max_rel = self.relative(self.offset_of_max_timestamp);
                self.time_index.maybe_push(self.max_timestamp, max_rel);
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += len;
        self.next_offset = header.last_offset() + 1;
    }

    /// Appends a batch whose header fields (base offset, epoch) are already final.
    pub fn append(&mut self, header: &BatchHeader, batch: Bytes, index_interval_bytes: usize) {
        assert!(!self.sealed, "no appends to a sealed segment");
        debug_assert_eq!(batch.len(), header.total_len());
        self.track(header, batch.len(), index_interval_bytes);
        self.size += batch.len() as u64;
        self.pending_bytes += batch.len();
        self.pending.push(batch);
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Builds the next write (head block + pending batches), or None if nothing is pending.
    pub fn take_write(&mut self) -> Option<WriteJob> {
        if self.pending.is_empty() {
            return None;
        }
        assert!(!self.write_in_flight, "one write per segment at a time");
        let pos = self.file.align_down(self.written);
        let len = self.head.len() + self.pending_bytes;
        debug_assert_eq!(pos + len as u64, self.size);
        let mut buf = self.file.alloc_dma_buffer(self.file.align_up(len as u64) as usize);
        let dst = buf.as_bytes_mut();
        dst[..self.head.len()].copy_from_slice(&self.head);
        let mut at = self.head.len();
        for b in self.pending.drain(..) {
            dst[at..at + b.len()].copy_from_slice(&b);
            at += b.len();
        }
        dst[at..].fill(0);
        let head_start = self.file.align_down(len as u64) as usize;
        let new_head = dst[head_start..len].to_vec();
        self.pending_bytes = 0;
        self.write_in_flight = true;
        Some(WriteJob {
            file: self.file.clone(),
            buf: Some(buf),
            pos,
            end: self.size,
            next_offset: self.next_offset,
            max_timestamp: (self.max_timestamp, self.offset_of_max_timestamp),
            new_head,
        })
    }

    /// The job's write completed: its bytes are on disk (not necessarily synced).
    pub fn complete_write(&mut self, job: WriteJob) {
        assert!(self.write_in_flight);
        assert!(job.end >= self.written && job.end <= self.size, "writes complete in order");
        self.write_in_flight = false;
        self.written = job.end;
        self.written_next_offset = job.next_offset;
        self.written_max_timestamp = job.max_timestamp;
        self.head = job.new_head;
    }

    /// A write failed: forget everything not on disk, so the log ends at `written`.
    /// Returns the new next offset.
    pub fn rollback_unwritten(&mut self) -> i64 {
        self.write_in_flight = false;
        self.pending.clear();
        self.pending_bytes = 0;
        self.size = self.written;
        self.next_offset = self.written_next_offset;
        (self.max_timestamp, self.offset_of_max_timestamp) = self.written_max_timestamp;
        self.index.truncate_to_position(self.written as u32);
        let rel = self.relative(self.next_offset);
        self.time_index.truncate_to_offset(rel);
        self.bytes_since_index = 0;
        self.next_offset
    }

    /// File position of the last indexed batch at or before `offset`.
    pub fn position_for(&self, offset: i64) -> u64 {
        u64::from(self.index.lookup(self.relative(offset.max(self.base_offset))))
    }

    /// File position to scan from for the first timestamp >= `timestamp`.
    pub fn position_for_timestamp(&self, timestamp: i64) -> u64 {
        let rel = self.time_index.lookup(timestamp);
        u64::from(self.index.lookup(rel))
    }

    /// Saves the indexes and the summary of a sealed, fully written segment.
    pub async fn save_indexes(&self) -> Result<()> {
        if !self.sealed || self.written != self.size {
            return Err(StorageError::Corrupt {
                what: format!("segment {}", self.base_offset),
                detail: "indexes saved before the segment was sealed and written".into(),
            });
        }
        self.index.save(&index_path(&self.dir, self.base_offset), &self.summary().encode()).await?;
        self.time_index.save(&time_index_path(&self.dir, self.base_offset)).await
    }
}
