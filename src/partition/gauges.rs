//! What a scrape reads of one partition (summed per shard by `server/shard/metrics_scrape.rs`).
use super::Partition;

/// One partition's point-in-time figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartitionGauges {
    pub leader: bool,
    pub size_bytes: u64,
    pub segments: u64,
    pub producer_state_entries: u64,
    /// acks=all appends waiting for the high watermark (Kafka's produce purgatory).
    pub produce_waiters: u64,
    /// Long-poll fetches waiting for data (Kafka's fetch purgatory).
    pub fetch_waiters: u64,
    /// Compacted topics only: the dirty share of the sealed segments (0 to 1; None when
    /// nothing is sealed), whether it is due for cleaning (min.cleanable.dirty.ratio), and
    /// whether the cleaner gave up on it (a corrupt batch).
    pub dirty_ratio: Option<f64>,
    pub cleanable: bool,
    pub uncleanable: bool,
}

impl Partition {
    pub fn gauges(&self) -> PartitionGauges {
        let cleanable = self.needs_cleaning();
        let log = self.log.borrow();
        let compacted = log.config().compact;
        PartitionGauges {
            leader: self.is_leader(),
            size_bytes: log.size_bytes(),
            segments: log.segment_count() as u64,
            producer_state_entries: self.producers.borrow().len() as u64,
            produce_waiters: self.hw_waiters.borrow().len() as u64,
            fetch_waiters: self.live_watcher_count() as u64,
            dirty_ratio: if compacted { log.dirty_ratio() } else { None },
            cleanable,
            uncleanable: compacted && log.is_uncleanable(),
        }
    }
}
