//! DeleteShareGroupOffsets 0 (KIP-932), as Kafka 4.4 answers it: share.version below 1
//! UNSUPPORTED_VERSION, no DELETE on the group GROUP_AUTHORIZATION_FAILED (top level); a
//! topic without READ TOPIC_AUTHORIZATION_FAILED; the rest is the group coordinator's
//! (`group/share/offsets_admin.rs`: the group must be empty, the topics' share state is
//! deleted from the share coordinator).
use std::rc::Rc;

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};

use super::route_group;
use crate::group::share::coordinator::{ShareOp, ShareReply};
use crate::group::{GroupOp, GroupReply};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Topics one request may name.
const MAX_TOPICS: usize = 10_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteShareGroupOffsetsRequest) -> Response {
    let failed = |e: ErrorCode| meta.respond(&DeleteShareGroupOffsetsResponse::default().with_error_code(e.code()));
    if !ctx.image().features.share_groups_enabled() {
        return failed(ErrorCode::UNSUPPORTED_VERSION);
    }
    let group_id = req.group_id.0.to_string();
    let access = ctx.access(&meta);
    if !access.allows_group(Operation::Delete, &group_id) {
        return failed(ErrorCode::GROUP_AUTHORIZATION_FAILED);
    }
    let (mut refused, mut topics) = (Vec::new(), Vec::new());
    for t in req.topics.into_iter().take(MAX_TOPICS) {
        if access.allows_topic(Operation::Read, t.topic_name.0.as_str()) {
            topics.push(t.topic_name.0.to_string());
        } else {
            refused.push(
                DeleteShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(t.topic_name)
                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code())
                    .with_error_message(Some(str_bytes("Not authorized to access topics: [Topic authorization failed.]"))),
            );
        }
    }
    let op = GroupOp::Share(ShareOp::DeleteOffsets { group_id: group_id.clone(), topics });
    let resp = match route_group(ctx, &meta, Operation::Delete, &group_id, op).await {
        Ok(GroupReply::Share(r)) => match *r {
            ShareReply::DeletedOffsets(mut resp) => {
                if resp.error_code == 0 {
                    refused.append(&mut resp.responses);
                    resp.responses = refused;
                }
                resp
            }
            _ => DeleteShareGroupOffsetsResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        },
        Ok(_) => DeleteShareGroupOffsetsResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        Err(e) => DeleteShareGroupOffsetsResponse::default().with_error_code(e.code()),
    };
    meta.respond(&resp)
}
