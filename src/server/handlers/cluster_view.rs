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

/// Every registered, unfenced broker by id with its endpoint on `listener` (brokers
/// without that listener are left out, as Kafka does). Before this node's own
/// registration is in the image (it is, once the node serves), the node itself.
pub(crate) fn live_brokers(ctx: &ShardContext, image: &MetadataImage, listener: u8) -> Vec<BrokerEndpoint> {
    let name = &ctx.listeners.all[usize::from(listener)].name;
    let live: Vec<BrokerEndpoint> = image
        .live_brokers()
        .filter_map(|b| {
            let (host, port) = b.endpoint(name)?;
            Some(BrokerEndpoint { id: b.id, host: host.to_string(), port, rack: b.rack.clone() })
        })
        .collect();
    if !live.is_empty() {
        return live;
    }
    let (id, host, port) = this_node(ctx, listener);
    vec![BrokerEndpoint { id, host, port, rack: ctx.config.broker_rack.clone() }]
}

/// The fenced brokers with their endpoint on `listener` (DescribeCluster v2 lists them
/// when asked, KIP-1073).
pub(crate) fn fenced_brokers(ctx: &ShardContext, image: &MetadataImage, listener: u8) -> Vec<BrokerEndpoint> {
    let name = &ctx.listeners.all[usize::from(listener)].name;
    image
        .brokers
        .values()
        .filter(|b| b.fenced)
        .filter_map(|b| {
            let (host, port) = b.endpoint(name)?;
            Some(BrokerEndpoint { id: b.id, host: host.to_string(), port, rack: b.rack.clone() })
        })
        .collect()
}

/// A live broker's (id, host, port) on `listener`.
pub(crate) fn endpoint_of(ctx: &ShardContext, image: &MetadataImage, broker: BrokerId, listener: u8) -> Option<(i32, String, i32)> {
    let name = &ctx.listeners.all[usize::from(listener)].name;
    let b = image.brokers.get(&broker).filter(|b| !b.fenced)?;
    let (host, port) = b.endpoint(name)?;
    Some((b.id, host.to_string(), port))
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
