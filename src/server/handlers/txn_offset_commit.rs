//! TxnOffsetCommit 0-6: offsets a transactional producer commits for a consumer group,
//! written with its transaction and visible once the commit marker reaches the group's
//! `__consumer_offsets` partition (`group/txn_offsets.rs`). Routed to the group's
//! coordinator like OffsetCommit. v6 names topics by id (`group_topic_ids.rs`).
use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::group_topic_ids::{id_of, resolve_ids};
use super::txn_verification::verify;
use crate::group::ops::{coordinator_of, route, GroupOp, GroupReply};
use crate::group::OFFSETS_TOPIC;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: TxnOffsetCommitRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let failed = |req: &TxnOffsetCommitRequest, e: ErrorCode| {
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| TxnOffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(e.code()))
                    .collect();
                TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_topic_id(t.topic_id).with_partitions(parts)
            })
            .collect();
        TxnOffsetCommitResponse::default().with_topics(topics)
    };
    // v6: topics by id. Known ids get their names (the coordinator keys offsets by name);
    // unknown ones are answered UNKNOWN_TOPIC_ID and the rest is committed.
    let mut req = req;
    let mut unknown_ids = Vec::new();
    if meta.version >= 6 {
        let (known, unknown) = resolve_ids(&ctx.image(), std::mem::take(&mut req.topics), |t| t.topic_id, |t, name| t.with_name(name));
        req.topics = known;
        unknown_ids = failed(&TxnOffsetCommitRequest::default().with_topics(unknown), ErrorCode::UNKNOWN_TOPIC_ID).topics;
    }
    // v6: the topics of the answer by id, and the unknown ids' answers.
    let version = meta.version;
    let by_id = |mut resp: TxnOffsetCommitResponse| {
        if version >= 6 {
            let image = ctx.image();
            for t in &mut resp.topics {
                t.topic_id = id_of(&image, t.name.as_str());
            }
            resp.topics.extend(unknown_ids.iter().cloned());
        }
        resp
    };
    let copy = req.clone();
    // ACLs: WRITE on the transactional id, READ on the group, READ on every topic (one
    // refusal answers every partition with it).
    let access = ctx.access(&meta);
    let refused = if !access.allows_transactional_id(Operation::Write, req.transactional_id.as_str()) {
        Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !access.allows_group(Operation::Read, &group_id) {
        Some(ErrorCode::GROUP_AUTHORIZATION_FAILED)
    } else if req.topics.iter().any(|t| !access.allows_topic(Operation::Read, t.name.as_str())) {
        Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
    } else {
        None
    };
    if let Some(e) = refused {
        return meta.respond(&by_id(failed(&copy, e)));
    }
    // KIP-890: the group's offsets partition must be in the transaction — verified for
    // v1 clients (they sent AddOffsetsToTxn), added for v2 ones (TxnOffsetCommit v5, no
    // AddOffsetsToTxn). A busy coordinator is retriable (COORDINATOR_LOAD_IN_PROGRESS).
    if let Some((partition, _)) = coordinator_of(&ctx.router, &group_id) {
        let txn_id = req.transactional_id.0.to_string();
        let tp = [(OFFSETS_TOPIC.to_string(), partition)];
        let code = verify(ctx, &txn_id, req.producer_id.0, req.producer_epoch, &tp, meta.version >= 5).await.pop().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR);
        let refused = match code {
            ErrorCode::NONE => None,
            ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::NOT_COORDINATOR | ErrorCode::CONCURRENT_TRANSACTIONS | ErrorCode::REQUEST_TIMED_OUT => {
                Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
            }
            ErrorCode::INVALID_PRODUCER_ID_MAPPING | ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH => Some(ErrorCode::INVALID_PRODUCER_EPOCH),
            e => Some(e),
        };
        if let Some(e) = refused {
            return meta.respond(&by_id(failed(&copy, e)));
        }
    }
    let resp = match route(&ctx.router, &group_id, GroupOp::TxnCommit { req, version: meta.version }).await {
        Ok(GroupReply::TxnCommit(r)) => r,
        Ok(_) => failed(&copy, ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(e) => failed(&copy, e),
    };
    meta.respond(&by_id(resp))
}
