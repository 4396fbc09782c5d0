//! ListGroups 0-5: asks every shard that coordinates groups; v4 filters by state, v5 by
//! type (every group here is "classic").
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use crate::group::ops::{call_partition, one_partition_per_shard, GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListGroupsRequest) -> Response {
    let states: Vec<String> = req.states_filter.iter().take(16).map(|s| s.to_string()).collect();
    let types: Vec<String> = req.types_filter.iter().take(16).map(|s| s.to_string()).collect();
    let calls = one_partition_per_shard(&ctx.router).into_iter().map(|(shard, partition)| {
        let op = GroupOp::List { states: states.clone(), types: types.clone() };
        call_partition(&ctx.router, shard, partition, op)
    });
    let mut error = ErrorCode::NONE;
    let mut groups = Vec::new();
    for r in join_all(calls).await {
        match r {
            Ok(GroupReply::List(g)) => groups.extend(g),
            Ok(_) => error = ErrorCode::UNKNOWN_SERVER_ERROR,
            Err(e) => error = e,
        }
    }
    // ACLs: DESCRIBE on the cluster lists every group; else only the groups the
    // principal may DESCRIBE (Kafka's KafkaApis).
    let access = ctx.access(&meta);
    if !access.allows_cluster(Operation::Describe) {
        groups.retain(|g| access.allows_group(Operation::Describe, g.group_id.as_str()));
    }
    for g in &mut groups {
        if meta.version < 4 {
            g.group_state = Default::default();
        }
        if meta.version < 5 {
            g.group_type = Default::default();
        }
    }
    meta.respond(&ListGroupsResponse::default().with_error_code(error.code()).with_groups(groups))
}
