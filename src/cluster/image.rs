//! The metadata image: registered brokers, topics, partitions (replicas, leader, ISR,
//! epochs, and the shard owning each replica on its broker), topic configs, dynamic
//! broker and group configs. Built by the controller from committed records; shards get an `Arc` of it
//! through their update channel and never mutate it.
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::runtime::ShardId;

/// A Kafka broker (node) id.
pub type BrokerId = i32;
/// `PartitionMeta::leader` of a partition no live broker leads (offline).
pub const NO_LEADER: BrokerId = -1;

/// One replica of a partition: the broker holding it and the shard owning its log there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaMeta {
    pub broker: BrokerId,
    pub shard: ShardId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub partition: i32,
    /// The shard of the leader's replica on the leader's broker (of the first replica
    /// when there is no leader): what a broker routes a request by, one field read.
    /// Kept equal to the replica's shard by the controller's apply (`leadership.rs`).
    pub shard: ShardId,
    /// Replicas in preference order (the first is the preferred leader). Empty only in a
    /// data dir written before brokers existed, until the first broker registers and
    /// adopts them (`leadership::adopt_unassigned`).
    #[serde(default)]
    pub replicas: Vec<ReplicaMeta>,
    /// The leading broker, or `NO_LEADER`.
    #[serde(default = "no_leader")]
    pub leader: BrokerId,
    /// In-sync replicas (broker ids, in replica order): every replica at creation; the
    /// leader's AlterPartition shrinks and expands it, fencing removes a broker except
    /// the last member (Kafka keeps the last ISR member). Holds the leader when there is one.
    #[serde(default)]
    pub isr: Vec<BrokerId>,
    /// Bumped on every leadership change; stamped into stored batches
    /// (partitionLeaderEpoch) so replication can truncate by epoch later.
    pub leader_epoch: i32,
    /// Bumped on every change of the partition (leader, ISR, replicas), as Kafka's.
    #[serde(default)]
    pub partition_epoch: i32,
    /// An ongoing reassignment (`controller/reassignment.rs`): the brokers being added
    /// (in the target, not yet in the ISR when it started) and removed (not in the
    /// target). While either is non-empty, `replicas` is the target followed by the
    /// removing ones (Kafka's order); both empty when none is ongoing.
    #[serde(default)]
    pub adding_replicas: Vec<BrokerId>,
    #[serde(default)]
    pub removing_replicas: Vec<BrokerId>,
    /// KIP-966 eligible leader replicas: replicas that left the ISR while it was below
    /// min.insync.replicas, so they hold every record up to the high watermark (which a
    /// leader does not move while its ISR is that small); one leads when the ISR is empty.
    /// Empty whenever the ISR is at or above min.insync.replicas, or ELR is off
    /// (`controller/eligible_leaders.rs`).
    #[serde(default)]
    pub elr: Vec<BrokerId>,
    /// The last known leader (Kafka's LastKnownElr as Kafka 4.4 uses it): set when the ISR
    /// becomes empty, elected when the ISR and the ELR are both empty and it returns;
    /// cleared once the partition has a leader.
    #[serde(default)]
    pub last_known_elr: Vec<BrokerId>,
}

fn no_leader() -> BrokerId {
    NO_LEADER
}

impl PartitionMeta {
    /// A partition with no replicas yet (pre-cluster data, or a test): led by nobody.
    pub fn unassigned(partition: i32, shard: ShardId) -> PartitionMeta {
        PartitionMeta {
            partition,
            shard,
            replicas: Vec::new(),
            leader: NO_LEADER,
            isr: Vec::new(),
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    /// A new partition on `replicas` (non-empty): the first leads, ISR = every replica
    /// (their logs are all empty), as Kafka's.
    pub fn new_on(partition: i32, replicas: Vec<ReplicaMeta>) -> PartitionMeta {
        let first = replicas.first().copied();
        PartitionMeta {
            partition,
            shard: first.map_or(0, |r| r.shard),
            isr: replicas.iter().map(|r| r.broker).collect(),
            replicas,
            leader: first.map_or(NO_LEADER, |r| r.broker),
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    /// Whether a reassignment is ongoing (Kafka's `isReassigning`).
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    pub fn replica_on(&self, broker: BrokerId) -> Option<&ReplicaMeta> {
        self.replicas.iter().find(|r| r.broker == broker)
    }
}

/// A broker process's epoch as followers send it in Fetch (`replica_state.replica_epoch`,
/// KIP-903): derived from its incarnation id, so it changes with every process start, and
/// a leader counts a follower's position only from the incarnation the metadata names.
pub fn broker_epoch(incarnation: &[u8; 16]) -> i64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&incarnation[..8]);
    i64::from_be_bytes(first) & i64::MAX
}

/// A registered broker (Kafka's BrokerRegistrationRecord plus its fencing state). When it
/// last heartbeated is not here: liveness is the quorum leader's in-memory view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerMeta {
    pub id: BrokerId,
    /// New on every process start: a re-registration with another incarnation is a restart.
    pub incarnation: [u8; 16],
    /// The client listener as advertised to clients.
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    pub shard_count: u16,
    /// A fenced broker leads nothing and is not listed to clients.
    pub fenced: bool,
    /// Every client listener's advertised endpoint (Kafka's BrokerRegistrationRecord
    /// endpoints): a client connected to listener X is told each broker's X endpoint.
    /// Empty in registrations from before named listeners: `host:port` is then the one
    /// PLAINTEXT listener.
    #[serde(default)]
    pub listeners: Vec<crate::security::listeners::ListenerEndpoint>,
}

impl BrokerMeta {
    /// The broker's endpoint on listener `name`, if it has that listener.
    pub fn endpoint(&self, name: &str) -> Option<(&str, i32)> {
        if self.listeners.is_empty() {
            return (name == "PLAINTEXT").then_some((self.host.as_str(), self.port));
        }
        self.listeners.iter().find(|l| l.name == name).map(|l| (l.host.as_str(), l.port))
    }
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
    /// Every broker that ever registered, fenced or not.
    #[serde(default)]
    pub brokers: BTreeMap<BrokerId, BrokerMeta>,
    /// SCRAM credentials (and the security records to come).
    #[serde(default)]
    pub security: super::security_image::SecurityImage,
    /// Finalized feature levels (Kafka's FeatureLevelRecords); UpdateFeatures changes them.
    #[serde(default)]
    pub features: super::features::FinalizedFeatures,
    /// The static `min.insync.replicas` of the controller that proposed the latest broker
    /// registration, fencing or unfencing (the records carry it, as `unclean_default`):
    /// the controller's default for topics and clusters that do not set the key, so every
    /// replica of the log computes the same ELRs. 0 (images from before) counts as 1.
    #[serde(default)]
    pub min_insync_replicas_default: i32,
    /// Each tiered partition's remote segments (`remote_log_image.rs`); saved in its own
    /// snapshot section, not through serde.
    #[serde(skip)]
    pub remote_log: super::remote_log_image::RemoteLogImage,
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

    /// Registered brokers that are not fenced, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerMeta> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    pub fn is_live(&self, broker: BrokerId) -> bool {
        self.brokers.get(&broker).is_some_and(|b| !b.fenced)
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
    TopicCreated {
        name: String,
    },
    /// Partitions `first_new..` were added to an existing topic.
    PartitionsCreated {
        name: String,
        first_new: i32,
    },
    TopicDeleted {
        name: String,
        topic_id: [u8; 16],
    },
    TopicConfigChanged {
        name: String,
    },
    /// Dynamic broker configs changed (this broker's or the cluster-wide default): topic
    /// defaults may differ, so every partition is reconfigured.
    BrokerConfigChanged,
    /// A group's dynamic configs changed: nothing to reconfigure (the coordinator reads
    /// them from the image), but the shards must get the new image.
    GroupConfigChanged {
        group: String,
    },
    /// A broker registered, was fenced or unfenced: the shards need the new broker list.
    BrokersChanged,
    /// SCRAM credentials changed: nothing to reconfigure (authentication reads them from
    /// the published image), but the shards must get the new image.
    SecurityChanged,
    /// Finalized feature levels changed: the shards answer ApiVersions from the new image.
    FeaturesChanged,
    /// Leaders or ISRs of some partitions of this topic changed (a fencing, an election,
    /// an AlterPartition): each shard re-reads every partition of the topic from the image,
    /// opens the ones it now leads and stops serving the ones it no longer leads (keeping
    /// their files), and gives its leaders their new ISR and partition epoch.
    LeadersChanged {
        name: String,
    },
    /// The remote log of a partition of this topic changed (a segment uploaded or
    /// deleted): nothing to reconfigure, but replicas read the remote log from the image.
    RemoteLogChanged {
        name: String,
    },
}

/// Sent to every shard after each committed change (and once at start with no deltas,
/// carrying the image recovered from disk).
#[derive(Clone, Debug)]
pub struct MetadataUpdate {
    pub image: Arc<MetadataImage>,
    pub deltas: Vec<MetadataDelta>,
}
