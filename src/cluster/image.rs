//! The metadata image: topics, partitions, their owning shard and leader epoch, topic
//! configs, dynamic broker and group configs. Built by the controller from committed records; shards get an `Arc` of it
//! through their update channel and never mutate it.
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::runtime::ShardId;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub partition: i32,
    /// The shard that owns this partition's log. Decided by the controller, recorded in
    /// metadata, never recomputed.
    pub shard: ShardId,
    /// Bumped on every leadership change; stamped into stored batches
    /// (partitionLeaderEpoch) so replication can truncate by epoch later.
    pub leader_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub topic_id: [u8; 16],
    pub partitions: Vec<PartitionMeta>,
    /// Only the keys set on the topic (dynamic topic configs); defaults come from the
    /// broker config, see `topic_config::TopicConfig::resolve`.
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    /// The partition with index `partition`, if the topic has it.
    pub fn partition(&self, partition: i32) -> Option<&PartitionMeta> {
        // Partitions are kept in index order, so the index is the position; the scan is a
        // fallback that never runs while that holds.
        let at = usize::try_from(partition).ok().and_then(|i| self.partitions.get(i));
        at.filter(|p| p.partition == partition).or_else(|| self.partitions.iter().find(|p| p.partition == partition))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    pub cluster_id: String,
    /// Offset of the last metadata record applied (raft log index); 0 when empty.
    pub applied_index: u64,
    pub topics: BTreeMap<String, TopicMeta>,
    /// First producer id not yet handed out.
    pub next_producer_id: i64,
    /// Dynamic configs of non-topic resources (Kafka's ConfigRecords for BROKER and GROUP
    /// resources): only the keys set, already validated (`config_defs.rs`). A resource
    /// with no keys set has no entry.
    #[serde(default)]
    pub resource_configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
}

/// A non-topic resource that can carry dynamic configs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConfigResource {
    /// A broker by id; the empty name is the cluster-wide default of every broker
    /// (Kafka's `--entity-default`).
    Broker(String),
    /// A consumer group by id (KIP-848 group configs).
    Group(String),
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<&TopicMeta> {
        self.topics.values().find(|t| &t.topic_id == id)
    }

    /// The dynamic configs set on `resource` (empty if none).
    pub fn configs_of(&self, resource: &ConfigResource) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.resource_configs.get(resource).unwrap_or(&EMPTY)
    }
}

/// What changed in one committed metadata record, so a shard can act on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataDelta {
    TopicCreated { name: String },
    /// Partitions `first_new..` were added to an existing topic.
    PartitionsCreated { name: String, first_new: i32 },
    TopicDeleted { name: String, topic_id: [u8; 16] },
    TopicConfigChanged { name: String },
    /// Dynamic broker configs changed (this broker's or the cluster-wide default): topic
    /// defaults may differ, so every partition is reconfigured.
    BrokerConfigChanged,
    /// A group's dynamic configs changed: nothing to reconfigure (the coordinator reads
    /// them from the image), but the shards must get the new image.
    GroupConfigChanged { group: String },
}

/// Sent to every shard after each committed change (and once at start with no deltas,
/// carrying the image recovered from disk).
#[derive(Clone, Debug)]
pub struct MetadataUpdate {
    pub image: Arc<MetadataImage>,
    pub deltas: Vec<MetadataDelta>,
}
