//! DescribeCluster 0-1: every live broker; the controller id is this broker (KIP-919:
//! a broker names any live broker, which forwards to the quorum). Cluster
//! authorized operations when asked: all of them (no authorizer), as Kafka answers.
use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest};

use super::cluster_view::live_brokers;
use super::{str_bytes, this_node};
use crate::protocol::acl_operations;
use crate::security::acl::{ResourceType, CLUSTER_NAME};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub fn handle(ctx: &ShardContext, meta: RequestMeta, req: DescribeClusterRequest) -> Response {
    let (node, _, _) = this_node(ctx, meta.listener);
    let image = ctx.image();
    let resp = DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(str_bytes(&image.cluster_id))
        .with_controller_id(BrokerId(node))
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            ctx.access(&meta).authorized_operations(ResourceType::Cluster, CLUSTER_NAME, acl_operations::CLUSTER)
        } else {
            acl_operations::NOT_REQUESTED
        })
        .with_brokers(
            live_brokers(ctx, &image, meta.listener)
                .into_iter()
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.id))
                        .with_host(str_bytes(&b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.as_deref().map(str_bytes))
                })
                .collect(),
        );
    meta.respond(&resp)
}
