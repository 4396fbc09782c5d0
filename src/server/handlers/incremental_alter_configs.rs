//! IncrementalAlterConfigs for topic, broker (this broker's id, or "" for the cluster-wide
//! default) and group resources, validated and committed by the controller through the
//! metadata log; shards apply the new values when the change reaches them. Broker keys
//! that are not dynamic are INVALID_REQUEST, as Kafka's DynamicBrokerConfig refuses them;
//! bad values are INVALID_CONFIG (`cluster/config_defs.rs`).
use std::rc::Rc;

use kafka_protocol::messages::incremental_alter_configs_request::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_response::{AlterConfigsResourceResponse, IncrementalAlterConfigsResponse};

use super::alter_configs::{check_access, error_fields, refuse_pinned_keys, target, Target};
use crate::controller::ConfigOp;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::dynamic_tls::check_key_stores;
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: IncrementalAlterConfigsRequest) -> Response {
    let mut responses = Vec::with_capacity(req.resources.len());
    let mut changed = false;
    let access = ctx.access(&meta);
    for res in req.resources {
        let mut r = AlterConfigsResourceResponse::default().with_resource_type(res.resource_type).with_resource_name(res.resource_name.clone());
        let target = check_access(&access, res.resource_type, res.resource_name.as_str(), Operation::AlterConfigs)
            .and_then(|()| target(ctx, res.resource_type, res.resource_name.as_str(), true))
            .and_then(|t| refuse_pinned_keys(ctx, &t, res.configs.iter().map(|c| c.name.as_str())).map(|()| t));
        let outcome = match (target, ops(&res.configs)) {
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(Target::Topic(name)), Ok(ops)) => {
                ctx.controller.alter_topic_configs(name, ops, req.validate_only).await.map_err(|e| (ErrorCode::from(&e), e.to_string()))
            }
            (Ok(Target::Resource(resource)), Ok(ops)) => match check_key_stores(&ctx.config, &ctx.controller.image(), &resource, &ops, false) {
                Err(e) => Err(e),
                Ok(()) => {
                    ctx.controller.alter_resource_configs(resource, ops, false, req.validate_only).await.map_err(|e| (ErrorCode::from(&e), e.to_string()))
                }
            },
        };
        changed |= outcome.is_ok() && !req.validate_only;
        (r.error_code, r.error_message) = error_fields(outcome);
        responses.push(r);
    }
    if changed {
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&IncrementalAlterConfigsResponse::default().with_responses(responses))
}

/// The request's operations: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (Kafka's OpType).
fn ops(configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig]) -> Result<Vec<ConfigOp>, (ErrorCode, String)> {
    configs
        .iter()
        .map(|c| {
            let key = c.name.to_string();
            let value = c.value.as_ref().map(|v| v.to_string());
            match (c.config_operation, value) {
                (0, Some(v)) => Ok(ConfigOp::Set(key, v)),
                (1, _) => Ok(ConfigOp::Delete(key)),
                (2, Some(v)) => Ok(ConfigOp::Append(key, v)),
                (3, Some(v)) => Ok(ConfigOp::Subtract(key, v)),
                (op, _) => Err((ErrorCode::INVALID_CONFIG, format!("invalid operation {op} (or null value) for {key}"))),
            }
        })
        .collect()
}
