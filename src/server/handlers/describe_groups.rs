//! DescribeGroups 0-6: each group described by its coordinating shard. When asked (v3+),
//! groups described without error carry their authorized operations: all of them (no
//! authorizer), as Kafka.
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::route_group;
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::{acl_operations, ErrorCode};
use crate::security::acl::{Operation, ResourceType};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Groups one request may name.
const MAX_GROUPS: usize = 10_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeGroupsRequest) -> Response {
    let v = meta.version;
    let include_operations = req.include_authorized_operations;
    let groups = req.groups.into_iter().take(MAX_GROUPS).map(|g| async move {
        let id = g.0.to_string();
        let mut d = match route_group(ctx, &meta, Operation::Describe, &id, GroupOp::Describe { group_id: id.clone(), version: v }).await {
            Ok(GroupReply::Describe(d)) => d,
            Ok(_) => DescribedGroup::default().with_group_id(g).with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
            Err(e) => DescribedGroup::default().with_group_id(g).with_error_code(e.code()),
        };
        if v < 6 {
            d.error_message = None;
        }
        let ops = || ctx.access(&meta).authorized_operations(ResourceType::Group, &id, acl_operations::GROUP);
        d.authorized_operations = if include_operations && d.error_code == ErrorCode::NONE.code() { ops() } else { acl_operations::NOT_REQUESTED };
        d
    });
    let groups = join_all(groups).await;
    meta.respond(&DescribeGroupsResponse::default().with_groups(groups))
}
