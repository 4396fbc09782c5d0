//! DeleteGroups 0-2: an Empty group's offsets and metadata are tombstoned in
//! `__consumer_offsets`; a group with members gets NON_EMPTY_GROUP.
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Groups one request may name.
const MAX_GROUPS: usize = 10_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteGroupsRequest) -> Response {
    let results = req.groups_names.into_iter().take(MAX_GROUPS).map(|g| async move {
        let id = g.0.to_string();
        let code = match route_group(ctx, &meta, Operation::Delete, &id, GroupOp::Delete { group_id: id.clone() }).await {
            Ok(GroupReply::Delete(c)) => c,
            Ok(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
            Err(e) => e,
        };
        DeletableGroupResult::default().with_group_id(g).with_error_code(code.code())
    });
    let results = join_all(results).await;
    meta.respond(&DeleteGroupsResponse::default().with_results(results))
}
