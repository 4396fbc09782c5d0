//! The coordinators' operations a shard's router carries to the shard owning their
//! partition (`cluster::router`'s extension): group operations, addressed to a
//! `__consumer_offsets` partition, and transaction operations, addressed to a
//! `__transaction_state` partition. Group and txn each name only their own half, through
//! the `Carries*` / `Answers*` traits; this is the one place that knows both.
use std::rc::Rc;

use crate::cluster::router::Router;
use crate::group::ops::{execute_here as execute_group, GroupResult};
use crate::group::{AnswersGroupOps, CarriesGroupOps, CoordinatorContext, GroupOp};
use crate::protocol::ErrorCode;
use crate::txn::ops::execute_here as execute_txn;
use crate::txn::{AnswersTxnOps, CarriesTxnOps, TxnContext, TxnOp, TxnResult};

use crate::group::share::share_partitions::{SharePartitionError, SharePartitionOp, SharePartitionReply, SharePartitions};
use crate::group::share::state_coordinator::{ShareStateCoordinator, ShareStateFailure, ShareStateOp, ShareStateResult};

pub enum ShardOp {
    Group(GroupOp),
    Txn(TxnOp),
    /// A share-partition's part of a ShareFetch / ShareAcknowledge (group/share/).
    Share(SharePartitionOp),
    /// A share-partition's part of a share-coordinator state API, addressed to a
    /// `__share_group_state` partition (group/share/state_coordinator.rs).
    ShareState(ShareStateOp),
}

pub enum ShardResult {
    Group(GroupResult),
    Txn(TxnResult),
    Share(Result<SharePartitionReply, SharePartitionError>),
    ShareState(ShareStateResult),
}

/// The router of a broker shard: partition operations plus the coordinators' ones.
pub type ShardRouter = Router<ShardOp, ShardResult>;

impl CarriesGroupOps for ShardOp {
    fn from_group(op: GroupOp) -> Self {
        ShardOp::Group(op)
    }
}

impl AnswersGroupOps for ShardResult {
    fn into_group(self) -> GroupResult {
        match self {
            ShardResult::Group(r) => r,
            ShardResult::Txn(_) | ShardResult::Share(_) | ShardResult::ShareState(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
}

impl CarriesTxnOps for ShardOp {
    fn from_txn(op: TxnOp) -> Self {
        ShardOp::Txn(op)
    }
}

impl AnswersTxnOps for ShardResult {
    fn into_txn(self) -> TxnResult {
        match self {
            ShardResult::Txn(r) => r,
            ShardResult::Group(_) | ShardResult::Share(_) | ShardResult::ShareState(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
}

/// Installs this shard's coordinators as its router's extension: an operation arriving
/// for one of its partitions runs on the coordinator it names.
pub fn serve_coordinator_ops(
    router: &ShardRouter,
    groups: &Rc<CoordinatorContext>,
    txns: &Rc<TxnContext>,
    shares: &Rc<SharePartitions>,
    share_state: &Rc<ShareStateCoordinator>,
) {
    let (groups, txns, shares, share_state) = (Rc::downgrade(groups), Rc::downgrade(txns), Rc::downgrade(shares), Rc::downgrade(share_state));
    router.set_extension(Box::new(move |p, op| {
        let (groups, txns, shares, share_state) = (groups.clone(), txns.clone(), shares.clone(), share_state.clone());
        Box::pin(async move {
            match op {
                ShardOp::Group(op) => ShardResult::Group(execute_group(&groups, p, op).await),
                ShardOp::Txn(op) => ShardResult::Txn(execute_txn(&txns, p, op).await),
                ShardOp::Share(op) => ShardResult::Share(match shares.upgrade() {
                    Some(s) => s.run(&p, op, crate::runtime::now_ms()).await,
                    None => Err(SharePartitionError::Partition(crate::partition::PartitionError::NotLeader)),
                }),
                ShardOp::ShareState(op) => ShardResult::ShareState(match share_state.upgrade() {
                    Some(c) => c.execute(&p, op, crate::runtime::now_ms()).await,
                    None => Err(ShareStateFailure { code: ErrorCode::NOT_COORDINATOR, message: None }),
                }),
            }
        })
    }));
}
