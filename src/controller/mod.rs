//! The metadata controller: the KRaft equivalent.
//!
//! It owns topic/partition metadata as an openraft replicated state machine. It runs on its
//! own OS thread (pinned when a core is given) with a tokio current-thread runtime; shards
//! and request handlers talk to it through a [`ControllerHandle`] (async_channel +
//! oneshot, so callers need no tokio context) and learn about committed changes from one
//! bounded `MetadataUpdate` channel per shard (`shard_updates.rs`).
//!
//! Files, one idea each:
//! - `types.rs`         raft type config, the replicated `Command` and its `Response`
//! - `frame.rs`         on-disk record framing: magic, version, length, CRC-32C
//! - `log_store.rs`     raft log + vote, append-only file under `<data_dir>/controller/`
//! - `snapshot.rs`      state-machine snapshot file (rkyv image, CRC-checked)
//! - `state_machine.rs` applies commands to the image, produces deltas, publishes updates
//! - `shard_updates.rs` the channel to each shard: one update waits, newer ones merge into it
//! - `apply.rs`         the pure, deterministic command → image transition
//! - `propose.rs`       validates client requests against the image and builds commands
//! - `placement.rs`     partition → shard balancing
//! - `election.rs`      ElectLeaders (preferred / unclean) and the automatic preferred-leader rebalance
//! - `clean_shutdown.rs` the broker's clean-shutdown record (Kafka's PreviousBrokerEpoch)
//! - `eligible_leaders.rs` KIP-966 eligible leader replicas: who may lead when the ISR is empty
//! - `leadership.rs`    leaders and ISRs as brokers are fenced, come back and restart;
//!   `unclean.leader.election.enable`
//! - `alter_partition.rs` AlterPartition: a leader's ISR change, checked as Kafka does
//! - `reassignment.rs`  AlterPartitionReassignments: add the target replicas, catch up, drop the old
//! - `rpc.rs`           controller-to-controller wire format (raft RPCs, forwarded requests)
//! - `quorum_info.rs`   the quorum as DescribeQuorum reports it (leader, epoch, progress)
//! - `network.rs`       the client side: openraft's `RaftNetworkV2` over TCP
//! - `rpc_server.rs`    the receiving side on the controller listener
//! - `rpc_tls.rs`       the controller listener over mutual TLS: handshake, who may act for the cluster
//! - `handle.rs`        `ControllerHandle`, the request channel
//! - `server.rs`        the controller thread: runtime, raft start-up, request loop, forwarding
//! - `quorum_start.rs`  start-up checks: a new quorum's membership, a stale data dir, placement
//! - `user_op_limit.rs` Kafka's bound on the records one admin request writes (10,000)
//! - `scale.rs`         measurement seam for benches/metadata_scale.rs (not on any path)
//!
//! - `observer.rs`      broker-only nodes as raft learners: joining, and adding them
//!
//! Roles (`process_roles`): the controllers listed in `controller_quorum_voters` form one
//! openraft quorum over TCP; any node accepts controller requests and forwards them to the
//! leader. A combined node runs both a voter and a broker. A controller-only node runs a
//! voter and no broker (`ControllerConfig::broker` false: no shards, never registered). A
//! broker-only node runs this same controller thread as an openraft LEARNER: it asks the
//! quorum to add it, then receives the replicated log and snapshots like any replica,
//! applies them through the same state machine and publishes to its shards through the
//! same channels; it never votes and forwards every request to the leader (why a learner
//! rather than a delta fetcher: see `observer.rs`).
//!
//! Never imports `server::`, `group::`, `partition::` or `protocol::`: shards learn what
//! the controller decided only from `MetadataUpdate`s.
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cluster::topic_config::TopicConfigDefaults;
use crate::runtime::ShardId;

mod alter_partition;
mod apply;
mod clean_shutdown;
mod directory_id;
mod election;
mod eligible_leaders;
mod files;
mod frame;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_surface;
mod handle;
mod heartbeat_sender;
mod leadership;
mod liveness;
mod log_store;
mod network;
mod observer;
mod placement;
mod propose;
mod quorum_info;
mod quorum_start;
mod reassignment;
mod rpc;
mod rpc_server;
pub mod rpc_tls;
mod runtime;
pub mod scale;
mod server;
mod shard_updates;
mod snapshot;
mod state_machine;
mod types;
mod user_op_limit;
mod voters;

pub use alter_partition::AlterPartitionError;
/// The deterministic metadata transition and its commands, for the replication
/// simulation (`replication/simulation.rs`), which runs the controller as one authority
/// applying commands in order.
#[cfg(test)]
pub(crate) mod sim_api {
    pub(crate) use super::apply::apply;
    pub(crate) use super::types::{Applied, Command, Rejection};
}
pub use clean_shutdown::record as record_clean_shutdown;
pub use election::{ElectionError, ElectionResult, ElectionType, TopicElection};
pub use handle::ControllerHandle;
pub use propose::validate_topic_name;
pub use quorum_info::{LocalQuorumStatus, QuorumInfo, ReplicaProgress};
pub use reassignment::ReassignmentError;
pub use shard_updates::ShardUpdates;
pub use types::{QuotaAlteration, ScramUpsertion};
pub use user_op_limit::{over_limit, topic_creation_records, EXCESSIVE_BATCH};

/// Largest partition count one topic may have (every structure has a limit).
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;
/// Largest producer-id block one AllocateProducerIds may hand out.
pub const MAX_PRODUCER_ID_BLOCK: i64 = 1_000_000;

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The broker's data dir; the controller keeps its files in `<data_dir>/controller/`.
    pub data_dir: PathBuf,
    /// Kafka node id (>= 0); also the raft node id.
    pub node_id: i32,
    /// Number of shards partitions are placed on (>= 1).
    pub shard_count: u16,
    /// Core to pin the controller thread to; None = not pinned.
    pub core: Option<usize>,
    /// Partitions for CreateTopics with num_partitions = -1 (Kafka `num.partitions`).
    pub default_num_partitions: i32,
    /// Replicas for CreateTopics with replication_factor = -1 (Kafka `default.replication.factor`).
    pub default_replication_factor: i16,
    /// Broker defaults topic configs are validated against.
    pub topic_defaults: TopicConfigDefaults,
    /// Take a state-machine snapshot (and purge the log before it) every this many entries.
    pub snapshot_every_entries: u64,
    /// Take one at a clean stop too, so the next start replays nothing (`server.rs`).
    pub snapshot_at_shutdown: bool,
    /// host:port to serve controller RPCs on; None = single node, no peers. A broker-only
    /// node is added as an observer at this address, so it must be reachable from the
    /// controllers.
    pub listener: Option<String>,
    /// The address an observer announces to the leader (`advertised_controller_listener`);
    /// None = `listener`.
    pub advertised_listener: Option<String>,
    /// Raft id → controller listener of every voter (controller.quorum.voters). Empty =
    /// a single-voter quorum of this node alone (the behaviour before issue 11). A node
    /// not in a non-empty `voters` is an observer (a raft learner): a broker-only node.
    pub voters: BTreeMap<u64, String>,
    /// controller.quorum.bootstrap.servers (KIP-853): host:port of controllers a node
    /// outside `voters` asks to join the quorum (with the voters' own addresses).
    pub bootstrap_servers: Vec<String>,
    /// This node has the controller role: it may be made a voter (AddRaftVoter).
    pub controller_role: bool,
    /// This node runs a broker: it registers and heartbeats, and has `shard_count` shards
    /// to publish to. False on a controller-only node (no shards, never registered, so
    /// placement never puts partitions on it).
    pub broker: bool,
    /// This node's broker as it registers: client listener as advertised, and rack.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Every client listener's advertised endpoint (registered with the broker).
    pub listeners: Vec<crate::security::listeners::ListenerEndpoint>,
    pub rack: Option<String>,
    /// `broker_session_timeout_ms`: the leader fences a broker silent this long.
    pub session_timeout: std::time::Duration,
    /// `auto_leader_rebalance_enable`: the quorum leader moves leadership back to
    /// preferred replicas every `leader_imbalance_check_interval` when a broker's share of
    /// partitions it should lead but does not is above `leader_imbalance_per_broker_percentage`.
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval: std::time::Duration,
    pub leader_imbalance_per_broker_percentage: u32,
    /// The controller listener's mutual TLS (None: PLAINTEXT), for both the listener and
    /// this node's connections to its peers' controller listeners.
    pub rpc_tls: Option<std::sync::Arc<rpc_tls::RpcTls>>,
    /// delegation.token.expiry.check.interval.ms: how often the leader removes expired tokens.
    pub delegation_token_expiry_check_interval: std::time::Duration,
    /// `unstable.feature.versions.enable`: UpdateFeatures may finalize levels still being built.
    pub unstable_feature_versions: bool,
    /// `remote.log.storage.system.enable`: CreateTopics / AlterConfigs may make a topic tiered.
    pub remote_storage_system_enabled: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            data_dir: PathBuf::from("data"),
            node_id: 1,
            shard_count: 1,
            core: None,
            default_num_partitions: 1,
            default_replication_factor: 1,
            topic_defaults: TopicConfigDefaults::default(),
            snapshot_every_entries: 1024,
            snapshot_at_shutdown: true,
            listener: None,
            advertised_listener: None,
            voters: BTreeMap::new(),
            bootstrap_servers: Vec::new(),
            controller_role: true,
            broker: true,
            advertised_host: "localhost".into(),
            advertised_port: 9092,
            listeners: Vec::new(),
            rack: None,
            session_timeout: std::time::Duration::from_millis(3000),
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval: std::time::Duration::from_secs(300),
            leader_imbalance_per_broker_percentage: 10,
            rpc_tls: None,
            delegation_token_expiry_check_interval: std::time::Duration::from_secs(3600),
            unstable_feature_versions: false,
            remote_storage_system_enabled: false,
        }
    }
}

/// One IncrementalAlterConfigs operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigOp {
    Set(String, String),
    Delete(String),
    /// Add items to a list config (only `cleanup.policy`).
    Append(String, String),
    /// Remove items from a list config (only `cleanup.policy`).
    Subtract(String, String),
}

impl ConfigOp {
    /// The config key the operation changes.
    pub fn key(&self) -> &str {
        match self {
            ConfigOp::Set(k, _) | ConfigOp::Delete(k) | ConfigOp::Append(k, _) | ConfigOp::Subtract(k, _) => k,
        }
    }
}

/// Errors of the controller. Kafka error-code mapping lives in `protocol/`; the variant
/// names follow Kafka's exception names.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerError {
    #[error("topic '{0}' already exists")]
    TopicAlreadyExists(String),
    #[error("unknown topic '{0}'")]
    UnknownTopic(String),
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// A malformed request that fits no narrower variant (e.g. a producer-id block size).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// This node is not the active controller (or the controller stopped); retry elsewhere.
    #[error("not the controller: {0}")]
    NotController(String),
    /// The controller's files could not be read or written; see the message for the file.
    #[error("controller storage: {0}")]
    Storage(String),
    /// The controller config is unusable (e.g. fewer shards than the metadata places on).
    #[error("controller config: {0}")]
    Config(String),
    /// An AlterPartition refused (the partition leader answers per partition).
    #[error("{0}")]
    AlterPartition(AlterPartitionError),
    /// A partition's reassignment refused (answered per partition).
    #[error("{0}")]
    Reassignment(ReassignmentError),
    /// UpdateFeatures refused (`cluster/features.rs`: Kafka's words).
    #[error("{0}")]
    InvalidUpdateVersion(String),
    /// A quorum membership change refused (KIP-853: `voters.rs`), with Kafka's error.
    #[error("{1}")]
    Membership(MembershipError, String),
    /// UnregisterBroker of an id with no registration.
    #[error("{0}")]
    BrokerIdNotRegistered(String),
}

/// Kafka's errors for AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipError {
    DuplicateVoter,
    VoterNotFound,
    /// kraft.version is 0 (a static quorum).
    UnsupportedVersion,
    /// Another change is not committed yet, or the new voter has not caught up.
    RequestTimedOut,
}

/// Starts the controller thread, recovers metadata from `<data_dir>/controller/`, and
/// returns a handle plus one update receiver per shard. Each receiver first gets the
/// recovered image (no deltas), then one update per committed change.
///
/// Blocks the calling thread until recovery is done (election + log replay, typically
/// under a second): call it before the shard executors start, not on one of them.
pub fn start(cfg: ControllerConfig) -> Result<(ControllerHandle, Vec<ShardUpdates>), ControllerError> {
    server::start(cfg)
}

/// Raft node id for a Kafka node id (which must not be negative).
fn raft_node_id(node_id: i32) -> Result<u64, ControllerError> {
    u64::try_from(node_id).map_err(|_| ControllerError::Config(format!("node_id must be >= 0, got {node_id}")))
}

fn check_shard_count(n: u16, broker: bool) -> Result<ShardId, ControllerError> {
    if n == 0 && broker {
        return Err(ControllerError::Config("shard_count must be at least 1".into()));
    }
    Ok(n)
}

#[cfg(test)]
mod isr_tests;
#[cfg(test)]
mod quorum_tests;
#[cfg(test)]
mod rebalance_tests;
#[cfg(test)]
mod simulation;
#[cfg(test)]
mod simulation_brokers;
#[cfg(test)]
mod simulation_isr;
#[cfg(test)]
mod tests;
