//! DescribeConfigs for topics, brokers and groups, as Kafka 4.1 answers it.
//! - topic: every known key; DYNAMIC_TOPIC_CONFIG where set on the topic, else the source
//!   of the broker key it defaults to (`config_defs::topic_key_broker_synonyms`);
//! - broker `<this node id>`: every key of `config_defs::BROKER_KEYS` with the value in force
//!   and its source (dynamic per-broker > dynamic cluster default > static > default);
//!   broker "" (the cluster-wide default): only the dynamic defaults set, as Kafka;
//!   another broker id: INVALID_REQUEST, as Kafka;
//! - group: the KIP-848 group keys, GROUP_CONFIG where set (the group need not exist).
//!
//! Synonyms only when `include_synonyms`, documentation only when
//! `include_documentation`; the config type always. Sensitive values are null.
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym,
};

use super::str_bytes;
use crate::cluster::config_defs::{self, source, Described, Synonym};
use crate::cluster::topic_config::describe;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Kafka's ConfigResource.Type ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;

pub async fn handle(ctx: &ShardContext, meta: RequestMeta, req: DescribeConfigsRequest) -> Response {
    // A topic created through another shard may not be in this shard's image yet (the
    // client saw it in a Metadata answer from that shard): catch up first.
    let image = ctx
        .image_for_request(|image| {
            req.resources.iter().filter(|r| r.resource_type == RESOURCE_TOPIC && image.topic(r.resource_name.as_str()).is_none()).count()
        })
        .await;
    let access = ctx.access(&meta);
    let results = req
        .resources
        .iter()
        .map(|res| {
            let mut r = DescribeConfigsResult::default().with_resource_type(res.resource_type).with_resource_name(res.resource_name.clone());
            let name = res.resource_name.as_str();
            if let Err((code, message)) = super::alter_configs::check_access(&access, res.resource_type, name, Operation::DescribeConfigs) {
                r.error_code = code.code();
                r.error_message = Some(str_bytes(&message));
                return r;
            }
            let entries: Vec<Described> = match res.resource_type {
                RESOURCE_TOPIC => match image.topic(name) {
                    Some(t) => describe(&ctx.topic_defaults(), &t.configs)
                        .into_iter()
                        .map(|e| {
                            let mut synonyms = Vec::new();
                            if !e.is_default {
                                synonyms.push(Synonym { name: e.name.clone(), value: Some(e.value.clone()), source: source::DYNAMIC_TOPIC_CONFIG });
                            }
                            synonyms.extend(config_defs::topic_key_broker_synonyms(&e.name, &ctx.config, &image));
                            let source = synonyms.first().map_or(source::DEFAULT_CONFIG, |s| s.source);
                            let (ty, doc) = crate::cluster::topic_config::type_and_doc(&e.name).unwrap_or((config_defs::ConfigType::String, ""));
                            Described { name: e.name, value: Some(e.value), source, read_only: false, sensitive: false, ty, doc, synonyms }
                        })
                        .collect(),
                    None => {
                        r.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                        r.error_message = Some(str_bytes(&format!("Topic {name} does not exist")));
                        return r;
                    }
                },
                RESOURCE_BROKER => {
                    let node = ctx.config.node_id.to_string();
                    if !name.is_empty() && name != node {
                        r.error_code = ErrorCode::INVALID_REQUEST.code();
                        r.error_message = Some(str_bytes(&format!("Unexpected broker id, expected {node} or empty string, but received {name}")));
                        return r;
                    }
                    config_defs::describe_broker(&ctx.config, &image, name)
                }
                RESOURCE_GROUP => config_defs::describe_group(&ctx.config, &image, name),
                other => {
                    r.error_code = ErrorCode::INVALID_REQUEST.code();
                    r.error_message = Some(str_bytes(&format!("Unsupported resource type {other}: topic, broker and group configs are served")));
                    return r;
                }
            };
            r.configs = entries
                .into_iter()
                .filter(|d| res.configuration_keys.as_ref().is_none_or(|keys| keys.iter().any(|k| k.as_str() == d.name)))
                .map(|d| entry(d, req.include_synonyms, req.include_documentation))
                .collect();
            r
        })
        .collect();
    meta.respond(&DescribeConfigsResponse::default().with_results(results))
}

fn entry(d: Described, include_synonyms: bool, include_documentation: bool) -> DescribeConfigsResourceResult {
    let synonyms = if include_synonyms {
        d.synonyms
            .iter()
            .map(|s| DescribeConfigsSynonym::default().with_name(str_bytes(&s.name)).with_value(s.value.as_deref().map(str_bytes)).with_source(s.source))
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(&d.name))
        .with_value(d.value.as_deref().map(str_bytes))
        .with_read_only(d.read_only)
        .with_config_source(d.source)
        .with_is_sensitive(d.sensitive)
        .with_synonyms(synonyms)
        .with_config_type(d.ty as i8)
        .with_documentation(include_documentation.then(|| str_bytes(d.doc)))
}
