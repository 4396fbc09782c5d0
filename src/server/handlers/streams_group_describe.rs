//! StreamsGroupDescribe 0-1 (KIP-1071): each group routed to its coordinating shard
//! (`group/streams/describe.rs`). As Kafka's KafkaApis: below streams.version 1 every
//! group is UNSUPPORTED_VERSION; DESCRIBE on the group else GROUP_AUTHORIZATION_FAILED;
//! an empty id INVALID_GROUP_ID; a group whose topology names a topic the caller may not
//! describe is TOPIC_AUTHORIZATION_FAILED without its members or topology.
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::streams_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{GroupId, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse};

use super::str_bytes;
use crate::group::streams::coordinator::{StreamsOp, StreamsReply};
use crate::group::{GroupOp, GroupReply};
use crate::protocol::acl_operations::NOT_REQUESTED as OPERATIONS_NOT_REQUESTED;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Groups one request may name.
const MAX_GROUPS: usize = 10_000;

fn failed(group_id: &str, code: ErrorCode, message: Option<&str>) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(GroupId(str_bytes(group_id)))
        .with_error_code(code.code())
        .with_error_message(message.map(str_bytes))
        .with_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: StreamsGroupDescribeRequest) -> Response {
    let ids: Vec<String> = req.group_ids.iter().take(MAX_GROUPS).map(|g| g.0.to_string()).collect();
    if !ctx.image().features.streams_groups_enabled() {
        let groups = ids.iter().map(|g| failed(g, ErrorCode::UNSUPPORTED_VERSION, None)).collect();
        return meta.respond(&StreamsGroupDescribeResponse::default().with_groups(groups));
    }
    let access = ctx.access(&meta);
    let version = meta.version;
    let futures = ids.into_iter().map(|group_id| {
        let access = &access;
        async move {
            if group_id.is_empty() {
                return failed(&group_id, ErrorCode::INVALID_GROUP_ID, None);
            }
            if !access.allows_group(Operation::Describe, &group_id) {
                return failed(&group_id, ErrorCode::GROUP_AUTHORIZATION_FAILED, None);
            }
            let op =
                GroupOp::Streams(StreamsOp::Describe { group_id: group_id.clone(), include_authorized_operations: req.include_authorized_operations, version });
            match crate::group::ops::route(&ctx.router, &group_id, op).await {
                Ok(GroupReply::Streams(r)) => match *r {
                    StreamsReply::Describe(d) => {
                        let topics = d.topology.iter().flat_map(|t| t.subtopologies.iter().flatten()).flat_map(|s| {
                            s.source_topics
                                .iter()
                                .chain(s.repartition_sink_topics.iter())
                                .map(|t| t.0.to_string())
                                .chain(s.repartition_source_topics.iter().chain(s.state_changelog_topics.iter()).map(|t| t.name.0.to_string()))
                        });
                        let hidden = topics.collect::<Vec<_>>().iter().any(|t| !access.allows_topic(Operation::Describe, t));
                        if hidden {
                            failed(
                                &group_id,
                                ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                Some("The described group uses topics that the client is not authorized to describe."),
                            )
                        } else {
                            *d
                        }
                    }
                    StreamsReply::Heartbeat(_) => failed(&group_id, ErrorCode::UNKNOWN_SERVER_ERROR, None),
                },
                Ok(_) => failed(&group_id, ErrorCode::UNKNOWN_SERVER_ERROR, None),
                Err(e) => failed(&group_id, e, None),
            }
        }
    });
    let groups = join_all(futures).await;
    meta.respond(&StreamsGroupDescribeResponse::default().with_groups(groups))
}
