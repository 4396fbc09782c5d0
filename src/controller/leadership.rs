//! Partition leadership as brokers come and go: pure functions over the image, called by
//! `apply.rs` when a registration, fencing or unfencing record commits (so every replica
//! and every replay elects the same leaders). No clock, no threads: the property test
//! below drives them directly.
//!
//! Invariants kept here: a fenced (or unregistered) broker never leads; every change of
//! leader bumps the leader epoch; every change of a partition bumps its partition epoch;
//! `PartitionMeta::shard` is the leader's replica shard (the first replica's if none).
use std::collections::BTreeSet;

use crate::cluster::image::{BrokerId, BrokerMeta, MetadataImage, PartitionMeta, ReplicaMeta, NO_LEADER};

/// The leader Kafka would elect: the first replica (preference order) that is in the ISR
/// and on a live broker; `NO_LEADER` if none (no unclean election).
pub fn elect(p: &PartitionMeta, image: &MetadataImage) -> BrokerId {
    p.replicas
        .iter()
        .map(|r| r.broker)
        .find(|b| p.isr.contains(b) && image.is_live(*b))
        .unwrap_or(NO_LEADER)
}

/// Sets the leader (bumping the epochs when it changes) and keeps `shard` in step.
pub(super) fn set_leader(p: &mut PartitionMeta, leader: BrokerId) {
    if p.leader != leader {
        p.leader = leader;
        p.leader_epoch = p.leader_epoch.saturating_add(1);
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    let owner = p.replica_on(leader).or(p.replicas.first()).map(|r| r.shard);
    if let Some(shard) = owner {
        p.shard = shard;
    }
    debug_assert!(leader == NO_LEADER || p.replica_on(leader).is_some(), "a leader is one of the replicas");
}

/// The topics whose partitions changed, for the shards' deltas.
pub type ChangedTopics = BTreeSet<String>;

/// `broker` is fenced (already marked so in `image.brokers`): it leaves the ISR of every
/// partition where it is not the last member, and every partition it led gets a new
/// leader from the remaining ISR, or none.
pub fn on_fenced(image: &mut MetadataImage, broker: BrokerId) -> ChangedTopics {
    debug_assert!(!image.is_live(broker), "fence the broker before moving its leaderships");
    let mut changed = ChangedTopics::new();
    let snapshot = image.clone();
    for (name, topic) in image.topics.iter_mut() {
        for p in topic.partitions.iter_mut() {
            if p.replica_on(broker).is_none() {
                continue;
            }
            let before = (p.leader, p.isr.len());
            if p.isr.len() > 1 && p.isr.contains(&broker) {
                p.isr.retain(|b| *b != broker);
                p.partition_epoch = p.partition_epoch.saturating_add(1);
            }
            if p.leader == broker {
                let next = elect(p, &snapshot);
                set_leader(p, next);
            }
            if (p.leader, p.isr.len()) != before {
                changed.insert(name.clone());
            }
        }
    }
    changed
}

/// `broker` is live again (registered or unfenced): it leads again every leaderless
/// partition whose ISR holds it (its data is on its disk).
pub fn on_unfenced(image: &mut MetadataImage, broker: BrokerId) -> ChangedTopics {
    let mut changed = ChangedTopics::new();
    let snapshot = image.clone();
    for (name, topic) in image.topics.iter_mut() {
        for p in topic.partitions.iter_mut() {
            if p.leader == NO_LEADER && p.isr.contains(&broker) {
                let next = elect(p, &snapshot);
                if next != NO_LEADER {
                    set_leader(p, next);
                    changed.insert(name.clone());
                }
            }
        }
    }
    changed
}

/// Partitions with no replicas (a data dir from before brokers existed: one node held
/// everything) become replicas of `broker`, on the shard they were on, led by it. Runs
/// when a broker registers; in such a data dir that is the node itself.
pub fn adopt_unassigned(image: &mut MetadataImage, broker: &BrokerMeta) -> ChangedTopics {
    let mut changed = ChangedTopics::new();
    for (name, topic) in image.topics.iter_mut() {
        for p in topic.partitions.iter_mut().filter(|p| p.replicas.is_empty()) {
            p.replicas = vec![ReplicaMeta { broker: broker.id, shard: p.shard }];
            p.isr = vec![broker.id];
            p.partition_epoch = p.partition_epoch.saturating_add(1);
            // Same leader epoch as before: the single node led it all along.
            p.leader = broker.id;
            changed.insert(name.clone());
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::cluster::image::TopicMeta;

    fn broker(id: BrokerId) -> BrokerMeta {
        BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 2, fenced: false }
    }

    fn image(brokers: usize, assignments: &[Vec<BrokerId>]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 0..brokers as BrokerId {
            img.brokers.insert(id, broker(id));
        }
        let partitions = assignments
            .iter()
            .enumerate()
            .map(|(i, rs)| {
                let mut p = PartitionMeta::new_on(i as i32, rs.iter().map(|b| ReplicaMeta { broker: *b, shard: (*b % 2) as u16 }).collect());
                // As if replication kept every replica in sync.
                p.isr = rs.clone();
                p
            })
            .collect();
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions, configs: BTreeMap::new() });
        img
    }

    fn fence(img: &mut MetadataImage, b: BrokerId) -> ChangedTopics {
        img.brokers.get_mut(&b).unwrap().fenced = true;
        on_fenced(img, b)
    }

    fn unfence(img: &mut MetadataImage, b: BrokerId) -> ChangedTopics {
        img.brokers.get_mut(&b).unwrap().fenced = false;
        on_unfenced(img, b)
    }

    #[test]
    fn single_replica_goes_offline_and_comes_back() {
        let mut img = image(2, &[vec![0], vec![1]]);
        assert_eq!(fence(&mut img, 0).len(), 1);
        let p = &img.topics["t"].partitions;
        assert_eq!((p[0].leader, p[0].leader_epoch, p[0].isr.clone()), (NO_LEADER, 1, vec![0]));
        assert_eq!((p[1].leader, p[1].leader_epoch), (1, 0));
        unfence(&mut img, 0);
        let p = &img.topics["t"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch, p.shard), (0, 2, 0));
    }

    #[test]
    fn leadership_moves_to_the_next_isr_replica() {
        let mut img = image(3, &[vec![1, 2, 0]]);
        fence(&mut img, 1);
        let p = &img.topics["t"].partitions[0];
        assert_eq!((p.leader, p.shard, p.isr.clone()), (2, 0, vec![2, 0]));
    }

    #[test]
    fn adoption_keeps_the_shard() {
        let mut img = MetadataImage::default();
        let mut t = TopicMeta { name: "t".into(), topic_id: [1; 16], partitions: vec![PartitionMeta::unassigned(0, 3)], configs: BTreeMap::new() };
        t.partitions[0].leader_epoch = 4;
        img.topics.insert("t".into(), t);
        adopt_unassigned(&mut img, &broker(7));
        let p = &img.topics["t"].partitions[0];
        assert_eq!((p.leader, p.shard, p.leader_epoch, p.replicas.clone()), (7, 3, 4, vec![ReplicaMeta { broker: 7, shard: 3 }]));
    }

    proptest! {
        /// Any sequence of fencings and unfencings: a fenced broker never leads, a leader
        /// is always in the ISR, and the leader epoch rises exactly when the leader changes.
        #[test]
        fn fenced_never_leads(
            assignments in prop::collection::vec(prop::sample::subsequence(vec![0, 1, 2, 3], 1..=3), 1..8),
            steps in prop::collection::vec((0..4i32, any::<bool>()), 0..40),
        ) {
            let mut img = image(4, &assignments);
            for (b, up) in steps {
                let before: Vec<_> = img.topics["t"].partitions.iter().map(|p| (p.leader, p.leader_epoch)).collect();
                if up { unfence(&mut img, b); } else { fence(&mut img, b); }
                for (p, (leader, epoch)) in img.topics["t"].partitions.iter().zip(before) {
                    prop_assert!(p.leader == NO_LEADER || img.is_live(p.leader), "fenced broker {} leads", p.leader);
                    prop_assert!(p.leader == NO_LEADER || p.isr.contains(&p.leader));
                    prop_assert!(!p.isr.is_empty());
                    if p.leader != leader { prop_assert_eq!(p.leader_epoch, epoch + 1); } else { prop_assert_eq!(p.leader_epoch, epoch); }
                    if p.leader != NO_LEADER { prop_assert_eq!(Some(p.shard), p.replica_on(p.leader).map(|r| r.shard)); }
                }
            }
        }
    }
}
