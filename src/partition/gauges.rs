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
}

impl Partition {
    pub fn gauges(&self) -> PartitionGauges {
        let log = self.log.borrow();
        PartitionGauges {
            leader: self.is_leader(),
            size_bytes: log.size_bytes(),
            segments: log.segment_count() as u64,
            producer_state_entries: self.producers.borrow().len() as u64,
            produce_waiters: self.hw_waiters.borrow().len() as u64,
            fetch_waiters: self.live_watcher_count() as u64,
        }
    }
}
