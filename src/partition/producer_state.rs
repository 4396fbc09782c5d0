//! Idempotent and transactional producer state of one partition: per producer id, its
//! epoch, the last five batches' sequence ranges with their offsets (Kafka keeps five,
//! matching `max.in.flight.requests.per.connection` <= 5 for idempotent producers), its
//! open transaction here and the coordinator epoch of its last marker; for the partition,
//! the open transactions by first offset (the last stable offset is the smallest), the
//! completed ones whose marker the high watermark has not passed yet, and the aborted
//! transactions still in the log (what read_committed fetches list).
use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::record::{parse_marker, BatchHeader, ControlType, Marker};

/// The snapshot file (`storage::segment::snapshot_path`) of the producer state as of a
/// segment's base, written when the segment is created.
pub const SNAPSHOT_MAGIC: u32 = 0x534c_5053; // "SLPS"
/// 2: transaction state (open transaction, coordinator epoch, last write time per
/// producer; the aborted transactions). A version-1 snapshot is not read: the state is
/// then rebuilt from the log, as when a snapshot is missing.
pub const SNAPSHOT_VERSION: u16 = 2;

/// Batches remembered per producer for duplicate detection.
pub const BATCHES_PER_PRODUCER: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    /// First offset of this producer's open transaction on this partition.
    pub current_txn_first_offset: Option<i64>,
    /// Coordinator epoch of the last marker written for this producer (-1: none); a
    /// marker from an older coordinator is refused.
    pub coordinator_epoch: i32,
    /// Largest batch timestamp this producer wrote here (producer.id.expiration.ms).
    pub last_timestamp_ms: i64,
    /// The transaction this producer completed last here: (first offset, marker offset).
    /// Not saved: it lets a rolled-back marker reopen its transaction (`truncate_from`).
    last_completed: Option<(i64, i64)>,
}

/// An aborted transaction in the log: its producer, first offset and marker offset
/// (Kafka's AbortedTxn; a read_committed consumer drops that producer's batches in the
/// range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("out of order sequence number {first_seq} (expected {expected})")]
    OutOfOrder { first_seq: i32, expected: i32 },
    #[error("producer epoch {epoch} is older than the current {current}")]
    InvalidProducerEpoch { epoch: i16, current: i16 },
    #[error("producer {producer_id} has a transaction open on this partition: its writes must be transactional")]
    NonTransactionalWriteInTransaction { producer_id: i64 },
    #[error("transaction marker from coordinator epoch {coordinator_epoch}, older than the current {current}")]
    CoordinatorFenced { coordinator_epoch: i32, current: i32 },
}

/// What to do with an incoming batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended: answer success with the original offsets, append nothing.
    Duplicate(BatchMeta),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset -> producer id. Kept equal to the entries'
    /// `current_txn_first_offset` (`assert_consistent`).
    ongoing: BTreeMap<i64, i64>,
    /// Completed transactions whose marker may still be above the high watermark:
    /// (first offset, marker offset), in marker order. Not saved (see `first_unstable_offset`).
    unreplicated: VecDeque<(i64, i64)>,
    /// Aborted transactions in the log, in marker order (so by `last_offset`).
    aborted: Vec<AbortedTxn>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

fn last_seq_of(h: &BatchHeader) -> i32 {
    // Sequences wrap at i32::MAX back to 0, as in Kafka.
    ((i64::from(h.base_sequence) + i64::from(h.last_offset_delta)) % (i64::from(i32::MAX) + 1)) as i32
}

impl ProducerStateTable {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// The producer ids with state here.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.producers.keys().copied()
    }

    /// Checks a batch from the network against the state (no change made).
    pub fn check(&self, h: &BatchHeader) -> Result<SequenceCheck, SequenceError> {
        if h.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&h.producer_id) else {
            // Unknown producer (new, or its state expired): accept, as Kafka does.
            return Ok(SequenceCheck::Append);
        };
        if h.producer_epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch { epoch: h.producer_epoch, current: entry.epoch });
        }
        // Kafka's ProducerAppendInfo.checkProducerEpoch / "Expected transactional write".
        if !h.is_transactional() && entry.current_txn_first_offset.is_some() {
            return Err(SequenceError::NonTransactionalWriteInTransaction { producer_id: h.producer_id });
        }
        if h.base_sequence < 0 {
            // Written by the broker for the producer (a TxnOffsetCommit): no sequence to
            // check (clients' batches with a producer id always carry one, `validate.rs`).
            return Ok(SequenceCheck::Append);
        }
        if h.producer_epoch > entry.epoch {
            return if h.base_sequence == 0 { Ok(SequenceCheck::Append) } else { Err(SequenceError::OutOfOrder { first_seq: h.base_sequence, expected: 0 }) };
        }
        let last = last_seq_of(h);
        if let Some(dup) = entry.batches.iter().find(|b| b.first_seq == h.base_sequence && b.last_seq == last) {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        match entry.batches.back() {
            Some(prev) if next_seq(prev.last_seq) != h.base_sequence => {
                Err(SequenceError::OutOfOrder { first_seq: h.base_sequence, expected: next_seq(prev.last_seq) })
            }
            _ => Ok(SequenceCheck::Append),
        }
    }

    /// Checks a transaction marker for `producer_id` at `producer_epoch` from coordinator
    /// epoch `coordinator_epoch` (Kafka's ProducerAppendInfo.appendEndTxnMarker checks).
    /// `transaction_version` (WriteTxnMarkers v2, KIP-1228): from 2 the coordinator bumps
    /// the epoch before every marker, so a marker must be above the producer's epoch; at
    /// its epoch only as the retry of a marker already written (no transaction open:
    /// KAFKA-19999). Below 2, not below it.
    pub fn check_marker(&self, producer_id: i64, producer_epoch: i16, coordinator_epoch: i32, transaction_version: i8) -> Result<(), SequenceError> {
        let Some(entry) = self.producers.get(&producer_id) else { return Ok(()) };
        let stale = if transaction_version >= 2 {
            producer_epoch < entry.epoch || (producer_epoch == entry.epoch && entry.current_txn_first_offset.is_some())
        } else {
            producer_epoch < entry.epoch
        };
        if stale {
            return Err(SequenceError::InvalidProducerEpoch { epoch: producer_epoch, current: entry.epoch });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(SequenceError::CoordinatorFenced { coordinator_epoch, current: entry.coordinator_epoch });
        }
        Ok(())
    }

    /// Records an appended batch (its base offset is final; `batch` its stored bytes,
    /// read for a control batch's marker). A control batch whose marker cannot be read
    /// (a damaged log) is taken as an abort, the safe reading for read_committed.
    pub fn update(&mut self, h: &BatchHeader, batch: &[u8]) {
        if h.producer_id < 0 {
            return;
        }
        if h.is_control() {
            let marker = parse_marker(batch, h).unwrap_or_else(|e| {
                tracing::warn!(producer_id = h.producer_id, offset = h.base_offset, error = %e, "unreadable transaction marker: taken as an abort");
                Marker { control: ControlType::Abort, coordinator_epoch: -1 }
            });
            self.apply_marker(h, marker);
            return;
        }
        let entry = self.producers.entry(h.producer_id).or_insert_with(|| ProducerEntry { coordinator_epoch: -1, ..Default::default() });
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(h.max_timestamp);
        if h.base_sequence < 0 {
            // No sequence (a broker-written batch): nothing to remember for duplicates.
            if h.is_transactional() && entry.current_txn_first_offset.is_none() {
                entry.current_txn_first_offset = Some(h.base_offset);
                self.ongoing.insert(h.base_offset, h.producer_id);
            }
            return;
        }
        entry.batches.push_back(BatchMeta { first_seq: h.base_sequence, last_seq: last_seq_of(h), base_offset: h.base_offset, last_offset: h.last_offset() });
        while entry.batches.len() > BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset);
            self.ongoing.insert(h.base_offset, h.producer_id);
        }
    }

    /// Records an appended marker (header `h` at its final offset): the producer's open
    /// transaction here, if any, is complete; an abort is remembered for read_committed.
    fn apply_marker(&mut self, h: &BatchHeader, marker: Marker) {
        let entry = self.producers.entry(h.producer_id).or_insert_with(|| ProducerEntry { coordinator_epoch: -1, ..Default::default() });
        if h.producer_epoch != entry.epoch {
            // Transaction protocol v2: the marker carries the bumped epoch; the producer's
            // next batch starts its sequences over, at 0 (as Kafka's lastSeq = -1 after
            // such a marker): a sequence -1 "batch" at the marker makes `check` ask for 0,
            // so a later batch of the next transaction cannot land first.
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
            entry.batches.push_back(BatchMeta { first_seq: -1, last_seq: -1, base_offset: h.base_offset, last_offset: h.base_offset });
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(h.max_timestamp);
        let marker_offset = h.base_offset;
        if let Some(first) = entry.current_txn_first_offset.take() {
            self.ongoing.remove(&first);
            entry.last_completed = Some((first, marker_offset));
            self.unreplicated.push_back((first, marker_offset));
            if marker.control == ControlType::Abort {
                self.aborted.push(AbortedTxn { producer_id: h.producer_id, first_offset: first, last_offset: marker_offset });
            }
        }
    }

    /// The first offset of the oldest transaction not yet stable at high watermark `hw`:
    /// open, or completed with its marker at or above `hw`. The last stable offset is
    /// min(this, hw) (Kafka's firstUnstableOffset).
    pub fn first_unstable_offset(&mut self, hw: i64) -> Option<i64> {
        while self.unreplicated.front().is_some_and(|&(_, marker)| marker < hw) {
            self.unreplicated.pop_front();
        }
        let open = self.ongoing.keys().next().copied();
        let unreplicated = self.unreplicated.iter().map(|&(first, _)| first).min();
        match (open, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The open transactions: (first offset, producer id), oldest first.
    pub fn open_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(&first, &pid)| (first, pid))
    }

    /// The aborted transactions overlapping offsets [`from`, `to`): marker at or after
    /// `from`, first offset before `to` (Kafka's collectAbortedTransactions).
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..].iter().filter(|a| a.first_offset < to).copied().collect()
    }

    /// Forgets what lies at or above `offset` (after a rolled-back write or a
    /// truncation): batches, transactions that began there; a transaction whose marker
    /// was there is open again.
    pub fn truncate_from(&mut self, offset: i64) {
        for entry in self.producers.values_mut() {
            while entry.batches.back().is_some_and(|b| b.base_offset >= offset) {
                entry.batches.pop_back();
            }
            if entry.current_txn_first_offset.is_some_and(|f| f >= offset) {
                entry.current_txn_first_offset = None;
            }
            if let Some((first, marker)) = entry.last_completed {
                if marker >= offset {
                    entry.last_completed = None;
                    if first < offset {
                        entry.current_txn_first_offset = Some(first);
                    }
                }
            }
        }
        self.producers.retain(|_, e| !e.batches.is_empty() || e.current_txn_first_offset.is_some());
        self.ongoing = self.producers.iter().filter_map(|(&pid, e)| e.current_txn_first_offset.map(|f| (f, pid))).collect();
        self.unreplicated.retain(|&(_, marker)| marker < offset);
        self.aborted.retain(|a| a.last_offset < offset);
    }

    /// Forgets aborted transactions wholly below `log_start_offset` (retention removed them).
    pub fn trim_aborted_below(&mut self, log_start_offset: i64) {
        let n = self.aborted.partition_point(|a| a.last_offset < log_start_offset);
        self.aborted.drain(..n);
    }

    /// Removes producers silent for `expiration_ms` at `now_ms` with no open transaction
    /// (Kafka's producer.id.expiration.ms); returns how many.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| e.current_txn_first_offset.is_some() || e.last_timestamp_ms.saturating_add(expiration_ms) >= now_ms);
        before - self.producers.len()
    }

    /// Keeps at most `max` producers: past it, forgets the least recently writing ones
    /// (by batch timestamp) without an open transaction, down to 90 % of `max` so a flood
    /// of new ids pays the sort once per tenth of the table. A forgotten producer is what
    /// an expired one is (`expire`): its next batch is accepted as a new producer's.
    /// Producers with an open transaction are kept (the coordinator's timeout bounds
    /// them). Returns how many were forgotten.
    pub fn bound(&mut self, max: usize) -> usize {
        if self.producers.len() <= max {
            return 0;
        }
        let keep = max - max / 10;
        let mut idle: Vec<(i64, i64)> =
            self.producers.iter().filter(|(_, e)| e.current_txn_first_offset.is_none()).map(|(&id, e)| (e.last_timestamp_ms, id)).collect();
        idle.sort_unstable();
        let excess = self.producers.len().saturating_sub(keep).min(idle.len());
        for &(_, id) in &idle[..excess] {
            self.producers.remove(&id);
        }
        excess
    }

    /// Some producer's remembered batch, transaction or marker lies at or above `offset`
    /// (a truncation there changes the table).
    pub fn has_batches_from(&self, offset: i64) -> bool {
        self.producers.values().any(|e| {
            e.batches.back().is_some_and(|b| b.base_offset >= offset)
                || e.current_txn_first_offset.is_some_and(|f| f >= offset)
                || e.last_completed.is_some_and(|(_, m)| m >= offset)
        }) || self.aborted.last().is_some_and(|a| a.last_offset >= offset)
    }

    /// Debug check: the open-transaction index matches the entries.
    pub fn assert_consistent(&self) {
        debug_assert_eq!(
            self.ongoing.len(),
            self.producers.values().filter(|e| e.current_txn_first_offset.is_some()).count(),
            "open transactions index out of step with the producers"
        );
    }

    /// Snapshot payload (stored in a checked file next to the segment it precedes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.producers.len() * 64 + self.aborted.len() * 24);
        out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        for id in ids {
            let e = &self.producers[id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
            }
            out.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&e.last_timestamp_ms.to_be_bytes());
        }
        out.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for a in &self.aborted {
            out.extend_from_slice(&a.producer_id.to_be_bytes());
            out.extend_from_slice(&a.first_offset.to_be_bytes());
            out.extend_from_slice(&a.last_offset.to_be_bytes());
        }
        out
    }

    pub fn decode(mut p: &[u8]) -> Option<ProducerStateTable> {
        fn take<const N: usize>(p: &mut &[u8]) -> Option<[u8; N]> {
            let (head, rest) = p.split_at_checked(N)?;
            *p = rest;
            head.try_into().ok()
        }
        let count = u32::from_be_bytes(take::<4>(&mut p)?) as usize;
        // Each entry takes at least 31 bytes: bound the count before allocating.
        if count > p.len() / 31 {
            return None;
        }
        let mut table = ProducerStateTable { producers: HashMap::with_capacity(count), ..Default::default() };
        for _ in 0..count {
            let id = i64::from_be_bytes(take::<8>(&mut p)?);
            let epoch = i16::from_be_bytes(take::<2>(&mut p)?);
            let n = take::<1>(&mut p)?[0] as usize;
            if n > BATCHES_PER_PRODUCER {
                return None;
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: i32::from_be_bytes(take::<4>(&mut p)?),
                    last_seq: i32::from_be_bytes(take::<4>(&mut p)?),
                    base_offset: i64::from_be_bytes(take::<8>(&mut p)?),
                    last_offset: i64::from_be_bytes(take::<8>(&mut p)?),
                });
            }
            let first = i64::from_be_bytes(take::<8>(&mut p)?);
            let coordinator_epoch = i32::from_be_bytes(take::<4>(&mut p)?);
            let last_timestamp_ms = i64::from_be_bytes(take::<8>(&mut p)?);
            let current_txn_first_offset = (first >= 0).then_some(first);
            if let Some(f) = current_txn_first_offset {
                if table.ongoing.insert(f, id).is_some() {
                    return None; // two transactions cannot start at one offset
                }
            }
            table.producers.insert(id, ProducerEntry { epoch, batches, current_txn_first_offset, coordinator_epoch, last_timestamp_ms, last_completed: None });
        }
        let aborted = u32::from_be_bytes(take::<4>(&mut p)?) as usize;
        if aborted != p.len() / 24 || !p.len().is_multiple_of(24) {
            return None;
        }
        table.aborted.reserve_exact(aborted);
        for _ in 0..aborted {
            table.aborted.push(AbortedTxn {
                producer_id: i64::from_be_bytes(take::<8>(&mut p)?),
                first_offset: i64::from_be_bytes(take::<8>(&mut p)?),
                last_offset: i64::from_be_bytes(take::<8>(&mut p)?),
            });
        }
        if !table.aborted.is_sorted_by_key(|a| a.last_offset) {
            return None;
        }
        Some(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ProducerStateTable {
        fn update_h(&mut self, h: &BatchHeader) {
            self.update(h, &[]);
        }
    }

    fn h(pid: i64, epoch: i16, seq: i32, count: i32, base: i64) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    #[test]
    fn bound_forgets_the_least_recent_producers_but_never_an_open_transaction() {
        let mut t = ProducerStateTable::default();
        // Producer 0 opens a transaction first (the oldest timestamp of all).
        let mut txn = h(0, 0, 0, 1, 0);
        txn.attributes = 0x10; // transactional
        t.update_h(&txn);
        for pid in 1..=100i64 {
            let mut b = h(pid, 0, 0, 1, pid);
            b.max_timestamp = pid * 10;
            t.update_h(&b);
        }
        assert_eq!(t.bound(200), 0, "within the bound, nothing is forgotten");
        assert_eq!(t.len(), 101);
        let forgotten = t.bound(50);
        // Down to 90 % of the bound: 45 kept, the open transaction among them.
        assert_eq!((forgotten, t.len()), (56, 45));
        assert!(t.get(0).is_some(), "a producer with an open transaction is kept");
        assert!((1..=56).all(|pid| t.get(pid).is_none()), "the least recent are forgotten");
        assert!((57..=100).all(|pid| t.get(pid).is_some()));
        t.assert_consistent();
        // A forgotten producer's next batch is a new producer's, as after expiry.
        assert_eq!(t.check(&h(1, 0, 7, 1, 200)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn duplicates_out_of_order_and_fencing() {
        let mut t = ProducerStateTable::default();
        assert_eq!(t.check(&h(7, 0, 0, 10, 0)), Ok(SequenceCheck::Append));
        t.update_h(&h(7, 0, 0, 10, 0));
        t.update_h(&h(7, 0, 10, 5, 10));
        let dup = t.check(&h(7, 0, 0, 10, 999)).unwrap();
        assert_eq!(dup, SequenceCheck::Duplicate(BatchMeta { first_seq: 0, last_seq: 9, base_offset: 0, last_offset: 9 }));
        assert_eq!(t.check(&h(7, 0, 15, 1, 15)), Ok(SequenceCheck::Append));
        assert_eq!(t.check(&h(7, 0, 17, 1, 15)), Err(SequenceError::OutOfOrder { first_seq: 17, expected: 15 }));
        assert!(matches!(t.check(&h(7, -1, 15, 1, 15)), Err(SequenceError::InvalidProducerEpoch { .. })));
        assert_eq!(t.check(&h(7, 1, 0, 1, 15)), Ok(SequenceCheck::Append));
        assert!(matches!(t.check(&h(7, 1, 3, 1, 15)), Err(SequenceError::OutOfOrder { .. })));
        // Only the last five batches are remembered.
        for i in 0..6 {
            t.update_h(&h(7, 0, 15 + i, 1, 15 + i64::from(i)));
        }
        assert_eq!(t.get(7).unwrap().batches.len(), BATCHES_PER_PRODUCER);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut t = ProducerStateTable::default();
        // Sequences MAX-1, MAX, 0.
        t.update_h(&h(1, 0, i32::MAX - 1, 3, 0));
        assert_eq!(t.get(1).unwrap().batches[0].last_seq, 0);
        assert_eq!(t.check(&h(1, 0, 1, 1, 3)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn snapshot_round_trip_and_truncate() {
        let mut t = ProducerStateTable::default();
        t.update_h(&h(1, 0, 0, 3, 0));
        t.update_h(&h(2, 4, 0, 3, 3));
        t.update_h(&h(1, 0, 3, 3, 6));
        let back = ProducerStateTable::decode(&t.encode()).unwrap();
        assert_eq!(back, t);
        assert!(ProducerStateTable::decode(&t.encode()[..10]).is_none());
        t.truncate_from(3);
        assert!(t.get(2).is_none());
        assert_eq!(t.get(1).unwrap().batches.len(), 1);
    }

    fn txn(pid: i64, epoch: i16, seq: i32, count: i32, base: i64) -> BatchHeader {
        BatchHeader { attributes: 0x10, ..h(pid, epoch, seq, count, base) }
    }

    /// A stored marker at `offset`: its header and bytes.
    fn marker(pid: i64, epoch: i16, control: ControlType, coordinator_epoch: i32, offset: i64) -> (BatchHeader, Vec<u8>) {
        let mut b = crate::record::build_marker(pid, epoch, Marker { control, coordinator_epoch }, 0).to_vec();
        crate::record::set_base_offset(&mut b, offset).unwrap();
        (crate::record::parse_header(&b).unwrap(), b)
    }

    /// Transactions v2: a marker with the bumped epoch starts the producer's sequences
    /// over at 0; the next transaction's later batch cannot land before its first.
    #[test]
    fn a_bumped_marker_makes_the_next_transaction_start_at_sequence_0() {
        let mut t = ProducerStateTable::default();
        t.update_h(&txn(4, 0, 0, 100, 0)); // 0..99
        let (mh, mb) = marker(4, 1, ControlType::Commit, 0, 100);
        t.update(&mh, &mb);
        assert_eq!(t.check(&txn(4, 1, 16, 16, 101)), Err(SequenceError::OutOfOrder { first_seq: 16, expected: 0 }));
        assert_eq!(t.check(&txn(4, 1, 0, 16, 101)), Ok(SequenceCheck::Append));
        t.update_h(&txn(4, 1, 0, 16, 101));
        assert_eq!(t.check(&txn(4, 1, 16, 16, 117)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn kip1228_markers_of_transaction_version_2_need_a_bumped_epoch() {
        let mut t = ProducerStateTable::default();
        t.update_h(&txn(2, 3, 0, 5, 0)); // a transaction open at epoch 3
        let stale = |epoch, current| Err(SequenceError::InvalidProducerEpoch { epoch, current });
        assert_eq!(t.check_marker(2, 3, 0, 2), stale(3, 3), "TV2: the coordinator bumps the epoch before its marker");
        assert_eq!(t.check_marker(2, 3, 0, 0), Ok(()), "TV0/1: the same epoch is the marker's");
        assert_eq!(t.check_marker(2, 4, 0, 2), Ok(()));
        let (mh, mb) = marker(2, 4, ControlType::Commit, 0, 5);
        t.update(&mh, &mb);
        assert_eq!(t.check_marker(2, 4, 0, 2), Ok(()), "the retry of a marker already written (no transaction open: KAFKA-19999)");
        assert_eq!(t.check_marker(2, 3, 0, 2), stale(3, 4));
        assert_eq!(t.check_marker(2, 3, 0, 0), stale(3, 4));
        assert_eq!(t.check_marker(9, 0, 0, 2), Ok(()), "a producer this partition does not know");
    }

    #[test]
    fn transactions_open_complete_and_bound_the_last_stable_offset() {
        let mut t = ProducerStateTable::default();
        t.update_h(&h(1, 0, 0, 5, 0)); // plain idempotent 0..4
        t.update_h(&txn(2, 0, 0, 5, 5)); // txn A 5..9
        t.update_h(&txn(3, 0, 0, 5, 10)); // txn B 10..14
        t.update_h(&txn(2, 0, 5, 5, 15)); // A again 15..19
        assert_eq!(t.get(2).unwrap().current_txn_first_offset, Some(5));
        assert_eq!(t.first_unstable_offset(20), Some(5));
        // A plain write from a producer inside a transaction is refused.
        assert_eq!(t.check(&h(2, 0, 10, 1, 20)), Err(SequenceError::NonTransactionalWriteInTransaction { producer_id: 2 }));
        let (mh, mb) = marker(2, 0, ControlType::Abort, 4, 20);
        assert_eq!(t.check_marker(2, 0, 4, 0), Ok(()));
        t.update(&mh, &mb);
        t.assert_consistent();
        // A is complete, but its marker (20) is not below the high watermark yet.
        assert_eq!(t.first_unstable_offset(20), Some(5));
        assert_eq!(t.first_unstable_offset(21), Some(10));
        assert_eq!(t.aborted_between(0, 100), vec![AbortedTxn { producer_id: 2, first_offset: 5, last_offset: 20 }]);
        assert!(t.aborted_between(21, 100).is_empty());
        assert!(t.aborted_between(0, 5).is_empty());
        // Older coordinator or producer epochs are fenced.
        assert_eq!(t.check_marker(2, 0, 3, 0), Err(SequenceError::CoordinatorFenced { coordinator_epoch: 3, current: 4 }));
        let (bh, bb) = marker(3, 0, ControlType::Commit, 4, 21);
        t.update(&bh, &bb);
        assert_eq!(t.first_unstable_offset(22), None);
        assert_eq!(t.aborted_between(0, 100).len(), 1);
        // v2: a marker with a bumped epoch fences the old epoch.
        let (ch, cb) = marker(3, 1, ControlType::Commit, 4, 22);
        t.update(&ch, &cb);
        assert!(matches!(t.check(&txn(3, 0, 5, 1, 23)), Err(SequenceError::InvalidProducerEpoch { .. })));
        assert_eq!(t.check(&txn(3, 1, 0, 1, 23)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn a_rolled_back_marker_reopens_its_transaction() {
        let mut t = ProducerStateTable::default();
        t.update_h(&txn(2, 0, 0, 5, 0));
        let (mh, mb) = marker(2, 0, ControlType::Abort, 0, 5);
        t.update(&mh, &mb);
        assert!(t.has_batches_from(5) && !t.has_batches_from(6));
        t.truncate_from(5);
        t.assert_consistent();
        assert_eq!(t.get(2).unwrap().current_txn_first_offset, Some(0));
        assert!(t.aborted_between(0, 10).is_empty());
        assert_eq!(t.first_unstable_offset(10), Some(0));
        // Cutting below the transaction's start forgets it.
        t.truncate_from(0);
        assert_eq!(t.first_unstable_offset(10), None);
        assert!(t.is_empty());
    }

    #[test]
    fn snapshot_keeps_transactions_and_aborts_and_refuses_damage() {
        let mut t = ProducerStateTable::default();
        t.update_h(&txn(2, 0, 0, 5, 0));
        let (mh, mb) = marker(2, 0, ControlType::Abort, 1, 5);
        t.update(&mh, &mb);
        t.update_h(&txn(2, 0, 5, 2, 6));
        t.update_h(&txn(9, 3, 0, 2, 8));
        let back = ProducerStateTable::decode(&t.encode()).unwrap();
        assert_eq!(back.aborted_between(0, 100), t.aborted_between(0, 100));
        assert_eq!(back.open_transactions().collect::<Vec<_>>(), vec![(6, 2), (8, 9)]);
        assert_eq!(back.get(2).unwrap().coordinator_epoch, 1);
        let enc = t.encode();
        for cut in 0..enc.len() {
            assert!(ProducerStateTable::decode(&enc[..cut]).is_none(), "a cut at {cut} decoded");
        }
    }

    #[test]
    fn idle_producers_expire_but_not_inside_a_transaction() {
        let mut t = ProducerStateTable::default();
        t.update_h(&BatchHeader { max_timestamp: 1_000, ..h(1, 0, 0, 1, 0) });
        t.update_h(&BatchHeader { max_timestamp: 1_000, ..txn(2, 0, 0, 1, 1) });
        t.update_h(&BatchHeader { max_timestamp: 9_000, ..h(3, 0, 0, 1, 2) });
        assert_eq!(t.expire(10_000, 5_000), 1);
        assert!(t.get(1).is_none() && t.get(2).is_some() && t.get(3).is_some());
    }
}
