//! SyncGroup 0-5: routed to the coordinating shard (`group/membership.rs`).
use std::rc::Rc;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Assignments one SyncGroup may carry (the leader sends one per member).
const MAX_ASSIGNMENTS: usize = 100_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: SyncGroupRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let mut resp = if req.assignments.len() > MAX_ASSIGNMENTS {
        SyncGroupResponse::default().with_error_code(ErrorCode::INVALID_REQUEST.code())
    } else {
        match route_group(ctx, &meta, Operation::Read, &group_id, GroupOp::Sync { req, version: meta.version }).await {
            Ok(GroupReply::Sync(r)) => r,
            Ok(_) => SyncGroupResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
            Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
        }
    };
    if meta.version < 5 {
        resp.protocol_type = None;
        resp.protocol_name = None;
    }
    meta.respond(&resp)
}
