//! Leaders and replicas per broker and shard, from the committed image: the per-shard
//! balance the Kafka protocol cannot show (it knows brokers, not shards). Served by the
//! admin listener as `GET /v1/cluster/shards` (any node: every node has the image), read
//! by `shardlog cluster status --admin`.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::image::MetadataImage;

/// One shard of one broker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardLoad {
    pub shard: u16,
    /// Partitions whose leader is this broker with its replica on this shard.
    pub leaders: usize,
    /// Partition replicas this broker holds on this shard.
    pub replicas: usize,
}

/// One registered broker's shards (every shard it runs, empty ones too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerShards {
    pub broker: i32,
    pub shards: Vec<ShardLoad>,
}

/// Every registered broker's shards, by broker id. A replica on a shard the broker no
/// longer runs (it restarted with fewer) still counts, under its recorded shard.
pub fn shard_load(image: &MetadataImage) -> Vec<BrokerShards> {
    let mut load: BTreeMap<i32, BTreeMap<u16, ShardLoad>> =
        image.brokers.values().map(|b| (b.id, (0..b.shard_count).map(|s| (s, ShardLoad { shard: s, ..Default::default() })).collect())).collect();
    for p in image.topics.values().flat_map(|t| &t.partitions) {
        for r in &p.replicas {
            let Some(shards) = load.get_mut(&r.broker) else { continue };
            let shard = shards.entry(r.shard).or_insert_with(|| ShardLoad { shard: r.shard, ..Default::default() });
            shard.replicas += 1;
            if p.leader == r.broker {
                shard.leaders += 1;
            }
        }
    }
    load.into_iter().map(|(broker, shards)| BrokerShards { broker, shards: shards.into_values().collect() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{BrokerMeta, PartitionMeta, ReplicaMeta, TopicMeta};

    fn broker(id: i32, shard_count: u16) -> BrokerMeta {
        BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count, listeners: Vec::new(), fenced: false }
    }

    #[test]
    fn counts_leaders_and_replicas_per_broker_and_shard() {
        let mut image = MetadataImage::default();
        image.brokers.insert(1, broker(1, 2));
        image.brokers.insert(2, broker(2, 3));
        let r = |broker, shard| ReplicaMeta { broker, shard };
        // p0 led by 1 (shard 1), p1 led by 2 (shard 0), p2 without a leader.
        let mut p2 = PartitionMeta::new_on(2, vec![r(1, 0)]);
        p2.leader = crate::cluster::image::NO_LEADER;
        let partitions = vec![PartitionMeta::new_on(0, vec![r(1, 1), r(2, 2)]), PartitionMeta::new_on(1, vec![r(2, 0), r(1, 1)]), p2];
        image.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions, configs: Default::default() });
        let load = shard_load(&image);
        let s = |shard, leaders, replicas| ShardLoad { shard, leaders, replicas };
        assert_eq!(
            load,
            vec![
                BrokerShards { broker: 1, shards: vec![s(0, 0, 1), s(1, 1, 2)] },
                BrokerShards { broker: 2, shards: vec![s(0, 1, 1), s(1, 0, 0), s(2, 0, 1)] },
            ]
        );
    }
}
