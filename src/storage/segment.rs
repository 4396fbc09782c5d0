//! One segment: the `<base>.log` file plus its in-memory indexes and its write state.
//!
//! Appends go to `pending` (the batch bytes, not copied). `take_write` hands the next
//! bytes to a write job, which writes them at `issued`, the end of what earlier jobs
//! took. Every byte of the file is written once: no job
//! ever covers a byte an earlier job wrote (invariant 2), so a write in flight never
//! endangers acknowledged data.
//! - Page-cache files (`WriteMode::PageCache`): a job takes every pending byte; one job
//!   in flight at a time (buffered writes are quick, and serial completion keeps the
//!   written prefix trivially in order).
//! - O_DIRECT files: a job covers whole `PADDING_BLOCK`s only, up to
//!   `MAX_DIRECT_WRITES_IN_FLIGHT` jobs in flight. The partial tail block stays in
//!   memory while writes are in flight (they will be followed by more data); once the
//!   segment has no write in flight (or is sealed) the tail is written zero-padded and
//!   the next batch starts after the padding (`storage::after_padding`, the padding
//!   rule every reader applies).
//!
//! Completions may arrive out of order; `written` advances only over the contiguous
//! prefix of completed jobs, and readers see only whole batches inside it.
//!
//! One copy (issue 10): the produce path copies each batch once, from the request frame
//! into the segment's *stage buffer* (`stage`), at the address that matches its file
//! position modulo `PADDING_BLOCK`, patches it there, and appends a `Bytes` view of it:
//! the batch cache shares that view, and a write job whose bytes are one contiguous run
//! of a stage buffer is written straight from it (`WriteBuffer::Pinned`, no copy; for
//! O_DIRECT the congruence makes a block-aligned position a block-aligned address, and
//! the tail padding is zeroed stage memory right after the data, never part of a batch's
//! view). A job whose bytes are not one run (a batch not staged here, or the block that
//! straddles two stage buffers) is copied into a fresh buffer as before. Stage buffers
//! come from the shard's pool (`runtime/buffer_pool.rs`) and return to it when the
//! segment moves to a new one; the pool reuses a buffer once the cache and every write
//! and response are done with its views.
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};

use super::file::{SegmentFile, WriteBuffer};
use crate::runtime::buffer_pool::{skip_to_alignment, with_stage_pool, STAGE_BUFFER_ALIGN};

use super::index::{OffsetIndex, TimeIndex, SUMMARY_LEN};
use super::{after_padding, Result, StorageError, PADDING_BLOCK};
use crate::record::{BatchHeader, LOG_OVERHEAD};

/// O_DIRECT writes one segment may have in flight (bounded queue depth per partition).
pub const MAX_DIRECT_WRITES_IN_FLIGHT: usize = 4;
pub fn log_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

pub fn index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.index")
}

pub fn index_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(index_file_name(base_offset))
}

pub fn time_index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.timeindex")
}

pub fn time_index_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(time_index_file_name(base_offset))
}

pub fn snapshot_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.snapshot")
}

/// The `<base>.snapshot` file the partition keeps next to a segment (its producer state
/// as of the segment's base). Storage does not read it; it deletes it with the segment.
pub fn snapshot_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(snapshot_file_name(base_offset))
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

/// A small checked file (magic, version, payload) the layer above hands over at a roll,
/// to be saved as `<end>.snapshot` once the sealed segment is synced (storage does not
/// read it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealSnapshot {
    pub magic: u32,
    pub version: u16,
    pub payload: Vec<u8>,
}

/// One write handed to the device; see the module comment.
pub struct WriteJob {
    pub file: Rc<SegmentFile>,
    /// Taken by the writer (`write_at` consumes it); `end` is kept to complete the write.
    pub buf: Option<WriteBuffer>,
    pub pos: u64,
    /// Segment position once this write completes (names the job among those in flight).
    pub end: u64,
}

/// A batch staged in memory, with where the segment stands once it is written.
struct PendingBatch {
    bytes: Bytes,
    mark: WriteMark,
    /// The stage buffer holding `bytes` (see `Stage::id`); 0 when not staged here.
    stage_id: u64,
}

/// The segment's current stage buffer (see the module comment).
struct Stage {
    /// Free room; its first byte is where the batch at segment position `at` goes.
    buf: BytesMut,
    at: u64,
    /// Names the buffer among the segment's (ids start at 1): bytes of two pending
    /// batches are one run only when they share the id and are adjacent.
    id: u64,
    /// From the shard pool (given back there when the segment moves on).
    pooled: bool,
}

impl Stage {
    fn give_back(self) {
        if self.pooled {
            with_stage_pool(|p| p.give_back(self.buf));
        }
    }
}

/// Room an O_DIRECT stage buffer keeps after its data: the tail padding
/// (`after_padding` adds at most a block plus `LOG_OVERHEAD`).
const STAGE_PAD_ROOM: usize = PADDING_BLOCK as usize + LOG_OVERHEAD;

/// Where a segment's written data stands after some prefix of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WriteMark {
    /// End of the last whole batch.
    batch_end: u64,
    next_offset: i64,
    max_timestamp: (i64, i64),
}

struct InFlight {
    end: u64,
    mark: WriteMark,
    done: bool,
}

pub struct Segment {
    pub base_offset: i64,
    pub file: Rc<SegmentFile>,
    pub dir: PathBuf,
    /// Logical bytes appended (written or pending), padding included.
    size: u64,
    /// Bytes handed to write jobs.
    issued: u64,
    /// The contiguous prefix of bytes whose writes completed.
    written: u64,
    /// What `written` holds in whole batches, and what `issued` will.
    written_mark: WriteMark,
    issued_mark: WriteMark,
    /// Batches not (wholly) handed to a job yet; `front_issued` bytes of the first are.
    pending: VecDeque<PendingBatch>,
    front_issued: usize,
    in_flight: VecDeque<InFlight>,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    pub created_ms: i64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    bytes_since_index: usize,
    /// A newer segment exists; this one takes no more appends.
    pub sealed: bool,
    /// Its indexes (with the summary) and its seal snapshot are on disk.
    pub indexes_saved: bool,
    /// Its file's directory entry is synced (a rolled segment's is synced by the writer
    /// before any of its data counts as synced).
    pub dir_synced: bool,
    /// Saved next to the segment once it is sealed and synced (see `SealSnapshot`).
    pub snapshot: Option<SealSnapshot>,
    stage: Option<Stage>,
    stages_made: u64,
}

impl Segment {
    /// A segment whose first `summary.size` bytes are valid and on disk. An O_DIRECT
    /// file's next write starts after padding (the last block on disk is never rewritten).
    pub fn opened(
        dir: &Path,
        base_offset: i64,
        file: Rc<SegmentFile>,
        summary: SegmentSummary,
        index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: i64,
    ) -> Segment {
        let end = if file.write_unit() > 1 { after_padding(summary.size) } else { summary.size };
        let mark =
            WriteMark { batch_end: summary.size, next_offset: summary.next_offset, max_timestamp: (summary.max_timestamp, summary.offset_of_max_timestamp) };
        Segment {
            base_offset,
            file,
            dir: dir.to_path_buf(),
            size: end,
            issued: end,
            written: end,
            written_mark: mark,
            issued_mark: mark,
            pending: VecDeque::new(),
            front_issued: 0,
            in_flight: VecDeque::new(),
            next_offset: summary.next_offset,
            max_timestamp: summary.max_timestamp,
            offset_of_max_timestamp: summary.offset_of_max_timestamp,
            created_ms,
            index,
            time_index,
            bytes_since_index: 0,
            sealed: false,
            indexes_saved: false,
            dir_synced: true,
            snapshot: None,
            stage: None,
            stages_made: 0,
        }
    }

    pub fn empty(dir: &Path, base_offset: i64, file: Rc<SegmentFile>, now_ms: i64) -> Segment {
        let summary = SegmentSummary { size: 0, next_offset: base_offset, max_timestamp: -1, offset_of_max_timestamp: -1 };
        Segment::opened(dir, base_offset, file, summary, OffsetIndex::default(), TimeIndex::default(), now_ms)
    }

    /// Turns the scratch segment the cleaner built (every batch tracked with
    /// `index_existing`, all of it on disk) into the sealed segment that replaces the
    /// original. `next_offset` is the original's end: compaction never moves it, so the
    /// next segment's base stays adjacent even when the last records were removed.
    pub fn cleaned(mut scratch: Segment, next_offset: i64) -> Segment {
        assert!(next_offset >= scratch.next_offset, "a cleaned segment ends where the original did");
        assert!(scratch.is_fully_written(), "a cleaned segment is fully written");
        scratch.next_offset = next_offset;
        scratch.written_mark.next_offset = next_offset;
        scratch.issued_mark.next_offset = next_offset;
        scratch.sealed = true;
        // The cleaner saves them itself; the log writer must not race it.
        scratch.indexes_saved = true;
        scratch
    }

    /// Logical size, padding included.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// End of the whole batches whose writes completed: what readers may read.
    pub fn written(&self) -> u64 {
        self.written_mark.batch_end
    }

    /// Every appended byte is written (nothing pending or in flight).
    pub fn is_fully_written(&self) -> bool {
        self.pending.is_empty() && self.in_flight.is_empty() && self.written == self.size
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn written_next_offset(&self) -> i64 {
        self.written_mark.next_offset
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

    fn mark_now(&self) -> WriteMark {
        WriteMark { batch_end: self.size, next_offset: self.next_offset, max_timestamp: (self.max_timestamp, self.offset_of_max_timestamp) }
    }

    /// Records a batch that is already on disk at the current end (recovery scan).
    pub fn index_existing(&mut self, header: &BatchHeader, len: usize, index_interval_bytes: usize) {
        debug_assert!(self.pending.is_empty() && self.in_flight.is_empty());
        self.track(header, len, index_interval_bytes);
        self.size += len as u64;
        self.set_all_written();
    }

    /// A scan found padding: the next batch on disk starts at `pos`.
    pub fn skip_padding_to(&mut self, pos: u64) {
        assert!(pos >= self.size && self.pending.is_empty() && self.in_flight.is_empty(), "padding only after written data");
        self.size = pos;
        self.set_all_written();
    }

    fn set_all_written(&mut self) {
        self.issued = self.size;
        self.written = self.size;
        self.written_mark = self.mark_now();
        self.issued_mark = self.written_mark;
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

    /// Copies `src`, the next batch to append, into the stage buffer at the place of
    /// segment position `size()` (the one copy of the produce path; see the module
    /// comment). The caller patches the returned bytes and appends them frozen.
    pub fn stage(&mut self, src: &[u8]) -> BytesMut {
        let room = src.len() + if self.file.write_unit() > 1 { STAGE_PAD_ROOM } else { 0 };
        let fits = self.stage.as_ref().is_some_and(|s| s.at == self.size && s.buf.capacity() >= room);
        if !fits {
            if let Some(old) = self.stage.take() {
                old.give_back();
            }
            let phase = (self.size % PADDING_BLOCK) as usize;
            let (buf, pooled) = with_stage_pool(|p| {
                if room + phase <= p.size() {
                    (p.take(), true)
                } else {
                    // A batch larger than a pooled buffer gets one of its own.
                    (BytesMut::with_capacity(room + 2 * STAGE_BUFFER_ALIGN), false)
                }
            });
            let buf = skip_to_alignment(buf, STAGE_BUFFER_ALIGN, phase);
            self.stages_made += 1;
            self.stage = Some(Stage { buf, at: self.size, id: self.stages_made, pooled });
        }
        let Some(stage) = self.stage.as_mut() else { unreachable!("a stage buffer was just set") };
        debug_assert!(stage.buf.capacity() >= room, "no reallocation: views point into this buffer");
        stage.buf.extend_from_slice(src);
        stage.at += src.len() as u64;
        stage.buf.split_to(src.len())
    }

    /// Appends a batch whose header fields (base offset, epoch) are already final.
    pub fn append(&mut self, header: &BatchHeader, batch: Bytes, index_interval_bytes: usize) {
        assert!(!self.sealed, "no appends to a sealed segment");
        debug_assert_eq!(batch.len(), header.total_len());
        // Staged here when it ends where the stage buffer's free room starts.
        let stage_id = match &self.stage {
            Some(s) if s.at == self.size + batch.len() as u64 && batch.as_ptr_range().end == s.buf.as_ptr() => s.id,
            _ => 0,
        };
        self.track(header, batch.len(), index_interval_bytes);
        self.size += batch.len() as u64;
        let mark = self.mark_now();
        self.pending.push_back(PendingBatch { bytes: batch, mark, stage_id });
    }

    /// Gives the stage buffer back to the shard pool (the segment is sealed or rolled
    /// back; views already handed out keep their bytes).
    pub fn release_stage(&mut self) {
        if let Some(s) = self.stage.take() {
            s.give_back();
        }
    }

    /// The run of stage-buffer memory holding the next `want` unissued bytes, as far as
    /// it goes: (a view that keeps the buffer alive, start address, length).
    fn staged_run(&self, want: usize) -> Option<(Bytes, *const u8, usize)> {
        let front = self.pending.front()?;
        if front.stage_id == 0 {
            return None;
        }
        let start = front.bytes[self.front_issued..].as_ptr();
        let mut len = front.bytes.len() - self.front_issued;
        for b in self.pending.iter().skip(1) {
            if len >= want || b.stage_id != front.stage_id || b.bytes.as_ptr() != start.wrapping_add(len) {
                break;
            }
            len += b.bytes.len();
        }
        Some((front.bytes.clone(), start, len.min(want)))
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn writes_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The next write (see the module comment), or None when nothing may be written now.
    /// `flush_tail`: an O_DIRECT segment writes its partial tail block too, zero-padded.
    pub fn take_write(&mut self, flush_tail: bool) -> Option<WriteJob> {
        let unit = self.file.write_unit();
        let max_in_flight = if unit == 1 { 1 } else { MAX_DIRECT_WRITES_IN_FLIGHT };
        if self.in_flight.len() >= max_in_flight || self.pending.is_empty() {
            return None;
        }
        debug_assert_eq!(self.issued % unit, 0, "every write starts on a write unit");
        let avail = self.size - self.issued;
        let whole = avail - avail % unit;
        let mut pad = flush_tail && whole < avail;
        let mut len = if pad { avail } else { whole };
        if len == 0 {
            return None;
        }
        let pos = self.issued;
        // Written in place when the bytes are one run of a stage buffer (and, with
        // padding, the zeros can follow them there); else copied as before.
        let mut pinned = None;
        if let Some((owner, start, run)) = self.staged_run(len as usize) {
            if run as u64 == len {
                let pad_len = if pad { (after_padding(pos + len) - pos - len) as usize } else { 0 };
                let zeros_follow = pad_len == 0
                    || self.stage.as_ref().is_some_and(|s| s.at == self.size && s.buf.as_ptr() == start.wrapping_add(run) && s.buf.capacity() >= pad_len);
                if zeros_follow {
                    if pad_len > 0 {
                        let Some(stage) = self.stage.as_mut() else { unreachable!("checked above") };
                        // The padding's zeros, right after the data; no view covers them.
                        stage.buf.resize(pad_len, 0);
                        drop(stage.buf.split_to(pad_len));
                        stage.at += pad_len as u64;
                    }
                    pinned = Some((owner, start, run + pad_len));
                }
            } else if run as u64 >= unit {
                // The run ends early (the next stage buffer, or a batch not staged here):
                // write its whole units in place now, the rest with the next job.
                len = run as u64 - run as u64 % unit;
                pad = false;
                pinned = Some((owner, start, len as usize));
            } else if unit > 1 && len > unit {
                // The run ends inside the first block: copy that block alone.
                len = unit;
                pad = false;
            }
        }
        let buf_len = if pad { after_padding(pos + len) - pos } else { len };
        let buf = match pinned {
            Some((owner, start, n)) => {
                debug_assert_eq!(n as u64, buf_len);
                debug_assert!(unit == 1 || (start as usize).is_multiple_of(PADDING_BLOCK as usize), "stage memory is congruent to positions");
                // SAFETY: `start..start + n` lies in the stage buffer `owner` is a view of
                // (same stage id, adjacent views, padding split off that buffer's free
                // room), which `owner` keeps alive; nothing writes to it again: views are
                // frozen and the buffer's free room starts after it.
                WriteBuffer::Pinned(unsafe { glommio::io::PinnedBytes::new(owner, start, n) })
            }
            None => {
                let mut buf = self.file.alloc_write_buffer(buf_len as usize);
                self.copy_pending(buf.as_bytes_mut(), len as usize);
                buf
            }
        };
        self.mark_issued(len as usize);
        // The padding is part of the segment (zeros after the data, in either buffer).
        if pad {
            debug_assert!(self.pending.is_empty());
            self.size = pos + buf_len;
        }
        self.issued = pos + buf_len;
        self.in_flight.push_back(InFlight { end: self.issued, mark: self.issued_mark, done: false });
        Some(WriteJob { file: self.file.clone(), buf: Some(buf), pos, end: self.issued })
    }

    /// Copies the next `len` unissued bytes into `dst` (the fallback of `take_write`).
    fn copy_pending(&self, dst: &mut [u8], len: usize) {
        let mut at = 0usize;
        let mut from = self.front_issued;
        for b in &self.pending {
            if at == len {
                break;
            }
            let n = (b.bytes.len() - from).min(len - at);
            dst[at..at + n].copy_from_slice(&b.bytes[from..from + n]);
            at += n;
            from = 0;
        }
        debug_assert_eq!(at, len, "pending bytes cover the write");
    }

    /// The next `len` pending bytes are handed to a job: whole batches leave `pending`.
    fn mark_issued(&mut self, len: usize) {
        let mut at = 0usize;
        while at < len {
            let Some(front) = self.pending.front() else { break };
            let n = (front.bytes.len() - self.front_issued).min(len - at);
            at += n;
            if self.front_issued + n == front.bytes.len() {
                self.issued_mark = front.mark;
                self.pending.pop_front();
                self.front_issued = 0;
            } else {
                self.front_issued += n;
            }
        }
        debug_assert_eq!(at, len, "pending bytes cover the write");
    }

    /// The job ending at `end` completed: `written` advances over the completed prefix.
    pub fn complete_write(&mut self, end: u64) {
        let job = self.in_flight.iter_mut().find(|j| j.end == end);
        assert!(job.as_ref().is_some_and(|j| !j.done), "a completed write was in flight");
        if let Some(j) = job {
            j.done = true;
        }
        while self.in_flight.front().is_some_and(|j| j.done) {
            let Some(j) = self.in_flight.pop_front() else { break };
            assert!(j.end > self.written && j.end <= self.issued, "the written prefix only grows");
            self.written = j.end;
            self.written_mark = j.mark;
        }
    }

    /// Bytes past the written whole batches that a failed write may have left in the
    /// file (the caller cuts the file at `written()` when true).
    pub fn has_unwritten(&self) -> bool {
        self.issued > self.written_mark.batch_end || !self.pending.is_empty()
    }

    /// A write failed (and no write of this segment is in flight any more): forget
    /// everything beyond the written whole batches, so the log ends there. The caller
    /// cuts the file at `written()`; an O_DIRECT segment continues after padding there,
    /// never rewriting the block holding written data. Returns the new next offset.
    pub fn rollback_unwritten(&mut self) -> i64 {
        self.pending.clear();
        self.release_stage();
        self.front_issued = 0;
        self.in_flight.clear();
        let cut = self.written_mark.batch_end;
        let end = if self.file.write_unit() > 1 { after_padding(cut) } else { cut };
        self.size = end;
        self.issued = end;
        self.written = end;
        self.issued_mark = self.written_mark;
        self.next_offset = self.written_mark.next_offset;
        (self.max_timestamp, self.offset_of_max_timestamp) = self.written_mark.max_timestamp;
        self.index.truncate_to_position(cut as u32);
        let rel = self.relative(self.next_offset);
        self.time_index.truncate_to_offset(rel);
        self.bytes_since_index = 0;
        self.next_offset
    }

    /// Truncation (`truncate.rs`): where to scan for the batch holding `offset`, as
    /// (position, offset of the batch there), and the largest (timestamp, offset) of the
    /// batches before that position. The scan starts at the indexed batch *before* the
    /// last one at or below `offset`, so the maximum is exact: a time-index entry is only
    /// added at an indexed batch, and one that the time index lost (a maximum raised
    /// between two indexed batches, then raised again by the second) is always inside
    /// the scanned range or below a batch the scan reads (the cut is at or after the last
    /// indexed batch at or below `offset`).
    pub fn cut_scan_start(&self, offset: i64) -> (u64, i64, (i64, i64)) {
        match self.index.entry_before_floor(self.relative(offset.max(self.base_offset))) {
            None => (0, self.base_offset, (-1, -1)),
            Some((rel, pos)) => {
                let before = self.time_index.last_before(rel).map_or((-1, -1), |(ts, off)| (ts, self.base_offset + i64::from(off)));
                (u64::from(pos), self.base_offset + i64::from(rel), before)
            }
        }
    }

    /// Truncation (`truncate.rs`): keeps the whole batches below `position` —
    /// `next_offset` follows them, `max_timestamp` is their largest (timestamp, offset) —
    /// and forgets the rest; the caller cuts the file at `position`. `active`: appends
    /// follow (an O_DIRECT segment continues after padding, `after_padding(position)`, so
    /// the block holding its last batch is never rewritten); else it stays sealed, ending
    /// exactly at `position`.
    pub fn cut_to(&mut self, position: u64, next_offset: i64, max_timestamp: (i64, i64), active: bool) {
        assert!(self.pending.is_empty() && self.in_flight.is_empty(), "only a fully written segment is cut");
        assert!(position <= self.written_mark.batch_end && next_offset >= self.base_offset && next_offset <= self.next_offset, "a cut only shortens a segment");
        self.release_stage();
        let end = if active && self.file.write_unit() > 1 { after_padding(position) } else { position };
        self.size = end;
        self.issued = end;
        self.written = end;
        self.front_issued = 0;
        self.written_mark = WriteMark { batch_end: position, next_offset, max_timestamp };
        self.issued_mark = self.written_mark;
        self.next_offset = next_offset;
        (self.max_timestamp, self.offset_of_max_timestamp) = max_timestamp;
        self.index.truncate_to_position(u32::try_from(position).unwrap_or(u32::MAX));
        let rel = self.relative(next_offset);
        self.time_index.truncate_to_offset(rel);
        self.bytes_since_index = position.saturating_sub(self.index.last_position().map_or(0, u64::from)) as usize;
        self.sealed = !active;
        self.indexes_saved = false;
        self.snapshot = None;
        if position == 0 {
            // Emptied: segment.ms counts from now, as for a new segment (Kafka's too).
            self.created_ms = crate::runtime::now_ms();
        }
    }

    /// File position of the last indexed batch at or before `offset`.
    pub fn position_for(&self, offset: i64) -> u64 {
        u64::from(self.index.lookup(self.relative(offset.max(self.base_offset))))
    }

    /// The last indexed batch start in `(after, limit]` (see `OffsetIndex::batch_start_in`).
    pub fn batch_start_in(&self, after: u64, limit: u64) -> Option<u64> {
        let clamp = |p: u64| u32::try_from(p).unwrap_or(u32::MAX);
        self.index.batch_start_in(clamp(after), clamp(limit)).map(u64::from)
    }

    /// Position of the batch starting at `offset`, when the index has it.
    pub fn indexed_position_of(&self, offset: i64) -> Option<u64> {
        let rel = u32::try_from(offset.checked_sub(self.base_offset)?).ok()?;
        self.index.position_of(rel).map(u64::from)
    }

    /// Where a read of whole written batches from the batch start `start` ends, at most
    /// `limit`, holding only batches that start below `max_offset`: the end of what is
    /// written when all of it qualifies, else the last indexed batch start that does.
    /// `None` when no such end lies past `start`.
    pub fn written_batches_end(&self, start: u64, limit: u64, max_offset: i64) -> Option<u64> {
        let written = self.written();
        if self.written_next_offset() <= max_offset && written <= limit {
            return (written > start).then_some(written);
        }
        let clamp = |p: u64| u32::try_from(p).unwrap_or(u32::MAX);
        let max_rel = clamp(u64::try_from(max_offset.saturating_sub(self.base_offset)).ok()?);
        // An index entry's batch may be staged but not written yet: stop at `written`.
        self.index.batch_start_at_or_below(clamp(start), clamp(limit.min(written)), max_rel).map(u64::from)
    }

    /// File position to scan from for the first timestamp >= `timestamp`.
    pub fn position_for_timestamp(&self, timestamp: i64) -> u64 {
        let rel = self.time_index.lookup(timestamp);
        u64::from(self.index.lookup(rel))
    }

    /// Saves the indexes and the summary of a sealed, fully written segment.
    pub async fn save_indexes(&self) -> Result<()> {
        if !self.sealed || !self.is_fully_written() {
            return Err(StorageError::Corrupt {
                what: format!("segment {}", self.base_offset),
                detail: "indexes saved before the segment was sealed and written".into(),
            });
        }
        self.index.save(&index_path(&self.dir, self.base_offset), &self.summary().encode()).await?;
        self.time_index.save(&time_index_path(&self.dir, self.base_offset)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{parse_header, set_base_offset};
    use crate::storage::file::FileRole;
    use crate::storage::testing::run;
    use crate::storage::WriteMode;

    /// A batch of `n` records of 100-byte values, as a producer sends it.
    fn produced(n: usize) -> Bytes {
        let values: Vec<String> = (0..n).map(|_| "v".repeat(100)).collect();
        let recs: Vec<(Option<&str>, Option<&str>)> = values.iter().map(|v| (Some("k"), Some(v.as_str()))).collect();
        crate::record::tests::kv_batch(0, &recs, kafka_protocol::records::Compression::None, None, 1000)
    }

    /// Stages, patches and appends `src` as the produce path does; returns the view the
    /// segment (and the batch cache) keeps.
    fn append_staged(seg: &mut Segment, src: &[u8]) -> Bytes {
        let mut b = seg.stage(src);
        set_base_offset(&mut b, seg.next_offset()).expect("patch");
        let h = parse_header(&b).expect("header");
        let view = b.freeze();
        seg.append(&h, view.clone(), 4096);
        view
    }

    /// Takes every write the segment allows now (completing each at once); returns
    /// (position, bytes, written in place) per job.
    fn drain(seg: &mut Segment, flush_tail: bool) -> Vec<(u64, Vec<u8>, bool)> {
        let mut out = Vec::new();
        while let Some(mut job) = seg.take_write(flush_tail) {
            let buf = job.buf.take().expect("a buffer");
            out.push((job.pos, buf.as_bytes().to_vec(), matches!(buf, WriteBuffer::Pinned(_))));
            seg.complete_write(job.end);
        }
        out
    }

    /// What the file holds after `jobs`: batches where they were appended, padding zeros.
    fn file_image(jobs: &[(u64, Vec<u8>, bool)]) -> Vec<u8> {
        let mut image = Vec::new();
        for (pos, bytes, _) in jobs {
            assert_eq!(*pos as usize, image.len(), "jobs cover the file in order, each byte once");
            image.extend_from_slice(bytes);
        }
        image
    }

    #[test]
    fn staged_batches_are_written_from_the_cached_bytes_in_both_modes() {
        run(|dir| async move {
            for mode in [WriteMode::PageCache, WriteMode::Direct] {
                let file = SegmentFile::open_rw_as(&dir.join(format!("{mode:?}.log")), FileRole::Segment, mode).await.unwrap();
                let mut seg = Segment::empty(&dir, 0, file, 0);
                let src = produced(10);
                let view = append_staged(&mut seg, &src);
                let jobs = drain(&mut seg, true);
                assert_eq!(jobs.len(), 1);
                let (pos, bytes, pinned) = &jobs[0];
                assert!(*pinned, "{mode:?}: written from the stage buffer, not copied");
                assert_eq!((*pos, &bytes[..view.len()]), (0, &view[..]));
                if mode == WriteMode::Direct {
                    assert_eq!(bytes.len() as u64, after_padding(view.len() as u64), "the tail block is padded");
                    assert!(bytes[view.len()..].iter().all(|&b| b == 0), "padding is zeros");
                } else {
                    assert_eq!(bytes.len(), view.len(), "page-cache writes never pad");
                }
                // The next batch follows the padding, in place again, and the cached view
                // of the first batch never saw the padding.
                let second = append_staged(&mut seg, &src);
                let jobs2 = drain(&mut seg, true);
                assert!(jobs2.iter().all(|j| j.2), "{mode:?}: in place after padding too");
                assert_eq!(jobs2[0].0, seg.size() - jobs2[0].1.len() as u64);
                assert_eq!(&jobs2[0].1[..second.len()], &second[..]);
                assert_eq!(view.len(), src.len());
            }
        });
    }

    #[test]
    fn writes_across_stage_buffers_copy_at_most_one_block() {
        run(|dir| async move {
            for mode in [WriteMode::PageCache, WriteMode::Direct] {
                let file = SegmentFile::open_rw_as(&dir.join(format!("x{mode:?}.log")), FileRole::Segment, mode).await.unwrap();
                let unit = file.write_unit() as usize;
                let mut seg = Segment::empty(&dir, 0, file, 0);
                let src = produced(150);
                let mut jobs = Vec::new();
                let mut views = Vec::new();
                // ~17 KiB batches: several stage buffers; whole blocks are taken as they fill.
                for i in 0..150 {
                    views.push(append_staged(&mut seg, &src));
                    jobs.extend(drain(&mut seg, i == 149));
                }
                let copied: Vec<usize> = jobs.iter().filter(|j| !j.2).map(|j| j.1.len()).collect();
                assert!(seg.stages_made >= 2, "the test crosses stage buffers ({})", seg.stages_made);
                assert!(copied.len() < seg.stages_made as usize, "{mode:?}: a copy only where a buffer ends: {copied:?}");
                assert!(copied.iter().all(|&n| n <= unit.max(1)), "{mode:?}: at most one block copied per switch: {copied:?}");
                let image = file_image(&jobs);
                let expect: Vec<u8> = views.iter().flat_map(|v| v.iter().copied()).collect();
                assert_eq!(&image[..expect.len()], &expect[..], "{mode:?}: the file holds the batches, in order");
                assert!(image[expect.len()..].iter().all(|&b| b == 0));
            }
        });
    }
}
