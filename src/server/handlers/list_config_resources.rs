//! ListConfigResources 0-1 (KIP-714 ListClientMetricsResources, extended by KIP-1142 in
//! Kafka 4.1), answered as Kafka 4.1 does (checked against a node on the wire):
//! - v0 lists client-metrics resources only: none here (no client-metrics configs exist);
//! - v1 lists the resource types asked for, all supported ones when the list is empty:
//!   BROKER_LOGGER and BROKER (this node's id), TOPIC (every topic, internal ones too),
//!   CLIENT_METRICS and GROUP (resources with dynamic configs: groups with group configs
//!   set, no client-metrics configs);
//! - any other type (UNKNOWN, ANY, CLUSTER, TRANSACTIONAL_ID, ...) makes the whole answer
//!   UNSUPPORTED_VERSION with no resources.
use std::rc::Rc;

use kafka_protocol::messages::list_config_resources_response::{ConfigResource, ListConfigResourcesResponse};
use kafka_protocol::messages::ListConfigResourcesRequest;

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Kafka's ConfigResource.Type ids.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;
const SUPPORTED: [i8; 5] = [TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP];

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListConfigResourcesRequest) -> Response {
    let mut resp = ListConfigResourcesResponse::default();
    // ACLs: DESCRIBE_CONFIGS on the cluster (Kafka's KafkaApis).
    if !ctx.access(&meta).allows_cluster(Operation::DescribeConfigs) {
        resp.error_code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
        return meta.respond(&resp);
    }
    if meta.version == 0 {
        // Client-metrics resources only, and there are none.
        return meta.respond(&resp);
    }
    if req.resource_types.iter().any(|t| !SUPPORTED.contains(t)) {
        resp.error_code = ErrorCode::UNSUPPORTED_VERSION.code();
        return meta.respond(&resp);
    }
    let wants = |t: i8| req.resource_types.is_empty() || req.resource_types.contains(&t);
    let node = ctx.config.node_id.to_string();
    let resource = |name: &str, t: i8| ConfigResource::default().with_resource_name(str_bytes(name)).with_resource_type(t);
    if wants(BROKER_LOGGER) {
        resp.config_resources.push(resource(&node, BROKER_LOGGER));
    }
    if wants(BROKER) {
        resp.config_resources.push(resource(&node, BROKER));
    }
    let image = ctx.image();
    if wants(TOPIC) {
        resp.config_resources.extend(image.topics.keys().map(|n| resource(n, TOPIC)));
    }
    if wants(GROUP) {
        resp.config_resources.extend(image.resource_configs.keys().filter_map(|r| match r {
            crate::cluster::image::ConfigResource::Group(g) => Some(resource(g, GROUP)),
            crate::cluster::image::ConfigResource::Broker(_) => None,
        }));
    }
    meta.respond(&resp)
}
