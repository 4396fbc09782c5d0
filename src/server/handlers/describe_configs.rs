//! DescribeConfigs for topics (every known key: set on the topic = DYNAMIC_TOPIC_CONFIG,
//! else DEFAULT_CONFIG) and for this broker (its effective settings, read-only).
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult};

use super::str_bytes;
use crate::cluster::topic_config::describe;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

pub fn handle(ctx: &ShardContext, meta: RequestMeta, req: DescribeConfigsRequest) -> Response {
    let image = ctx.image();
    let results = req
        .resources
        .iter()
        .map(|res| {
            let mut r = DescribeConfigsResult::default().with_resource_type(res.resource_type).with_resource_name(res.resource_name.clone());
            let entries: Vec<(String, String, i8, bool)> = match res.resource_type {
                RESOURCE_TOPIC => match image.topic(res.resource_name.as_str()) {
                    Some(t) => describe(&ctx.topic_defaults, &t.configs)
                        .into_iter()
                        .map(|e| (e.name, e.value, if e.is_default { SOURCE_DEFAULT } else { SOURCE_DYNAMIC_TOPIC }, false))
                        .collect(),
                    None => {
                        r.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                        return r;
                    }
                },
                RESOURCE_BROKER => {
                    if res.resource_name.as_str() != ctx.config.node_id.to_string() && !res.resource_name.is_empty() {
                        r.error_code = ErrorCode::INVALID_REQUEST.code();
                        r.error_message = Some(str_bytes("unknown broker id"));
                        return r;
                    }
                    broker_configs(ctx)
                }
                _ => {
                    r.error_code = ErrorCode::INVALID_REQUEST.code();
                    r.error_message = Some(str_bytes("only topic and broker resources are supported"));
                    return r;
                }
            };
            r.configs = entries
                .into_iter()
                .filter(|(name, ..)| res.configuration_keys.as_ref().is_none_or(|keys| keys.iter().any(|k| k.as_str() == name)))
                .map(|(name, value, source, read_only)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(&name))
                        .with_value(Some(str_bytes(&value)))
                        .with_read_only(read_only)
                        .with_config_source(source)
                })
                .collect();
            r
        })
        .collect();
    meta.respond(&DescribeConfigsResponse::default().with_results(results))
}

fn broker_configs(ctx: &ShardContext) -> Vec<(String, String, i8, bool)> {
    let c = &ctx.config;
    let s = |k: &str, v: String| (k.to_string(), v, SOURCE_STATIC_BROKER, true);
    vec![
        s("broker.id", c.node_id.to_string()),
        s("node.id", c.node_id.to_string()),
        s("num.partitions", c.num_partitions.to_string()),
        s("auto.create.topics.enable", c.auto_create_topics_enable.to_string()),
        s("log.segment.bytes", c.log_segment_bytes.to_string()),
        s("log.roll.ms", c.log_roll_ms.to_string()),
        s("log.retention.ms", c.log_retention_ms.to_string()),
        s("log.retention.bytes", c.log_retention_bytes.to_string()),
        s("message.max.bytes", c.message_max_bytes.to_string()),
        s("log.message.timestamp.type", c.log_message_timestamp_type.clone()),
        s("socket.request.max.bytes", c.socket_request_max_bytes.to_string()),
        s("log.retention.check.interval.ms", c.log_retention_check_interval_ms.to_string()),
        s("log.cleaner.backoff.ms", c.log_cleaner_backoff_ms.to_string()),
    ]
}
