//! OffsetDelete 0: removes committed offsets of partitions the group does not consume.
use std::rc::Rc;

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::group::ops::{route, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: OffsetDeleteRequest) -> Response {
    let group_id = req.group_id.0.to_string();
    let resp = match route(&ctx.router, &group_id, GroupOp::DeleteOffsets { req }).await {
        Ok(GroupReply::DeleteOffsets(r)) => r,
        Ok(_) => OffsetDeleteResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        Err(e) => OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    meta.respond(&resp)
}
