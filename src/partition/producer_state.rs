//! Idempotent-producer state of one partition: per producer id, its epoch and the last
//! five batches' sequence ranges with their offsets (Kafka keeps five, matching
//! `max.in.flight.requests.per.connection` <= 5 for idempotent producers).
use std::collections::{HashMap, VecDeque};

use crate::record::BatchHeader;

/// The snapshot file (`storage::segment::snapshot_path`) of the producer state as of a
/// segment's base, written when the segment is created.
pub const SNAPSHOT_MAGIC: u32 = 0x534c_5053; // "SLPS"
pub const SNAPSHOT_VERSION: u16 = 1;

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("out of order sequence number {first_seq} (expected {expected})")]
    OutOfOrder { first_seq: i32, expected: i32 },
    #[error("producer epoch {epoch} is older than the current {current}")]
    InvalidProducerEpoch { epoch: i16, current: i16 },
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
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX { 0 } else { seq + 1 }
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
        if h.producer_epoch > entry.epoch {
            return if h.base_sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(SequenceError::OutOfOrder { first_seq: h.base_sequence, expected: 0 })
            };
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

    /// Records an appended batch (its base offset is final).
    pub fn update(&mut self, h: &BatchHeader) {
        if h.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: last_seq_of(h),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
        });
        while entry.batches.len() > BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
    }

    /// Forgets batches at or above `offset` (after a rolled-back write).
    pub fn truncate_from(&mut self, offset: i64) {
        for entry in self.producers.values_mut() {
            while entry.batches.back().is_some_and(|b| b.base_offset >= offset) {
                entry.batches.pop_back();
            }
        }
        self.producers.retain(|_, e| !e.batches.is_empty());
    }

    /// Some producer's remembered batch starts at or above `offset` (a truncation there
    /// changes the table).
    pub fn has_batches_from(&self, offset: i64) -> bool {
        self.producers.values().any(|e| e.batches.back().is_some_and(|b| b.base_offset >= offset))
    }

    /// Snapshot payload (stored in a checked file next to the segment it precedes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.producers.len() * 64);
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
        // Each entry takes at least 11 bytes: bound the count before allocating.
        if count > p.len() / 11 {
            return None;
        }
        let mut producers = HashMap::with_capacity(count);
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
            producers.insert(id, ProducerEntry { epoch, batches });
        }
        if !p.is_empty() {
            return None;
        }
        Some(ProducerStateTable { producers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn duplicates_out_of_order_and_fencing() {
        let mut t = ProducerStateTable::default();
        assert_eq!(t.check(&h(7, 0, 0, 10, 0)), Ok(SequenceCheck::Append));
        t.update(&h(7, 0, 0, 10, 0));
        t.update(&h(7, 0, 10, 5, 10));
        let dup = t.check(&h(7, 0, 0, 10, 999)).unwrap();
        assert_eq!(dup, SequenceCheck::Duplicate(BatchMeta { first_seq: 0, last_seq: 9, base_offset: 0, last_offset: 9 }));
        assert_eq!(t.check(&h(7, 0, 15, 1, 15)), Ok(SequenceCheck::Append));
        assert_eq!(t.check(&h(7, 0, 17, 1, 15)), Err(SequenceError::OutOfOrder { first_seq: 17, expected: 15 }));
        assert!(matches!(t.check(&h(7, -1, 15, 1, 15)), Err(SequenceError::InvalidProducerEpoch { .. })));
        assert_eq!(t.check(&h(7, 1, 0, 1, 15)), Ok(SequenceCheck::Append));
        assert!(matches!(t.check(&h(7, 1, 3, 1, 15)), Err(SequenceError::OutOfOrder { .. })));
        // Only the last five batches are remembered.
        for i in 0..6 {
            t.update(&h(7, 0, 15 + i, 1, 15 + i64::from(i)));
        }
        assert_eq!(t.get(7).unwrap().batches.len(), BATCHES_PER_PRODUCER);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut t = ProducerStateTable::default();
        // Sequences MAX-1, MAX, 0.
        t.update(&h(1, 0, i32::MAX - 1, 3, 0));
        assert_eq!(t.get(1).unwrap().batches[0].last_seq, 0);
        assert_eq!(t.check(&h(1, 0, 1, 1, 3)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn snapshot_round_trip_and_truncate() {
        let mut t = ProducerStateTable::default();
        t.update(&h(1, 0, 0, 3, 0));
        t.update(&h(2, 4, 0, 3, 3));
        t.update(&h(1, 0, 3, 3, 6));
        let back = ProducerStateTable::decode(&t.encode()).unwrap();
        assert_eq!(back, t);
        assert!(ProducerStateTable::decode(&t.encode()[..10]).is_none());
        t.truncate_from(3);
        assert!(t.get(2).is_none());
        assert_eq!(t.get(1).unwrap().batches.len(), 1);
    }
}
