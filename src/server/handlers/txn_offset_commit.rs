//! TxnOffsetCommit 0-5: offsets a transactional producer commits for a consumer group,
//! written with its transaction and visible once the commit marker reaches the group's
//! `__consumer_offsets` partition (`group/txn_offsets.rs`). Routed to the group's
//! coordinator like OffsetCommit.
use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use crate::group::ops::{route, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: TxnOffsetCommitRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let failed = |req: &TxnOffsetCommitRequest, e: ErrorCode| {
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let parts = t.partitions.iter().map(|p| TxnOffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(e.code())).collect();
                TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(parts)
            })
            .collect();
        TxnOffsetCommitResponse::default().with_topics(topics)
    };
    let copy = req.clone();
    let resp = match route(&ctx.router, &group_id, GroupOp::TxnCommit { req, version: meta.version }).await {
        Ok(GroupReply::TxnCommit(r)) => r,
        Ok(_) => failed(&copy, ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(e) => failed(&copy, e),
    };
    meta.respond(&resp)
}
