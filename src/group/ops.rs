//! Group operations as they travel to the coordinating shard (inside the router's
//! `PartitionOp::Extension`, addressed to the group's `__consumer_offsets` partition), and
//! their replies. Requests and responses are kafka-protocol bodies (Send).

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    SyncGroupRequest, SyncGroupResponse,
};

use super::context::CoordinatorContext;
use super::placement::partition_for;
use super::OFFSETS_TOPIC;
use crate::cluster::router::{OpOutput, PartitionOp, Router};
use crate::partition::PartitionError;
use crate::protocol::ErrorCode;
use crate::runtime::ShardId;

pub enum GroupOp {
    Join {
        req: JoinGroupRequest,
        version: i16,
        client_id: String,
        client_host: String,
    },
    Sync {
        req: SyncGroupRequest,
        version: i16,
    },
    Heartbeat {
        req: HeartbeatRequest,
    },
    Leave {
        group_id: String,
        members: Vec<MemberIdentity>,
    },
    Commit {
        req: OffsetCommitRequest,
        version: i16,
    },
    /// `topics` None = all committed partitions.
    FetchOffsets {
        group_id: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
    Describe {
        group_id: String,
        version: i16,
    },
    /// Every group of the receiving shard.
    List {
        states: Vec<String>,
        types: Vec<String>,
    },
    Delete {
        group_id: String,
    },
    DeleteOffsets {
        req: OffsetDeleteRequest,
    },
    /// KIP-848 consumer-group operations (consumer/mod.rs).
    Consumer(super::consumer::ConsumerOp),
    /// KIP-932 share-group operations (share/coordinator.rs).
    Share(super::share::coordinator::ShareOp),
    /// KIP-1071 streams-group operations (streams/coordinator.rs).
    Streams(super::streams::coordinator::StreamsOp),
    /// TxnOffsetCommit: offsets stored with the producer's transaction, pending until its marker.
    TxnCommit {
        req: kafka_protocol::messages::TxnOffsetCommitRequest,
        version: i16,
    },
    /// A transaction marker of `producer_id` reached this offsets partition: its pending
    /// offsets there take effect (commit) or are dropped (abort).
    CompleteTxn {
        producer_id: i64,
        commit: bool,
    },
    /// Whether any of these partitions has offsets pending in an open transaction
    /// (OffsetFetch's require_stable).
    HasPendingOffsets {
        group_id: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOffset {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub error: ErrorCode,
}

pub enum GroupReply {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
    Heartbeat(ErrorCode),
    /// Group-level error, per-member results.
    Leave(ErrorCode, Vec<MemberResponse>),
    Commit(OffsetCommitResponse),
    Offsets(ErrorCode, Vec<(String, Vec<PartitionOffset>)>),
    Describe(DescribedGroup),
    List(Vec<ListedGroup>),
    Delete(ErrorCode),
    DeleteOffsets(OffsetDeleteResponse),
    Consumer(Box<super::consumer::ConsumerReply>),
    Share(Box<super::share::coordinator::ShareReply>),
    Streams(Box<super::streams::coordinator::StreamsReply>),
    TxnCommit(kafka_protocol::messages::TxnOffsetCommitResponse),
    Done,
    Pending(bool),
}

pub type GroupResult = Result<GroupReply, ErrorCode>;

/// A router's extension operation that can carry a group operation (the shard's router
/// carries the operations of several coordinators: `server::shard::ShardOp`).
pub trait CarriesGroupOps: Send + Sized + 'static {
    fn from_group(op: GroupOp) -> Self;
}

/// A router's extension result that answers group operations.
pub trait AnswersGroupOps: Send + Sized + 'static {
    /// The group reply; an answer of another coordinator is a bug, answered as an error.
    fn into_group(self) -> GroupResult;
}

/// The offsets partition coordinating `group_id` and its shard; None while
/// `__consumer_offsets` does not exist.
pub fn coordinator_of<X: CarriesGroupOps, Y: AnswersGroupOps>(router: &Router<X, Y>, group_id: &str) -> Option<(i32, ShardId)> {
    let image = router.partitions().image();
    let t = image.topic(OFFSETS_TOPIC)?;
    let n = i32::try_from(t.partitions.len()).ok()?;
    let p = partition_for(group_id, n);
    t.partition(p).map(|x| (p, x.shard))
}

/// Runs `op` on the shard coordinating `group_id`.
pub async fn route<X: CarriesGroupOps, Y: AnswersGroupOps>(router: &Router<X, Y>, group_id: &str, op: GroupOp) -> GroupResult {
    let found = match coordinator_of(router, group_id) {
        Some(c) => Some(c),
        None => {
            // Right after start-up a shard may not have applied the creation of
            // `__consumer_offsets` yet: catch up with the controller before giving up.
            router.partitions().catch_up_with_controller().await;
            coordinator_of(router, group_id)
        }
    };
    let Some((partition, shard)) = found else { return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
    call_partition(router, shard, partition, op).await
}

/// Runs `op` on `shard`, addressed to offsets partition `partition`.
pub async fn call_partition<X: CarriesGroupOps, Y: AnswersGroupOps>(router: &Router<X, Y>, shard: ShardId, partition: i32, op: GroupOp) -> GroupResult {
    match router.call(shard, OFFSETS_TOPIC, partition, PartitionOp::Extension(X::from_group(op))).await {
        Ok(OpOutput::Extension(r)) => r.into_group(),
        Ok(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(PartitionError::UnknownTopicOrPartition | PartitionError::NotLeader) => Err(ErrorCode::NOT_COORDINATOR),
        Err(PartitionError::LeaderNotAvailable) => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        Err(e) => Err(ErrorCode::from(&e)),
    }
}

/// Runs a group operation that arrived for offsets partition `p` on this shard (the
/// shard's router extension calls this).
pub async fn execute_here(coordinator: &std::rc::Weak<CoordinatorContext>, p: std::rc::Rc<crate::partition::Partition>, op: GroupOp) -> GroupResult {
    let Some(ctx) = coordinator.upgrade() else { return Err(ErrorCode::NOT_COORDINATOR) };
    ctx.groups.execute(&ctx, &p, op).await
}

/// One offsets partition per shard that owns any (for requests that visit every shard).
pub fn one_partition_per_shard<X: Send + 'static, Y: Send + 'static>(router: &Router<X, Y>) -> Vec<(ShardId, i32)> {
    let image = router.partitions().image();
    let Some(t) = image.topic(OFFSETS_TOPIC) else { return Vec::new() };
    let mut out: Vec<(ShardId, i32)> = Vec::new();
    for p in &t.partitions {
        if !out.iter().any(|(s, _)| *s == p.shard) {
            out.push((p.shard, p.partition));
        }
    }
    out
}
