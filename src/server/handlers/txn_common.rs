//! What the transaction APIs' handlers share: creating `__transaction_state` the first
//! time a transactional id looks for its coordinator (as Kafka does), and routing an
//! operation to the coordinating shard.
use std::rc::Rc;

use crate::protocol::ErrorCode;
use crate::server::shard::ShardContext;
use crate::txn::ops::route;
use crate::txn::{TxnOp, TxnResult, TRANSACTION_STATE_TOPIC};

/// Starts creating `__transaction_state` if it does not exist (once per shard at a
/// time); the caller answers COORDINATOR_NOT_AVAILABLE meanwhile, which clients retry.
/// Its min.insync.replicas is transaction.state.log.min.isr, capped by the replicas it
/// gets (Kafka would refuse every transaction on a single broker with the default 2).
pub fn ensure_transaction_state_topic(ctx: &Rc<ShardContext>) {
    if ctx.controller.image().topic(TRANSACTION_STATE_TOPIC).is_some() || ctx.txn_topic_creating.replace(true) {
        return;
    }
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let c = &ctx.config;
        let live = ctx.controller.image().live_brokers().count().max(1);
        let replication_factor = c.transaction_state_log_replication_factor.min(i16::try_from(live).unwrap_or(i16::MAX));
        let min_isr = c.transaction_state_log_min_isr.min(i32::from(replication_factor)).max(1);
        let configs = std::collections::BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), c.transaction_state_log_segment_bytes.to_string()),
            ("min.insync.replicas".to_string(), min_isr.to_string()),
        ]);
        let created =
            ctx.controller.create_topic(TRANSACTION_STATE_TOPIC.to_string(), c.transaction_state_log_num_partitions, replication_factor, configs, false).await;
        match created {
            Ok(_) => tracing::info!(partitions = c.transaction_state_log_num_partitions, replication_factor, "created __transaction_state"),
            Err(crate::controller::ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => tracing::warn!(error = %e, "cannot create __transaction_state yet"),
        }
        ctx.txn_topic_creating.set(false);
    })
    .detach();
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
