//! The partition lifecycle of one shard: it applies each metadata update — opening
//! (recovering) every replica the controller placed on this broker's shard, as leader or
//! follower; moving replicas between the two roles when leadership moves (a new leader
//! starts its epoch, a deposed one fails its waiting acks=all appends); taking ISR
//! changes; reconfiguring; deleting with their files — then publishes the image, so
//! operations routed by it find their partitions, and points the replica fetchers at the
//! current leaders. The batch-cache budget is split over the open logs.
use std::rc::Rc;

use futures::StreamExt;

use super::context::ShardContext;
use crate::cluster::image::{BrokerId, MetadataDelta, MetadataImage, MetadataUpdate, PartitionMeta, TopicMeta};
use crate::cluster::replica_role::{apply_role, replica_ids, role_on, RoleChange};
use crate::cluster::topic_config::{TimestampType, TopicConfig};
use crate::controller::ShardUpdates;
use crate::partition::{effective_flush, write_mode, Partition, PartitionSettings, Role, RoleState};
use crate::remote::object_keys::partition_prefix;
use crate::storage::LogConfig;

/// Replicas a shard opens at once (their file waits overlap; each holds a read buffer).
const OPEN_CONCURRENCY: usize = 64;
/// Opened replicas awaiting their taken markers' sync from which one `syncfs` replaces
/// their own syncs (`insert_opened`).
const SYNCFS_MIN_REPLICAS: usize = 64;

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
        // Kafka's UnifiedLog.localRetentionMs/Size: a tiered log that still uploads keeps
        // local.retention.* locally (and deletes only what is uploaded, `retention.rs`).
        let tiered = self.config.remote_log_storage_system_enable && tc.remote_storage_enable && !tc.is_compacted() && !tc.remote_log_copy_disable;
        let (retention_ms, retention_bytes) =
            if tiered { (tc.local_retention_ms(), tc.local_retention_bytes()) } else { (tc.retention_ms, tc.retention_bytes) };
        let log = LogConfig {
            segment_bytes: tc.segment_bytes,
            segment_ms: tc.segment_ms,
            retention_ms,
            retention_bytes,
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
            min_insync_replicas: tc.min_insync_replicas,
            max_producer_ids: self.config.max_producer_ids_per_partition,
            hold_high_watermark_below_min_isr: image.features.elr_enabled(),
            checkpoint_high_watermark_periodically: true,
            tiered,
        };
        (log, settings)
    }

    /// The shard's batch-cache budget split evenly over its open logs (led and
    /// followed), capped by the per-partition setting.
    fn cache_budget_per_partition(&self) -> usize {
        let count = self.partitions.open_count();
        (self.config.batch_cache_bytes_per_shard / count.max(1)).min(self.config.batch_cache_bytes_per_partition)
    }

    fn rebalance_cache_budgets(&self) {
        let budget = self.cache_budget_per_partition();
        for p in self.partitions.all().into_iter().chain(self.partitions.followers()) {
            p.set_cache_budget(budget);
        }
    }

    /// What this shard is for `meta` (`replica_role::role_on`).
    fn role_here(&self, meta: &PartitionMeta) -> Option<Role> {
        role_on(meta, self.config.node_id, self.shard)
    }

    /// The replica open here, led or followed.
    fn open_replica(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        self.partitions.get(topic, index).or_else(|| self.partitions.follower(topic, index))
    }

    /// Opens (recovering) this shard's replica of `meta` in the role the image gives it;
    /// the caller makes it reachable (`insert_opened`).
    async fn open_partition(&self, image: &MetadataImage, topic: &TopicMeta, meta: &PartitionMeta, role: Role) -> Option<(Rc<Partition>, Role)> {
        let index = meta.partition;
        let (log, settings) = self.settings_for(image, topic);
        let dir = self.partition_dir(&topic.name, index);
        let role_state = match role {
            Role::Leader => {
                RoleState::Leader { leader_epoch: meta.leader_epoch, partition_epoch: meta.partition_epoch, replicas: replica_ids(meta), isr: meta.isr.clone() }
            }
            Role::Follower { leader } => RoleState::Follower { leader_epoch: meta.leader_epoch, leader },
        };
        let opened = Partition::open_replica(&dir, topic.name.clone(), index, topic.topic_id, self.shard, self.config.node_id, role_state, log, settings).await;
        match opened {
            Ok(p) => Some((p, role)),
            Err(e) => {
                tracing::error!(shard = self.shard, topic = %topic.name, partition = index, error = %e, "cannot open partition");
                None
            }
        }
    }

    /// Makes a batch of opened replicas reachable, once the taking of their clean-shutdown
    /// markers is durable (`Log::marker_taken_unsynced`): one `syncfs` per log dir for a
    /// large batch (a restart: a sync per partition was most of a 100k-partition start),
    /// the markers' own syncs for a small one.
    async fn insert_opened(&self, opened: Vec<(Rc<Partition>, Role)>) {
        let waiting: Vec<&Rc<Partition>> = opened.iter().map(|(p, _)| p).filter(|p| p.marker_taken_unsynced()).collect();
        if waiting.len() >= SYNCFS_MIN_REPLICAS {
            let roots: std::collections::BTreeSet<std::path::PathBuf> = waiting.iter().filter_map(|p| p.dir().parent().map(|d| d.to_path_buf())).collect();
            let (mut synced, syncing) = (true, std::time::Instant::now());
            for root in &roots {
                if let Err(e) = crate::storage::dma::sync_filesystem(root).await {
                    tracing::warn!(shard = self.shard, dir = %root.display(), error = %e, "syncfs failed; syncing each replica's marker instead");
                    synced = false;
                }
            }
            if synced {
                waiting.iter().for_each(|p| p.mark_marker_taken_synced());
                tracing::info!(
                    shard = self.shard,
                    replicas = waiting.len(),
                    took_ms = syncing.elapsed().as_millis() as u64,
                    "taken clean-shutdown markers synced (syncfs)"
                );
            }
        }
        // The rest (a small batch, or after a failed syncfs) sync their own markers.
        let failed: std::collections::HashSet<*const Partition> = futures::stream::iter(opened.iter().map(|(p, _)| p).filter(|p| p.marker_taken_unsynced()))
            .map(|p| async move { p.sync_taken_marker().await.err().map(|e| (p, e)) })
            .buffer_unordered(OPEN_CONCURRENCY)
            .filter_map(|failed| async move { failed })
            .map(|(p, e)| {
                tracing::error!(shard = self.shard, topic = %p.topic, partition = p.index, error = %e, "cannot open partition: syncing its clean-shutdown marker failed");
                Rc::as_ptr(p)
            })
            .collect()
            .await;
        // The cache budgets are split again once the whole batch is in (`sync_topics`): once
        // per partition, that was quadratic in the partitions at start-up.
        for (p, role) in opened {
            if failed.contains(&Rc::as_ptr(&p)) {
                p.close();
                continue;
            }
            match role {
                Role::Leader => self.partitions.insert(p),
                Role::Follower { .. } => self.partitions.insert_follower(p),
            }
        }
    }

    /// Brings an open replica in line with `meta`: a new role, leader epoch or ISR.
    /// Invariant 7: a replica that stops leading fails its waiting acks=all appends
    /// (`become_follower`), so a deposed leader never acknowledges a write.
    fn sync_partition(&self, p: Rc<Partition>, meta: &PartitionMeta, role: Option<Role>) {
        let (topic, index) = (p.topic.clone(), p.index);
        match apply_role(&p, meta, role) {
            RoleChange::Removed => {
                // Reassigned away from this shard: stop (`sync_topics` deletes the files
                // when this broker holds no replica any more).
                self.partitions.remove(&topic, index);
                self.partitions.remove_follower(&topic, index);
                tracing::info!(shard = self.shard, topic, partition = index, "no longer a replica on this shard");
                p.close();
            }
            RoleChange::Kept => {}
            RoleChange::NowFollower => {
                self.partitions.remove(&topic, index);
                tracing::info!(shard = self.shard, topic, partition = index, leader = meta.leader, leader_epoch = meta.leader_epoch, "now a follower");
                self.partitions.insert_follower(p);
            }
            RoleChange::NowLeader => {
                self.partitions.remove_follower(&topic, index);
                tracing::info!(shard = self.shard, topic, partition = index, leader_epoch = meta.leader_epoch, isr = ?meta.isr, "now the leader");
                self.partitions.insert(p);
            }
        }
    }

    /// Opens, re-roles or updates every replica of `topics` this shard holds. The replicas
    /// to open are opened `OPEN_CONCURRENCY` at a time: each waits mostly on its files
    /// (reads, and the fsyncs of a new leader epoch's checkpoint), so a restarted broker
    /// with many partitions overlaps those waits instead of paying them one by one.
    async fn sync_topics<'a>(&self, image: &'a MetadataImage, topics: impl IntoIterator<Item = &'a TopicMeta>) {
        let mut to_open: Vec<(&TopicMeta, &PartitionMeta, Role)> = Vec::new();
        for topic in topics {
            for meta in &topic.partitions {
                let role = self.role_here(meta);
                match self.open_replica(&topic.name, meta.partition) {
                    Some(p) => {
                        let dir = p.dir();
                        self.sync_partition(p, meta, role);
                        // A reassignment removed this broker's replica: its files go, as
                        // Kafka's StopReplica(delete=true). (A broker that was down then
                        // removes them at start-up: `stray_partitions.rs`.)
                        if role.is_none() && !meta.replicas.is_empty() && meta.replica_on(self.config.node_id).is_none() {
                            tracing::info!(shard = self.shard, topic = %topic.name, partition = meta.partition, "reassigned to other brokers: deleting the replica's files");
                            self.remove_partition_dir(&topic.name, meta.partition, dir).await;
                        }
                    }
                    None => {
                        if let Some(role) = role {
                            to_open.push((topic, meta, role));
                        }
                    }
                }
            }
        }
        let room = self.config.max_partitions_per_shard.saturating_sub(self.partitions.open_count());
        for (topic, meta, _) in to_open.iter().skip(room) {
            tracing::error!(shard = self.shard, topic = %topic.name, partition = meta.partition,
                limit = self.config.max_partitions_per_shard, "partition limit per shard reached; not opening (raise max_partitions_per_shard)");
        }
        to_open.truncate(room);
        let opened: Vec<_> = futures::stream::iter(to_open)
            .map(|(topic, meta, role)| self.open_partition(image, topic, meta, role))
            .buffer_unordered(OPEN_CONCURRENCY)
            .filter_map(|opened| async move { opened })
            .collect()
            .await;
        self.insert_opened(opened).await;
        self.rebalance_cache_budgets();
    }

    /// A broker that re-registered (a new process, maybe without data it had) or was
    /// fenced since the image this shard applied: every partition this shard leads forgets
    /// that follower's position, so neither the high watermark nor an ISR expansion rests
    /// on what its previous process fetched (KIP-903's concern).
    fn forget_restarted_followers(&self, next: &MetadataImage) {
        let before = self.partitions.image();
        let changed: Vec<BrokerId> = next
            .brokers
            .values()
            .filter(|b| before.brokers.get(&b.id).is_some_and(|old| old.incarnation != b.incarnation || (b.fenced && !old.fenced)))
            .map(|b| b.id)
            .collect();
        if changed.is_empty() {
            return;
        }
        for p in self.partitions.all() {
            for &b in &changed {
                p.forget_follower(b);
            }
        }
    }

    /// Applies one metadata update: open, re-role, reconfigure or delete this shard's
    /// replicas, then publish the image, wake operations waiting for it, and point the
    /// replica fetchers at the current leaders.
    pub async fn apply_update(&self, update: MetadataUpdate) {
        let image = update.image.clone();
        if update.deltas.is_empty() {
            // Initial image (or a snapshot): every replica this shard holds.
            self.sync_topics(&image, image.topics.values()).await;
        }
        for delta in &update.deltas {
            match delta {
                MetadataDelta::TopicCreated { name } | MetadataDelta::PartitionsCreated { name, .. } | MetadataDelta::LeadersChanged { name } => {
                    if let Some(topic) = image.topic(name) {
                        self.sync_topics(&image, [topic]).await;
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
                    // A listener's key store may have changed (`dynamic_tls.rs`).
                    for info in self.listener_infos.borrow().iter() {
                        info.update_tls(&self.config, &image, self.shard);
                    }
                }
                // The coordinator reads group configs from the published image.
                MetadataDelta::GroupConfigChanged { .. } => {}
                // Handlers read the broker list from the published image; fetchers look
                // up their leader's address when they (re)connect.
                MetadataDelta::BrokersChanged => {}
                // SASL/SCRAM reads credentials from the published image.
                MetadataDelta::SecurityChanged => {}
                // The remote log tasks and remote reads look remote segments up in the image.
                MetadataDelta::RemoteLogChanged { .. } => {}
                // ApiVersions and the group coordinator read features from the image; the
                // partitions hold their high watermark by eligible.leader.replicas.version.
                MetadataDelta::FeaturesChanged => {
                    for topic in image.topics.values() {
                        self.reconfigure_topic(&image, topic);
                    }
                }
            }
        }
        self.forget_restarted_followers(&image);
        self.partitions.publish(image);
        self.fetchers.reconcile();
    }

    fn reconfigure_topic(&self, image: &MetadataImage, topic: &TopicMeta) {
        let (log, settings) = self.settings_for(image, topic);
        let followed = self.partitions.followers().into_iter().filter(|p| p.topic == topic.name);
        for p in self.partitions.of_topic(&topic.name).into_iter().chain(followed) {
            p.apply_config(log.clone(), settings.clone());
        }
    }

    async fn delete_topic(&self, name: &str) {
        // Its metrics series go with it (every shard applies the deletion).
        crate::metrics::with(|m| m.forget_topic(name));
        let mut doomed: Vec<(i32, std::path::PathBuf)> = Vec::new();
        let followed = self.partitions.remove_followers_of_topic(name);
        let led = self.partitions.remove_topic(name);
        // Tiered storage: the partition's remote objects go (Kafka's deleteRemoteLog when a
        // topic is deleted), in the background. Every replica deletes them, not only the
        // leader: a topic deleted while its leader is down leaves no orphans (deleting an
        // object twice is no error). Only partitions with remote segment records (every
        // object has one: CopySegmentStarted is recorded before an upload begins), as the
        // image before the deletion shows them.
        if let Some(store) = &self.remote_store {
            let before = self.partitions.image();
            for (index, p) in led.iter().chain(&followed).filter(|(i, p)| before.remote_log.partition(&p.topic_id, *i).is_some()) {
                let (store, folder) = (store.clone(), partition_prefix(&store.settings.key_prefix, name, &p.topic_id, *index));
                let (topic, partition) = (name.to_string(), *index);
                glommio::spawn_local(async move {
                    match store.delete_prefix(folder).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(topic, partition, objects = n, "deleted topic: remote objects deleted"),
                        Err(e) => tracing::warn!(topic, partition, error = %e, "deleted topic: its remote objects stay"),
                    }
                })
                .detach();
            }
        }
        for (index, p) in led.into_iter().chain(followed) {
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
            self.remove_partition_dir(name, index, dir).await;
        }
        self.rebalance_cache_budgets();
    }

    /// Removes a closed partition's directory `dir`: durably renamed first, then deleted.
    async fn remove_partition_dir(&self, name: &str, index: i32, dir: std::path::PathBuf) {
        {
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
    }
}

/// Applies metadata updates as they arrive (several merged into one when this shard
/// fell behind: counted).
pub async fn follow_metadata(ctx: Rc<ShardContext>, updates: ShardUpdates) {
    while let Some((update, merged)) = updates.recv().await {
        if merged > 0 {
            crate::metrics::with(|m| m.metadata_updates_merged += merged);
        }
        ctx.apply_update(update).await;
    }
}
