//! OffsetForLeaderEpoch (v2-v4): for each partition, the largest leader epoch at or below
//! the one asked that the log holds, and the offset where it ended (the log end offset
//! for the current epoch), from the log's leader-epoch cache (`storage::leader_epoch_cache`).
//! Consumers call it to validate their position after a leader change (KIP-320);
//! followers will, to truncate a divergent tail (KIP-101/279).
//!
//! Checked here first, as Kafka does: the topic and partition exist, and the request's
//! `current_leader_epoch` (when given) is the partition's (newer: UNKNOWN_LEADER_EPOCH,
//! older: FENCED_LEADER_EPOCH). Every partition goes in one router batch.
use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult};

use super::code;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: OffsetForLeaderEpochRequest) -> Response {
    let image = ctx
        .image_for_request(|image| {
            req.topics.iter().map(|t| super::unknown_partitions(image.topic(t.topic.0.as_str()), t.partitions.iter().map(|p| p.partition))).sum()
        })
        .await;
    let partition_count = req.topics.iter().map(|t| t.partitions.len()).sum();
    let mut batch = OpBatch::with_capacity(partition_count);
    let mut topics = Vec::with_capacity(req.topics.len());
    // ACLs: a follower (replica id >= 0, v3+) needs CLUSTER_ACTION, a consumer DESCRIBE on
    // each topic; else TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
    let access = ctx.access(&meta);
    let follower = meta.version >= 3 && req.replica_id.0 >= 0;
    let cluster_denied = follower && !access.allows_cluster(Operation::ClusterAction);
    for topic in &req.topics {
        let t = image.topic(topic.topic.0.as_str());
        let denied = cluster_denied || (!follower && !access.allows_topic(Operation::Describe, topic.topic.as_str()));
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let resp = EpochEndOffset::default().with_partition(p.partition).with_leader_epoch(-1).with_end_offset(-1);
            if denied {
                partitions.push(resp.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()));
                continue;
            }
            let owner = t.and_then(|t| Some((t.name.as_str(), t.partition(p.partition)?)));
            let Some((name, owner)) = owner else {
                partitions.push(resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()));
                continue;
            };
            if let Some(e) = super::leader_epoch_error(p.current_leader_epoch, owner.leader_epoch) {
                partitions.push(resp.with_error_code(e.code()));
                continue;
            }
            // Sent to its shard: error code 0 until the result is in.
            batch.push(owner.shard, name, p.partition, PartitionOp::EpochEndOffset { epoch: p.leader_epoch });
            partitions.push(resp);
        }
        topics.push(OffsetForLeaderTopicResult::default().with_topic(topic.topic.clone()).with_partitions(partitions));
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    for resp in topics.iter_mut().flat_map(|t| t.partitions.iter_mut()).filter(|r| r.error_code == 0) {
        match results.next() {
            Some(Ok(OpOutput::EpochEnd(epoch, end))) => {
                resp.leader_epoch = epoch;
                resp.end_offset = end;
            }
            Some(Ok(_)) | None => resp.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => resp.error_code = code(&e),
        }
    }
    meta.respond(&OffsetForLeaderEpochResponse::default().with_topics(topics))
}
