//! read_committed share groups (Kafka 4.4's `share.isolation.level`): a share-partition of
//! such a group reads below the last stable offset, and the batches of aborted
//! transactions it fetched are archived instead of delivered, as Kafka's
//! `SharePartition.fetchAbortedTransactionRecordBatches` decides: walking the batches in
//! order, an aborted transaction counts from its first offset until its producer's abort
//! marker; a transactional batch of a producer with such a transaction open is aborted.
//! The markers themselves are delivered (clients acknowledge control records as gaps).
use std::collections::HashSet;

use crate::partition::producer_state::AbortedTxn;
use crate::record::{parse_marker, BatchHeader, ControlType};

/// What the walk needs of one fetched batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1: no producer (not idempotent, not transactional).
    pub producer_id: i64,
    pub transactional: bool,
    pub abort_marker: bool,
}

impl FetchedBatch {
    /// `batch` whole, its header `h`. A control batch whose marker does not parse is not
    /// taken for an abort marker (the producer's transaction stays aborted).
    pub fn of(batch: &[u8], h: &BatchHeader) -> FetchedBatch {
        let abort_marker = h.is_control() && parse_marker(batch, h).is_ok_and(|m| m.control == ControlType::Abort);
        FetchedBatch { base_offset: h.base_offset, last_offset: h.last_offset(), producer_id: h.producer_id, transactional: h.is_transactional(), abort_marker }
    }
}

/// The `(base offset, last offset)` of the batches of `batches` (in offset order) that
/// belong to one of the `aborted` transactions (those the read returned for its range).
pub fn aborted_batches(batches: &[FetchedBatch], aborted: &[AbortedTxn]) -> Vec<(i64, i64)> {
    if aborted.is_empty() {
        return Vec::new();
    }
    let mut pending: Vec<&AbortedTxn> = aborted.iter().collect();
    pending.sort_by_key(|a| a.first_offset);
    let mut next = 0;
    let mut open: HashSet<i64> = HashSet::new();
    let mut out = Vec::new();
    for b in batches.iter().filter(|b| b.producer_id >= 0) {
        while next < pending.len() && pending[next].first_offset <= b.last_offset {
            open.insert(pending[next].producer_id);
            next += 1;
        }
        if b.abort_marker {
            open.remove(&b.producer_id);
        } else if b.transactional && open.contains(&b.producer_id) {
            out.push((b.base_offset, b.last_offset));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64, pid: i64) -> FetchedBatch {
        FetchedBatch { base_offset: base, last_offset: last, producer_id: pid, transactional: pid >= 0, abort_marker: false }
    }

    fn marker(at: i64, pid: i64, abort: bool) -> FetchedBatch {
        FetchedBatch { base_offset: at, last_offset: at, producer_id: pid, transactional: true, abort_marker: abort }
    }

    fn txn(pid: i64, first: i64) -> AbortedTxn {
        AbortedTxn { producer_id: pid, first_offset: first, last_offset: i64::MAX }
    }

    #[test]
    fn only_the_aborted_transactions_batches_are_taken() {
        // Producer 1 aborts (2-5 with its marker at 6), producer 2 commits (3-4, marker 7),
        // plain records at 0-1 and 8.
        let batches = [batch(0, 1, -1), batch(2, 2, 1), batch(3, 4, 2), batch(5, 5, 1), marker(6, 1, true), marker(7, 2, false), batch(8, 8, -1)];
        assert_eq!(aborted_batches(&batches, &[txn(1, 2)]), vec![(2, 2), (5, 5)]);
        assert_eq!(aborted_batches(&batches, &[]), vec![]);
    }

    #[test]
    fn a_producers_next_transaction_after_its_abort_marker_is_not_aborted() {
        // Producer 1: aborted 0-1 (marker 2), then a committed transaction 3-4 (marker 5),
        // then aborted again from 6 (marker 8).
        let batches = [batch(0, 1, 1), marker(2, 1, true), batch(3, 4, 1), marker(5, 1, false), batch(6, 7, 1), marker(8, 1, true)];
        assert_eq!(aborted_batches(&batches, &[txn(1, 0), txn(1, 6)]), vec![(0, 1), (6, 7)]);
    }

    #[test]
    fn non_transactional_batches_of_the_producer_are_kept() {
        let idempotent = FetchedBatch { transactional: false, ..batch(1, 1, 1) };
        assert_eq!(aborted_batches(&[batch(0, 0, 1), idempotent, marker(2, 1, true)], &[txn(1, 0)]), vec![(0, 0)]);
    }
}
