//! IncrementalAlterConfigs for topic resources, validated and committed by the
//! controller; shards apply the new values when the change reaches them.
use std::rc::Rc;

use kafka_protocol::messages::incremental_alter_configs_request::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_response::{AlterConfigsResourceResponse, IncrementalAlterConfigsResponse};

use super::{code, str_bytes};
use crate::controller::ConfigOp;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

const RESOURCE_TOPIC: i8 = 2;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: IncrementalAlterConfigsRequest) -> Response {
    let mut responses = Vec::with_capacity(req.resources.len());
    let mut changed = false;
    for res in req.resources {
        let mut r = AlterConfigsResourceResponse::default().with_resource_type(res.resource_type).with_resource_name(res.resource_name.clone());
        if res.resource_type != RESOURCE_TOPIC {
            r.error_code = ErrorCode::INVALID_REQUEST.code();
            r.error_message = Some(str_bytes("only topic configs can be altered on this broker"));
            responses.push(r);
            continue;
        }
        let mut ops = Vec::with_capacity(res.configs.len());
        let mut bad = None;
        for c in &res.configs {
            let key = c.name.to_string();
            let value = c.value.as_ref().map(|v| v.to_string());
            let op = match (c.config_operation, value) {
                (0, Some(v)) => ConfigOp::Set(key, v),
                (1, _) => ConfigOp::Delete(key),
                (2, Some(v)) => ConfigOp::Append(key, v),
                (3, Some(v)) => ConfigOp::Subtract(key, v),
                (op, _) => {
                    bad = Some(format!("invalid operation {op} (or null value) for {key}"));
                    break;
                }
            };
            ops.push(op);
        }
        if let Some(msg) = bad {
            r.error_code = ErrorCode::INVALID_CONFIG.code();
            r.error_message = Some(str_bytes(&msg));
        } else {
            match ctx.controller.alter_topic_configs(res.resource_name.to_string(), ops, req.validate_only).await {
                Ok(()) => changed |= !req.validate_only,
                Err(e) => {
                    r.error_code = code(&e);
                    r.error_message = Some(str_bytes(&e.to_string()));
                }
            }
        }
        responses.push(r);
    }
    if changed {
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&IncrementalAlterConfigsResponse::default().with_responses(responses))
}
