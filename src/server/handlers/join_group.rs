//! JoinGroup 0-9: routed to the coordinating shard (`group/membership.rs`). The response
//! is trimmed to what the request version carries.
use std::rc::Rc;

use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: JoinGroupRequest, client_id: String) -> Response {
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.clone();
    // Kafka reports the host as "/<ip>".
    let client_host = meta.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default();
    let op = GroupOp::Join { req, version: meta.version, client_id, client_host };
    let mut resp = match route_group(ctx, &meta, Operation::Read, &group_id, op).await {
        Ok(GroupReply::Join(r)) => r,
        Ok(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR, member_id),
        Err(e) => error(e, member_id),
    };
    if meta.version < 7 {
        resp.protocol_type = None;
    }
    if meta.version < 5 {
        for m in &mut resp.members {
            m.group_instance_id = None;
        }
    }
    if resp.protocol_name.is_none() && meta.version < 7 {
        // Not nullable before v7.
        resp.protocol_name = Some(StrBytes::default());
    }
    meta.respond(&resp)
}

fn error(e: ErrorCode, member_id: StrBytes) -> JoinGroupResponse {
    JoinGroupResponse::default().with_error_code(e.code()).with_generation_id(-1).with_member_id(member_id).with_protocol_name(Some(StrBytes::default()))
}
