//! OffsetDelete 0: removes committed offsets of partitions the group does not consume.
use std::rc::Rc;

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::group::ops::{route, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: OffsetDeleteRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    // ACLs: DELETE on the group (top-level GROUP_AUTHORIZATION_FAILED), READ on each topic
    // (else its partitions are TOPIC_AUTHORIZATION_FAILED and the rest deleted).
    let access = ctx.access(&meta);
    if !access.allows_group(Operation::Delete, &group_id) {
        return meta.respond(&OffsetDeleteResponse::default().with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.code()));
    }
    let mut req = req;
    let (topics, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics).into_iter().partition(|t| access.allows_topic(Operation::Read, t.name.as_str()));
    req.topics = topics;
    let denied: Vec<OffsetDeleteResponseTopic> = denied
        .into_iter()
        .map(|t| {
            let parts = t.partitions.iter().map(|p| {
                OffsetDeleteResponsePartition::default().with_partition_index(p.partition_index).with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code())
            });
            OffsetDeleteResponseTopic::default().with_name(t.name.clone()).with_partitions(parts.collect())
        })
        .collect();
    let resp = match route(&ctx.router, &group_id, GroupOp::DeleteOffsets { req }).await {
        Ok(GroupReply::DeleteOffsets(r)) => r,
        Ok(_) => OffsetDeleteResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        Err(e) => OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let mut resp = resp;
    resp.topics.extend(denied);
    meta.respond(&resp)
}
