//! `ControllerHandle`: how shards and request handlers talk to the controller thread.
//!
//! Requests go over an async_channel and answers come back on a futures oneshot, so the
//! futures run on any executor (glommio shards included) without a tokio context.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use futures::channel::oneshot;

use crate::cluster::image::{BrokerId, ConfigResource, MetadataImage, PartitionMeta, TopicMeta};

use super::election::{ElectionType, TopicElection};
use super::quorum_info::QuorumInfo;
use super::reassignment::{PartitionReassignment, TopicReassignmentResult};
use super::rpc::{ClientReply, ClientRequest};
use super::state_machine::Publisher;
use super::types::{QuotaAlteration, ScramUpsertion};
use super::{ConfigOp, ControllerError};
use crate::security::acl::{AclBinding, AclFilter};
use crate::security::scram::ScramMechanism;

type Reply<T> = oneshot::Sender<Result<T, ControllerError>>;

/// One client request to the controller thread, from this node's broker side or forwarded
/// by a peer controller (`rpc_server.rs`).
pub(super) struct Request {
    pub body: ClientRequest,
    /// Forwarded by a peer: answer NOT_CONTROLLER rather than forward again if this node
    /// does not lead (no forwarding loops between nodes that disagree about the leader).
    pub forwarded: bool,
    /// The controller connection a forwarded request came on (`rpc_server.rs` numbers
    /// them), so a broker whose heartbeat connection closes can be fenced at once.
    pub via: Option<u64>,
    pub reply: Reply<ClientReply>,
}

/// Cheap to clone; Send + Sync.
#[derive(Clone)]
pub struct ControllerHandle {
    tx: async_channel::Sender<Request>,
    publisher: Arc<Publisher>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// This process's broker incarnation (what it registers with).
    incarnation: [u8; 16],
    /// The metadata dir's directory id (KIP-853, `directory_id.rs`).
    directory_id: [u8; 16],
}

/// The controller answered a request with another request's kind of reply (a bug, or a
/// peer of another version): an error, not a panic.
fn mismatch(what: &str, got: ClientReply) -> ControllerError {
    ControllerError::Storage(format!("internal: {what} answered with {got:?}"))
}

fn stopped() -> ControllerError {
    ControllerError::NotController("the controller has stopped".into())
}

impl ControllerHandle {
    pub(super) fn new(
        tx: async_channel::Sender<Request>,
        publisher: Arc<Publisher>,
        thread: JoinHandle<()>,
        incarnation: [u8; 16],
        directory_id: [u8; 16],
    ) -> ControllerHandle {
        ControllerHandle { tx, publisher, thread: Arc::new(Mutex::new(Some(thread))), incarnation, directory_id }
    }

    /// The metadata dir's directory id in Kafka's text form (its `meta.properties` line).
    pub fn directory_id_text(&self) -> String {
        super::directory_id::to_text(&self.directory_id)
    }

    /// This process's broker epoch (KIP-903: sent by its replica fetchers, checked by
    /// leaders against the registration the metadata names).
    pub fn broker_epoch(&self) -> i64 {
        crate::cluster::image::broker_epoch(&self.incarnation)
    }

    /// This process's broker incarnation (what it registered with).
    pub fn incarnation(&self) -> [u8; 16] {
        self.incarnation
    }

    async fn call(&self, body: ClientRequest) -> Result<ClientReply, ControllerError> {
        let (reply, rx) = oneshot::channel();
        let req = Request { body, forwarded: false, via: None, reply };
        self.tx.send(req).await.map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// The latest committed image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.image()
    }

    /// The metadata quorum as this node sees it (None before its raft node started).
    pub fn quorum_status(&self) -> Option<super::quorum_info::LocalQuorumStatus> {
        self.publisher.quorum_status()
    }

    /// The newest metadata index the shards will apply (committed entries that change
    /// nothing on a shard are not sent to them).
    pub fn shard_index(&self) -> u64 {
        self.publisher.shard_index()
    }

    pub async fn create_topic(
        &self,
        name: String,
        num_partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, ControllerError> {
        match self.call(ClientRequest::CreateTopic { name, num_partitions, replication_factor, assignments: Vec::new(), configs, validate_only }).await? {
            ClientReply::Topic(meta) => Ok(meta),
            other => Err(mismatch("CreateTopic", other)),
        }
    }

    /// CreateTopics with an explicit replica assignment (broker ids per partition).
    pub async fn create_topic_assigned(
        &self,
        name: String,
        assignments: Vec<Vec<BrokerId>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, ControllerError> {
        let req = ClientRequest::CreateTopic { name, num_partitions: -1, replication_factor: -1, assignments, configs, validate_only };
        match self.call(req).await? {
            ClientReply::Topic(meta) => Ok(meta),
            other => Err(mismatch("CreateTopic", other)),
        }
    }

    /// Returns the deleted topic's id.
    pub async fn delete_topic(&self, name: String) -> Result<[u8; 16], ControllerError> {
        match self.call(ClientRequest::DeleteTopic { name }).await? {
            ClientReply::TopicId(id) => Ok(id),
            other => Err(mismatch("DeleteTopic", other)),
        }
    }

    /// `assignments`: broker ids per new partition, or empty for placement.
    pub async fn create_partitions(&self, name: String, total_count: i32, assignments: Vec<Vec<i32>>, validate_only: bool) -> Result<(), ControllerError> {
        self.call(ClientRequest::CreatePartitions { name, total_count, assignments, validate_only }).await.map(|_| ())
    }

    pub async fn alter_topic_configs(&self, name: String, ops: Vec<ConfigOp>, validate_only: bool) -> Result<(), ControllerError> {
        self.call(ClientRequest::AlterConfigs { name, ops, replace: false, validate_only }).await.map(|_| ())
    }

    /// Legacy AlterConfigs on a topic: `configs` become the topic's whole override set.
    pub async fn replace_topic_configs(&self, name: String, configs: BTreeMap<String, String>, validate_only: bool) -> Result<(), ControllerError> {
        let ops = configs.into_iter().map(|(k, v)| ConfigOp::Set(k, v)).collect();
        self.call(ClientRequest::AlterConfigs { name, ops, replace: true, validate_only }).await.map(|_| ())
    }

    /// Changes the dynamic configs of a broker (or the cluster-wide default) or a group;
    /// `replace` = legacy AlterConfigs (keys not in `ops` are removed).
    pub async fn alter_resource_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        self.call(ClientRequest::AlterResourceConfigs { resource, ops, replace, validate_only }).await.map(|_| ())
    }

    /// AlterUserScramCredentials: sets and removes SCRAM credentials in one record;
    /// returns the deletions refused because no such credential exists.
    pub async fn alter_scram_credentials(
        &self,
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, ScramMechanism)>,
    ) -> Result<Vec<(String, ScramMechanism)>, ControllerError> {
        match self.call(ClientRequest::AlterScramCredentials { upsertions, deletions }).await? {
            ClientReply::MissingScramCredentials(missing) => Ok(missing),
            other => Err(mismatch("AlterScramCredentials", other)),
        }
    }

    /// CreateAcls: adds the bindings (already checked) in one record.
    pub async fn create_acls(&self, acls: Vec<AclBinding>) -> Result<(), ControllerError> {
        self.call(ClientRequest::CreateAcls { acls }).await.map(|_| ())
    }

    /// DeleteAcls: removes what the filters match; per filter, the bindings removed.
    pub async fn delete_acls(&self, filters: Vec<AclFilter>) -> Result<Vec<Vec<AclBinding>>, ControllerError> {
        match self.call(ClientRequest::DeleteAcls { filters }).await? {
            ClientReply::DeletedAcls(deleted) => Ok(deleted),
            other => Err(mismatch("DeleteAcls", other)),
        }
    }

    /// UpdateFeatures: checked and committed by the quorum leader, all or none; Err
    /// `InvalidUpdateVersion` carries Kafka's message.
    pub async fn update_features(&self, updates: Vec<crate::cluster::features::FeatureUpdate>, validate_only: bool) -> Result<(), ControllerError> {
        self.call(ClientRequest::UpdateFeatures { updates, validate_only }).await.map(|_| ())
    }

    /// AddRaftVoter (KIP-853): makes observer `id` (with `directory_id`) a voter reached at
    /// `addr` (empty: where it joined from).
    pub async fn add_voter(&self, id: u64, directory_id: [u8; 16], addr: String) -> Result<(), ControllerError> {
        self.call(ClientRequest::AddVoter { id, directory_id, addr }).await.map(|_| ())
    }

    /// RemoveRaftVoter (KIP-853).
    pub async fn remove_voter(&self, id: u64, directory_id: [u8; 16]) -> Result<(), ControllerError> {
        self.call(ClientRequest::RemoveVoter { id, directory_id }).await.map(|_| ())
    }

    /// UnregisterBroker: forgets a broker's registration (fenced first).
    pub async fn unregister_broker(&self, broker: i32) -> Result<(), ControllerError> {
        self.call(ClientRequest::UnregisterBroker { broker }).await.map(|_| ())
    }

    /// AlterClientQuotas: sets and removes quota values (already validated) in one record.
    pub async fn alter_client_quotas(&self, entries: Vec<QuotaAlteration>) -> Result<(), ControllerError> {
        self.call(ClientRequest::AlterClientQuotas { entries }).await.map(|_| ())
    }

    /// Create/Renew/ExpireDelegationToken: the token as it now is, in one record.
    pub async fn put_delegation_token(&self, token: crate::security::delegation_token::DelegationToken) -> Result<(), ControllerError> {
        self.call(ClientRequest::PutDelegationToken { token }).await.map(|_| ())
    }

    /// Records a remote segment's new state (tiered storage), as `leader` of the partition
    /// in `leader_epoch`: refused once another leader or epoch has it, or (`expected`)
    /// when the segment is no longer in the state the decision was made on.
    pub async fn remote_log_segment(
        &self,
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        segment: crate::remote::segment_metadata::RemoteLogSegmentMetadata,
        expected: Option<crate::remote::segment_metadata::RemoteSegmentState>,
    ) -> Result<(), ControllerError> {
        self.call(ClientRequest::RemoteLogSegment { topic_id, partition, leader, leader_epoch, segment, expected }).await.map(|_| ())
    }

    /// DeleteRecords on a tiered partition: its log start offset, now inside remote
    /// storage, as `leader` in `leader_epoch`.
    pub async fn remote_log_start_offset(
        &self,
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        offset: i64,
    ) -> Result<(), ControllerError> {
        self.call(ClientRequest::RemoteLogStartOffset { topic_id, partition, leader, leader_epoch, offset }).await.map(|_| ())
    }

    /// ExpireDelegationToken with a negative period: the token is removed.
    pub async fn remove_delegation_token(&self, token_id: String) -> Result<(), ControllerError> {
        self.call(ClientRequest::RemoveDelegationToken { token_id }).await.map(|_| ())
    }

    /// Reserves `count` producer ids; returns the first of the block.
    pub async fn allocate_producer_ids(&self, count: i64) -> Result<i64, ControllerError> {
        match self.call(ClientRequest::AllocateProducerIds { count }).await? {
            ClientReply::FirstProducerId(first) => Ok(first),
            other => Err(mismatch("AllocateProducerIds", other)),
        }
    }

    /// The metadata quorum as its leader sees it (asked of the leader, wherever it is).
    pub async fn describe_quorum(&self) -> Result<QuorumInfo, ControllerError> {
        match self.call(ClientRequest::DescribeQuorum).await? {
            ClientReply::Quorum(q) => Ok(q),
            other => Err(mismatch("DescribeQuorum", other)),
        }
    }

    /// ElectLeaders: elects leaders of `topics` (None: every partition); the answer per
    /// partition, as Kafka's controller gives it.
    pub async fn elect_leaders(&self, election: ElectionType, topics: Option<Vec<(String, Vec<i32>)>>) -> Result<Vec<TopicElection>, ControllerError> {
        match self.call(ClientRequest::ElectLeaders { election, topics }).await? {
            ClientReply::Elections(results) => Ok(results),
            other => Err(mismatch("ElectLeaders", other)),
        }
    }

    /// AlterPartitionReassignments: starts or cancels (target None) the reassignment of
    /// each partition named; the answer per partition, as Kafka's controller gives it
    /// (`reassignment.rs`). Forwarded to the quorum leader from any node.
    pub async fn alter_partition_reassignments(
        &self,
        topics: Vec<(String, Vec<PartitionReassignment>)>,
        allow_replication_factor_change: bool,
    ) -> Result<Vec<TopicReassignmentResult>, ControllerError> {
        match self.call(ClientRequest::AlterPartitionReassignments { topics, allow_replication_factor_change }).await? {
            ClientReply::Reassignments(results) => Ok(results),
            other => Err(mismatch("AlterPartitionReassignments", other)),
        }
    }

    /// AlterPartition (Kafka's, for one partition): the leader `leader` of `partition` of
    /// topic `topic_id`, at `leader_epoch` and `partition_epoch` as it knows them, asks
    /// for the ISR `new_isr`, whose members' broker epochs as it knows them are
    /// `new_isr_epochs` (same order; -1 = unknown). Returns the partition as committed (partition epoch bumped
    /// when the ISR changed), or `ControllerError::AlterPartition` with Kafka's reason
    /// (`alter_partition.rs`). Forwarded to the quorum leader from any node.
    pub async fn alter_partition(
        &self,
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<BrokerId>,
        new_isr_epochs: Vec<i64>,
    ) -> Result<PartitionMeta, ControllerError> {
        let req = ClientRequest::AlterPartition { topic_id, partition, leader, leader_epoch, partition_epoch, new_isr, new_isr_epochs };
        match self.call(req).await? {
            ClientReply::Partition(meta) => Ok(meta),
            other => Err(mismatch("AlterPartition", other)),
        }
    }

    /// A controlled shutdown of this node's broker: its heartbeats stop and the quorum
    /// leader fences it, so its leaderships move to other in-sync replicas and it leaves
    /// the ISRs while it still serves. Returns once the fencing committed (or there was
    /// nothing to do).
    pub async fn controlled_shutdown(&self, broker: BrokerId) -> Result<(), ControllerError> {
        match self.call(ClientRequest::ControlledShutdown { broker, incarnation: self.incarnation }).await? {
            ClientReply::Done => Ok(()),
            other => Err(mismatch("ControlledShutdown", other)),
        }
    }

    /// Asks the controller to stop (non-blocking): queued requests are still answered, later
    /// ones fail with NotController. Use `join` to wait until its files are closed.
    pub fn shutdown(&self) {
        self.tx.close();
    }

    /// Blocks until the controller thread has exited. Blocking: never call it on a shard
    /// thread; meant for process shutdown and tests.
    pub fn join(&self) {
        let thread = match self.thread.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("controller thread panicked");
            }
        }
    }
}
