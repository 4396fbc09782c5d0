//! What the group coordinator needs from the shard hosting it, and nothing more: its shard
//! id, the group settings, the shard's partitions (for its `__consumer_offsets`
//! partitions and the metadata image) and the coordinator state itself. The broker's
//! shard builds one at start (server/shard); the coordinator never sees the server.
use std::rc::Rc;

use super::consumer::migration::{Migration, MigrationPolicy};
use super::coordinator::Coordinator;
use super::share::state_persister::StatePersister;

use crate::cluster::shard_partitions::{ShardImage, ShardPartitions};
use crate::partition::Partition;
use crate::runtime::ShardId;

/// The broker settings groups use (Kafka's group.* and offsets.* keys).
#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_max_size: usize,
    /// group.consumer.migration.policy (validated at start).
    pub group_consumer_migration_policy: MigrationPolicy,
    pub max_groups_per_shard: usize,
    pub group_consumer_session_timeout_ms: u64,
    pub group_consumer_heartbeat_interval_ms: i32,
    pub group_streams_session_timeout_ms: i32,
    pub group_streams_heartbeat_interval_ms: i32,
    pub group_streams_num_standby_replicas: i32,
    /// group.streams.rack.aware.assignment.tags (validated at start).
    pub group_streams_rack_aware_assignment_tags: Vec<String>,
    pub group_streams_initial_rebalance_delay_ms: i32,
    pub offset_metadata_max_bytes: usize,
    pub offsets_retention_minutes: u64,
    pub offsets_retention_check_interval_ms: u64,
}

/// The coordinator of one shard with its view of that shard (shard-owned).
pub struct CoordinatorContext {
    pub shard: ShardId,
    pub config: GroupConfig,
    pub partitions: Rc<ShardPartitions>,
    /// The groups of this shard's offsets partitions.
    pub groups: Coordinator,
    /// How share groups initialize their share-partitions' state in the share
    /// coordinator (InitializeShareGroupState) before they assign them.
    pub share_persister: StatePersister,
}

impl CoordinatorContext {
    pub fn new(config: GroupConfig, partitions: Rc<ShardPartitions>, share_persister: StatePersister) -> CoordinatorContext {
        CoordinatorContext { shard: partitions.shard(), config, partitions, groups: Coordinator::default(), share_persister }
    }

    pub fn image(&self) -> ShardImage {
        self.partitions.image()
    }

    /// This shard's image, first caught up with what the controller committed when it
    /// lacks one of `topics`: a client may commit offsets for a topic it just created
    /// through another shard (or broker), before this shard applied it.
    pub async fn image_with_topics<'a>(&self, mut topics: impl Iterator<Item = &'a str>) -> ShardImage {
        let image = self.partitions.image();
        if topics.any(|t| image.topic(t).is_none()) {
            self.partitions.catch_up_with_controller().await;
            return self.partitions.image();
        }
        image
    }

    /// Session timeout (ms) and heartbeat interval (ms) of KIP-848 group `group_id`: its
    /// group configs (consumer.session.timeout.ms, consumer.heartbeat.interval.ms) if set,
    /// else the broker's group.consumer.* defaults.
    pub fn consumer_timeouts(&self, image: &crate::cluster::image::MetadataImage, group_id: &str) -> (u64, i32) {
        crate::cluster::config_defs::group_consumer_timeouts(
            image,
            group_id,
            self.config.group_consumer_session_timeout_ms,
            self.config.group_consumer_heartbeat_interval_ms,
        )
    }

    /// What the classic ↔ consumer conversions of a group may do.
    pub fn migration(&self) -> Migration {
        Migration { policy: self.config.group_consumer_migration_policy, max_size: self.config.group_max_size }
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.partitions.get(topic, partition)
    }

    pub fn local_partitions(&self) -> Vec<Rc<Partition>> {
        self.partitions.all()
    }
}
