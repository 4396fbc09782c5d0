//! DescribeCluster 0-2: every live broker, and from v2 the fenced ones too when the
//! client asks (`include_fenced_brokers`, KIP-1073: `kafka-cluster.sh list-endpoints
//! --include-fenced-brokers`), flagged `is_fenced`; the controller id is this broker
//! (KIP-919: a broker names any live broker, which forwards to the quorum). Cluster
//! authorized operations when asked, from the ACLs.
use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest};

use super::cluster_view::{fenced_brokers, live_brokers, BrokerEndpoint};
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
        .with_brokers({
            let broker = |b: BrokerEndpoint, fenced: bool| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id))
                    .with_host(str_bytes(&b.host))
                    .with_port(b.port)
                    .with_rack(b.rack.as_deref().map(str_bytes))
                    .with_is_fenced(fenced)
            };
            let mut brokers: Vec<DescribeClusterBroker> = live_brokers(ctx, &image, meta.listener).into_iter().map(|b| broker(b, false)).collect();
            if meta.version >= 2 && req.include_fenced_brokers {
                brokers.extend(fenced_brokers(ctx, &image, meta.listener).into_iter().map(|b| broker(b, true)));
                brokers.sort_by_key(|b| b.broker_id.0);
            }
            brokers
        });
    meta.respond(&resp)
}
