//! Legacy AlterConfigs (API 33, v0-2): the configs given become the resource's whole
//! dynamic set (keys not named go back to their defaults), for topics and brokers (this
//! broker's id, or "" for the cluster-wide default), as Kafka 4.1. Validated and committed
//! by the controller like IncrementalAlterConfigs; `validate_only` checks without commit.
//! Also the resource addressing both alter APIs share (`target`).
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::str_bytes;
use crate::cluster::image::ConfigResource;
use crate::controller::ConfigOp;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::authorization::Access;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// A resource's error code and message in an alter response (NONE and null when it worked).
pub fn error_fields(outcome: Result<(), (ErrorCode, String)>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match outcome {
        Ok(()) => (ErrorCode::NONE.code(), None),
        Err((code, message)) => (code.code(), Some(str_bytes(&message))),
    }
}

/// Refuses broker keys this broker's static config pins (INVALID_REQUEST, as a read-only key).
pub fn refuse_pinned_keys<'a>(ctx: &ShardContext, target: &Target, mut keys: impl Iterator<Item = &'a str>) -> Result<(), (ErrorCode, String)> {
    if !matches!(target, Target::Resource(ConfigResource::Broker(_))) {
        return Ok(());
    }
    match keys.find_map(|k| crate::cluster::config_defs::fixed_by_static_config(&ctx.config, k)) {
        Some(why) => Err((ErrorCode::INVALID_REQUEST, why)),
        None => Ok(()),
    }
}

/// What an alter request names.
pub enum Target {
    Topic(String),
    Resource(ConfigResource),
}

/// Resolves a request's resource: topics and groups by name, brokers by this node's id or
/// "" (Kafka: another broker id is INVALID_REQUEST). `groups`: whether the API takes group
/// resources (IncrementalAlterConfigs does, legacy AlterConfigs does not).
pub fn target(ctx: &ShardContext, resource_type: i8, name: &str, groups: bool) -> Result<Target, (ErrorCode, String)> {
    match resource_type {
        RESOURCE_TOPIC => Ok(Target::Topic(name.to_string())),
        RESOURCE_BROKER => {
            let node = ctx.config.node_id.to_string();
            if name.is_empty() || name == node {
                Ok(Target::Resource(ConfigResource::Broker(name.to_string())))
            } else {
                Err((ErrorCode::INVALID_REQUEST, format!("Unexpected broker id, expected {node} or empty string, but received {name}")))
            }
        }
        RESOURCE_GROUP if groups => {
            if name.is_empty() {
                return Err((ErrorCode::INVALID_REQUEST, "Group name must not be empty".into()));
            }
            Ok(Target::Resource(ConfigResource::Group(name.to_string())))
        }
        other => Err((ErrorCode::INVALID_REQUEST, format!("Unsupported resource type {other} for this API"))),
    }
}

/// The ACL check of a config resource (Kafka's KafkaApis): `operation` (DESCRIBE_CONFIGS
/// or ALTER_CONFIGS) on the topic, the cluster (for a broker) or the group, else
/// TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED.
pub fn check_access(access: &Access<'_>, resource_type: i8, name: &str, operation: Operation) -> Result<(), (ErrorCode, String)> {
    let (allowed, refused) = match resource_type {
        RESOURCE_TOPIC => (access.allows_topic(operation, name), ErrorCode::TOPIC_AUTHORIZATION_FAILED),
        RESOURCE_BROKER => (access.allows_cluster(operation), ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
        RESOURCE_GROUP => (access.allows_group(operation, name), ErrorCode::GROUP_AUTHORIZATION_FAILED),
        _ => (true, ErrorCode::NONE),
    };
    if allowed {
        Ok(())
    } else {
        Err((refused, "Authorization failed.".to_string()))
    }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterConfigsRequest) -> Response {
    let access = ctx.access(&meta);
    let mut responses = Vec::with_capacity(req.resources.len());
    let mut changed = false;
    for res in req.resources {
        let mut r = AlterConfigsResourceResponse::default().with_resource_type(res.resource_type).with_resource_name(res.resource_name.clone());
        let checked = check_access(&access, res.resource_type, res.resource_name.as_str(), Operation::AlterConfigs);
        let outcome = match checked.and_then(|()| target(ctx, res.resource_type, res.resource_name.as_str(), false)) {
            Err(e) => Err(e),
            Ok(t) => replace(ctx, t, &res.configs, req.validate_only).await,
        };
        changed |= outcome.is_ok() && !req.validate_only;
        (r.error_code, r.error_message) = error_fields(outcome);
        responses.push(r);
    }
    if changed {
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&AlterConfigsResponse::default().with_responses(responses))
}

async fn replace(
    ctx: &ShardContext,
    target: Target,
    configs: &[kafka_protocol::messages::alter_configs_request::AlterableConfig],
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    let mut map = BTreeMap::new();
    for c in configs {
        let Some(value) = &c.value else {
            return Err((ErrorCode::INVALID_REQUEST, format!("Null value not supported for: {}", c.name.as_str())));
        };
        if map.insert(c.name.to_string(), value.to_string()).is_some() {
            return Err((ErrorCode::INVALID_REQUEST, format!("Duplicate config key: {}", c.name.as_str())));
        }
    }
    refuse_pinned_keys(ctx, &target, map.keys().map(String::as_str))?;
    let res = match target {
        Target::Topic(name) => ctx.controller.replace_topic_configs(name, map, validate_only).await,
        Target::Resource(resource) => {
            let ops: Vec<ConfigOp> = map.into_iter().map(|(k, v)| ConfigOp::Set(k, v)).collect();
            crate::server::dynamic_tls::check_key_stores(&ctx.config, &ctx.controller.image(), &resource, &ops, true)?;
            ctx.controller.alter_resource_configs(resource, ops, true, validate_only).await
        }
    };
    res.map_err(|e| (ErrorCode::from(&e), e.to_string()))
}
