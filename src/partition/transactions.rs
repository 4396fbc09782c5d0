//! The partition's side of transactions: the last stable offset, the aborted
//! transactions a read_committed fetch lists, and the open transactions (for
//! DescribeProducers and hanging-transaction checks). Markers are appended by
//! `append.rs::append_marker`; the state itself is the producer table's
//! (`producer_state.rs`), kept across roll, recovery and truncation with it.
use super::producer_state::{AbortedTxn, ProducerStateTable};
use super::read::FetchData;
use super::state::Partition;
use crate::record::parse_header;

/// A producer's state on this partition, as DescribeProducers reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    pub coordinator_epoch: i32,
    /// First offset of its open transaction here, -1 if none.
    pub current_txn_start_offset: i64,
}

impl Partition {
    /// The last stable offset: below it every transaction is committed or aborted and its
    /// marker is below the high watermark. Never above the high watermark (invariant 10:
    /// read_committed reads stop here).
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        let lso = self.producers.borrow_mut().first_unstable_offset(hw).map_or(hw, |f| f.min(hw));
        debug_assert!(lso <= hw);
        lso
    }

    /// The aborted transactions a read_committed read from `offset` returning `data`
    /// must list: those overlapping [`offset`, end of what it read) (the last stable
    /// offset when the read's end is not known, a file slice).
    pub(super) fn aborted_transactions_in(&self, offset: i64, data: &FetchData) -> Vec<AbortedTxn> {
        let end = match data.records.last().map(|b| parse_header(b)) {
            Some(Ok(h)) => h.last_offset() + 1,
            _ => data.last_stable_offset,
        };
        if end <= offset {
            return Vec::new();
        }
        self.producers.borrow().aborted_between(offset, end)
    }

    /// Applies max_producer_ids_per_partition after appends (`ProducerStateTable::bound`).
    pub(super) fn bound_producers(&self, table: &mut ProducerStateTable) {
        bound_producer_table(table, self.settings.borrow().max_producer_ids, &self.topic, self.index);
    }

    /// Kafka's producer.id.expiration.ms: forgets producers with no open transaction that
    /// wrote nothing for `expiration_ms` (by their batches' timestamps, as Kafka), and the
    /// aborted transactions retention removed from the log. Bounds the producer table (and
    /// every snapshot of it) by what clients used recently. Returns how many expired.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.assert_on_shard();
        let mut table = self.producers.borrow_mut();
        table.trim_aborted_below(self.log_start_offset());
        let expired = table.expire(now_ms, expiration_ms);
        if expired > 0 {
            tracing::debug!(topic = %self.topic, partition = self.index, expired, left = table.len(), "expired idle producers");
        }
        expired
    }

    /// Every producer with state here (DescribeProducers).
    pub fn producers_view(&self) -> Vec<ProducerView> {
        self.assert_on_shard();
        let table = self.producers.borrow();
        table
            .ids()
            .filter_map(|id| {
                let e = table.get(id)?;
                Some(ProducerView {
                    producer_id: id,
                    producer_epoch: e.epoch,
                    last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                    last_timestamp_ms: e.last_timestamp_ms,
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
                })
            })
            .collect()
    }
}

/// Keeps `table` within `max` producers; what it forgets is logged and counted
/// (`shardlog_producer_ids_evicted_total`).
pub(super) fn bound_producer_table(table: &mut ProducerStateTable, max: usize, topic: &str, index: i32) {
    let forgotten = table.bound(max);
    if forgotten > 0 {
        tracing::info!(topic, partition = index, forgotten, max, "producer table full: forgot the least recently writing producers");
        crate::metrics::with(|m| m.producer_ids_evicted += forgotten as u64);
    }
}
