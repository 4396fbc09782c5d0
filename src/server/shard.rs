//! One shard: a glommio executor pinned to a core that owns a set of partitions.
//!
//! It learns metadata only from its controller update channel, opens/closes/deletes its
//! own partitions as deltas say, serves other shards' partition operations from its
//! inbox, accepts client connections on the shared listen address (SO_REUSEPORT), and
//! runs retention for its partitions.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use futures::FutureExt;

use super::partition_ops::ShardRequest;
use crate::cluster::image::{MetadataDelta, MetadataImage, MetadataUpdate, TopicMeta};
use crate::runtime::ShardId;
use crate::cluster::topic_config::{TimestampType, TopicConfig, TopicConfigDefaults};
use crate::config::Config;
use crate::controller::ControllerHandle;
use crate::partition::{Partition, PartitionSettings};
use crate::runtime::mesh::Mesh;
use crate::storage::LogConfig;

/// Producer ids fetched from the controller at a time.
const PRODUCER_ID_BLOCK: i64 = 1000;

pub struct ShardContext {
    pub shard: ShardId,
    pub config: Arc<Config>,
    pub controller: ControllerHandle,
    pub mesh: Mesh<ShardRequest>,
    pub topic_defaults: TopicConfigDefaults,
    image: RefCell<Arc<MetadataImage>>,
    /// Partitions this shard owns, by topic then partition index.
    partitions: RefCell<HashMap<String, HashMap<i32, Rc<Partition>>>>,
    metadata_waiters: RefCell<Vec<oneshot::Sender<()>>>,
    producer_ids: Cell<(i64, i64)>,
    pub connections: Cell<usize>,
    /// Groups coordinated by this shard (those of its `__consumer_offsets` partitions).
    pub groups: crate::group::Coordinator,
}

impl ShardContext {
    pub fn new(
        shard: ShardId,
        config: Arc<Config>,
        controller: ControllerHandle,
        mesh: Mesh<ShardRequest>,
        topic_defaults: TopicConfigDefaults,
    ) -> ShardContext {
        ShardContext {
            shard,
            config,
            controller,
            mesh,
            topic_defaults,
            image: RefCell::new(Arc::new(MetadataImage::default())),
            partitions: RefCell::new(HashMap::new()),
            metadata_waiters: RefCell::new(Vec::new()),
            producer_ids: Cell::new((0, 0)),
            connections: Cell::new(0),
            groups: crate::group::Coordinator::default(),
        }
    }

    /// The metadata image this shard has fully applied (partitions opened).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    pub fn metadata_index(&self) -> u64 {
        self.image.borrow().applied_index
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(topic)?.get(&partition).cloned()
    }

    pub fn local_partitions(&self) -> Vec<Rc<Partition>> {
        self.partitions.borrow().values().flat_map(|m| m.values().cloned()).collect()
    }

    /// Waits until this shard has applied metadata `index` (or the timeout passes).
    pub async fn wait_for_metadata(&self, index: u64, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while self.metadata_index() < index {
            let now = std::time::Instant::now();
            if now >= deadline {
                tracing::warn!(shard = self.shard, index, applied = self.metadata_index(), "metadata barrier timed out");
                return;
            }
            let (tx, rx) = oneshot::channel();
            self.metadata_waiters.borrow_mut().push(tx);
            futures::select! {
                _ = rx.fuse() => {}
                _ = glommio::timer::sleep(deadline - now).fuse() => {}
            }
        }
    }

    /// Waits until this shard has applied everything the controller committed so far.
    pub async fn catch_up_with_controller(&self) {
        let index = self.controller.image().applied_index;
        self.wait_for_metadata(index, Duration::from_secs(10)).await;
    }

    /// A fresh producer id (blocks of ids come from the controller).
    pub async fn next_producer_id(&self) -> Result<i64, crate::controller::ControllerError> {
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        let first = self.controller.allocate_producer_ids(PRODUCER_ID_BLOCK).await?;
        self.producer_ids.set((first + 1, first + PRODUCER_ID_BLOCK));
        Ok(first)
    }

    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.config.data_dir.join(format!("{topic}-{partition}"))
    }

    fn settings_for(&self, topic: &TopicMeta) -> (LogConfig, PartitionSettings) {
        let tc = TopicConfig::resolve(&self.topic_defaults, &topic.configs).unwrap_or_else(|e| {
            // The controller validated these; an invalid stored value falls back to defaults.
            tracing::error!(topic = %topic.name, error = %e, "stored topic config invalid; using defaults");
            TopicConfig::resolve(&self.topic_defaults, &Default::default()).unwrap_or_else(|_| unreachable!("defaults are valid"))
        });
        let log = LogConfig {
            segment_bytes: tc.segment_bytes,
            segment_ms: tc.segment_ms,
            retention_ms: tc.retention_ms,
            retention_bytes: tc.retention_bytes,
            index_interval_bytes: self.config.log_index_interval_bytes,
            cache_bytes: self.cache_budget_per_partition(),
            compact: tc.is_compacted(),
            delete: tc.is_delete(),
            min_cleanable_dirty_ratio: tc.min_cleanable_dirty_ratio,
            delete_retention_ms: tc.delete_retention_ms,
        };
        let settings = PartitionSettings {
            max_message_bytes: tc.max_message_bytes.max(0) as usize,
            log_append_time: tc.timestamp_type == TimestampType::LogAppendTime,
            flush: self.config.flush,
        };
        (log, settings)
    }

    /// The shard's batch-cache budget split evenly over its partitions, capped by the
    /// per-partition setting.
    fn cache_budget_per_partition(&self) -> usize {
        let count: usize = self.partitions.borrow().values().map(|m| m.len()).sum();
        (self.config.batch_cache_bytes_per_shard / count.max(1)).min(self.config.batch_cache_bytes_per_partition)
    }

    fn rebalance_cache_budgets(&self) {
        let budget = self.cache_budget_per_partition();
        for p in self.local_partitions() {
            p.set_cache_budget(budget);
        }
    }

    async fn open_partition(&self, topic: &TopicMeta, index: i32) {
        let Some(meta) = topic.partitions.iter().find(|p| p.partition == index) else { return };
        if meta.shard != self.shard || self.partition(&topic.name, index).is_some() {
            return;
        }
        let count: usize = self.partitions.borrow().values().map(|m| m.len()).sum();
        if count >= self.config.max_partitions_per_shard {
            tracing::error!(shard = self.shard, topic = %topic.name, partition = index,
                limit = self.config.max_partitions_per_shard, "partition limit per shard reached; not opening (raise max_partitions_per_shard)");
            return;
        }
        let (log, settings) = self.settings_for(topic);
        let dir = self.partition_dir(&topic.name, index);
        match Partition::open(&dir, topic.name.clone(), index, topic.topic_id, self.shard, meta.leader_epoch, log, settings).await {
            Ok(p) => {
                self.partitions.borrow_mut().entry(topic.name.clone()).or_default().insert(index, p);
                self.rebalance_cache_budgets();
            }
            Err(e) => tracing::error!(shard = self.shard, topic = %topic.name, partition = index, error = %e, "cannot open partition"),
        }
    }

    /// Applies one metadata update: open, reconfigure or delete this shard's partitions,
    /// then publish the image and wake operations waiting for it.
    pub async fn apply_update(&self, update: MetadataUpdate) {
        let image = update.image.clone();
        if update.deltas.is_empty() {
            // Initial image (or a snapshot): open everything this shard owns.
            for topic in image.topics.values() {
                for p in &topic.partitions {
                    self.open_partition(topic, p.partition).await;
                }
            }
        }
        for delta in &update.deltas {
            match delta {
                MetadataDelta::TopicCreated { name } | MetadataDelta::PartitionsCreated { name, .. } => {
                    if let Some(topic) = image.topic(name) {
                        for p in &topic.partitions {
                            self.open_partition(topic, p.partition).await;
                        }
                    }
                }
                MetadataDelta::TopicDeleted { name, .. } => self.delete_topic(name).await,
                MetadataDelta::TopicConfigChanged { name } => {
                    if let Some(topic) = image.topic(name) {
                        let (log, settings) = self.settings_for(topic);
                        for p in self.partitions.borrow().get(name).into_iter().flat_map(|m| m.values()) {
                            p.apply_config(log.clone(), settings.clone());
                        }
                    }
                }
            }
        }
        *self.image.borrow_mut() = image;
        for w in self.metadata_waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    async fn delete_topic(&self, name: &str) {
        let removed = self.partitions.borrow_mut().remove(name);
        for (index, p) in removed.into_iter().flatten() {
            p.close();
            let dir = self.partition_dir(name, index);
            drop(p);
            // Kafka renames a deleted partition's directory, then removes it in the
            // background; the rename frees the name for a topic created right after.
            let res = glommio::executor()
                .spawn_blocking(move || {
                    let mut doomed = dir.clone().into_os_string();
                    doomed.push(format!(".{}-delete", crate::runtime::now_ms()));
                    std::fs::rename(&dir, &doomed)?;
                    std::fs::remove_dir_all(&doomed)
                })
                .await;
            if let Err(e) = res {
                tracing::warn!(shard = self.shard, topic = name, partition = index, error = %e, "could not remove a deleted partition's files");
            }
        }
        self.rebalance_cache_budgets();
    }
}

/// Applies metadata updates as they arrive.
pub async fn follow_metadata(ctx: Rc<ShardContext>, updates: async_channel::Receiver<MetadataUpdate>) {
    while let Ok(update) = updates.recv().await {
        ctx.apply_update(update).await;
    }
}

/// Runs retention on this shard's partitions every `log_retention_check_interval_ms`.
pub async fn retention_loop(ctx: Rc<ShardContext>) {
    let every = Duration::from_millis(ctx.config.log_retention_check_interval_ms.max(100));
    loop {
        glommio::timer::sleep(every).await;
        let now = crate::runtime::now_ms();
        for p in ctx.local_partitions() {
            if let Err(e) = p.apply_retention(now).await {
                tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e, "retention failed");
            }
        }
    }
}

/// Runs the log cleaner every `log_cleaner_backoff_ms` on this shard's compacted
/// partitions whose dirty ratio reached min.cleanable.dirty.ratio (Kafka's LogCleaner,
/// one per shard instead of a thread pool). A pass yields between batches.
pub async fn cleaner_loop(ctx: Rc<ShardContext>) {
    let every = Duration::from_millis(ctx.config.log_cleaner_backoff_ms.max(10));
    loop {
        glommio::timer::sleep(every).await;
        for p in ctx.local_partitions() {
            if !p.needs_cleaning() {
                continue;
            }
            if let Err(e) = p.clean(crate::runtime::now_ms()).await {
                tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e,
                    "log clean failed; a partition with damaged data is not cleaned again until restart");
            }
            glommio::yield_if_needed().await;
        }
    }
}
