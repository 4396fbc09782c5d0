//! Partition → shard placement, decided once by the controller when it builds a proposal
//! and written into the committed record (never recomputed on apply or replay).
use crate::cluster::image::MetadataImage;
use crate::runtime::ShardId;

/// Shards for `n` new partitions: each goes to the shard with the fewest partitions
/// (counting all topics and the ones placed before it), ties to the lowest shard id.
/// Partitions already placed on shards >= `shard_count` are ignored for balance.
pub fn place(image: &MetadataImage, shard_count: ShardId, n: usize) -> Vec<ShardId> {
    let mut load = vec![0u64; usize::from(shard_count)];
    for p in image.topics.values().flat_map(|t| t.partitions.iter()) {
        if let Some(c) = load.get_mut(usize::from(p.shard)) {
            *c += 1;
        }
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        // min_by_key returns the first minimum: the lowest shard id among ties.
        let Some((shard, _)) = load.iter().enumerate().min_by_key(|(_, c)| **c) else {
            break; // shard_count == 0: nothing to place on (rejected earlier by the caller).
        };
        load[shard] += 1;
        // shard < shard_count <= u16::MAX, so the conversion cannot fail.
        out.push(ShardId::try_from(shard).unwrap_or(ShardId::MAX));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::image::{PartitionMeta, TopicMeta};

    fn topic(name: &str, shards: &[ShardId]) -> TopicMeta {
        TopicMeta {
            name: name.into(),
            topic_id: [0; 16],
            partitions: shards
                .iter()
                .enumerate()
                .map(|(i, s)| PartitionMeta {
                    partition: i as i32,
                    shard: *s,
                    leader_epoch: 0,
                })
                .collect(),
            configs: BTreeMap::new(),
        }
    }

    #[test]
    fn round_robin_on_empty() {
        assert_eq!(
            place(&MetadataImage::default(), 3, 7),
            vec![0, 1, 2, 0, 1, 2, 0]
        );
    }

    #[test]
    fn fills_least_loaded_first() {
        let mut img = MetadataImage::default();
        img.topics.insert("a".into(), topic("a", &[0, 0, 0, 1]));
        // loads: [3,1,0,0] -> 2,3,1,2,3,1,...
        assert_eq!(place(&img, 4, 6), vec![2, 3, 1, 2, 3, 1]);
    }
}
