//! OffsetCommit 2-10: validated and stored by the coordinating shard (`group/offsets.rs`).
//! v10 names topics by id (`group_topic_ids.rs`).
use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::group_topic_ids::{id_of, resolve_ids};
use crate::group::ops::{route, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Partitions one commit may carry (each becomes a record in one batch).
const MAX_PARTITIONS: usize = 100_000;

fn all_failed(req: &OffsetCommitRequest, e: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_topic_id(t.topic_id).with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| OffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(e.code()))
                        .collect(),
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
    let mut req = req;
    // v10: topics by id. Known ids get their names (the coordinator keys offsets by name);
    // unknown ones are answered UNKNOWN_TOPIC_ID.
    let mut unknown_ids = Vec::new();
    if meta.version >= 10 {
        let (known, unknown) = resolve_ids(&ctx.image(), std::mem::take(&mut req.topics), |t| t.topic_id, |t, name| t.with_name(name));
        req.topics = known;
        unknown_ids = all_failed(&OffsetCommitRequest::default().with_topics(unknown), ErrorCode::UNKNOWN_TOPIC_ID).topics;
    }
    let group_id = req.group_id.0.to_string();
    // ACLs (Kafka's KafkaApis): READ on the group (else every partition is
    // GROUP_AUTHORIZATION_FAILED), then READ on each topic (else its partitions are
    // TOPIC_AUTHORIZATION_FAILED and the rest is committed).
    let access = ctx.access(&meta);
    if !access.allows_group(Operation::Read, &group_id) {
        let mut resp = all_failed(&req, ErrorCode::GROUP_AUTHORIZATION_FAILED);
        resp.topics.extend(unknown_ids);
        return meta.respond(&resp);
    }
    let (topics, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics).into_iter().partition(|t| access.allows_topic(Operation::Read, t.name.as_str()));
    req.topics = topics;
    let denied = all_failed(&OffsetCommitRequest::default().with_topics(denied), ErrorCode::TOPIC_AUTHORIZATION_FAILED).topics;
    // Kept for error answers: the request moves to the coordinating shard.
    let skeleton = OffsetCommitRequest::default().with_topics(req.topics.clone());
    let mut resp = match route(&ctx.router, &group_id, GroupOp::Commit { req, version: meta.version }).await {
        Ok(GroupReply::Commit(r)) => r,
        Ok(_) => all_failed(&skeleton, ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(e) => all_failed(&skeleton, e),
    };
    resp.topics.extend(denied);
    if meta.version >= 10 {
        let image = ctx.image();
        for t in &mut resp.topics {
            t.topic_id = id_of(&image, t.name.as_str());
        }
        resp.topics.extend(unknown_ids);
    }
    meta.respond(&resp)
}
