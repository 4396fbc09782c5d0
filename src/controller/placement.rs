//! Replica placement, decided once by the controller when it builds a proposal and written
//! into the committed record (never recomputed on apply or replay).
//!
//! Across brokers: the partitions of one request spread evenly over the live (unfenced)
//! brokers first (so every topic's leaders cover the cluster), then by the load already
//! there: the leader (first replica) to the broker with the fewest leaders, the others to
//! those with the fewest replicas; with racks set no two replicas of a partition share a
//! rack while an unused rack is left. Inside a
//! broker (its shard count is in its registration): a leader replica goes to the shard
//! leading the fewest partitions, then the one with the fewest replicas, so leaders spread
//! over shards as well as brokers (a shard serves only what it leads); a follower replica
//! to the shard with the fewest followers, then the fewest replicas (so replicas balance
//! too); ties to the lowest id.
use std::collections::BTreeMap;

use crate::cluster::image::{BrokerId, MetadataImage, ReplicaMeta};
use crate::runtime::ShardId;

use super::ControllerError;

/// Replica counts the placement balances, for the brokers new replicas may go to.
struct Load {
    /// broker → (leaders, replicas, replicas per shard, rack).
    brokers: BTreeMap<BrokerId, BrokerLoad>,
}

struct BrokerLoad {
    leaders: u64,
    replicas: u64,
    /// Leaders and replicas placed by this request.
    new_leaders: u64,
    new_replicas: u64,
    /// Per shard: (leader replicas, follower replicas).
    shards: Vec<(u64, u64)>,
    rack: Option<String>,
}

impl Load {
    fn of(image: &MetadataImage) -> Load {
        let mut brokers: BTreeMap<BrokerId, BrokerLoad> = image
            .live_brokers()
            .map(|b| {
                (
                    b.id,
                    BrokerLoad {
                        leaders: 0,
                        replicas: 0,
                        new_leaders: 0,
                        new_replicas: 0,
                        shards: vec![(0, 0); usize::from(b.shard_count)],
                        rack: b.rack.clone(),
                    },
                )
            })
            .collect();
        for p in image.topics.values().flat_map(|t| t.partitions.iter()) {
            for (i, r) in p.replicas.iter().enumerate() {
                if let Some(l) = brokers.get_mut(&r.broker) {
                    l.replicas += 1;
                    l.leaders += u64::from(i == 0);
                    if let Some(c) = l.shards.get_mut(usize::from(r.shard)) {
                        if i == 0 {
                            c.0 += 1
                        } else {
                            c.1 += 1
                        }
                    }
                }
            }
        }
        Load { brokers }
    }

    /// Takes a replica slot on `broker` (known live): its least-loaded shard, by leaders
    /// for a leader replica, by followers for a follower.
    fn take(&mut self, broker: BrokerId, leader: bool) -> Option<ReplicaMeta> {
        let l = self.brokers.get_mut(&broker)?;
        // min_by_key returns the first minimum: the lowest shard id among ties.
        let key = |&(leaders, followers): &(u64, u64)| if leader { (leaders, leaders + followers) } else { (followers, leaders + followers) };
        let (shard, _) = l.shards.iter().enumerate().min_by_key(|(_, c)| key(c))?;
        if leader {
            l.shards[shard].0 += 1
        } else {
            l.shards[shard].1 += 1
        }
        l.replicas += 1;
        l.leaders += u64::from(leader);
        l.new_replicas += 1;
        l.new_leaders += u64::from(leader);
        // shard < shard_count <= u16::MAX.
        Some(ReplicaMeta { broker, shard: ShardId::try_from(shard).ok()? })
    }

    /// The next replica of a partition that already has `chosen`: the live broker not yet
    /// chosen, on an unused rack if any is left, least loaded (leaders first for the
    /// first replica), ties to the lowest id.
    fn pick(&self, chosen: &[ReplicaMeta]) -> Option<BrokerId> {
        let used_racks: Vec<&Option<String>> = chosen.iter().filter_map(|r| self.brokers.get(&r.broker)).map(|l| &l.rack).collect();
        let leader = chosen.is_empty();
        self.brokers
            .iter()
            .filter(|(id, _)| !chosen.iter().any(|r| r.broker == **id))
            .min_by_key(|(id, l)| {
                let rack_used = l.rack.is_some() && used_racks.contains(&&l.rack);
                let this_request = if leader { l.new_leaders } else { l.new_replicas };
                (rack_used, this_request, if leader { l.leaders } else { 0 }, l.replicas, **id)
            })
            .map(|(id, _)| *id)
    }
}

/// Replicas for `n` new partitions with `rf` replicas each (`rf` >= 1), or with the given
/// `assignments` (broker ids per partition; then `n` = their count).
pub fn place(image: &MetadataImage, n: usize, rf: usize, assignments: &[Vec<BrokerId>]) -> Result<Vec<Vec<ReplicaMeta>>, ControllerError> {
    let mut load = Load::of(image);
    if !assignments.is_empty() {
        return assignments
            .iter()
            .map(|brokers| {
                brokers
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        load.take(*b, i == 0).ok_or_else(|| {
                            ControllerError::InvalidReplicaAssignment(format!(
                                "The manual partition assignment includes broker {b}, which is not a registered, unfenced broker."
                            ))
                        })
                    })
                    .collect()
            })
            .collect();
    }
    let live = load.brokers.len();
    if rf > live {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {live} broker(s) are registered."
        )));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut replicas = Vec::with_capacity(rf);
        while replicas.len() < rf {
            let next = load.pick(&replicas).and_then(|b| load.take(b, replicas.is_empty()));
            let Some(r) = next else { break };
            replicas.push(r);
        }
        debug_assert_eq!(replicas.len(), rf, "rf <= live brokers, each with >= 1 shard");
        out.push(replicas);
    }
    Ok(out)
}

/// The shard of `broker` a replica added by a reassignment goes to: its shard with the
/// fewest follower replicas, then the fewest replicas, ties to the lowest id (as `place`
/// for a follower). Any registered broker, fenced or not: Kafka lets a reassignment name
/// a broker that is down (it catches up when it returns). None if `broker` is not
/// registered or has no shards.
pub fn follower_shard(image: &MetadataImage, broker: BrokerId) -> Option<ShardId> {
    let b = image.brokers.get(&broker)?;
    let mut shards = vec![(0u64, 0u64); usize::from(b.shard_count)];
    for p in image.topics.values().flat_map(|t| t.partitions.iter()) {
        for (i, r) in p.replicas.iter().enumerate().filter(|(_, r)| r.broker == broker) {
            if let Some(c) = shards.get_mut(usize::from(r.shard)) {
                if i == 0 {
                    c.0 += 1
                } else {
                    c.1 += 1
                }
            }
        }
    }
    let (shard, _) = shards.iter().enumerate().min_by_key(|(_, (leaders, followers))| (*followers, leaders + followers))?;
    ShardId::try_from(shard).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{BrokerMeta, PartitionMeta, TopicMeta};

    fn image(brokers: &[(BrokerId, u16, Option<&str>)]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for (id, shards, rack) in brokers {
            img.brokers.insert(
                *id,
                BrokerMeta {
                    id: *id,
                    incarnation: [0; 16],
                    host: "h".into(),
                    port: 1,
                    rack: rack.map(str::to_string),
                    shard_count: *shards,
                    listeners: Vec::new(),
                    fenced: false,
                },
            );
        }
        img
    }

    fn flat(v: &[Vec<ReplicaMeta>]) -> Vec<Vec<(BrokerId, ShardId)>> {
        v.iter().map(|rs| rs.iter().map(|r| (r.broker, r.shard)).collect()).collect()
    }

    #[test]
    fn single_broker_round_robins_its_shards() {
        let img = image(&[(1, 3, None)]);
        assert_eq!(flat(&place(&img, 4, 1, &[]).unwrap()), vec![vec![(1, 0)], vec![(1, 1)], vec![(1, 2)], vec![(1, 0)]]);
    }

    #[test]
    fn leaders_spread_over_brokers_and_shards() {
        let img = image(&[(1, 2, None), (2, 2, None), (3, 2, None)]);
        let placed = place(&img, 6, 1, &[]).unwrap();
        assert_eq!(flat(&placed), vec![vec![(1, 0)], vec![(2, 0)], vec![(3, 0)], vec![(1, 1)], vec![(2, 1)], vec![(3, 1)]]);
    }

    /// RF 2 over 2 brokers with 2 shards each: replicas alone would put every leader of a
    /// broker on one shard (leader, follower, leader, ... lands on shards 0, 1, 0, ...).
    #[test]
    fn leaders_spread_over_the_shards_of_each_broker_whatever_the_replicas() {
        let img = image(&[(1, 2, None), (2, 2, None)]);
        let placed = place(&img, 8, 2, &[]).unwrap();
        for broker in [1, 2] {
            let mut leaders = [0; 2];
            let mut replicas = [0; 2];
            for rs in &placed {
                for (i, r) in rs.iter().enumerate().filter(|(_, r)| r.broker == broker) {
                    leaders[usize::from(r.shard)] += u32::from(i == 0);
                    replicas[usize::from(r.shard)] += 1;
                }
            }
            assert_eq!(leaders, [2, 2], "broker {broker}: {:?}", flat(&placed));
            assert_eq!(replicas, [4, 4], "broker {broker}: {:?}", flat(&placed));
        }
    }

    #[test]
    fn fills_least_loaded_first_and_skips_fenced() {
        let mut img = image(&[(1, 1, None), (2, 1, None), (3, 1, None)]);
        img.brokers.get_mut(&3).unwrap().fenced = true;
        let rs = vec![ReplicaMeta { broker: 1, shard: 0 }];
        img.topics
            .insert("a".into(), TopicMeta { name: "a".into(), topic_id: [0; 16], partitions: vec![PartitionMeta::new_on(0, rs)], configs: Default::default() });
        assert_eq!(flat(&place(&img, 2, 1, &[]).unwrap()), vec![vec![(2, 0)], vec![(1, 0)]]);
    }

    #[test]
    fn a_topic_spreads_over_every_broker_whatever_the_load() {
        let mut img = image(&[(1, 1, None), (2, 1, None), (3, 1, None)]);
        let busy = (0..10).map(|i| PartitionMeta::new_on(i, vec![ReplicaMeta { broker: 1, shard: 0 }])).collect();
        img.topics.insert("a".into(), TopicMeta { name: "a".into(), topic_id: [0; 16], partitions: busy, configs: Default::default() });
        let leaders: Vec<_> = place(&img, 6, 1, &[]).unwrap().iter().map(|rs| rs[0].broker).collect();
        assert_eq!(leaders, vec![2, 3, 1, 2, 3, 1]);
    }

    #[test]
    fn rack_aware() {
        let img = image(&[(1, 1, Some("a")), (2, 1, Some("a")), (3, 1, Some("b"))]);
        for rs in place(&img, 3, 2, &[]).unwrap() {
            let racks: Vec<_> = rs.iter().map(|r| img.brokers[&r.broker].rack.clone()).collect();
            assert_ne!(racks[0], racks[1], "{rs:?}");
        }
    }

    #[test]
    fn a_reassigned_replica_goes_to_the_shard_with_the_fewest_followers_even_when_fenced() {
        let mut img = image(&[(1, 3, None), (2, 1, None)]);
        let parts = vec![
            PartitionMeta::new_on(0, vec![ReplicaMeta { broker: 2, shard: 0 }, ReplicaMeta { broker: 1, shard: 0 }]),
            PartitionMeta::new_on(1, vec![ReplicaMeta { broker: 1, shard: 1 }]),
        ];
        img.topics.insert("a".into(), TopicMeta { name: "a".into(), topic_id: [0; 16], partitions: parts, configs: Default::default() });
        assert_eq!(follower_shard(&img, 1), Some(2), "shard 0 has a follower, shard 1 a leader");
        img.brokers.get_mut(&1).unwrap().fenced = true;
        assert_eq!(follower_shard(&img, 1), Some(2));
        assert_eq!(follower_shard(&img, 9), None, "not registered");
    }

    #[test]
    fn too_few_brokers_and_unknown_assignment() {
        let img = image(&[(1, 1, None)]);
        assert!(matches!(place(&img, 1, 2, &[]), Err(ControllerError::InvalidReplicationFactor(_))));
        assert!(matches!(place(&img, 1, 1, &[vec![9]]), Err(ControllerError::InvalidReplicaAssignment(_))));
        assert_eq!(flat(&place(&img, 1, 1, &[vec![1]]).unwrap()), vec![vec![(1, 0)]]);
    }
}
