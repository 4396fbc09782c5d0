//! What the transaction APIs' handlers share: creating `__transaction_state` the first
//! time a transactional id looks for its coordinator (as Kafka does), and routing an
//! operation to the coordinating shard.
use std::rc::Rc;

use super::internal_topic::{ensure_internal_topic, InternalTopic};
use crate::protocol::ErrorCode;
use crate::server::shard::ShardContext;
use crate::txn::ops::route;
use crate::txn::{TxnOp, TxnResult, TRANSACTION_STATE_TOPIC};

/// Starts creating `__transaction_state` if it does not exist (its min.insync.replicas is
/// transaction.state.log.min.isr, capped by the replicas it gets).
pub fn ensure_transaction_state_topic(ctx: &Rc<ShardContext>) {
    let c = &ctx.config;
    let topic = InternalTopic {
        name: TRANSACTION_STATE_TOPIC,
        partitions: c.transaction_state_log_num_partitions,
        replication_factor: c.transaction_state_log_replication_factor,
        min_isr: c.transaction_state_log_min_isr,
        cleanup_policy: "compact",
        segment_bytes: c.transaction_state_log_segment_bytes,
    };
    ensure_internal_topic(ctx, topic);
}

/// Runs `op` on the shard coordinating `txn_id`, catching up with the controller first
/// when this shard has not applied `__transaction_state` yet.
pub async fn route_txn(ctx: &Rc<ShardContext>, txn_id: &str, op: TxnOp) -> TxnResult {
    if ctx.image().topic(TRANSACTION_STATE_TOPIC).is_none() {
        ctx.catch_up_for_topics(Some(&[TRANSACTION_STATE_TOPIC])).await;
        if ctx.image().topic(TRANSACTION_STATE_TOPIC).is_none() {
            ensure_transaction_state_topic(ctx);
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
    }
    route(&ctx.router, txn_id, op).await
}
