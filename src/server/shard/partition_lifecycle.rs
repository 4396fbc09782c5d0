//! The partition lifecycle of one shard: it applies each metadata update — opening
//! (recovering) the partitions whose leader replica the controller placed on this
//! broker's shard, closing those it no longer leads (keeping their files: the data is
//! still this replica's), reconfiguring them, deleting them with their files — and then
//! publishes the image, so operations routed by it find their partitions. Followers hold
//! no open log until replication (issue 12) gives them one. The batch-cache budget is split over open partitions.
use std::rc::Rc;

use super::context::ShardContext;
use crate::cluster::image::{MetadataDelta, MetadataImage, MetadataUpdate, TopicMeta};
use crate::cluster::topic_config::{TimestampType, TopicConfig};
use crate::partition::{effective_flush, write_mode, Partition, PartitionSettings};
use crate::storage::LogConfig;

impl ShardContext {
    /// `image` is the one being applied: its dynamic broker configs give the defaults.
    pub(super) fn settings_for(&self, image: &MetadataImage, topic: &TopicMeta) -> (LogConfig, PartitionSettings) {
        let defaults = self.topic_defaults_in(image);
        let tc = TopicConfig::resolve(&defaults, &topic.configs).unwrap_or_else(|e| {
            // The controller validated these; an invalid stored value falls back to defaults.
            tracing::error!(topic = %topic.name, error = %e, "stored topic config invalid; using defaults");
            TopicConfig::resolve(&defaults, &Default::default()).unwrap_or_else(|_| unreachable!("defaults are valid"))
        });
        let flush = effective_flush(self.config.flush, tc.flush_messages);
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
            write_mode: write_mode(flush),
            flush_interval_messages: tc.flush_messages,
            flush_interval_ms: tc.flush_ms,
            // Kafka recovers after an unclean shutdown; a replica refetches what was cut.
            verify_sealed_after_unclean_shutdown: true,
        };
        let settings = PartitionSettings {
            max_message_bytes: tc.max_message_bytes.max(0) as usize,
            log_append_time: tc.timestamp_type == TimestampType::LogAppendTime,
            timestamp_before_max_ms: tc.timestamp_before_max_ms,
            timestamp_after_max_ms: tc.timestamp_after_max_ms,
            flush,
        };
        (log, settings)
    }

    /// The shard's batch-cache budget split evenly over its partitions, capped by the
    /// per-partition setting.
    fn cache_budget_per_partition(&self) -> usize {
        let count = self.partitions.count();
        (self.config.batch_cache_bytes_per_shard / count.max(1)).min(self.config.batch_cache_bytes_per_partition)
    }

    fn rebalance_cache_budgets(&self) {
        let budget = self.cache_budget_per_partition();
        for p in self.partitions.all() {
            p.set_cache_budget(budget);
        }
    }

    async fn open_partition(&self, image: &MetadataImage, topic: &TopicMeta, index: i32) {
        let Some(meta) = topic.partition(index) else { return };
        if meta.leader != self.config.node_id || meta.shard != self.shard || self.partitions.get(&topic.name, index).is_some() {
            return;
        }
        let count = self.partitions.count();
        if count >= self.config.max_partitions_per_shard {
            tracing::error!(shard = self.shard, topic = %topic.name, partition = index,
                limit = self.config.max_partitions_per_shard, "partition limit per shard reached; not opening (raise max_partitions_per_shard)");
            return;
        }
        let (log, settings) = self.settings_for(image, topic);
        let dir = self.partition_dir(&topic.name, index);
        match Partition::open(&dir, topic.name.clone(), index, topic.topic_id, self.shard, meta.leader_epoch, log, settings).await {
            Ok(p) => {
                self.partitions.insert(p);
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
                    self.open_partition(&image, topic, p.partition).await;
                }
            }
        }
        for delta in &update.deltas {
            match delta {
                MetadataDelta::TopicCreated { name } | MetadataDelta::PartitionsCreated { name, .. } => {
                    if let Some(topic) = image.topic(name) {
                        for p in &topic.partitions {
                            self.open_partition(&image, topic, p.partition).await;
                        }
                    }
                }
                MetadataDelta::TopicDeleted { name, .. } => self.delete_topic(name).await,
                MetadataDelta::TopicConfigChanged { name } => {
                    if let Some(topic) = image.topic(name) {
                        self.reconfigure_topic(&image, topic);
                    }
                }
                MetadataDelta::BrokerConfigChanged => {
                    for topic in image.topics.values() {
                        self.reconfigure_topic(&image, topic);
                    }
                }
                // The coordinator reads group configs from the published image.
                MetadataDelta::GroupConfigChanged { .. } => {}
                // Handlers read the broker list from the published image.
                MetadataDelta::BrokersChanged => {}
                MetadataDelta::LeadersChanged { name } => {
                    if let Some(topic) = image.topic(name) {
                        self.follow_leaders(&image, topic).await;
                    }
                }
            }
        }
        self.partitions.publish(image);
    }

    /// Stops serving the partitions of `topic` this shard no longer leads, takes the new
    /// leader epoch of those it still leads, then opens those it leads now.
    async fn follow_leaders(&self, image: &MetadataImage, topic: &TopicMeta) {
        for p in self.partitions.of_topic(&topic.name) {
            match topic.partition(p.index).filter(|m| m.leader == self.config.node_id && m.shard == self.shard) {
                Some(m) => p.set_leader_epoch(m.leader_epoch),
                None => {
                    if let Some(p) = self.partitions.remove(&topic.name, p.index) {
                        tracing::info!(shard = self.shard, topic = %topic.name, partition = p.index, "no longer leading this partition (files kept)");
                        p.close();
                    }
                }
            }
        }
        for p in &topic.partitions {
            self.open_partition(image, topic, p.partition).await;
        }
        self.rebalance_cache_budgets();
    }

    fn reconfigure_topic(&self, image: &MetadataImage, topic: &TopicMeta) {
        let (log, settings) = self.settings_for(image, topic);
        for p in self.partitions.of_topic(&topic.name) {
            p.apply_config(log.clone(), settings.clone());
        }
    }

    async fn delete_topic(&self, name: &str) {
        let mut doomed: Vec<(i32, std::path::PathBuf)> = Vec::new();
        for (index, p) in self.partitions.remove_topic(name) {
            p.close();
            // Whichever log dir the partition is in.
            doomed.push((index, p.dir()));
        }
        // This shard's replicas it does not serve now (another broker leads them, or
        // nobody): their files go too, so a deletion removes the data on every broker.
        let before = self.partitions.image();
        let me = self.config.node_id;
        for p in before.topic(name).map(|t| t.partitions.as_slice()).unwrap_or_default() {
            let here = match p.replica_on(me) {
                Some(r) => r.shard == self.shard,
                None => p.replicas.is_empty() && p.shard == self.shard,
            };
            if here && !doomed.iter().any(|(i, _)| *i == p.partition) && self.log_dirs.dir_index_of(name, p.partition).is_some() {
                doomed.push((p.partition, self.partition_dir(name, p.partition)));
            }
        }
        for (index, dir) in doomed {
            // Kafka renames a deleted partition's directory, then removes it in the
            // background; the rename frees the name for a topic created right after.
            let mut doomed = dir.clone().into_os_string();
            doomed.push(format!(".{}-delete", crate::runtime::now_ms()));
            let renamed = glommio::executor()
                .spawn_blocking({
                    let doomed = doomed.clone();
                    move || {
                        std::fs::rename(&dir, &doomed)?;
                        // The rename is durable before the files go: a crash during removal
                        // never brings the old partition back under its name.
                        match dir.parent() {
                            Some(parent) => crate::storage::dma::sync_dir_blocking(parent),
                            None => Ok(()),
                        }
                    }
                })
                .await;
            let res = match renamed {
                Ok(()) => {
                    // Only now: while the directory is there, a partition re-created under
                    // the name must go to the same log dir (two copies would stop a restart).
                    self.log_dirs.forget(name, index);
                    glommio::executor().spawn_blocking(move || std::fs::remove_dir_all(&doomed)).await
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.log_dirs.forget(name, index);
                    Ok(())
                }
                Err(e) => Err(e),
            };
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

