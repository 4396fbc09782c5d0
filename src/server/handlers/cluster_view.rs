//! The cluster as clients see it, read from the metadata image: the live (unfenced)
//! brokers with their advertised endpoints, and each partition's leader, replicas, ISR
//! and offline replicas. Metadata, DescribeCluster, DescribeTopicPartitions and
//! FindCoordinator all answer from here.
use kafka_protocol::messages::BrokerId as WireBrokerId;

use super::this_node;
use crate::cluster::image::{BrokerId, MetadataImage, PartitionMeta, NO_LEADER};
use crate::protocol::ErrorCode;
use crate::server::shard::ShardContext;

pub(crate) struct BrokerEndpoint {
    pub id: BrokerId,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// Every registered, unfenced broker by id. Before this node's own registration is in
/// the image (it is, once the node serves), the node itself.
pub(crate) fn live_brokers(ctx: &ShardContext, image: &MetadataImage) -> Vec<BrokerEndpoint> {
    let live: Vec<BrokerEndpoint> =
        image.live_brokers().map(|b| BrokerEndpoint { id: b.id, host: b.host.clone(), port: b.port, rack: b.rack.clone() }).collect();
    if !live.is_empty() {
        return live;
    }
    let (id, host, port) = this_node(ctx);
    vec![BrokerEndpoint { id, host, port, rack: ctx.config.broker_rack.clone() }]
}

/// A live broker's (id, host, port).
pub(crate) fn endpoint_of(image: &MetadataImage, broker: BrokerId) -> Option<(i32, String, i32)> {
    image.brokers.get(&broker).filter(|b| !b.fenced).map(|b| (b.id, b.host.clone(), b.port))
}

/// One partition's leadership as Kafka's Metadata answers it.
pub(crate) struct PartitionView {
    /// LEADER_NOT_AVAILABLE when no live broker leads it, else 0.
    pub error: i16,
    pub leader: WireBrokerId,
    pub replicas: Vec<WireBrokerId>,
    pub isr: Vec<WireBrokerId>,
    /// Replicas on fenced or unregistered brokers.
    pub offline: Vec<WireBrokerId>,
}

pub(crate) fn partition_view(image: &MetadataImage, p: &PartitionMeta) -> PartitionView {
    let leads = p.leader != NO_LEADER && image.is_live(p.leader);
    PartitionView {
        error: if leads { 0 } else { ErrorCode::LEADER_NOT_AVAILABLE.code() },
        leader: WireBrokerId(if leads { p.leader } else { NO_LEADER }),
        replicas: p.replicas.iter().map(|r| WireBrokerId(r.broker)).collect(),
        isr: p.isr.iter().map(|b| WireBrokerId(*b)).collect(),
        offline: p.replicas.iter().filter(|r| !image.is_live(r.broker)).map(|r| WireBrokerId(r.broker)).collect(),
    }
}
