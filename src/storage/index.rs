//! Sparse offset and time indexes of one segment, kept in memory and written next to
//! the segment (`<base>.index`, `<base>.timeindex`) when it is sealed. The active
//! segment's indexes are rebuilt by recovery, so they are never trusted from disk.
use std::path::Path;

use super::dma::{read_rebuildable_file, report_unusable, write_checked_file};
use super::Result;

const INDEX_MAGIC: u32 = 0x534c_4f49; // "SLOI"
const TIME_INDEX_MAGIC: u32 = 0x534c_5449; // "SLTI"
const INDEX_VERSION: u16 = 1;
/// Bytes of the sealed-segment summary stored at the head of the offset index file.
pub const SUMMARY_LEN: usize = 32;

/// Offset index: entries (offset relative to the segment base, byte position), both
/// strictly increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    pub fn push(&mut self, relative_offset: u32, position: u32) {
        if let Some(&(last_off, last_pos)) = self.entries.last() {
            assert!(relative_offset > last_off && position > last_pos, "offset index must increase");
        }
        self.entries.push((relative_offset, position));
    }

    /// Position of the last indexed batch starting at or before `relative_offset`.
    pub fn lookup(&self, relative_offset: u32) -> u32 {
        let i = self.entries.partition_point(|&(off, _)| off <= relative_offset);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// The last indexed batch start in `(after, limit]`, if any: a read of `[after, it)`
    /// ends on a batch boundary, so it holds whole batches only (see `Log::chunk_end`).
    pub fn batch_start_in(&self, after: u32, limit: u32) -> Option<u32> {
        let i = self.entries.partition_point(|&(_, pos)| pos <= limit);
        let (_, pos) = *self.entries.get(i.checked_sub(1)?)?;
        (pos > after).then_some(pos)
    }

    /// Position of the batch that starts at `relative_offset`, if it is indexed.
    pub fn position_of(&self, relative_offset: u32) -> Option<u32> {
        let i = self.entries.partition_point(|&(off, _)| off < relative_offset);
        self.entries.get(i).filter(|&&(off, _)| off == relative_offset).map(|&(_, pos)| pos)
    }

    /// The last indexed batch start in `(after, limit]` whose batch starts at or below
    /// `max_relative_offset`: a read of `[after, it)` holds whole batches, all of them
    /// below `max_relative_offset` (entries increase in both, so the two bounds cut one
    /// prefix).
    pub fn batch_start_at_or_below(&self, after: u32, limit: u32, max_relative_offset: u32) -> Option<u32> {
        let i = self.entries.partition_point(|&(off, pos)| pos <= limit && off <= max_relative_offset);
        let (_, pos) = *self.entries.get(i.checked_sub(1)?)?;
        (pos > after).then_some(pos)
    }

    /// Drops entries at or past `position` (after truncation).
    pub fn truncate_to_position(&mut self, position: u32) {
        let i = self.entries.partition_point(|&(_, pos)| pos < position);
        self.entries.truncate(i);
    }

    /// Where a truncation scans from to find the batch holding `relative_offset` and the
    /// largest timestamp before it (`Segment::cut_scan_start`): the entry before the last
    /// one at or below it, as (relative offset, position); None: from the segment's start.
    pub fn entry_before_floor(&self, relative_offset: u32) -> Option<(u32, u32)> {
        let i = self.entries.partition_point(|&(off, _)| off <= relative_offset);
        i.checked_sub(2).map(|j| self.entries[j])
    }

    /// Position of the last entry.
    pub fn last_position(&self) -> Option<u32> {
        self.entries.last().map(|&(_, pos)| pos)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Saves the entries after a fixed-size `summary` of the sealed segment, so a
    /// sealed segment opens without a scan.
    pub async fn save(&self, path: &Path, summary: &[u8; SUMMARY_LEN]) -> Result<()> {
        let mut payload = Vec::with_capacity(SUMMARY_LEN + self.entries.len() * 8);
        payload.extend_from_slice(summary);
        for &(off, pos) in &self.entries {
            payload.extend_from_slice(&off.to_be_bytes());
            payload.extend_from_slice(&pos.to_be_bytes());
        }
        write_checked_file(path, INDEX_MAGIC, INDEX_VERSION, &payload).await
    }

    /// None when missing or unusable (logged and counted); the caller rebuilds by scanning.
    pub async fn load(path: &Path) -> Option<([u8; SUMMARY_LEN], OffsetIndex)> {
        let payload = read_rebuildable_file(path, INDEX_MAGIC, INDEX_VERSION, "index").await?;
        Self::from_payload(&payload).map_err(|why| report_unusable(path, "index", why)).ok()
    }

    /// The summary and entries of an index file's payload, or why it is unusable.
    pub fn from_payload(payload: &[u8]) -> std::result::Result<([u8; SUMMARY_LEN], OffsetIndex), &'static str> {
        if payload.len() < SUMMARY_LEN || !(payload.len() - SUMMARY_LEN).is_multiple_of(8) {
            return Err("payload is not a summary and whole entries");
        }
        let mut summary = [0u8; SUMMARY_LEN];
        summary.copy_from_slice(&payload[..SUMMARY_LEN]);
        let mut idx = OffsetIndex::default();
        for c in payload[SUMMARY_LEN..].chunks_exact(8) {
            let off = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            let pos = u32::from_be_bytes([c[4], c[5], c[6], c[7]]);
            if idx.entries.last().is_some_and(|&(o, p)| off <= o || pos <= p) {
                return Err("entries not increasing");
            }
            idx.entries.push((off, pos));
        }
        Ok((summary, idx))
    }
}

/// Time index: entries (max timestamp so far, relative offset of the batch holding it),
/// both increasing. Lookups give the first batch that may hold a timestamp >= target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    /// Adds an entry only when the timestamp grew (the index stays monotonic).
    pub fn maybe_push(&mut self, timestamp: i64, relative_offset: u32) {
        match self.entries.last() {
            Some(&(ts, off)) if timestamp <= ts || relative_offset <= off => {}
            _ => self.entries.push((timestamp, relative_offset)),
        }
    }

    /// Relative offset from which to scan for the first timestamp >= `target`.
    pub fn lookup(&self, target: i64) -> u32 {
        let i = self.entries.partition_point(|&(ts, _)| ts < target);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// The last entry for a batch below `relative_offset`: (timestamp, relative offset).
    pub fn last_before(&self, relative_offset: u32) -> Option<(i64, u32)> {
        let i = self.entries.partition_point(|&(_, off)| off < relative_offset);
        i.checked_sub(1).map(|j| self.entries[j])
    }

    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let i = self.entries.partition_point(|&(_, off)| off < relative_offset);
        self.entries.truncate(i);
    }

    pub async fn save(&self, path: &Path) -> Result<()> {
        let mut payload = Vec::with_capacity(self.entries.len() * 12);
        for &(ts, off) in &self.entries {
            payload.extend_from_slice(&ts.to_be_bytes());
            payload.extend_from_slice(&off.to_be_bytes());
        }
        write_checked_file(path, TIME_INDEX_MAGIC, INDEX_VERSION, &payload).await
    }

    pub async fn load(path: &Path) -> Option<TimeIndex> {
        let payload = read_rebuildable_file(path, TIME_INDEX_MAGIC, INDEX_VERSION, "time_index").await?;
        Self::from_payload(&payload).map_err(|why| report_unusable(path, "time_index", why)).ok()
    }

    /// The entries of a time index file's payload, or why it is unusable.
    pub fn from_payload(payload: &[u8]) -> std::result::Result<TimeIndex, &'static str> {
        if !payload.len().is_multiple_of(12) {
            return Err("payload is not whole entries");
        }
        let mut idx = TimeIndex::default();
        for c in payload.chunks_exact(12) {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&c[..8]);
            let off = u32::from_be_bytes([c[8], c[9], c[10], c[11]]);
            idx.entries.push((i64::from_be_bytes(ts), off));
        }
        Ok(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_start_in_is_the_last_indexed_start_strictly_after_and_up_to_the_limit() {
        let mut idx = OffsetIndex::default();
        idx.push(0, 0);
        idx.push(10, 4096);
        idx.push(25, 9000);
        assert_eq!(idx.batch_start_in(0, 4095), None, "no start inside (0, 4095]");
        assert_eq!(idx.batch_start_in(0, 4096), Some(4096), "the limit itself counts");
        assert_eq!(idx.batch_start_in(0, 8999), Some(4096));
        assert_eq!(idx.batch_start_in(0, 1 << 20), Some(9000));
        assert_eq!(idx.batch_start_in(4096, 8999), None, "the start of the read itself does not count");
        assert_eq!(idx.batch_start_in(9000, 1 << 20), None);
        assert_eq!(OffsetIndex::default().batch_start_in(0, 1 << 20), None);
    }

    #[test]
    fn exact_positions_and_starts_bounded_by_position_and_offset() {
        let mut idx = OffsetIndex::default();
        idx.push(0, 0);
        idx.push(10, 4096);
        idx.push(25, 9000);
        assert_eq!((idx.position_of(0), idx.position_of(10), idx.position_of(25)), (Some(0), Some(4096), Some(9000)));
        assert_eq!((idx.position_of(5), idx.position_of(26)), (None, None), "only indexed batch starts");
        // Bounded by position only (offsets far away): as batch_start_in.
        assert_eq!(idx.batch_start_at_or_below(0, 1 << 20, u32::MAX), Some(9000));
        assert_eq!(idx.batch_start_at_or_below(0, 8999, u32::MAX), Some(4096));
        // Bounded by offset: batches starting above it are not included, one at it ends the read.
        assert_eq!(idx.batch_start_at_or_below(0, 1 << 20, 24), Some(4096));
        assert_eq!(idx.batch_start_at_or_below(0, 1 << 20, 25), Some(9000));
        assert_eq!(idx.batch_start_at_or_below(0, 1 << 20, 9), None, "nothing strictly after the start");
        assert_eq!(idx.batch_start_at_or_below(4096, 1 << 20, 24), None);
    }

    #[test]
    fn offset_lookup_finds_floor_entry() {
        let mut idx = OffsetIndex::default();
        idx.push(0, 1);
        idx.push(10, 4096);
        idx.push(25, 9000);
        assert_eq!(idx.lookup(0), 1);
        assert_eq!(idx.lookup(9), 1);
        assert_eq!(idx.lookup(10), 4096);
        assert_eq!(idx.lookup(1000), 9000);
        idx.truncate_to_position(4096);
        assert_eq!(idx.lookup(1000), 1);
    }

    #[test]
    fn time_lookup_is_conservative() {
        let mut idx = TimeIndex::default();
        idx.maybe_push(100, 0);
        idx.maybe_push(90, 5); // not monotonic: ignored
        idx.maybe_push(200, 10);
        assert_eq!(idx.lookup(50), 0);
        assert_eq!(idx.lookup(150), 0);
        assert_eq!(idx.lookup(201), 10);
    }
}
