//! Heartbeat 0-4: routed to the coordinating shard (`group/membership.rs`).
use std::rc::Rc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: HeartbeatRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let code = match route_group(ctx, &meta, Operation::Read, &group_id, GroupOp::Heartbeat { req }).await {
        Ok(GroupReply::Heartbeat(c)) => c,
        Ok(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
        Err(e) => e,
    };
    meta.respond(&HeartbeatResponse::default().with_error_code(code.code()))
}
