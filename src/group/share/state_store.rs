//! The share coordinator's state of one `__share_group_state` partition (Kafka 4.4's
//! ShareCoordinatorShard): every share-partition whose key hashes there, rebuilt by
//! replaying the partition's records, and the records each state API writes.
//!
//! The APIs decide here and write nothing themselves: each returns its answer and the
//! record to append (acks=all), and the caller replays that record once it is appended,
//! so memory only ever holds what the log holds. Kafka 4.4's rules:
//! - Initialize writes a fresh snapshot (state epoch from the request, leader epoch 0, no
//!   batches); a lower state epoch than one seen is FENCED_STATE_EPOCH.
//! - Read answers the state and, when the leader epoch is new, records it (a reader is the
//!   share-partition's new leader); a lower leader epoch is FENCED_LEADER_EPOCH.
//! - Write adds the leader's changed batches (combined by `state_batches`: the higher
//!   delivery count, then state, wins); it never changes the stored leader or state epoch,
//!   and the start offset and delivery-complete count never go backwards. Every
//!   `snapshot_every` updates of a key, the next write is a whole snapshot instead.
//! - Delete writes a tombstone; ReadSummary writes nothing.
//! - Equal epochs are accepted; negative epochs and partitions are INVALID_REQUEST (4.4 no
//!   longer takes -1 as "skip the check").
//!
//! The epochs a key is checked against are the highest ever replayed for it (a later
//! Initialize resets the stored leader epoch to 0 but not what fences), until a tombstone
//! removes the key.
use std::collections::HashMap;

use super::state_batches::{combine, is_valid};
use super::state_records::{PersistedBatch, SharePartitionKey, ShareSnapshot, ShareStateRecord, ShareUpdate};

/// Kafka's `share.coordinator.snapshot.update.records.per.snapshot` default (and maximum).
pub const DEFAULT_SNAPSHOT_EVERY: u32 = 500;

/// Why a state API refused (Kafka's error for each is in `error_code`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("{0}")]
    InvalidRequest(&'static str),
    #[error("the leader epoch is older than one already seen")]
    FencedLeaderEpoch,
    #[error("the state epoch is older than one already seen")]
    FencedStateEpoch,
    #[error("the topic or partition does not exist")]
    UnknownTopicOrPartition,
}

impl StateError {
    pub fn error_code(&self) -> crate::protocol::ErrorCode {
        use crate::protocol::ErrorCode;
        match self {
            StateError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            StateError::FencedLeaderEpoch => ErrorCode::FENCED_LEADER_EPOCH,
            StateError::FencedStateEpoch => ErrorCode::FENCED_STATE_EPOCH,
            StateError::UnknownTopicOrPartition => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        }
    }
}

/// One partition's part of a WriteShareGroupState.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteState {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1: not written.
    pub start_offset: i64,
    /// -1: not known (WriteShareGroupState v0).
    pub delivery_complete_count: i32,
    pub batches: Vec<PersistedBatch>,
}

/// What ReadShareGroupState answers for a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadState {
    pub state_epoch: i32,
    /// -1: never set (the leader starts where `share.auto.offset.reset` says).
    pub start_offset: i64,
    pub batches: Vec<PersistedBatch>,
}

/// What ReadShareGroupStateSummary answers for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSummary {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
}

#[derive(Debug)]
struct Entry {
    state: ShareSnapshot,
    /// Updates replayed since the last snapshot that reset the count.
    updates: u32,
    /// The highest epochs replayed for the key: what fences.
    max_leader_epoch: i32,
    max_state_epoch: i32,
}

#[derive(Debug)]
pub struct ShareStateStore {
    states: HashMap<SharePartitionKey, Entry>,
    snapshot_every: u32,
}

impl ShareStateStore {
    pub fn new(snapshot_every: u32) -> ShareStateStore {
        ShareStateStore { states: HashMap::new(), snapshot_every }
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Applies a record of the partition's log (at load, and after each append).
    pub fn replay(&mut self, record: ShareStateRecord) {
        match record {
            ShareStateRecord::Snapshot { key, value: None } => {
                self.states.remove(&key);
            }
            ShareStateRecord::Snapshot { key, value: Some(s) } => {
                let limit = self.snapshot_every;
                let (leader, state) = (s.leader_epoch, s.state_epoch);
                match self.states.get_mut(&key) {
                    Some(e) => {
                        e.max_leader_epoch = e.max_leader_epoch.max(leader);
                        e.max_state_epoch = e.max_state_epoch.max(state);
                        e.state = s;
                        if e.updates >= limit {
                            e.updates = 0;
                        }
                    }
                    None => {
                        self.states.insert(key, Entry { state: s, updates: 0, max_leader_epoch: leader, max_state_epoch: state });
                    }
                }
            }
            ShareStateRecord::Update { key, value: u } => match self.states.get_mut(&key) {
                Some(e) => {
                    let s = &mut e.state;
                    if u.start_offset != -1 {
                        s.start_offset = u.start_offset;
                    }
                    if u.leader_epoch != -1 {
                        s.leader_epoch = u.leader_epoch;
                    }
                    s.delivery_complete_count = u.delivery_complete_count;
                    s.batches = combine(&s.batches, &u.batches, s.start_offset);
                    e.max_leader_epoch = e.max_leader_epoch.max(u.leader_epoch);
                    e.updates += 1;
                }
                None => {
                    let state = ShareSnapshot {
                        snapshot_epoch: u.snapshot_epoch,
                        state_epoch: 0,
                        leader_epoch: u.leader_epoch,
                        start_offset: u.start_offset,
                        create_timestamp_ms: 0,
                        write_timestamp_ms: 0,
                        batches: combine(&[], &u.batches, u.start_offset),
                        delivery_complete_count: u.delivery_complete_count,
                    };
                    self.states.insert(key, Entry { state, updates: 1, max_leader_epoch: u.leader_epoch, max_state_epoch: 0 });
                }
            },
            ShareStateRecord::Unknown { .. } => {}
        }
    }

    /// InitializeShareGroupState for one partition: the record to append.
    pub fn initialize(&self, key: &SharePartitionKey, state_epoch: i32, start_offset: i64, exists: bool, now_ms: i64) -> Result<ShareStateRecord, StateError> {
        if key.partition < 0 || state_epoch < 0 {
            return Err(StateError::InvalidRequest("negative partition or state epoch"));
        }
        let cur = self.states.get(key);
        if cur.is_some_and(|e| e.max_state_epoch > state_epoch) {
            return Err(StateError::FencedStateEpoch);
        }
        if !exists {
            return Err(StateError::UnknownTopicOrPartition);
        }
        let snapshot = ShareSnapshot {
            snapshot_epoch: cur.map_or(0, |e| e.state.snapshot_epoch + 1),
            state_epoch,
            leader_epoch: 0,
            start_offset,
            create_timestamp_ms: now_ms,
            write_timestamp_ms: now_ms,
            batches: Vec::new(),
            delivery_complete_count: if start_offset == -1 { -1 } else { 0 },
        };
        Ok(ShareStateRecord::Snapshot { key: key.clone(), value: Some(snapshot) })
    }

    /// ReadShareGroupState for one partition: the state, and the record that stores a new
    /// leader epoch (None when the epoch is the stored one).
    pub fn read(&self, key: &SharePartitionKey, leader_epoch: i32, exists: bool, now_ms: i64) -> Result<(ReadState, Option<ShareStateRecord>), StateError> {
        if key.partition < 0 || leader_epoch < 0 {
            return Err(StateError::InvalidRequest("negative partition or leader epoch"));
        }
        let Some(e) = self.states.get(key) else {
            return Err(StateError::InvalidRequest("Read operation on uninitialized share partition not allowed."));
        };
        if e.max_leader_epoch > leader_epoch {
            return Err(StateError::FencedLeaderEpoch);
        }
        if !exists {
            return Err(StateError::UnknownTopicOrPartition);
        }
        let s = &e.state;
        let answer = ReadState { state_epoch: s.state_epoch, start_offset: s.start_offset, batches: s.batches.clone() };
        let record = (leader_epoch != s.leader_epoch).then(|| self.next_record(key, e, leader_epoch, s.start_offset, s.delivery_complete_count, &[], now_ms));
        Ok((answer, record))
    }

    /// WriteShareGroupState for one partition: the record to append.
    pub fn write(&self, key: &SharePartitionKey, w: &WriteState, exists: bool, now_ms: i64) -> Result<ShareStateRecord, StateError> {
        if key.partition < 0 || w.leader_epoch < 0 || w.state_epoch < 0 {
            return Err(StateError::InvalidRequest("negative partition, leader epoch or state epoch"));
        }
        if !w.batches.iter().all(is_valid) {
            return Err(StateError::InvalidRequest("a state batch is not a range of offsets with a delivery count"));
        }
        let Some(e) = self.states.get(key) else {
            return Err(StateError::InvalidRequest("Write operation on uninitialized share partition not allowed."));
        };
        if e.max_leader_epoch > w.leader_epoch {
            return Err(StateError::FencedLeaderEpoch);
        }
        if e.max_state_epoch > w.state_epoch {
            return Err(StateError::FencedStateEpoch);
        }
        if !exists {
            return Err(StateError::UnknownTopicOrPartition);
        }
        let cur = &e.state;
        let start_offset = w.start_offset.max(cur.start_offset);
        let delivery_complete_count = match w.start_offset.cmp(&cur.start_offset) {
            std::cmp::Ordering::Equal => w.delivery_complete_count.max(cur.delivery_complete_count),
            std::cmp::Ordering::Less => cur.delivery_complete_count,
            std::cmp::Ordering::Greater => w.delivery_complete_count,
        };
        // The stored leader epoch stays: only a read records a new one (KAFKA-19456).
        Ok(self.next_record(key, e, cur.leader_epoch, start_offset, delivery_complete_count, &w.batches, now_ms))
    }

    /// DeleteShareGroupState for one partition: the tombstone to append (None: nothing
    /// stored, nothing to write; still a success).
    pub fn delete(&self, key: &SharePartitionKey, exists: bool) -> Result<Option<ShareStateRecord>, StateError> {
        if key.partition < 0 {
            return Err(StateError::InvalidRequest("negative partition"));
        }
        if !exists {
            return Err(StateError::UnknownTopicOrPartition);
        }
        Ok(self.states.contains_key(key).then(|| ShareStateRecord::Snapshot { key: key.clone(), value: None }))
    }

    /// ReadShareGroupStateSummary for one partition (a key never seen: start -1, epochs 0).
    pub fn summary(&self, key: &SharePartitionKey, exists: bool) -> Result<StateSummary, StateError> {
        if key.partition < 0 {
            return Err(StateError::InvalidRequest("negative partition"));
        }
        if !exists {
            return Err(StateError::UnknownTopicOrPartition);
        }
        Ok(match self.states.get(key) {
            Some(e) => StateSummary {
                state_epoch: e.state.state_epoch,
                leader_epoch: e.state.leader_epoch,
                start_offset: e.state.start_offset,
                delivery_complete_count: e.state.delivery_complete_count,
            },
            None => StateSummary { state_epoch: 0, leader_epoch: 0, start_offset: -1, delivery_complete_count: -1 },
        })
    }

    /// An update of `e` carrying `batches`, or a whole snapshot when `snapshot_every`
    /// updates have been replayed since the last.
    fn next_record(
        &self,
        key: &SharePartitionKey,
        e: &Entry,
        leader_epoch: i32,
        start_offset: i64,
        delivery_complete_count: i32,
        batches: &[PersistedBatch],
        now_ms: i64,
    ) -> ShareStateRecord {
        let cur = &e.state;
        if e.updates >= self.snapshot_every {
            let snapshot = ShareSnapshot {
                snapshot_epoch: cur.snapshot_epoch + 1,
                state_epoch: cur.state_epoch,
                leader_epoch,
                start_offset,
                create_timestamp_ms: now_ms,
                write_timestamp_ms: now_ms,
                batches: combine(&cur.batches, batches, start_offset),
                delivery_complete_count,
            };
            return ShareStateRecord::Snapshot { key: key.clone(), value: Some(snapshot) };
        }
        let update = ShareUpdate {
            snapshot_epoch: cur.snapshot_epoch,
            leader_epoch,
            start_offset,
            batches: combine(&[], batches, start_offset),
            delivery_complete_count,
        };
        ShareStateRecord::Update { key: key.clone(), value: update }
    }
}

#[cfg(test)]
#[path = "state_store_tests.rs"]
mod tests;
