//! ConsumerGroupHeartbeat 0-1 (KIP-848): routed to the coordinating shard
//! (`group/consumer/`), like the classic group APIs. With group.version finalized below 1
//! (`kafka-features.sh downgrade --feature group.version=0`) it is UNSUPPORTED_VERSION, as
//! Kafka 4.4 answers (the API stays advertised).
use std::rc::Rc;

use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::route_group;
use super::str_bytes;
use crate::group::consumer::{ConsumerOp, ConsumerReply};
use crate::group::ops::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

fn error(e: ErrorCode) -> ConsumerGroupHeartbeatResponse {
    let msg = e.as_response_error().map(|r| r.to_string());
    ConsumerGroupHeartbeatResponse::default().with_error_code(e.code()).with_error_message(msg.as_deref().map(str_bytes))
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ConsumerGroupHeartbeatRequest, client_id: String) -> Response {
    if !ctx.image().features.consumer_groups_enabled() {
        return meta.respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(ErrorCode::UNSUPPORTED_VERSION.code()));
    }
    let group_id = req.group_id.0.to_string();
    // ACLs, as Kafka's KafkaApis: READ on the group (route_group checks it again), then
    // DESCRIBE on every topic named in the subscription, else TOPIC_AUTHORIZATION_FAILED
    // (without a message, and without saying which: a member may not learn of topics it
    // cannot describe).
    let access = ctx.access(&meta);
    if access.is_checked() && access.allows_group(Operation::Read, &group_id) {
        let names = req.subscribed_topic_names.iter().flatten();
        if names.into_iter().any(|t| !access.allows_topic(Operation::Describe, t.0.as_str())) {
            return meta
                .respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()).with_error_message(None));
        }
    }
    // Kafka reports the host as "/<ip>".
    let client_host = meta.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default();
    let op = GroupOp::Consumer(ConsumerOp::Heartbeat { req: Box::new(req), version: meta.version, client_id, client_host });
    let resp = match route_group(ctx, &meta, Operation::Read, &group_id, op).await {
        Ok(GroupReply::Consumer(r)) => match *r {
            ConsumerReply::Heartbeat(r) => r,
            ConsumerReply::Describe(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR),
        },
        Ok(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(e) => error(e),
    };
    meta.respond(&resp)
}
