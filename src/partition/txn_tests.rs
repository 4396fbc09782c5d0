//! The partition's side of transactions on a real executor: KIP-890 verification guards,
//! markers, the last stable offset, read_committed reads with their aborted list, marker
//! fencing, and all of it surviving a reopen (recovery replays the markers from disk).
use bytes::Bytes;
use kafka_protocol::records::Compression;

use super::tests::{batch, open_flushed, run};
use super::PartitionError;
use crate::config::FlushMode;
use crate::partition::producer_state::{AbortedTxn, SequenceError};
use crate::partition::ReadLimit;
use crate::record::{compute_crc, parse_header, ControlType, Marker};
use crate::storage::LogConfig;

/// `b` with the transactional attribute set (CRC recomputed).
pub(super) fn transactional(b: Bytes) -> Bytes {
    let mut v = b.to_vec();
    v[22] |= 0x10;
    let crc = compute_crc(&v);
    v[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(v)
}

const ALL: ReadLimit = ReadLimit { max_bytes: 1 << 20, min_one_batch: true, file_slice: false };
pub(super) const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) fn marker(control: ControlType, coordinator_epoch: i32) -> Marker {
    Marker { control, coordinator_epoch }
}

/// (base offset, is control) of each batch a read returned.
fn batches(records: &[Bytes]) -> Vec<(i64, bool)> {
    records.iter().map(|b| parse_header(b).map(|h| (h.base_offset, h.is_control())).expect("stored batch")).collect()
}

/// Kafka's VerificationStateEntry: pipelined batches of one transaction that all ask for
/// verification share a guard, and only the lowest sequence may start the transaction;
/// a later batch verified first waits (or, at last, is refused as out of order and resent
/// by the client), never appended ahead of the first.
#[test]
fn pipelined_first_writes_share_a_guard_and_start_at_the_lowest_sequence() {
    run(|dir| async move {
        let p = open_flushed(&dir, LogConfig::default(), FlushMode::Never).await;
        let first = transactional(batch(2, 1000, Some((9, 0, 0)), Compression::None));
        let second = transactional(batch(2, 1000, Some((9, 0, 2)), Compression::None));
        let Err(PartitionError::TxnVerificationNeeded { guard: g1, .. }) = p.append_client(first.clone(), -1, None, None).await else {
            panic!("not asked to verify")
        };
        let Err(PartitionError::TxnVerificationNeeded { guard: g2, .. }) = p.append_client(second.clone(), -1, None, None).await else {
            panic!("not asked to verify")
        };
        assert_eq!(g1, g2, "one transaction, one pending verification");
        // The second batch's verification answers first: refused, nothing appended.
        assert!(matches!(p.append_client(second.clone(), -1, None, Some(g2)).await, Err(PartitionError::TxnEarlierWritePending { first_seq: 2, lowest: 0 })));
        assert_eq!(p.high_watermark(), 0);
        assert_eq!(p.append_client(first, -1, None, Some(g1)).await.expect("the lowest sequence starts it").base_offset, 0);
        // The transaction is open: the resent second batch needs no verification.
        assert_eq!(p.append_client(second, -1, None, None).await.expect("in order now").base_offset, 2);
    });
}

#[test]
fn verified_transactions_markers_and_read_committed_survive_a_reopen() {
    for flush in [FlushMode::Always, FlushMode::Never] {
        run(move |dir| async move {
            let cfg = LogConfig::default();
            let p = open_flushed(&dir, cfg.clone(), flush).await;
            p.append(batch(3, 1000, None, Compression::None), -1).await.expect("plain"); // 0..2
            let txn = transactional(batch(2, 1000, Some((5, 0, 0)), Compression::None));
            // The first write of the transaction asks for verification; a wrong guard too.
            let Err(PartitionError::TxnVerificationNeeded { producer_id: 5, guard }) = p.append_client(txn.clone(), -1, None, None).await else {
                panic!("not asked to verify")
            };
            assert!(matches!(p.append_client(txn.clone(), -1, None, Some(guard + 100)).await, Err(PartitionError::TxnVerificationNeeded { .. })));
            let Err(PartitionError::TxnVerificationNeeded { guard, .. }) = p.append_client(txn.clone(), -1, None, None).await else { panic!() };
            assert_eq!(p.append_client(txn, -1, None, Some(guard)).await.expect("verified").base_offset, 3); // 3..4
                                                                                                             // Later writes of the open transaction need no verification.
            let more = transactional(batch(1, 1000, Some((5, 0, 2)), Compression::None));
            assert_eq!(p.append_client(more, -1, None, None).await.expect("in txn").base_offset, 5);
            assert_eq!((p.high_watermark(), p.last_stable_offset()), (6, 3));
            let committed = p.read_isolated(0, ALL, true).await.unwrap();
            assert_eq!(batches(&committed.records), vec![(0, false)], "read_committed stops at the LSO");
            assert_eq!((committed.last_stable_offset, committed.aborted_transactions.clone()), (3, Some(vec![])));
            let uncommitted = p.read_isolated(0, ALL, false).await.unwrap();
            assert_eq!(batches(&uncommitted.records).len(), 3);
            assert!(uncommitted.aborted_transactions.is_none());
            // A plain write from the producer inside its transaction is refused.
            let plain = batch(1, 1000, Some((5, 0, 3)), Compression::None);
            assert!(matches!(
                p.append_client(plain, -1, None, None).await,
                Err(PartitionError::Sequence(SequenceError::NonTransactionalWriteInTransaction { .. }))
            ));
            // Abort: the marker at 6 ends it; read_committed lists it.
            assert_eq!(p.append_marker(5, 0, marker(ControlType::Abort, 2), TIMEOUT).await.expect("marker").base_offset, 6);
            assert_eq!((p.high_watermark(), p.last_stable_offset()), (7, 7));
            let after = p.read_isolated(0, ALL, true).await.unwrap();
            assert_eq!(batches(&after.records), vec![(0, false), (3, false), (5, false), (6, true)]);
            assert_eq!(after.aborted_transactions, Some(vec![AbortedTxn { producer_id: 5, first_offset: 3, last_offset: 6 }]));
            // An older coordinator's marker is fenced; a guard handed out before a marker is void.
            assert!(matches!(
                p.append_marker(5, 0, marker(ControlType::Commit, 1), TIMEOUT).await,
                Err(PartitionError::Sequence(SequenceError::CoordinatorFenced { coordinator_epoch: 1, current: 2 }))
            ));
            let next = transactional(batch(1, 1000, Some((5, 0, 3)), Compression::None));
            let Err(PartitionError::TxnVerificationNeeded { guard, .. }) = p.append_client(next.clone(), -1, None, None).await else { panic!() };
            p.append_marker(5, 0, marker(ControlType::Commit, 2), TIMEOUT).await.expect("a marker with no open transaction is written");
            assert!(
                matches!(p.append_client(next, -1, None, Some(guard)).await, Err(PartitionError::TxnVerificationNeeded { .. })),
                "a marker voids the guard"
            );
            let end = p.high_watermark();
            p.close();
            drop(p);
            // Recovery rebuilds the aborted list and the LSO from the markers on disk.
            let p = open_flushed(&dir, cfg, flush).await;
            assert_eq!(p.last_stable_offset(), end);
            let again = p.read_isolated(0, ALL, true).await.unwrap();
            assert_eq!(again.aborted_transactions, Some(vec![AbortedTxn { producer_id: 5, first_offset: 3, last_offset: 6 }]));
            assert!(
                matches!(
                    p.append_marker(5, 0, marker(ControlType::Commit, 1), TIMEOUT).await,
                    Err(PartitionError::Sequence(SequenceError::CoordinatorFenced { .. }))
                ),
                "the coordinator epoch survives recovery"
            );
        });
    }
}
