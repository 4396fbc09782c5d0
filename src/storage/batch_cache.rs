//! Recent batches of one partition, kept in memory as the exact bytes stored on disk, so
//! that a fetch near the log end is a list of `Bytes` handed to the socket without a
//! read or a copy. Oldest batches are evicted first when the byte budget is exceeded.
use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Clone, Debug)]
pub struct CachedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub bytes: Bytes,
}

#[derive(Debug, Default)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    budget_bytes: usize,
}

impl BatchCache {
    pub fn new(budget_bytes: usize) -> BatchCache {
        BatchCache { batches: VecDeque::new(), bytes: 0, budget_bytes }
    }

    /// Appends the newest batch. Batches arrive in offset order.
    pub fn push(&mut self, batch: CachedBatch) {
        if let Some(last) = self.batches.back() {
            assert!(batch.base_offset > last.last_offset, "cache batches must be in offset order");
        }
        self.bytes += batch.bytes.len();
        self.batches.push_back(batch);
        // Keep at least the newest batch even when it alone exceeds the budget.
        while self.bytes > self.budget_bytes && self.batches.len() > 1 {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        if let Some(b) = self.batches.pop_front() {
            self.bytes -= b.bytes.len();
        }
    }

    /// First offset the cache can serve, if any.
    pub fn first_offset(&self) -> Option<i64> {
        self.batches.front().map(|b| b.base_offset)
    }

    /// Batches holding offsets >= `offset` and starting below `max_offset`, up to
    /// `max_bytes`; with `min_one_batch` the first batch is returned whole even above
    /// `max_bytes` (Kafka's minOneMessage). `None` if `offset` is older than the cache.
    pub fn read(&self, offset: i64, max_offset: i64, max_bytes: usize, min_one_batch: bool, out: &mut crate::record::BatchList) -> Option<usize> {
        let first = self.batches.front()?;
        if offset < first.base_offset {
            return None;
        }
        let start = self.batches.partition_point(|b| b.last_offset < offset);
        let mut total = 0usize;
        for b in self.batches.range(start..) {
            let fits = total + b.bytes.len() <= max_bytes || (total == 0 && min_one_batch);
            if b.base_offset >= max_offset || !fits {
                break;
            }
            total += b.bytes.len();
            out.push(b.bytes.clone());
        }
        Some(total)
    }

    /// Drops batches with offsets >= `offset` (rollback after a failed write).
    pub fn truncate_from(&mut self, offset: i64) {
        while self.batches.back().is_some_and(|b| b.last_offset >= offset) {
            if let Some(b) = self.batches.pop_back() {
                self.bytes -= b.bytes.len();
            }
        }
    }

    /// Drops batches entirely below `offset` (retention, DeleteRecords).
    pub fn evict_below(&mut self, offset: i64) {
        while self.batches.front().is_some_and(|b| b.last_offset < offset) {
            self.evict_oldest();
        }
    }

    pub fn set_budget(&mut self, budget_bytes: usize) {
        self.budget_bytes = budget_bytes;
        while self.bytes > self.budget_bytes && self.batches.len() > 1 {
            self.evict_oldest();
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The cached batches, oldest first (for timestamp searches).
    pub fn iter(&self) -> impl Iterator<Item = &CachedBatch> {
        self.batches.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64, len: usize) -> CachedBatch {
        CachedBatch { base_offset: base, last_offset: last, bytes: Bytes::from(vec![0u8; len]) }
    }

    #[test]
    fn reads_respect_hw_and_max_bytes_and_share_bytes() {
        let mut c = BatchCache::new(1000);
        c.push(batch(0, 4, 100));
        c.push(batch(5, 9, 100));
        c.push(batch(10, 14, 100));
        let mut out = crate::record::BatchList::new();
        assert_eq!(c.read(7, 15, 150, true, &mut out), Some(100));
        assert_eq!(out.len(), 1);
        out.clear();
        assert_eq!(c.read(7, 10, 1000, true, &mut out), Some(100), "batches at or above the HW are not served");
        out.clear();
        assert_eq!(c.read(0, 15, 1, false, &mut out), Some(0), "without min_one_batch max_bytes is hard");
        assert!(out.is_empty());
        assert_eq!(c.read(0, 15, 1, true, &mut out), Some(100), "the first batch is whole even above max_bytes");
        let cached = c.iter().next().unwrap().bytes.as_ptr();
        assert_eq!(out[0].as_ptr(), cached, "served bytes are the cached bytes, not a copy");
    }

    #[test]
    fn evicts_oldest_over_budget_and_truncates() {
        let mut c = BatchCache::new(250);
        c.push(batch(0, 4, 100));
        c.push(batch(5, 9, 100));
        c.push(batch(10, 14, 100));
        assert_eq!(c.first_offset(), Some(5));
        let mut out = crate::record::BatchList::new();
        assert_eq!(c.read(0, 15, 1000, true, &mut out), None);
        c.truncate_from(10);
        assert_eq!(c.bytes(), 100);
        c.evict_below(10);
        assert_eq!(c.first_offset(), None);
    }
}
