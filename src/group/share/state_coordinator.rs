//! The share coordinator on one shard (KIP-932): the state stores of the
//! `__share_group_state` partitions this shard leads, loaded by replaying the partition
//! once per leader epoch, and each state API run against one of them.
//!
//! An operation decides in the store, appends the record it yields with acks=all, and only
//! then replays that record into the store and answers, so what it answers is what the log
//! holds on every in-sync replica: a new leader of the partition loads the same state. The
//! operations of one partition run one at a time (a store decides a snapshot or an update
//! from its current state, so two in flight could write a snapshot that misses the other's
//! batches); different partitions run side by side. Kafka batches the writes of one
//! partition into one append instead; that is left for when share acknowledgements are
//! measured.
//!
//! An append that fails leaves the store as it was and unloads it: the next operation
//! reloads from the log, which may or may not hold the failed record (an acks=all timeout
//! can still be replicated later), so memory never believes what the log does not say.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use glommio::sync::Semaphore;

use super::state_records::{SharePartitionKey, ShareStateRecord};
use super::state_store::{ReadState, ShareStateStore, StateError, StateSummary, WriteState};
use crate::partition::{Partition, PartitionError, Replayed};
use crate::protocol::ErrorCode;

/// Kafka's share-group state topic.
pub const SHARE_GROUP_STATE_TOPIC: &str = "__share_group_state";
/// Bytes read at a time while loading a partition.
const LOAD_READ_BYTES: usize = 1 << 20;

/// One share-partition's part of a state API, run on the shard leading its
/// `__share_group_state` partition.
#[derive(Clone, Debug)]
pub struct ShareStateOp {
    pub key: SharePartitionKey,
    /// Whether the key's topic and partition exist in the metadata (the handler knows;
    /// UNKNOWN_TOPIC_OR_PARTITION otherwise, after the epoch checks, as Kafka orders them).
    pub exists: bool,
    pub kind: ShareStateOpKind,
}

#[derive(Clone, Debug)]
pub enum ShareStateOpKind {
    Initialize { state_epoch: i32, start_offset: i64 },
    Read { leader_epoch: i32 },
    Write(WriteState),
    Delete,
    Summary,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareStateAnswer {
    Done,
    Read(ReadState),
    Summary(StateSummary),
}

/// Kafka's error for a partition's part, and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareStateFailure {
    pub code: ErrorCode,
    pub message: Option<String>,
}

impl From<StateError> for ShareStateFailure {
    fn from(e: StateError) -> Self {
        ShareStateFailure { code: e.error_code(), message: Some(e.to_string()) }
    }
}

impl ShareStateFailure {
    fn code(code: ErrorCode) -> Self {
        ShareStateFailure { code, message: None }
    }
}

pub type ShareStateResult = Result<ShareStateAnswer, ShareStateFailure>;

struct Loaded {
    leader_epoch: i32,
    store: ShareStateStore,
}

pub struct ShareStateCoordinator {
    snapshot_every: u32,
    /// By `__share_group_state` partition index.
    stores: RefCell<HashMap<i32, Loaded>>,
    /// One operation at a time per partition (see the module comment).
    locks: RefCell<HashMap<i32, Rc<Semaphore>>>,
}

impl ShareStateCoordinator {
    /// `snapshot_every`: `share.coordinator.snapshot.update.records.per.snapshot`.
    pub fn new(snapshot_every: u32) -> ShareStateCoordinator {
        ShareStateCoordinator { snapshot_every, stores: RefCell::new(HashMap::new()), locks: RefCell::new(HashMap::new()) }
    }

    /// Runs `op` on `__share_group_state` partition `p`, which this shard leads.
    pub async fn execute(&self, p: &Rc<Partition>, op: ShareStateOp, now_ms: i64) -> ShareStateResult {
        let lock = self.locks.borrow_mut().entry(p.index).or_insert_with(|| Rc::new(Semaphore::new(1))).clone();
        let _permit = lock.acquire_permit(1).await.map_err(|_| ShareStateFailure::code(ErrorCode::COORDINATOR_NOT_AVAILABLE))?;
        self.ensure_loaded(p).await?;
        let (answer, record) = {
            let stores = self.stores.borrow();
            let store = &stores.get(&p.index).expect("loaded above, under the partition's lock").store;
            let ShareStateOp { key, exists, kind } = &op;
            match kind {
                ShareStateOpKind::Initialize { state_epoch, start_offset } => {
                    (ShareStateAnswer::Done, Some(store.initialize(key, *state_epoch, *start_offset, *exists, now_ms)?))
                }
                ShareStateOpKind::Read { leader_epoch } => {
                    let (state, record) = store.read(key, *leader_epoch, *exists, now_ms)?;
                    (ShareStateAnswer::Read(state), record)
                }
                ShareStateOpKind::Write(w) => (ShareStateAnswer::Done, Some(store.write(key, w, *exists, now_ms)?)),
                ShareStateOpKind::Delete => (ShareStateAnswer::Done, store.delete(key, *exists)?),
                ShareStateOpKind::Summary => (ShareStateAnswer::Summary(store.summary(key, *exists)?), None),
            }
        };
        if let Some(record) = record {
            if let Err(code) = self.append(p, &record, now_ms).await {
                self.stores.borrow_mut().remove(&p.index);
                return Err(ShareStateFailure::code(code));
            }
            if let Some(loaded) = self.stores.borrow_mut().get_mut(&p.index) {
                loaded.store.replay(record);
            }
        }
        Ok(answer)
    }

    /// The share-partitions stored in partition `index`, if loaded.
    #[cfg(test)]
    pub fn stored(&self, index: i32) -> Option<usize> {
        self.stores.borrow().get(&index).map(|l| l.store.len())
    }

    /// Replays `p` into a new store unless it was loaded in `p`'s current leader epoch.
    async fn ensure_loaded(&self, p: &Rc<Partition>) -> Result<(), ShareStateFailure> {
        let epoch = p.leader_epoch();
        if self.stores.borrow().get(&p.index).is_some_and(|l| l.leader_epoch == epoch) {
            return Ok(());
        }
        let mut store = ShareStateStore::new(self.snapshot_every);
        let mut skipped = 0usize;
        // To the log end, as the group coordinator loads: records its predecessor appended
        // with acks=all are in this leader's log even while its high watermark trails them.
        let loaded = p
            .replay(LOAD_READ_BYTES, true, |item| {
                if let Replayed::Record { key, value, .. } = item {
                    match ShareStateRecord::decode(key, value) {
                        Ok(r) => store.replay(r),
                        Err(_) => skipped += 1,
                    }
                }
            })
            .await;
        match loaded {
            Ok(records) => {
                if skipped > 0 {
                    tracing::warn!(partition = p.index, skipped, "unreadable __share_group_state records skipped while loading");
                }
                tracing::info!(partition = p.index, leader_epoch = epoch, records, share_partitions = store.len(), "loaded share-group state");
                self.stores.borrow_mut().insert(p.index, Loaded { leader_epoch: epoch, store });
                Ok(())
            }
            Err(PartitionError::NotLeader) => Err(ShareStateFailure::code(ErrorCode::NOT_COORDINATOR)),
            Err(e) => {
                tracing::error!(partition = p.index, error = %e, "cannot read __share_group_state while loading");
                Err(ShareStateFailure::code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS))
            }
        }
    }

    /// Appends `record` with acks=all; errors as Kafka's share coordinator maps them.
    async fn append(&self, p: &Rc<Partition>, record: &ShareStateRecord, now_ms: i64) -> Result<(), ErrorCode> {
        let Some(batch) = ShareStateRecord::batch(std::slice::from_ref(record), now_ms) else { return Err(ErrorCode::UNKNOWN_SERVER_ERROR) };
        match p.append(batch, -1).await {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(partition = p.index, error = %e, "append to __share_group_state failed");
                Err(ErrorCode::from(&e).from_coordinator_append())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::config::FlushMode;
    use crate::group::share::state_records::PersistedBatch;
    use crate::partition::tests::{open_flushed, run};
    use crate::storage::LogConfig;

    fn key(partition: i32) -> SharePartitionKey {
        SharePartitionKey { group_id: "g".into(), topic_id: Uuid::from_u128(5), partition }
    }

    fn op(partition: i32, kind: ShareStateOpKind) -> ShareStateOp {
        ShareStateOp { key: key(partition), exists: true, kind }
    }

    fn write(leader_epoch: i32, start_offset: i64, batches: Vec<PersistedBatch>) -> ShareStateOpKind {
        ShareStateOpKind::Write(WriteState { state_epoch: 1, leader_epoch, start_offset, delivery_complete_count: -1, batches })
    }

    async fn read(c: &ShareStateCoordinator, p: &Rc<Partition>, partition: i32, leader_epoch: i32) -> ShareStateResult {
        c.execute(p, op(partition, ShareStateOpKind::Read { leader_epoch }), 0).await
    }

    /// Answers come after the append; a new coordinator (a restart, a new leader) loads
    /// the same state from the partition's log; the store decides snapshots on the way.
    #[test]
    fn state_survives_a_reload_from_the_log() {
        run(|dir| async move {
            let p = open_flushed(&dir, LogConfig::default(), FlushMode::Always).await;
            let c = ShareStateCoordinator::new(2);
            assert_eq!(read(&c, &p, 0, 0).await.unwrap_err().code, ErrorCode::INVALID_REQUEST);
            for partition in 0..2 {
                c.execute(&p, op(partition, ShareStateOpKind::Initialize { state_epoch: 1, start_offset: 0 }), 0).await.unwrap();
            }
            for i in 0..5i64 {
                let batch = PersistedBatch { first_offset: i, last_offset: i, delivery_state: 2, delivery_count: 1 };
                c.execute(&p, op(0, write(0, 0, vec![batch])), 0).await.unwrap();
            }
            c.execute(&p, op(1, write(0, 3, vec![])), 0).await.unwrap();
            c.execute(&p, op(1, ShareStateOpKind::Delete), 0).await.unwrap();
            let want = ReadState {
                state_epoch: 1,
                start_offset: 0,
                batches: vec![PersistedBatch { first_offset: 0, last_offset: 4, delivery_state: 2, delivery_count: 1 }],
            };
            assert_eq!(read(&c, &p, 0, 3).await.unwrap(), ShareStateAnswer::Read(want.clone()));
            assert_eq!(c.stored(p.index), Some(1));
            let end = p.written_offset();
            assert_eq!(end, 2 + 5 + 1 + 1 + 1, "two initializes, five writes, a write, a delete, the read's new leader epoch");

            let reloaded = ShareStateCoordinator::new(2);
            assert_eq!(read(&reloaded, &p, 0, 3).await.unwrap(), ShareStateAnswer::Read(want));
            assert_eq!(read(&reloaded, &p, 0, 2).await.unwrap_err().code, ErrorCode::FENCED_LEADER_EPOCH, "the new leader epoch was stored");
            assert_eq!(read(&reloaded, &p, 1, 3).await.unwrap_err().code, ErrorCode::INVALID_REQUEST, "deleted");
            let summary = reloaded.execute(&p, op(0, ShareStateOpKind::Summary), 0).await.unwrap();
            assert_eq!(summary, ShareStateAnswer::Summary(StateSummary { state_epoch: 1, leader_epoch: 3, start_offset: 0, delivery_complete_count: 0 }));
            assert_eq!(p.written_offset(), end, "reads at a stored epoch and summaries write nothing");
        });
    }
}
