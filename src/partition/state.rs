//! The `Partition` itself: its state on the owning shard, opening (recovering the log and
//! the producer state), accessors and close. What it does lives beside it: `append.rs`
//! (produce), `read.rs` (fetch, ListOffsets, long polls), `retention.rs` (DeleteRecords,
//! retention), `cleaner.rs` (compaction), `replication.rs` (leader and follower roles,
//! the high watermark), `follower.rs` (appends and truncation as a follower).
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use glommio::sync::Semaphore;

use super::error::PartitionError;
use super::producer_state::{ProducerStateTable, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use super::read::Watchers;
use super::replica_tracker::{BrokerId, ReplicaTracker};
use super::replication::{HwWaiter, Role, RoleState};
use crate::config::FlushMode;
use crate::runtime::ShardId;
use crate::storage::batch_reader::BatchReader;
use crate::storage::dir_survey::{self, DirListing, DirSurvey};
use crate::storage::dma::read_checked_file;
use crate::storage::leader_epoch_cache::LeaderEpochCache;
use crate::storage::log::Log;
use crate::storage::log_writer::{LogWriter, WriterHooks};
use crate::storage::partition_metadata::{claim as claim_dir, record as record_topic_id, DirClaim};
use crate::storage::segment::{snapshot_file_name, snapshot_path};
use crate::storage::{LogConfig, StorageError, WriteMode};

/// Settings applied to appends, from the topic config.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSettings {
    pub max_message_bytes: usize,
    pub log_append_time: bool,
    /// message.timestamp.before.max.ms / after.max.ms (CreateTime topics).
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub flush: FlushMode,
    /// min.insync.replicas: an acks=all append needs at least this many in-sync replicas
    /// (NOT_ENOUGH_REPLICAS before appending, NOT_ENOUGH_REPLICAS_AFTER_APPEND after).
    pub min_insync_replicas: i32,
    /// max_producer_ids_per_partition: the producer table's bound (`ProducerStateTable::bound`).
    pub max_producer_ids: usize,
    /// KIP-966 (eligible.leader.replicas.version >= 1): a leader whose ISR is below
    /// min.insync.replicas (at most its replica count) does not move its high watermark,
    /// so every replica that left the ISR meanwhile holds everything below it and may lead
    /// (`controller/eligible_leaders.rs`).
    pub hold_high_watermark_below_min_isr: bool,
    /// Saves the high watermark every `HW_CHECKPOINT_INTERVAL` in the background (true
    /// on brokers; the replication simulation saves it on its own clock instead, so a
    /// seed replays exactly).
    pub checkpoint_high_watermark_periodically: bool,
    /// Tiered storage uploads this log (remote.storage.enable, remote.log.copy.disable
    /// false): retention deletes only local segments already in remote storage, by
    /// local.retention.* (the log's `LogConfig` carries those values then).
    pub tiered: bool,
}

/// The flush mode of a topic: the broker's `flush`, except that a topic whose
/// flush.messages is 1 (Kafka: fdatasync after every message) is flushed always.
pub fn effective_flush(broker: FlushMode, flush_messages: i64) -> FlushMode {
    if flush_messages <= 1 {
        FlushMode::Always
    } else {
        broker
    }
}

/// How a flush mode writes segments: through the page cache (never) or O_DIRECT (always).
pub fn write_mode(flush: FlushMode) -> WriteMode {
    match flush {
        FlushMode::Never => WriteMode::PageCache,
        FlushMode::Always => WriteMode::Direct,
    }
}

/// One partition on its owning shard (invariant 1: touched only there; `assert_on_shard`).
pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: [u8; 16],
    pub(super) shard: ShardId,
    /// This replica's broker (`SOLE_REPLICA` when opened by `open`, without replication).
    pub(super) broker: BrokerId,
    pub(super) leader_epoch: Cell<i32>,
    pub(super) role: Cell<Role>,
    /// The high watermark (`replication.rs`): monotonic except by truncation, never past
    /// the log end offset.
    pub(super) high_watermark: Cell<i64>,
    /// The followers and the ISR, as this replica last led (`replica_tracker.rs`).
    pub(super) tracker: RefCell<ReplicaTracker>,
    /// acks=all appends waiting for the high watermark to pass their end.
    pub(super) hw_waiters: RefCell<Vec<HwWaiter>>,
    /// Bumped each time this replica stops leading: an append begun under an older value
    /// never acknowledges (a deposed leader acknowledges nothing).
    pub(super) leadership: Cell<u64>,
    /// The high watermark last saved (`hw_checkpoint.rs`); one save at a time.
    pub(super) checkpointed_hw: Cell<i64>,
    pub(super) checkpoint_lock: Semaphore,
    /// Shared with `writer`, which writes what appends stage in it.
    pub(super) log: Rc<RefCell<Log>>,
    pub(super) writer: Rc<LogWriter>,
    /// Shared with the writer's rollback hook (see `open`).
    pub(super) producers: Rc<RefCell<ProducerStateTable>>,
    /// Where each leader epoch began writing (`storage::leader_epoch_cache`); shared with
    /// the rollback hook like `producers`.
    pub(super) epochs: Rc<RefCell<LeaderEpochCache>>,
    pub(super) settings: RefCell<PartitionSettings>,
    /// Held from the producer-sequence checks to the log append (not across the wait
    /// for durability, so concurrent producers share writes and syncs).
    pub(super) append_lock: Semaphore,
    /// Long-poll fetches waiting for the high watermark to move; the writer wakes them.
    pub(super) watchers: Rc<Watchers>,
    pub(super) closed: Cell<bool>,
    /// KIP-890 verification state: producer id -> the guard handed out when its first
    /// transactional write here went to be verified; a marker for the producer voids it,
    /// so a write verified before its transaction ended is verified again.
    pub(super) txn_guards: RefCell<std::collections::HashMap<i64, TxnGuard>>,
    pub(super) next_txn_guard: Cell<u64>,
}

/// The leader-epoch cache as saved, completed from the active segment's batches (an epoch
/// appended but not saved before a crash is found there) and cut to the recovered log end;
/// then the epoch this partition opens in starts at the log end, as Kafka assigns it when
/// a replica becomes leader (so an empty partition answers its epoch, ending at 0). A
/// follower (`leader_epoch` None) assigns nothing: its epochs come from fetched batches.
async fn open_epochs(
    survey: &mut DirSurvey,
    log_end_offset: i64,
    active_batches: &[crate::record::BatchHeader],
    leader_epoch: Option<i32>,
) -> Result<LeaderEpochCache, PartitionError> {
    let mut epochs = LeaderEpochCache::load_surveyed(survey).await?;
    let mut changed = epochs.truncate_from_end(log_end_offset);
    for h in active_batches {
        changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
    }
    if changed {
        // Recovery changed what was saved: the file matches the log again before anything
        // is served.
        if let Some(epoch) = leader_epoch {
            epochs.assign(epoch, log_end_offset);
        }
        epochs.save().await?;
    } else if let Some(epoch) = leader_epoch {
        // A leader's new epoch, with no batch yet: saved by the first append in it.
        epochs.assign_unsaved(epoch, log_end_offset);
    }
    Ok(epochs)
}

/// The producer state as of the log end: the newest readable snapshot at a segment base
/// (saved by the writer once everything below that base was synced), then every batch
/// on disk from that base on (the active segment's come from recovery's scan). Without
/// a snapshot it replays the whole log. Only batches on disk count, so a batch a crash
/// lost is never taken for a duplicate. `active_batches` None: the active segment is
/// replayed from disk too (after a truncation, when everything in the log is written).
/// The log is borrowed only to plan (never across a wait).
pub(super) async fn recover_producers(
    log: &RefCell<Log>,
    active_batches: Option<&[crate::record::BatchHeader]>,
    listing: Option<&DirListing>,
    topic: &str,
    index: i32,
) -> Result<ProducerStateTable, PartitionError> {
    let (bases, dir, reads) = {
        let log = log.borrow();
        (log.segment_bases(), log.dir().to_path_buf(), log.disk_reads())
    };
    let mut from = 0;
    let mut producers = ProducerStateTable::default();
    for (i, &base) in bases.iter().enumerate().rev() {
        // A snapshot the directory's listing did not show is not tried (a failed open each).
        if listing.is_some_and(|l| !l.contains(&snapshot_file_name(base))) {
            continue;
        }
        match read_checked_file(&snapshot_path(&dir, base), SNAPSHOT_MAGIC, SNAPSHOT_VERSION).await {
            Ok(Some(p)) => {
                if let Some(table) = ProducerStateTable::decode(&p) {
                    producers = table;
                    from = i;
                    break;
                }
                tracing::warn!(topic, partition = index, base, "producer snapshot undecodable; trying an older one");
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(topic, partition = index, base, error = %e, "producer snapshot unreadable; trying an older one"),
        }
    }
    // Sealed segments after the snapshot, then the active one (from disk when its
    // batches were not handed over).
    let on_disk = if active_batches.is_some() { bases.len().saturating_sub(from + 1) } else { bases.len().saturating_sub(from) };
    let sealed_after: Vec<_> = reads.into_iter().skip(from).take(on_disk).collect();
    if !sealed_after.is_empty() {
        tracing::info!(topic, partition = index, segments = sealed_after.len(), "replaying sealed segments to rebuild producer state");
    }
    for plan in sealed_after {
        let mut reader = BatchReader::new(plan.file.clone(), plan.position, plan.end, REPLAY_CHUNK_BYTES);
        loop {
            let chunk = reader.next_chunk_strict("sealed segment replayed for producer state").await?;
            if chunk.is_empty() {
                break;
            }
            for (h, batch) in chunk {
                producers.update(&h, &batch);
            }
        }
    }
    for h in active_batches.unwrap_or(&[]) {
        // Only headers: a caller with markers among them replays from disk instead.
        debug_assert!(!h.is_control(), "a marker's type is in its record, not its header");
        producers.update(h, &[]);
    }
    Ok(producers)
}

/// Bytes read at a time while replaying sealed segments for producer state.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// The broker id of a partition opened with `Partition::open` (no replication): it is its
/// only replica, the ISR is itself, and its high watermark is its written offset.
pub const SOLE_REPLICA: BrokerId = -1;

impl Partition {
    /// Opens (recovering) or creates the partition's log in `dir` as its only replica,
    /// leading in `leader_epoch` (no replication: `open_replica` with `SOLE_REPLICA`).
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        dir: &Path,
        topic: String,
        index: i32,
        topic_id: [u8; 16],
        shard: ShardId,
        leader_epoch: i32,
        log_config: LogConfig,
        settings: PartitionSettings,
    ) -> Result<Rc<Partition>, PartitionError> {
        let role = RoleState::Leader { leader_epoch, partition_epoch: 0, replicas: vec![SOLE_REPLICA], isr: vec![SOLE_REPLICA] };
        Self::open_replica(dir, topic, index, topic_id, shard, SOLE_REPLICA, role, log_config, settings).await
    }

    /// Opens (recovering) or creates the log in `dir` of this broker's (`broker`) replica
    /// of the partition, as leader or follower. A leader's epoch starts at the log end
    /// (as `become_leader`); a follower assigns no epoch (its epochs come from the
    /// batches it fetches). The high watermark starts at the saved checkpoint, within
    /// [log start, log end]; a leader whose ISR is itself alone moves it to its written
    /// offset at once.
    #[allow(clippy::too_many_arguments)]
    pub async fn open_replica(
        dir: &Path,
        topic: String,
        index: i32,
        topic_id: [u8; 16],
        shard: ShardId,
        broker: BrokerId,
        role: RoleState,
        log_config: LogConfig,
        settings: PartitionSettings,
    ) -> Result<Rc<Partition>, PartitionError> {
        // One look at the directory serves every step of the open (`dir_survey`).
        let mut survey = dir_survey::survey(dir).await?;
        // A restart at the tiered offset cut short by a crash: the log starts over.
        survey = super::tiered_restart::discard_unfinished(survey, &topic, index).await?;
        let claim = claim_dir(&mut survey, topic_id).await?;
        if let DirClaim::RemovedStray(old) = claim {
            tracing::warn!(topic, partition = index, dir = %dir.display(), old_topic_id = %uuid::Uuid::from_bytes(old),
                "removed a partition directory left by a deleted topic of the same name");
            survey = dir_survey::survey(dir).await?;
        }
        let mut opened = Log::open_surveyed(survey, log_config).await?;
        // A restart finds the file already naming the topic: not read a second time.
        if claim != DirClaim::Recorded {
            record_topic_id(dir, topic_id).await?;
        }
        let (log_start, log_end) = (opened.log.log_start_offset(), opened.log.next_offset());
        let log = Rc::new(RefCell::new(opened.log));
        // A marker's type is in its record: with markers in the active segment, its
        // batches are replayed from disk rather than from recovery's headers.
        let active = (!opened.active_batches.iter().any(|h| h.is_control())).then_some(&opened.active_batches[..]);
        let mut producers = recover_producers(&log, active, Some(&opened.survey.listing), &topic, index).await?;
        super::transactions::bound_producer_table(&mut producers, settings.max_producer_ids, &topic, index);
        if opened.truncated_bytes > 0 {
            tracing::info!(topic, partition = index, bytes = opened.truncated_bytes, log_end_offset = log_end, "recovered log; cut the invalid or padded tail");
        }
        let (leader_epoch, assign_epoch, role, tracker) = match role {
            RoleState::Leader { leader_epoch, partition_epoch, replicas, isr } => {
                let tracker = ReplicaTracker::new(broker, &replicas, &isr, partition_epoch, crate::runtime::now_ms());
                (leader_epoch, Some(leader_epoch), Role::Leader, tracker)
            }
            RoleState::Follower { leader_epoch, leader } => (leader_epoch, None, Role::Follower { leader }, ReplicaTracker::alone(broker)),
        };
        let epochs = open_epochs(&mut opened.survey, log_end, &opened.active_batches, assign_epoch).await?;
        let checkpointed = super::hw_checkpoint::load(&mut opened.survey, &topic, index).await;
        // Kafka's updateHighWatermark at load: within [log start, log end].
        let hw = checkpointed.unwrap_or(0).clamp(log_start, log_end);
        let producers = Rc::new(RefCell::new(producers));
        let epochs = Rc::new(RefCell::new(epochs));
        let watchers = Rc::new(Watchers::default());
        let partition = Rc::new_cyclic(|me: &Weak<Partition>| {
            let hooks = WriterHooks {
                // The leader's own write completed: its high watermark may move; long
                // polls (consumers below the high watermark, followers below the written
                // offset) re-read.
                on_written: Box::new({
                    let me = me.clone();
                    move || {
                        if let Some(p) = me.upgrade() {
                            p.on_written();
                        }
                    }
                }),
                // Runs synchronously inside the writer right after it rolled the log back
                // (no await in between, and appends run on this same thread), so no append
                // checks sequences against producer state that still holds dropped batches.
                on_rollback: Box::new({
                    let (producers, epochs) = (producers.clone(), epochs.clone());
                    move |log_end_offset| {
                        producers.borrow_mut().truncate_from(log_end_offset);
                        // The saved checkpoint may still name the dropped offsets: the next
                        // open truncates it to the log end the same way.
                        epochs.borrow_mut().truncate_from_end(log_end_offset);
                    }
                }),
            };
            let writer = LogWriter::new(log.clone(), topic.clone(), index, hooks);
            Partition {
                topic,
                index,
                topic_id,
                shard,
                broker,
                leader_epoch: Cell::new(leader_epoch),
                role: Cell::new(role),
                high_watermark: Cell::new(hw),
                tracker: RefCell::new(tracker),
                hw_waiters: RefCell::new(Vec::new()),
                leadership: Cell::new(0),
                checkpointed_hw: Cell::new(checkpointed.unwrap_or(-1)),
                checkpoint_lock: Semaphore::new(1),
                log,
                writer,
                producers,
                epochs,
                settings: RefCell::new(settings),
                append_lock: Semaphore::new(1),
                watchers,
                closed: Cell::new(false),
                txn_guards: RefCell::new(std::collections::HashMap::new()),
                next_txn_guard: Cell::new(1),
            }
        });
        partition.maybe_increment_high_watermark();
        if partition.settings.borrow().checkpoint_high_watermark_periodically {
            super::hw_checkpoint::spawn_periodic(&partition);
        }
        Ok(partition)
    }

    /// Invariant 1: partition state is touched only on its owning shard.
    pub(super) fn assert_on_shard(&self) {
        debug_assert_eq!(crate::runtime::current_shard(), Some(self.shard), "partition used off its shard");
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.get()
    }

    /// OffsetForLeaderEpoch for this log: the largest epoch at or below `epoch` it holds
    /// and where that epoch's writes end (`LeaderEpochCache::end_offset_for`).
    pub fn epoch_end_offset(&self, epoch: i32) -> (i32, i64) {
        self.epochs.borrow().end_offset_for(epoch, self.log.borrow().next_offset())
    }

    /// A new leader epoch while this replica keeps leading (the controller bumped it, e.g.
    /// its broker re-registered): batches appended from now on carry it.
    pub fn set_leader_epoch(&self, epoch: i32) {
        debug_assert!(epoch >= self.leader_epoch.get(), "leader epochs never go back");
        self.leader_epoch.set(epoch);
        if !self.is_leader() {
            // A follower's epochs come from the batches it fetches, never from its view.
            return;
        }
        // Kafka's makeLeader: the new epoch starts at the log end, also before anything is
        // appended in it. Saved by the first append in it, before that append is
        // acknowledged (`assign_unsaved`: until then losing it changes no answer); a save
        // here cost two fsyncs per partition whose leadership moved (100k of them after a
        // restart).
        let start = self.log.borrow().next_offset();
        self.epochs.borrow_mut().assign_unsaved(epoch, start);
    }

    /// The high watermark: consumers see only offsets below it (invariant 2). On a leader
    /// it is the smallest of its own written offset (`Log::written_offset()`, fdatasync'ed
    /// or not, as Kafka's high watermark does not wait for a flush) and the log end
    /// offsets of the ISR's followers; with the leader alone in the ISR, its written
    /// offset. A follower takes the leader's (`set_follower_high_watermark`). It never
    /// moves back except by truncation, and never passes the log end offset (the min
    /// below only covers the moment between a storage truncation and
    /// `Partition::truncate_to` lowering it, when nothing else runs on this partition).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.get().min(self.log.borrow().next_offset())
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.borrow().next_offset()
    }

    /// The end of the data whose write completed: what a follower can fetch from a leader.
    pub fn written_offset(&self) -> i64 {
        self.log.borrow().written_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.borrow().log_start_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.log.borrow().size_bytes()
    }

    pub fn dir(&self) -> PathBuf {
        self.log.borrow().dir().to_path_buf()
    }

    /// Its open took the clean-shutdown marker and that is not durable yet
    /// (`Log::marker_taken_unsynced`): whoever opened it syncs (`sync_taken_marker`, or one
    /// `syncfs` for a batch, then `mark_marker_taken_synced`) before anything can write
    /// to it.
    pub fn marker_taken_unsynced(&self) -> bool {
        self.log.borrow().marker_taken_unsynced()
    }

    pub fn mark_marker_taken_synced(&self) {
        self.log.borrow_mut().mark_marker_taken_synced();
    }

    /// Syncs its taken marker if that awaits a sync.
    pub async fn sync_taken_marker(&self) -> Result<(), PartitionError> {
        if self.marker_taken_unsynced() {
            crate::storage::clean_shutdown::sync_taken_marker(&self.dir()).await?;
            self.mark_marker_taken_synced();
        }
        Ok(())
    }

    pub fn set_cache_budget(&self, bytes: usize) {
        self.log.borrow_mut().set_cache_budget(bytes);
    }

    pub fn apply_config(&self, log_config: LogConfig, settings: PartitionSettings) {
        self.log.borrow_mut().set_config(log_config);
        *self.settings.borrow_mut() = settings;
        // A lower min.insync.replicas (or ELR turned off) may release a held high watermark.
        self.maybe_increment_high_watermark();
    }

    /// `PartitionError::Storage(StorageError::Offline)` once an fdatasync of the log
    /// failed (invariant 8): produce, fetch and ListOffsets all answer with it until the
    /// broker restarts.
    pub fn check_online(&self) -> Result<(), PartitionError> {
        Ok(self.log.borrow().check_online()?)
    }

    /// Offsets below this are fdatasync'ed (tests compare it with what acks promised).
    #[cfg(test)]
    pub(crate) fn synced_offset(&self) -> i64 {
        self.log.borrow().synced_offset()
    }

    /// (segment file, end of its written whole batches) for every segment: bytes below
    /// are written and may have been acknowledged (tests check no write covers them).
    #[cfg(test)]
    pub(crate) fn written_positions(&self) -> Vec<(PathBuf, u64)> {
        let log = self.log.borrow();
        log.segment_bases()
            .into_iter()
            .filter_map(|b| log.segment(b).map(|s| (log.dir().join(crate::storage::segment::log_file_name(b)), s.written())))
            .collect()
    }

    /// The log's writer has work in flight (tests wait for it to go idle).
    #[cfg(test)]
    pub(crate) fn writer_running(&self) -> bool {
        self.writer.is_running()
    }

    /// Tests only: an append holds the append lock (between its checks and its staging:
    /// a roll or an epoch save may be under way).
    #[cfg(test)]
    pub(crate) fn appending(&self) -> bool {
        self.append_lock.available() == 0
    }

    pub fn is_offline(&self) -> bool {
        self.log.borrow().is_offline()
    }

    /// Stops serving: appends waiting for durability fail (`StorageError::Closed`, a
    /// storage error as before), long polls return; later calls answer NotLeader.
    pub fn close(&self) {
        self.closed.set(true);
        self.writer.fail_all(&StorageError::Closed);
        self.fail_hw_waiters(|| PartitionError::Storage(StorageError::Closed));
        self.watchers.wake_all();
    }
}

/// A producer's pending KIP-890 verification on one partition (Kafka's
/// VerificationStateEntry). Every batch of the transaction that arrives before one is
/// appended shares the guard and lowers `lowest_sequence`; only the batch with the lowest
/// sequence may start the transaction. Pipelined batches verified out of order are refused
/// as out of order (retriable) instead of being appended ahead of the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TxnGuard {
    pub(super) guard: u64,
    pub(super) epoch: i16,
    pub(super) lowest_sequence: i32,
    /// False once a marker for the producer was written after the guard was handed out:
    /// the verification may predate the end of a transaction, so the guard no longer
    /// admits a write (it is verified again); the entry stays so that the transaction's
    /// later pipelined batches still wait for its first write.
    pub(super) live: bool,
}
