//! The `Partition` itself: its state on the owning shard, opening (recovering the log and
//! the producer state), accessors and close. What it does lives beside it: `append.rs`
//! (produce), `read.rs` (fetch, ListOffsets, long polls), `retention.rs` (DeleteRecords,
//! retention), `cleaner.rs` (compaction).
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::channel::oneshot;
use glommio::sync::Semaphore;

use super::error::PartitionError;
use super::producer_state::ProducerStateTable;
use crate::config::FlushMode;
use crate::runtime::ShardId;
use crate::storage::dma::read_checked_file;
use crate::storage::log::Log;
use crate::storage::LogConfig;

pub(super) const PRODUCER_SNAPSHOT_MAGIC: u32 = 0x534c_5053; // "SLPS"
pub(super) const PRODUCER_SNAPSHOT_VERSION: u16 = 1;

pub(super) fn producer_snapshot_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.snapshot"))
}


/// Settings applied to appends, from the topic config.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSettings {
    pub max_message_bytes: usize,
    pub log_append_time: bool,
    pub flush: FlushMode,
}

pub(super) struct Waiter {
    /// Acknowledge once offsets below this are on disk.
    pub(super) end_offset: i64,
    pub(super) sync: bool,
    pub(super) tx: oneshot::Sender<Result<(), String>>,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: [u8; 16],
    pub(super) shard: ShardId,
    pub(super) leader_epoch: Cell<i32>,
    pub(super) log: RefCell<Log>,
    pub(super) producers: RefCell<ProducerStateTable>,
    pub(super) settings: RefCell<PartitionSettings>,
    pub(super) append_lock: Semaphore,
    pub(super) flushing: Cell<bool>,
    pub(super) waiters: RefCell<Vec<Waiter>>,
    /// Long-poll fetches waiting for the high watermark to move.
    pub(super) watchers: RefCell<Vec<oneshot::Sender<()>>>,
    pub(super) closed: Cell<bool>,
}

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
        let opened = Log::open(dir, log_config).await?;
        let log = opened.log;
        let active_base = log.segment_bases().last().copied().unwrap_or(0);
        let snapshot_path = producer_snapshot_path(dir, active_base);
        let mut producers = match read_checked_file(&snapshot_path, PRODUCER_SNAPSHOT_MAGIC, PRODUCER_SNAPSHOT_VERSION).await {
            Ok(Some(p)) => ProducerStateTable::decode(&p).unwrap_or_default(),
            Ok(None) => ProducerStateTable::default(),
            Err(e) => {
                tracing::warn!(topic, partition = index, error = %e, "producer snapshot unreadable; starting from the active segment");
                ProducerStateTable::default()
            }
        };
        for h in &opened.active_batches {
            producers.update(h);
        }
        if opened.truncated_bytes > 0 {
            tracing::info!(topic, partition = index, bytes = opened.truncated_bytes,
                log_end_offset = log.next_offset(), "recovered log; cut the invalid or padded tail");
        }
        Ok(Rc::new(Partition {
            topic,
            index,
            topic_id,
            shard,
            leader_epoch: Cell::new(leader_epoch),
            log: RefCell::new(log),
            producers: RefCell::new(producers),
            settings: RefCell::new(settings),
            append_lock: Semaphore::new(1),
            flushing: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            watchers: RefCell::new(Vec::new()),
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

    pub fn high_watermark(&self) -> i64 {
        self.log.borrow().written_offset()
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


    /// Stops serving: pending waiters fail; later calls answer NotLeader.
    pub fn close(&self) {
        self.closed.set(true);
        self.fail_waiters(i64::MIN, "partition closed");
        for w in self.watchers.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }
}
