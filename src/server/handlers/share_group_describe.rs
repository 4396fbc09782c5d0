//! ShareGroupDescribe 1 (KIP-932): each group described by its coordinating shard; each
//! is UNSUPPORTED_VERSION while share.version is below 1, as Kafka 4.4 answers.
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse};

use super::route_group;
use crate::group::share::coordinator::{ShareOp, ShareReply};
use crate::group::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Groups one request may name.
const MAX_GROUPS: usize = 10_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ShareGroupDescribeRequest) -> Response {
    let include = req.include_authorized_operations;
    let enabled = ctx.image().features.share_groups_enabled();
    let groups = req.group_ids.into_iter().take(MAX_GROUPS).map(|g| async move {
        let id = g.0.to_string();
        let failed = |e: ErrorCode| DescribedGroup::default().with_group_id(g.clone()).with_error_code(e.code()).with_authorized_operations(i32::MIN);
        if !enabled {
            return failed(ErrorCode::UNSUPPORTED_VERSION);
        }
        let op = GroupOp::Share(ShareOp::Describe { group_id: id.clone(), include_authorized_operations: include });
        match route_group(ctx, &meta, Operation::Describe, &id, op).await {
            Ok(GroupReply::Share(r)) => match *r {
                // The coordinator answers every operation; the ACLs narrow them here.
                ShareReply::Describe(d) if include => {
                    let ops = ctx.access(&meta).authorized_operations(ResourceType::Group, &id, d.authorized_operations);
                    d.with_authorized_operations(ops)
                }
                ShareReply::Describe(d) => d,
                _ => failed(ErrorCode::UNKNOWN_SERVER_ERROR),
            },
            Ok(_) => failed(ErrorCode::UNKNOWN_SERVER_ERROR),
            Err(e) => failed(e),
        }
    });
    let groups = join_all(groups).await;
    meta.respond(&ShareGroupDescribeResponse::default().with_groups(groups))
}
