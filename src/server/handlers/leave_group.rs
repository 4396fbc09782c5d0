//! LeaveGroup 0-5: v0-2 name one member, v3+ a batch (`members`), answered per member.
use std::rc::Rc;

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Members one LeaveGroup may name.
const MAX_MEMBERS: usize = 100_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: LeaveGroupRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let members = if meta.version < 3 { vec![MemberIdentity::default().with_member_id(req.member_id.clone())] } else { req.members };
    if members.len() > MAX_MEMBERS {
        return meta.respond(&LeaveGroupResponse::default().with_error_code(ErrorCode::INVALID_REQUEST.code()));
    }
    let (top, results) = match route_group(ctx, &meta, Operation::Read, &group_id, GroupOp::Leave { group_id: group_id.clone(), members }).await {
        Ok(GroupReply::Leave(top, results)) => (top, results),
        Ok(_) => (ErrorCode::UNKNOWN_SERVER_ERROR, Vec::new()),
        Err(e) => (e, Vec::new()),
    };
    let resp = if meta.version < 3 {
        // One member: its result is the response's error.
        let code = results.first().map(|r| r.error_code).filter(|_| top == ErrorCode::NONE).unwrap_or(top.code());
        LeaveGroupResponse::default().with_error_code(code)
    } else {
        LeaveGroupResponse::default().with_error_code(top.code()).with_members(results)
    };
    meta.respond(&resp)
}
