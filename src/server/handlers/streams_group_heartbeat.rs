//! StreamsGroupHeartbeat 0-1 (KIP-1071): routed to the coordinating shard
//! (`group/streams/coordinator.rs`). While streams.version is below 1 it is
//! UNSUPPORTED_VERSION, as Kafka 4.4 answers. As Kafka's KafkaApis: the topology's topics
//! are checked first (no Kafka internal topic, valid names, DESCRIBE on each), and the
//! internal topics the coordinator reports missing are created here, in the background
//! (the members keep heartbeating; the topics' appearance in the metadata makes the group
//! ready), unless the caller may not CREATE them, which the status then says.
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use kafka_protocol::messages::streams_group_heartbeat_response::Status;
use kafka_protocol::messages::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse};

use super::{route_group, str_bytes};
use crate::group::streams::configure::{ConfiguredInternalTopic, TopicConfigurationStatus};
use crate::group::streams::coordinator::{StreamsOp, StreamsReply};
use crate::group::streams::heartbeat_request::check_topology_topics;
use crate::group::{GroupOp, GroupReply};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

thread_local! {
    /// Internal topics this shard is creating now (one CreateTopic each at a time).
    static CREATING: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

fn error(code: ErrorCode, message: Option<String>) -> StreamsGroupHeartbeatResponse {
    StreamsGroupHeartbeatResponse::default().with_error_code(code.code()).with_error_message(message.as_deref().map(str_bytes))
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: StreamsGroupHeartbeatRequest, client_id: String) -> Response {
    if !ctx.image().features.streams_groups_enabled() {
        return meta.respond(&error(ErrorCode::UNSUPPORTED_VERSION, None));
    }
    let group_id = req.group_id.0.to_string();
    let access = ctx.access(&meta);
    if !access.allows_group(Operation::Read, &group_id) {
        return meta.respond(&error(ErrorCode::GROUP_AUTHORIZATION_FAILED, None));
    }
    if let Some(t) = &req.topology {
        if let Err((code, message)) = check_topology_topics(t) {
            return meta.respond(&error(code, Some(message)));
        }
        let topology = crate::group::streams::heartbeat_request::topology(t);
        if topology.required_topics().iter().any(|name| !access.allows_topic(Operation::Describe, name)) {
            return meta.respond(&error(ErrorCode::TOPIC_AUTHORIZATION_FAILED, None));
        }
    }
    let client_host = meta.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default();
    let op = GroupOp::Streams(StreamsOp::Heartbeat { req: Box::new(req), version: meta.version, client_id, client_host });
    let mut resp = match route_group(ctx, &meta, Operation::Read, &group_id, op).await {
        Ok(GroupReply::Streams(r)) => match *r {
            StreamsReply::Heartbeat(answer) => match *answer {
                Ok((resp, to_create)) => {
                    let mut resp = resp;
                    if !to_create.is_empty() {
                        create_internal_topics(ctx, &meta, &mut resp, to_create);
                    }
                    resp
                }
                Err((code, message)) => error(code, Some(message)),
            },
            StreamsReply::Describe(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR, None),
        },
        Ok(_) => error(ErrorCode::UNKNOWN_SERVER_ERROR, None),
        Err(e) => error(e, None),
    };
    if resp.error_code != 0 && resp.error_message.is_none() {
        resp.error_message = ErrorCode(resp.error_code).as_response_error().map(|e| str_bytes(&e.to_string()));
    }
    meta.respond(&resp)
}

/// Starts creating `topics` with the caller's rights (CREATE on the cluster, or on each
/// topic); without them, the MISSING_INTERNAL_TOPICS status says so and nothing is created.
fn create_internal_topics(ctx: &Rc<ShardContext>, meta: &RequestMeta, resp: &mut StreamsGroupHeartbeatResponse, topics: Vec<ConfiguredInternalTopic>) {
    let access = ctx.access(meta);
    if !access.allows_cluster(Operation::Create) {
        let denied: Vec<&str> = topics.iter().map(|t| t.name.as_str()).filter(|n| !access.allows_topic(Operation::Create, n)).collect();
        if !denied.is_empty() {
            let note = format!("; Unauthorized to CREATE on topics {}.", denied.join(", "));
            let code = TopicConfigurationStatus::MissingInternalTopics.code();
            let statuses = resp.status.get_or_insert_with(Vec::new);
            match statuses.iter_mut().find(|s| s.status_code == code) {
                Some(s) => s.status_detail = str_bytes(&format!("{}{note}", s.status_detail)),
                None => statuses.push(Status::default().with_status_code(code).with_status_detail(str_bytes(note.trim_start_matches("; ")))),
            }
            return;
        }
    }
    for t in topics {
        if ctx.controller.image().topic(&t.name).is_some() || !CREATING.with(|c| c.borrow_mut().insert(t.name.clone())) {
            continue;
        }
        let ctx = ctx.clone();
        glommio::spawn_local(async move {
            let configs: BTreeMap<String, String> = t.topic_configs.clone();
            match ctx.controller.create_topic(t.name.clone(), t.number_of_partitions, t.creatable_replication_factor(), configs, false).await {
                Ok(_) => tracing::info!(topic = %t.name, partitions = t.number_of_partitions, "created a streams group's internal topic"),
                Err(crate::controller::ControllerError::TopicAlreadyExists(_)) => {}
                Err(e) => tracing::warn!(topic = %t.name, error = %e, "cannot create a streams group's internal topic"),
            }
            CREATING.with(|c| c.borrow_mut().remove(&t.name));
        })
        .detach();
    }
}
