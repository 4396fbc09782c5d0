//! ShareGroupHeartbeat 1 (KIP-932): routed to the coordinating shard
//! (`group/share/coordinator.rs`). While share.version is below 1 it is
//! UNSUPPORTED_VERSION, as Kafka 4.4 answers (the API stays advertised).
use std::rc::Rc;

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::{route_group, str_bytes};
use crate::group::share::coordinator::{ShareOp, ShareReply};
use crate::group::share::share_group::ShareHeartbeat;
use crate::group::GroupReply;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

fn error(code: ErrorCode, message: Option<String>) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default().with_error_code(code.code()).with_error_message(message.as_deref().map(str_bytes))
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ShareGroupHeartbeatRequest, client_id: String) -> Response {
    if !ctx.image().features.share_groups_enabled() {
        return meta.respond(&error(ErrorCode::UNSUPPORTED_VERSION, None));
    }
    // The share-partitions' state lives in `__share_group_state` (Kafka's group
    // coordinator creates it when it initializes the first share-partition).
    super::share_state_common::ensure_share_group_state_topic(ctx);
    let group_id = req.group_id.0.to_string();
    // ACLs, as for ConsumerGroupHeartbeat: READ on the group (route_group), DESCRIBE on
    // every subscribed topic, else TOPIC_AUTHORIZATION_FAILED without naming them.
    let access = ctx.access(&meta);
    if access.is_checked() && access.allows_group(Operation::Read, &group_id) {
        let mut names = req.subscribed_topic_names.iter().flatten();
        if names.any(|t| !access.allows_topic(Operation::Describe, t.0.as_str())) {
            return meta.respond(&error(ErrorCode::TOPIC_AUTHORIZATION_FAILED, None));
        }
    }
    let heartbeat = ShareHeartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.as_ref().map(|r| r.to_string()),
        subscribed_topic_names: req.subscribed_topic_names.as_ref().map(|t| t.iter().map(|n| n.0.to_string()).collect()),
        client_id,
        client_host: meta.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default(),
    };
    let op = crate::group::GroupOp::Share(ShareOp::Heartbeat { group_id: group_id.clone(), heartbeat });
    let resp = match route_group(ctx, &meta, Operation::Read, &group_id, op).await {
        Ok(GroupReply::Share(r)) => match *r {
            ShareReply::Heartbeat(Ok(a)) => {
                let assignment = a.assignment.map(|a| {
                    Assignment::default().with_topic_partitions(
                        a.into_iter().map(|(t, ps)| TopicPartitions::default().with_topic_id(t).with_partitions(ps.into_iter().collect())).collect(),
                    )
                });
                ShareGroupHeartbeatResponse::default()
                    .with_member_id(Some(str_bytes(&a.member_id)))
                    .with_member_epoch(a.member_epoch)
                    .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
                    .with_assignment(assignment)
            }
            ShareReply::Heartbeat(Err((code, message))) => error(code, message),
            _ => error(ErrorCode::UNKNOWN_SERVER_ERROR, None),
        },
        Ok(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR, None),
        Err(e) => error(e, None),
    };
    meta.respond(&resp)
}
