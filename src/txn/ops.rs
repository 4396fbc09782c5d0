//! Transaction-coordinator operations as they travel to the coordinating shard (inside
//! the router's `PartitionOp::Extension`, addressed to the transactional id's
//! `__transaction_state` partition), and their replies. Plain owned data (Send).
use super::context::TxnContext;
use super::TRANSACTION_STATE_TOPIC;
use crate::cluster::coordinator_placement::partition_for;
use crate::cluster::router::{OpOutput, PartitionOp, Router};
use crate::partition::PartitionError;
use crate::protocol::ErrorCode;
use crate::runtime::ShardId;

pub enum TxnOp {
    /// InitProducerId with a transactional id. `fresh_producer_id`: an id allocated by
    /// the caller, used when the transactional id is new or its epoch is exhausted.
    /// `producer_id`/`producer_epoch` (KIP-360, -1 when absent): the producer's current ones.
    InitProducerId { txn_id: String, timeout_ms: i32, producer_id: i64, producer_epoch: i16, fresh_producer_id: i64 },
    /// AddPartitionsToTxn / AddOffsetsToTxn (the group's offsets partition). `verify_only`
    /// (v4+ from a partition leader, KIP-890): only checks they are in the transaction.
    AddPartitions { txn_id: String, producer_id: i64, producer_epoch: i16, partitions: Vec<(String, i32)>, verify_only: bool },
    /// `bump_epoch`: transactions v2 (EndTxn v5): the end bumps the producer's epoch
    /// (markers carry the new one) and answers it.
    EndTxn { txn_id: String, producer_id: i64, producer_epoch: i16, commit: bool, bump_epoch: bool },
    /// DescribeTransactions for one id.
    Describe { txn_id: String },
    /// ListTransactions over this shard's ids: state names and producer ids filter when
    /// not empty; `min_duration_ms` >= 0 keeps transactions open at least that long (KIP-994).
    List { states: Vec<String>, producer_ids: Vec<i64>, min_duration_ms: i64 },
}

/// A transaction as the admin APIs show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: &'static str,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub partitions: Vec<(String, i32)>,
}

pub enum TxnReply {
    Producer {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// One code per partition, in request order.
    Partitions(Vec<ErrorCode>),
    Done,
    Described(Option<TxnView>),
    Listed(Vec<TxnView>),
}

pub type TxnResult = Result<TxnReply, ErrorCode>;

/// A router's extension operation that can carry a transaction operation.
pub trait CarriesTxnOps: Send + Sized + 'static {
    fn from_txn(op: TxnOp) -> Self;
}

/// A router's extension result that answers transaction operations.
pub trait AnswersTxnOps: Send + Sized + 'static {
    fn into_txn(self) -> TxnResult;
}

/// The `__transaction_state` partition coordinating `txn_id` and its shard; None while
/// the topic does not exist.
pub fn coordinator_of<X: CarriesTxnOps, Y: AnswersTxnOps>(router: &Router<X, Y>, txn_id: &str) -> Option<(i32, ShardId)> {
    let image = router.partitions().image();
    let t = image.topic(TRANSACTION_STATE_TOPIC)?;
    let n = i32::try_from(t.partitions.len()).ok()?;
    let p = partition_for(txn_id, n);
    t.partition(p).map(|x| (p, x.shard))
}

/// Runs `op` on the shard coordinating `txn_id` (NOT_COORDINATOR when this broker does
/// not lead its partition, COORDINATOR_NOT_AVAILABLE while the topic does not exist).
pub async fn route<X: CarriesTxnOps, Y: AnswersTxnOps>(router: &Router<X, Y>, txn_id: &str, op: TxnOp) -> TxnResult {
    let Some((partition, shard)) = coordinator_of(router, txn_id) else { return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
    call_partition(router, shard, partition, op).await
}

/// Runs `op` on `shard`, addressed to `__transaction_state` partition `partition`.
pub async fn call_partition<X: CarriesTxnOps, Y: AnswersTxnOps>(router: &Router<X, Y>, shard: ShardId, partition: i32, op: TxnOp) -> TxnResult {
    match router.call(shard, TRANSACTION_STATE_TOPIC, partition, PartitionOp::Extension(X::from_txn(op))).await {
        Ok(OpOutput::Extension(r)) => r.into_txn(),
        Ok(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(PartitionError::UnknownTopicOrPartition | PartitionError::NotLeader) => Err(ErrorCode::NOT_COORDINATOR),
        Err(PartitionError::LeaderNotAvailable) => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        Err(e) => Err(ErrorCode::from(&e)),
    }
}

/// For each shard of this broker (`node_id`) leading any `__transaction_state` partition,
/// one it leads (requests that visit every coordinator here: ListTransactions).
pub fn one_led_partition_per_shard<X: Send + 'static, Y: Send + 'static>(router: &Router<X, Y>, node_id: i32) -> Vec<(ShardId, i32)> {
    let image = router.partitions().image();
    let Some(t) = image.topic(TRANSACTION_STATE_TOPIC) else { return Vec::new() };
    let mut out: Vec<(ShardId, i32)> = Vec::new();
    for p in t.partitions.iter().filter(|p| p.leader == node_id) {
        if !out.iter().any(|(s, _)| *s == p.shard) {
            out.push((p.shard, p.partition));
        }
    }
    out
}

/// Runs a transaction operation that arrived for `__transaction_state` partition `p` on
/// this shard (the shard's router extension calls this).
pub async fn execute_here(ctx: &std::rc::Weak<TxnContext>, p: std::rc::Rc<crate::partition::Partition>, op: TxnOp) -> TxnResult {
    let Some(ctx) = ctx.upgrade() else { return Err(ErrorCode::NOT_COORDINATOR) };
    ctx.coordinator.execute(&ctx, &p, op).await
}
