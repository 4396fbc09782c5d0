//! OffsetCommit 2-9: validated and stored by the coordinating shard (`group/offsets.rs`).
use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::group::ops::{route, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Partitions one commit may carry (each becomes a record in one batch).
const MAX_PARTITIONS: usize = 100_000;

fn all_failed(req: &OffsetCommitRequest, e: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(
                    t.partitions.iter().map(|p| OffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(e.code())).collect(),
                )
            })
            .collect(),
    )
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: OffsetCommitRequest) -> Response {
    let count: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
    if count > MAX_PARTITIONS {
        return meta.respond(&all_failed(&req, ErrorCode::INVALID_COMMIT_OFFSET_SIZE));
    }
    let group_id = req.group_id.0.to_string();
    // Kept for error answers: the request moves to the coordinating shard.
    let skeleton = OffsetCommitRequest::default().with_topics(req.topics.clone());
    let resp = match route(&ctx.router, &group_id, GroupOp::Commit { req, version: meta.version }).await {
        Ok(GroupReply::Commit(r)) => r,
        Ok(_) => all_failed(&skeleton, ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(e) => all_failed(&skeleton, e),
    };
    meta.respond(&resp)
}
