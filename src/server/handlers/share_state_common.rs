//! What the share-coordinator lookups and APIs share (KIP-932): `__share_group_state`,
//! created the first time a share-partition's coordinator is looked up (as Kafka does),
//! and the partition of it that coordinates a share-partition key (Kafka's
//! `Utils.abs("group:topic_id:partition".hashCode()) % partitions`).
use std::rc::Rc;

use super::internal_topic::{ensure_internal_topic, InternalTopic};
use crate::cluster::coordinator_placement::partition_for;
use crate::cluster::image::MetadataImage;
use crate::cluster::router::{OpOutput, PartitionOp};
use crate::group::share::state_coordinator::{ShareStateFailure, ShareStateOp, ShareStateOpKind, ShareStateResult, SHARE_GROUP_STATE_TOPIC};
use crate::group::share::state_records::SharePartitionKey;
use crate::protocol::ErrorCode;
use crate::server::shard::{ShardContext, ShardOp, ShardResult, ShardRouter};

/// Starts creating `__share_group_state` if it does not exist: share.coordinator.state.topic.*
/// (Kafka's: deleted by retention and pruning, not compacted).
pub fn ensure_share_group_state_topic(ctx: &Rc<ShardContext>) {
    let c = &ctx.config;
    let topic = InternalTopic {
        name: SHARE_GROUP_STATE_TOPIC,
        partitions: c.share_coordinator_state_topic_num_partitions,
        replication_factor: c.share_coordinator_state_topic_replication_factor,
        min_isr: c.share_coordinator_state_topic_min_isr,
        cleanup_policy: "delete",
        segment_bytes: c.share_coordinator_state_topic_segment_bytes,
    };
    ensure_internal_topic(ctx, topic);
}

/// The `__share_group_state` partition coordinating `key` and its leader; None while the
/// topic does not exist.
pub fn share_coordinator_of(image: &MetadataImage, key: &SharePartitionKey) -> Option<(i32, i32)> {
    let t = image.topic(SHARE_GROUP_STATE_TOPIC)?;
    let p = partition_for(&key.coordinator_key(), i32::try_from(t.partitions.len()).ok()?);
    Some((p, t.partition(p)?.leader))
}

/// Runs one share-partition key's state operation on this broker, on the shard leading
/// its `__share_group_state` partition: NOT_COORDINATOR if another broker leads it,
/// COORDINATOR_NOT_AVAILABLE while the topic does not exist.
pub async fn run_here(router: &ShardRouter, node_id: i32, key: SharePartitionKey, kind: ShareStateOpKind) -> ShareStateResult {
    let fail = |code: ErrorCode| Err(ShareStateFailure { code, message: None });
    let mut image = router.partitions().image();
    if image.topic(SHARE_GROUP_STATE_TOPIC).is_none() {
        // Created through another shard (or broker) moments ago: this shard's image may
        // not have it yet.
        router.partitions().catch_up_with_controller().await;
        image = router.partitions().image();
    }
    let Some((partition, leader)) = share_coordinator_of(&image, &key) else { return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
    if leader != node_id {
        return fail(ErrorCode::NOT_COORDINATOR);
    }
    let Some(shard) = image.topic(SHARE_GROUP_STATE_TOPIC).and_then(|t| t.partition(partition)).map(|m| m.shard) else {
        return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    };
    let exists = image.topic_by_id(key.topic_id.as_bytes()).is_some_and(|t| key.partition >= 0 && (key.partition as usize) < t.partitions.len());
    let op = ShareStateOp { key, exists, kind };
    match router.call(shard, SHARE_GROUP_STATE_TOPIC, partition, PartitionOp::Extension(ShardOp::ShareState(op))).await {
        Ok(OpOutput::Extension(ShardResult::ShareState(r))) => r,
        Ok(_) => fail(ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(_) => fail(ErrorCode::NOT_COORDINATOR),
    }
}
