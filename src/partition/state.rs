//! The `Partition` itself: its state on the owning shard, opening (recovering the log and
//! the producer state), accessors and close. What it does lives beside it: `append.rs`
//! (produce), `read.rs` (fetch, ListOffsets, long polls), `retention.rs` (DeleteRecords,
//! retention), `cleaner.rs` (compaction).
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::Semaphore;

use super::error::PartitionError;
use super::producer_state::{ProducerStateTable, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use super::read::Watchers;
use crate::config::FlushMode;
use crate::runtime::ShardId;
use crate::storage::batch_reader::BatchReader;
use crate::storage::leader_epoch_cache::LeaderEpochCache;
use crate::storage::partition_metadata::{discard_if_stray, record as record_topic_id, DirClaim};
use crate::storage::dma::read_checked_file;
use crate::storage::log::Log;
use crate::storage::log_writer::{LogWriter, WriterHooks};
use crate::storage::segment::snapshot_path;
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
    pub(super) leader_epoch: Cell<i32>,
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
}

/// The leader-epoch cache as saved, completed from the active segment's batches (an epoch
/// appended but not saved before a crash is found there) and cut to the recovered log end;
/// then the epoch this partition opens in starts at the log end, as Kafka assigns it when
/// a replica becomes leader (so an empty partition answers its epoch, ending at 0).
async fn open_epochs(dir: &Path, log: &Log, active_batches: &[crate::record::BatchHeader], leader_epoch: i32) -> Result<LeaderEpochCache, PartitionError> {
    let mut epochs = LeaderEpochCache::load(dir).await?;
    let mut changed = epochs.truncate_from_end(log.next_offset());
    for h in active_batches {
        changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
    }
    changed |= epochs.assign(leader_epoch, log.next_offset());
    if changed {
        epochs.save().await?;
    }
    Ok(epochs)
}

/// The producer state as of the log end: the newest readable snapshot at a segment base
/// (saved by the writer once everything below that base was synced), then every batch
/// on disk from that base on (the active segment's come from recovery's scan). Without
/// a snapshot it replays the whole log. Only batches on disk count, so a batch a crash
/// lost is never taken for a duplicate.
async fn recover_producers(
    log: &Log,
    active_batches: &[crate::record::BatchHeader],
    topic: &str,
    index: i32,
) -> Result<ProducerStateTable, PartitionError> {
    let bases = log.segment_bases();
    let mut from = 0;
    let mut producers = ProducerStateTable::default();
    for (i, &base) in bases.iter().enumerate().rev() {
        match read_checked_file(&snapshot_path(log.dir(), base), SNAPSHOT_MAGIC, SNAPSHOT_VERSION).await {
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
    // Sealed segments after the snapshot, then the active one.
    let sealed_after: Vec<_> = log.disk_reads().into_iter().skip(from).take(bases.len().saturating_sub(from + 1)).collect();
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
            for (h, _) in chunk {
                producers.update(&h);
            }
        }
    }
    for h in active_batches {
        producers.update(h);
    }
    Ok(producers)
}

/// Bytes read at a time while replaying sealed segments for producer state.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

impl Partition {
    /// Opens (recovering) or creates the partition's log in `dir`.
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
        if let DirClaim::RemovedStray(old) = discard_if_stray(dir, topic_id).await? {
            tracing::warn!(topic, partition = index, dir = %dir.display(), old_topic_id = %uuid::Uuid::from_bytes(old),
                "removed a partition directory left by a deleted topic of the same name");
        }
        let opened = Log::open(dir, log_config).await?;
        record_topic_id(dir, topic_id).await?;
        let log = opened.log;
        let producers = recover_producers(&log, &opened.active_batches, &topic, index).await?;
        if opened.truncated_bytes > 0 {
            tracing::info!(topic, partition = index, bytes = opened.truncated_bytes,
                log_end_offset = log.next_offset(), "recovered log; cut the invalid or padded tail");
        }
        let epochs = open_epochs(dir, &log, &opened.active_batches, leader_epoch).await?;
        let log = Rc::new(RefCell::new(log));
        let producers = Rc::new(RefCell::new(producers));
        let epochs = Rc::new(RefCell::new(epochs));
        let watchers = Rc::new(Watchers::default());
        let hooks = WriterHooks {
            on_written: Box::new({
                let watchers = watchers.clone();
                move || watchers.wake_all()
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
        Ok(Rc::new(Partition {
            topic,
            index,
            topic_id,
            shard,
            leader_epoch: Cell::new(leader_epoch),
            log,
            writer,
            producers,
            epochs,
            settings: RefCell::new(settings),
            append_lock: Semaphore::new(1),
            watchers,
            closed: Cell::new(false),
        }))
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
        // Kafka's makeLeader: the new epoch starts at the log end, also before anything is
        // appended in it. Saved in the background; an append in the epoch finds it
        // assigned, and a restart re-derives it (`open_epochs`).
        let start = self.log.borrow().next_offset();
        if self.epochs.borrow_mut().assign(epoch, start) {
            let save = self.epochs.borrow().save_job();
            let (topic, index) = (self.topic.clone(), self.index);
            glommio::spawn_local(async move {
                if let Err(e) = save.await {
                    tracing::warn!(topic, partition = index, error = %e, "cannot save the leader-epoch checkpoint");
                }
            })
            .detach();
        }
    }

    /// The high watermark: consumers see only offsets below it (invariant 2). With one
    /// replica (no replication yet) it is the end of the data whose write completed,
    /// `Log::written_offset()` — fdatasync'ed or not, as Kafka's high watermark does not
    /// wait for a flush. With replicas it will be the offset the whole ISR has.
    /// It never passes the log end offset, and never moves back: a failed write rolls
    /// back only data that was never written (the writer asserts it in debug builds).
    pub fn high_watermark(&self) -> i64 {
        let log = self.log.borrow();
        let hw = log.written_offset();
        debug_assert!(hw <= log.next_offset(), "high watermark {hw} past the log end {}", log.next_offset());
        hw
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.borrow().next_offset()
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

    pub fn set_cache_budget(&self, bytes: usize) {
        self.log.borrow_mut().set_cache_budget(bytes);
    }

    pub fn apply_config(&self, log_config: LogConfig, settings: PartitionSettings) {
        self.log.borrow_mut().set_config(log_config);
        *self.settings.borrow_mut() = settings;
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

    pub fn is_offline(&self) -> bool {
        self.log.borrow().is_offline()
    }

    /// Stops serving: appends waiting for durability fail (`StorageError::Closed`, a
    /// storage error as before), long polls return; later calls answer NotLeader.
    pub fn close(&self) {
        self.closed.set(true);
        self.writer.fail_all(&StorageError::Closed);
        self.watchers.wake_all();
    }
}
