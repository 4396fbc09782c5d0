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

pub enum ShardOp {
    Group(GroupOp),
    Txn(TxnOp),
    /// A share-partition's part of a ShareFetch / ShareAcknowledge (group/share/).
    Share(SharePartitionOp),
}

pub enum ShardResult {
    Group(GroupResult),
    Txn(TxnResult),
    Share(Result<SharePartitionReply, SharePartitionError>),
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
            ShardResult::Txn(_) | ShardResult::Share(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
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
            ShardResult::Group(_) | ShardResult::Share(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
}

/// Installs this shard's coordinators as its router's extension: an operation arriving
/// for one of its partitions runs on the coordinator it names.
pub fn serve_coordinator_ops(router: &ShardRouter, groups: &Rc<CoordinatorContext>, txns: &Rc<TxnContext>, shares: &Rc<SharePartitions>) {
    let (groups, txns, shares) = (Rc::downgrade(groups), Rc::downgrade(txns), Rc::downgrade(shares));
    router.set_extension(Box::new(move |p, op| {
        let (groups, txns, shares) = (groups.clone(), txns.clone(), shares.clone());
        Box::pin(async move {
            match op {
                ShardOp::Group(op) => ShardResult::Group(execute_group(&groups, p, op).await),
                ShardOp::Txn(op) => ShardResult::Txn(execute_txn(&txns, p, op).await),
                ShardOp::Share(op) => ShardResult::Share(match shares.upgrade() {
                    Some(s) => s.run(&p, op, crate::runtime::now_ms()).await,
                    None => Err(SharePartitionError::Partition(crate::partition::PartitionError::NotLeader)),
                }),
            }
        })
    }));
}
