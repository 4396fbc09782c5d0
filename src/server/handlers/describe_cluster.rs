use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::BrokerId;

use super::{str_bytes, this_node};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub fn handle(ctx: &ShardContext, meta: RequestMeta) -> Response {
    let (node, host, port) = this_node(ctx);
    let image = ctx.image();
    let resp = DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(str_bytes(&image.cluster_id))
        .with_controller_id(BrokerId(node))
        .with_cluster_authorized_operations(i32::MIN)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(BrokerId(node))
            .with_host(str_bytes(&host))
            .with_port(port)]);
    meta.respond(&resp)
}
