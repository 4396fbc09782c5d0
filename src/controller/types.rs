//! The raft type config of the metadata quorum, and the records it replicates.
//!
//! A `Command` carries every decision already made (topic id, shard of each partition, the
//! resulting config map), so applying it is deterministic on every node and on replay.
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cluster::image::{BrokerId, BrokerMeta, ConfigResource, PartitionMeta, ReplicaMeta, TopicMeta};
use crate::remote::segment_metadata::RemoteLogSegmentMetadata;
use crate::runtime::ShardId;
use crate::security::acl::AclBinding;
use crate::security::client_quotas::{QuotaEntity, QuotaKey, QuotaValue};
use crate::security::delegation_token::DelegationToken;
use crate::security::scram::{ScramCredential, ScramMechanism};

use super::alter_partition::AlterPartitionError;
use super::election::{ElectionResult, ElectionType, PartitionRef};
use super::reassignment::ReassignmentError;
use super::ControllerError;

openraft::declare_raft_types!(
    /// Type config of the controller quorum. Node ids are Kafka node ids (non-negative);
    /// each member's `ControllerNode` says where its controller listener is.
    pub ControllerTypes:
        D = Command,
        R = Response,
        NodeId = u64,
        Node = ControllerNode,
        AsyncRuntime = super::runtime::ControllerRuntime,
        // Standard raft leader ids: one leader per term, as KRaft has one active controller
        // per epoch (openraft's default "advanced" ids allow a leader per (term, node): the
        // seeded simulation saw two leaders in one term, seed 76).
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, u64>,
);

/// A member of the metadata quorum (voter or observer) as the raft membership records it.
/// Stored in the log and snapshots as JSON: the fields after `addr` default, so members
/// recorded before them (openraft's `BasicNode`, `{"addr": ...}`) read unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerNode {
    /// host:port of its controller listener; empty for a single node with no peers.
    pub addr: String,
    /// KIP-853's replica directory id: the id of the node's metadata log dir, new when the
    /// dir is (`directory_id.rs`), so a wiped and restarted node is told apart from the
    /// replica it replaces. Zero = not known (members recorded before directory ids).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub directory_id: [u8; 16],
    /// The node has the controller role, so it may be made a voter (AddRaftVoter); a
    /// broker-only observer may not. Voters recorded before the field: false, unused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub controller: bool,
}

fn is_zero(id: &[u8; 16]) -> bool {
    *id == [0; 16]
}

impl ControllerNode {
    pub fn at(addr: impl Into<String>) -> ControllerNode {
        ControllerNode { addr: addr.into(), ..Default::default() }
    }
}

impl fmt::Display for ControllerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.addr)
    }
}

pub type Raft = openraft::Raft<ControllerTypes, super::state_machine::StateMachine>;
pub type Entry = openraft::type_config::alias::EntryOf<ControllerTypes>;
pub type LogId = openraft::type_config::alias::LogIdOf<ControllerTypes>;
pub type Vote = openraft::type_config::alias::VoteOf<ControllerTypes>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<ControllerTypes>;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<ControllerTypes>;
/// A snapshot travels (and is stored) as the bytes of the snapshot file.
pub type SnapshotData = Vec<u8>;
pub type Snapshot = openraft::type_config::alias::SnapshotOf<ControllerTypes, SnapshotData>;

/// One replicated metadata record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Written once, by the first leader of a fresh cluster.
    InitCluster {
        cluster_id: String,
    },
    /// `replicas[i]` are partition i's replicas (the first leads). Records written before
    /// brokers existed have `shards[i]` (partition i's shard) and no replicas instead.
    CreateTopic {
        name: String,
        topic_id: [u8; 16],
        #[serde(default)]
        shards: Vec<ShardId>,
        #[serde(default)]
        replicas: Vec<Vec<ReplicaMeta>>,
        configs: BTreeMap<String, String>,
    },
    /// Appends partitions `current..current+new_shards.len()`; `topic_id` guards against the
    /// topic having been deleted and re-created since the proposal was built.
    /// Older records carry `new_shards` and no `new_replicas`, as `CreateTopic`.
    CreatePartitions {
        name: String,
        topic_id: [u8; 16],
        #[serde(default)]
        new_shards: Vec<ShardId>,
        #[serde(default)]
        new_replicas: Vec<Vec<ReplicaMeta>>,
    },
    DeleteTopic {
        name: String,
        topic_id: [u8; 16],
    },
    /// Replaces the topic's whole override map (already validated).
    SetTopicConfigs {
        name: String,
        topic_id: [u8; 16],
        configs: BTreeMap<String, String>,
    },
    AllocateProducerIds {
        count: i64,
    },
    /// Replaces the whole dynamic config map of a broker or group (already validated);
    /// an empty map removes the resource's entry.
    SetResourceConfigs {
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    },
    /// A broker (re-)registers: a new incarnation replaces the old one (a restart, which
    /// may have lost unsynced writes: handled as a fencing first) and the broker is
    /// unfenced. `unclean_default` (in the three liveness records): the proposing
    /// leader's static `unclean_leader_election_enable`, for topics and dynamic broker
    /// configs that do not set it (records before issue 12: false). `min_isr_default`
    /// (the same three): its static `min_insync_replicas`, kept in the image for the ELR
    /// rules (0 in records before KIP-966: the image keeps what it has).
    /// `clean_shutdown_of`: the incarnation whose clean shutdown the new process found
    /// recorded (Kafka's PreviousBrokerEpoch); a restart without it was unclean and, with
    /// ELR, leaves every eligible leader replica set.
    RegisterBroker {
        broker: BrokerMeta,
        #[serde(default)]
        unclean_default: bool,
        #[serde(default)]
        min_isr_default: i32,
        #[serde(default)]
        clean_shutdown_of: Option<[u8; 16]>,
    },
    /// The quorum leader saw no heartbeat from this incarnation for a session timeout.
    FenceBroker {
        broker: BrokerId,
        incarnation: [u8; 16],
        #[serde(default)]
        unclean_default: bool,
        #[serde(default)]
        min_isr_default: i32,
    },
    /// A fenced incarnation heartbeats again.
    UnfenceBroker {
        broker: BrokerId,
        incarnation: [u8; 16],
        #[serde(default)]
        unclean_default: bool,
        #[serde(default)]
        min_isr_default: i32,
    },
    /// UnregisterBroker: the broker is fenced (if it was not) and its registration
    /// removed; its replicas stay assigned (Kafka's UnregisterBrokerRecord).
    UnregisterBroker {
        broker: BrokerId,
        #[serde(default)]
        unclean_default: bool,
        #[serde(default)]
        min_isr_default: i32,
    },
    /// A partition leader changes the ISR (`alter_partition.rs`); checked again on apply.
    /// `new_isr_epochs[i]`: the broker epoch of `new_isr[i]` as the leader knew it (Kafka's
    /// NewIsrWithEpochs, KIP-903; -1 = unknown, not checked; records before it: empty).
    AlterPartition {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<BrokerId>,
        #[serde(default)]
        new_isr_epochs: Vec<i64>,
    },
    /// Elect leaders of these partitions (ElectLeaders, or the leader's automatic
    /// preferred-leader rebalance); each is checked again on apply (`election.rs`).
    ElectLeaders {
        election: ElectionType,
        partitions: Vec<PartitionRef>,
    },
    /// Start (or replace) a reassignment of one partition to `target` (each broker with
    /// its replica's shard), or cancel the ongoing one (`target` None); checked again on
    /// apply (`reassignment.rs`).
    AlterPartitionReassignments {
        topic_id: [u8; 16],
        partition: i32,
        target: Option<Vec<ReplicaMeta>>,
    },
    /// SCRAM credentials set and removed in one step (Kafka's UserScramCredentialRecord
    /// and RemoveUserScramCredentialRecord, written atomically): validated and derived
    /// before (the salted password never reaches the log); a removal of a credential that
    /// is gone by apply time removes nothing.
    AlterScramCredentials {
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, ScramMechanism)>,
    },
    /// ACLs added (Kafka's AccessControlEntryRecords), already checked; one already
    /// present changes nothing.
    CreateAcls {
        acls: Vec<AclBinding>,
    },
    /// ACLs removed (Kafka's RemoveAccessControlEntryRecords): the bindings the leader's
    /// filters matched; one already gone changes nothing.
    DeleteAcls {
        acls: Vec<AclBinding>,
    },
    /// Client quota values set and removed (Kafka's ClientQuotaRecords), validated
    /// before: per entity, each key's new value or None to remove it.
    AlterClientQuotas {
        entries: Vec<QuotaAlteration>,
    },
    /// A delegation token created, renewed or given a new expiry (Kafka's
    /// DelegationTokenRecord: the whole token, never its HMAC).
    PutDelegationToken {
        token: DelegationToken,
    },
    /// Delegation tokens removed (Kafka's RemoveDelegationTokenRecords): expired by their
    /// owner, or past their expiry (the leader's periodic check); one already gone changes
    /// nothing.
    RemoveDelegationTokens {
        token_ids: Vec<String>,
    },
    /// Finalized feature levels set (Kafka's FeatureLevelRecords, written together),
    /// checked before (`cluster/features.rs`); level 0 removes a feature.
    UpdateFeatures {
        levels: Vec<(String, i16)>,
    },
    /// A remote segment record (Kafka's RemoteLogSegmentMetadata(Update)Record, tiered
    /// storage): proposed by the partition's leader, fenced on apply by its leader epoch
    /// (a deposed leader adds nothing); its state moves as `RemoteSegmentState` allows.
    RemoteLogSegment {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        segment: RemoteLogSegmentMetadata,
        /// Applied only if the segment is in this state now (a deletion decided on an
        /// older view); None: any state the transition allows.
        #[serde(default)]
        expected: Option<crate::remote::segment_metadata::RemoteSegmentState>,
    },
    /// DeleteRecords on a tiered partition moved its log start offset into remote
    /// storage (its leader proposes it, fenced as `RemoteLogSegment`).
    RemoteLogStartOffset {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        offset: i64,
    },
}

/// The changes of one entity's quotas (`AlterClientQuotas`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(QuotaKey, Option<QuotaValue>)>,
}

/// One credential of `AlterScramCredentials`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: ScramMechanism,
    pub credential: ScramCredential,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::InitCluster { cluster_id } => write!(f, "InitCluster({cluster_id})"),
            Command::CreateTopic { name, shards, replicas, .. } => {
                write!(f, "CreateTopic({name}, {} partitions)", shards.len().max(replicas.len()))
            }
            Command::CreatePartitions { name, new_shards, new_replicas, .. } => {
                write!(f, "CreatePartitions({name}, +{})", new_shards.len().max(new_replicas.len()))
            }
            Command::RegisterBroker { broker, .. } => write!(f, "RegisterBroker({}, shards {})", broker.id, broker.shard_count),
            Command::FenceBroker { broker, .. } => write!(f, "FenceBroker({broker})"),
            Command::UnregisterBroker { broker, .. } => write!(f, "UnregisterBroker({broker})"),
            Command::UnfenceBroker { broker, .. } => write!(f, "UnfenceBroker({broker})"),
            Command::AlterPartition { partition, leader, leader_epoch, partition_epoch, new_isr, .. } => {
                write!(f, "AlterPartition(partition {partition}, leader {leader}, epochs {leader_epoch}/{partition_epoch}, isr {new_isr:?})")
            }
            Command::ElectLeaders { election, partitions } => write!(f, "ElectLeaders({election:?}, {} partitions)", partitions.len()),
            Command::AlterPartitionReassignments { partition, target, .. } => match target {
                Some(t) => write!(f, "AlterPartitionReassignments(partition {partition}, target {:?})", t.iter().map(|r| r.broker).collect::<Vec<_>>()),
                None => write!(f, "AlterPartitionReassignments(partition {partition}, cancel)"),
            },
            Command::DeleteTopic { name, .. } => write!(f, "DeleteTopic({name})"),
            Command::SetTopicConfigs { name, configs, .. } => {
                write!(f, "SetTopicConfigs({name}, {} keys)", configs.len())
            }
            Command::AllocateProducerIds { count } => write!(f, "AllocateProducerIds({count})"),
            Command::SetResourceConfigs { resource, configs } => {
                write!(f, "SetResourceConfigs({resource:?}, {} keys)", configs.len())
            }
            Command::CreateAcls { acls } => write!(f, "CreateAcls({})", acls.len()),
            Command::DeleteAcls { acls } => write!(f, "DeleteAcls({})", acls.len()),
            Command::AlterClientQuotas { entries } => write!(f, "AlterClientQuotas({} entities)", entries.len()),
            Command::PutDelegationToken { token } => write!(f, "PutDelegationToken({}, expiry {})", token.token_id, token.expiry_ms),
            Command::RemoveDelegationTokens { token_ids } => write!(f, "RemoveDelegationTokens({})", token_ids.len()),
            Command::UpdateFeatures { levels } => write!(f, "UpdateFeatures({levels:?})"),
            Command::RemoteLogStartOffset { partition, offset, .. } => write!(f, "RemoteLogStartOffset(partition {partition}, {offset})"),
            Command::RemoteLogSegment { partition, leader_epoch, segment, .. } => write!(
                f,
                "RemoteLogSegment(partition {partition}, epoch {leader_epoch}, [{}, {}] {:?})",
                segment.start_offset, segment.end_offset, segment.state
            ),
            Command::AlterScramCredentials { upsertions, deletions } => {
                write!(f, "AlterScramCredentials(+{}, -{})", upsertions.len(), deletions.len())
            }
        }
    }
}

/// What applying a command produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    Done,
    TopicCreated(TopicMeta),
    TopicDeleted {
        topic_id: [u8; 16],
    },
    ProducerIds {
        first: i64,
    },
    /// One result per partition of an `ElectLeaders` record, in its order.
    Elected(Vec<ElectionResult>),
    /// The partition as an `AlterPartition` left it.
    PartitionAltered(PartitionMeta),
}

/// A command the state machine refused when applying it (the image changed between
/// proposal and commit). Deterministic: every replica refuses it the same way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rejection {
    TopicAlreadyExists(String),
    UnknownTopic(String),
    InvalidRequest(String),
    /// A fencing or unfencing record for an incarnation that has since re-registered.
    StaleIncarnation(BrokerId),
    /// An AlterPartition the image refuses (stale epochs, ineligible replicas, ...).
    AlterPartition(AlterPartitionError),
    /// A reassignment the image refuses (the topic went, a broker unregistered, ...).
    Reassignment(ReassignmentError),
}

impl From<Rejection> for ControllerError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::TopicAlreadyExists(n) => ControllerError::TopicAlreadyExists(n),
            Rejection::UnknownTopic(n) => ControllerError::UnknownTopic(n),
            Rejection::InvalidRequest(m) => ControllerError::InvalidRequest(m),
            Rejection::StaleIncarnation(b) => ControllerError::InvalidRequest(format!("broker {b} has re-registered since")),
            Rejection::AlterPartition(e) => ControllerError::AlterPartition(e),
            Rejection::Reassignment(e) => ControllerError::Reassignment(e),
        }
    }
}

/// The state machine's answer to one entry (blank and membership entries get `Done`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response(pub Result<Applied, Rejection>);
