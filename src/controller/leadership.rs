//! Partition leadership as brokers come and go: pure functions over the image, called by
//! `apply.rs` when a registration, fencing or unfencing record commits (so every replica
//! and every replay elects the same leaders). No clock, no threads: the property test
//! below drives them directly.
//!
//! Invariants kept here: a fenced (or unregistered) broker never leads; a leader is in its
//! ISR; an ISR of two or more members holds live brokers only (without ELR a fenced broker
//! stays in an ISR only as its last member: its log may be the only one with every
//! acknowledged record; with ELR it leaves, into the ELR, `eligible_leaders.rs`); every
//! change of leader bumps the leader epoch; every change of a partition bumps its
//! partition epoch; `PartitionMeta::shard` is the leader's replica shard (the first
//! replica's if none).
//!
//! Unclean elections (`unclean.leader.election.enable`): a partition whose leader is
//! fenced with no live ISR member left, or a leaderless one when a broker comes back,
//! gets its first live replica as leader, alone in the ISR, if its topic allows it (it
//! may lack records the old leader acknowledged). Kafka's KRaft controller does the same
//! in `generateLeaderAndIsrUpdates` with `Election.UNCLEAN`.
use std::collections::{BTreeMap, BTreeSet};

use super::eligible_leaders::{self as elr, ElrPolicy};
use crate::cluster::image::{BrokerId, BrokerMeta, ConfigResource, MetadataImage, PartitionMeta, ReplicaMeta, NO_LEADER};
use crate::cluster::topic_config::UNCLEAN_LEADER_ELECTION_ENABLE;

/// The leader Kafka would elect: the first replica (preference order) that is in the ISR
/// (or, the ISR being empty, in the ELR) and on a live broker; `NO_LEADER` if none (no
/// unclean election).
pub fn elect(p: &PartitionMeta, image: &MetadataImage) -> BrokerId {
    p.replicas.iter().map(|r| r.broker).find(|b| is_valid_leader(p, *b) && image.is_live(*b)).unwrap_or(NO_LEADER)
}

/// Kafka's `isValidNewLeader`, liveness aside: an ISR member, or an ELR member when the
/// ISR is empty.
pub fn is_valid_leader(p: &PartitionMeta, b: BrokerId) -> bool {
    p.isr.contains(&b) || (p.isr.is_empty() && p.elr.contains(&b))
}

/// The live brokers, read before the topics are borrowed mutably.
pub(super) fn live_set(image: &MetadataImage) -> BTreeSet<BrokerId> {
    image.live_brokers().map(|b| b.id).collect()
}

pub(super) fn elect_in(p: &PartitionMeta, live: &BTreeSet<BrokerId>) -> BrokerId {
    p.replicas.iter().map(|r| r.broker).find(|b| p.isr.contains(b) && live.contains(b)).unwrap_or(NO_LEADER)
}

/// Whether topics allow unclean elections: the topic's `unclean.leader.election.enable`,
/// else the cluster-wide dynamic broker default, else the static default the record
/// carries (the proposing controller's `unclean_leader_election_enable`, as Kafka's
/// controller falls back to its own config).
pub struct UncleanPolicy {
    cluster: Option<bool>,
    default: bool,
}

fn parse_bool(v: &str) -> Option<bool> {
    let v = v.trim();
    // Validated (a boolean, any case) before it was committed.
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

impl UncleanPolicy {
    pub fn of(image: &MetadataImage, default: bool) -> UncleanPolicy {
        let cluster = image.configs_of(&ConfigResource::Broker(String::new())).get(UNCLEAN_LEADER_ELECTION_ENABLE).and_then(|v| parse_bool(v));
        UncleanPolicy { cluster, default }
    }

    pub fn allows(&self, topic_configs: &BTreeMap<String, String>) -> bool {
        topic_configs.get(UNCLEAN_LEADER_ELECTION_ENABLE).and_then(|v| parse_bool(v)).or(self.cluster).unwrap_or(self.default)
    }
}

/// Sets `shard` to the leader's replica shard (the first replica's when leaderless).
fn follow_leader_shard(p: &mut PartitionMeta) {
    let owner = p.replica_on(p.leader).or(p.replicas.first()).map(|r| r.shard);
    if let Some(shard) = owner {
        p.shard = shard;
    }
}

/// Sets the leader (bumping the epochs when it changes) and keeps `shard` in step.
pub(super) fn set_leader(p: &mut PartitionMeta, leader: BrokerId) {
    if p.leader != leader {
        p.leader = leader;
        p.leader_epoch = p.leader_epoch.saturating_add(1);
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    follow_leader_shard(p);
    debug_assert!(leader == NO_LEADER || p.replica_on(leader).is_some(), "a leader is one of the replicas");
}

/// A new leader for `p`, whose leader is gone (or which had none): the first live ISR
/// member; else, with ELR (`elr_on`) and an empty ISR, the first live ELR member, then the
/// last known leader; else, if `unclean`, the first live replica, which becomes the whole
/// ISR.
fn reelect(p: &mut PartitionMeta, live: &BTreeSet<BrokerId>, unclean: bool, elr_on: bool, topic: &str) {
    let mut next = elect_in(p, live);
    if next == NO_LEADER && elr_on {
        if let Some(b) = elr::eligible_leader(p, live) {
            elr::promote(p, b);
            next = b;
        } else if let Some(b) = elr::last_known_leader(p, live) {
            tracing::warn!(
                topic,
                partition = p.partition,
                leader = b,
                "no ISR or eligible leader replica: the last known leader leads again; records it lost in a crash are lost"
            );
            p.isr = vec![b];
            elr::clear(p);
            next = b;
        }
    }
    if next == NO_LEADER && unclean {
        next = p.replicas.iter().map(|r| r.broker).find(|b| live.contains(b)).unwrap_or(NO_LEADER);
        if next != NO_LEADER {
            tracing::warn!(topic, partition = p.partition, leader = next, isr = ?p.isr, "unclean leader election: a replica outside the ISR leads; records acknowledged by the old ISR may be lost");
            // The leader changes too, so set_leader bumps the partition epoch.
            p.isr = vec![next];
            elr::clear(p);
        }
    }
    set_leader(p, next);
}

/// One change of `p` from `before`, one partition epoch (as Kafka's one
/// PartitionChangeRecord): a new leader bumped it already; any other change bumps it here.
fn bump_if_changed(p: &mut PartitionMeta, before: &PartitionMeta) -> bool {
    let changed = p.isr != before.isr || p.elr != before.elr || p.last_known_elr != before.last_known_elr || p.leader != before.leader;
    if changed && p.partition_epoch == before.partition_epoch {
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    p.partition_epoch != before.partition_epoch
}

/// The topics whose partitions changed, for the shards' deltas.
pub type ChangedTopics = BTreeSet<String>;

/// `broker` is fenced (already marked so in `image.brokers`): it leaves the ISR of every
/// partition where it is not the last member (with ELR, of every partition, into the ELR
/// when the ISR falls below min.insync.replicas), and every partition it led gets a new
/// leader from the remaining ISR (with ELR and an empty ISR, from the ELR), or, where none
/// is live and the topic allows it, an unclean one (`unclean_default`: see
/// `UncleanPolicy`), or none.
pub fn on_fenced(image: &mut MetadataImage, broker: BrokerId, unclean_default: bool) -> ChangedTopics {
    debug_assert!(!image.is_live(broker), "fence the broker before moving its leaderships");
    let mut changed = ChangedTopics::new();
    let live = live_set(image);
    let policy = UncleanPolicy::of(image, unclean_default);
    let elr_policy = ElrPolicy::of(image);
    let elr_on = elr_policy.enabled();
    for (name, topic) in image.topics.iter_mut() {
        let unclean = policy.allows(&topic.configs);
        for p in topic.partitions.iter_mut() {
            if p.replica_on(broker).is_none() {
                continue;
            }
            let before = p.clone();
            let shrunk = p.isr.contains(&broker) && (elr_on || p.isr.len() > 1);
            if shrunk {
                p.isr.retain(|b| *b != broker);
                if elr_on {
                    elr::after_isr_change(p, &before.isr, elr_policy.min_isr(&topic.configs, p.replicas.len()), None);
                }
            }
            if p.leader == broker {
                reelect(p, &live, unclean, elr_on, name);
            }
            if elr_on {
                elr::note_last_leader(p, &before);
                elr::check(p, elr_policy.min_isr(&topic.configs, p.replicas.len()));
            }
            if bump_if_changed(p, &before) {
                changed.insert(name.clone());
            }
        }
    }
    changed
}

/// `broker` restarted after an unclean shutdown (ELR only): it leaves every ELR (and ISR;
/// fencing its old process took it out of those already), as Kafka's
/// `handleBrokerUncleanShutdown`; a partition it led loses its leader.
pub fn on_unclean_shutdown(image: &mut MetadataImage, broker: BrokerId, unclean_default: bool) -> ChangedTopics {
    let elr_policy = ElrPolicy::of(image);
    let mut changed = ChangedTopics::new();
    if !elr_policy.enabled() {
        return changed;
    }
    let live = live_set(image);
    let policy = UncleanPolicy::of(image, unclean_default);
    for (name, topic) in image.topics.iter_mut() {
        let unclean = policy.allows(&topic.configs);
        for p in topic.partitions.iter_mut().filter(|p| p.elr.contains(&broker) || p.isr.contains(&broker)) {
            let before = p.clone();
            let min_isr = elr_policy.min_isr(&topic.configs, p.replicas.len());
            p.isr.retain(|b| *b != broker);
            elr::after_isr_change(p, &before.isr, min_isr, Some(broker));
            if p.leader == broker {
                reelect(p, &live, unclean, true, name);
            }
            elr::note_last_leader(p, &before);
            elr::check(p, min_isr);
            if bump_if_changed(p, &before) {
                tracing::info!(topic = %name, partition = p.partition, broker, elr = ?p.elr, isr = ?p.isr, "controller: a broker back from an unclean shutdown is not an eligible leader replica");
                changed.insert(name.clone());
            }
        }
    }
    changed
}

/// `broker` is live again (registered or unfenced): every leaderless partition gets a
/// leader if it can now have one: a live ISR member (the returning broker's data is on its
/// disk), or, where the topic allows it, an unclean one.
pub fn on_unfenced(image: &mut MetadataImage, broker: BrokerId, unclean_default: bool) -> ChangedTopics {
    debug_assert!(image.is_live(broker), "unfence the broker before electing it");
    elect_leaderless(image, None, unclean_default)
}

/// Elects leaders of the leaderless partitions (of topic `only`, or of all), as
/// `on_unfenced`; also run when a config change may have allowed unclean elections.
pub fn elect_leaderless(image: &mut MetadataImage, only: Option<&str>, unclean_default: bool) -> ChangedTopics {
    let mut changed = ChangedTopics::new();
    let live = live_set(image);
    let policy = UncleanPolicy::of(image, unclean_default);
    let elr_on = ElrPolicy::of(image).enabled();
    for (name, topic) in image.topics.iter_mut() {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let unclean = policy.allows(&topic.configs);
        for p in topic.partitions.iter_mut().filter(|p| p.leader == NO_LEADER && !p.replicas.is_empty()) {
            let before = p.clone();
            reelect(p, &live, unclean, elr_on, name);
            if p.leader != NO_LEADER {
                elr::note_last_leader(p, &before);
                bump_if_changed(p, &before);
                changed.insert(name.clone());
            }
        }
    }
    changed
}

/// A partition a CreateTopic or CreatePartitions record adds (ISR = every replica: their
/// logs are all empty, as Kafka's): placement put it on live brokers, but a replica
/// fenced since leaves the ISR as on fencing, and the first live member leads. Epochs
/// stay 0: nobody led it before.
pub fn settle_new(p: &mut PartitionMeta, image: &MetadataImage) {
    if p.replicas.is_empty() {
        return;
    }
    if p.isr.iter().any(|b| image.is_live(*b)) {
        p.isr.retain(|b| image.is_live(*b));
    }
    p.leader = elect(p, image);
    follow_leader_shard(p);
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
        BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 2, listeners: Vec::new(), fenced: false }
    }

    /// Without KIP-966 (these tests keep Kafka's rules before it; `isr_tests.rs` has the
    /// ELR ones).
    fn image(brokers: usize, assignments: &[Vec<BrokerId>]) -> MetadataImage {
        let mut img = MetadataImage::default();
        img.features.set(&[(crate::cluster::features::ELIGIBLE_LEADER_REPLICAS_VERSION.to_string(), 0)]);
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
        on_fenced(img, b, false)
    }

    fn unfence(img: &mut MetadataImage, b: BrokerId) -> ChangedTopics {
        img.brokers.get_mut(&b).unwrap().fenced = false;
        on_unfenced(img, b, false)
    }

    fn set_topic_config(img: &mut MetadataImage, key: &str, value: &str) {
        img.topics.get_mut("t").unwrap().configs.insert(key.into(), value.into());
    }

    #[test]
    fn unclean_election_on_fencing_only_where_allowed() {
        // ISR [0] alone (the followers lag); broker 0 fenced.
        let run = |topic: Option<&str>, cluster: Option<&str>, default: bool| {
            let mut img = image(3, &[vec![0, 1, 2]]);
            img.topics.get_mut("t").unwrap().partitions[0].isr = vec![0];
            if let Some(v) = topic {
                set_topic_config(&mut img, UNCLEAN_LEADER_ELECTION_ENABLE, v);
            }
            if let Some(v) = cluster {
                img.resource_configs.insert(ConfigResource::Broker(String::new()), [(UNCLEAN_LEADER_ELECTION_ENABLE.to_string(), v.to_string())].into());
            }
            img.brokers.get_mut(&0).unwrap().fenced = true;
            on_fenced(&mut img, 0, default);
            let p = img.topics["t"].partitions[0].clone();
            (p.leader, p.isr, p.leader_epoch)
        };
        assert_eq!(run(None, None, false), (NO_LEADER, vec![0], 1), "off by default: offline, the ISR kept");
        assert_eq!(run(None, None, true), (1, vec![1], 1), "the static default");
        assert_eq!(run(None, Some("true"), false), (1, vec![1], 1), "the cluster-wide dynamic default");
        assert_eq!(run(Some("false"), Some("TRUE"), true), (NO_LEADER, vec![0], 1), "the topic's own key wins");
        assert_eq!(run(Some("True"), None, false), (1, vec![1], 1));
        // A live ISR member is always preferred to an unclean choice.
        let mut img = image(3, &[vec![0, 1, 2]]);
        img.topics.get_mut("t").unwrap().partitions[0].isr = vec![0, 2];
        set_topic_config(&mut img, UNCLEAN_LEADER_ELECTION_ENABLE, "true");
        fence(&mut img, 0);
        let p = &img.topics["t"].partitions[0];
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    }

    #[test]
    fn unclean_election_when_a_replica_comes_back() {
        // Every replica down, the ISR [0]: broker 1 returns first.
        let mut img = image(3, &[vec![0, 1, 2]]);
        img.topics.get_mut("t").unwrap().partitions[0].isr = vec![0];
        for b in [1, 2, 0] {
            fence(&mut img, b);
        }
        assert_eq!(img.topics["t"].partitions[0].leader, NO_LEADER);
        unfence(&mut img, 1);
        assert_eq!(img.topics["t"].partitions[0].leader, NO_LEADER, "not allowed: waits for broker 0");
        img.brokers.get_mut(&1).unwrap().fenced = true;
        set_topic_config(&mut img, UNCLEAN_LEADER_ELECTION_ENABLE, "true");
        img.brokers.get_mut(&1).unwrap().fenced = false;
        let changed = on_unfenced(&mut img, 1, false);
        let p = &img.topics["t"].partitions[0];
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch, p.shard, changed.len()), (1, vec![1], 2, 1, 1));
        // Broker 0 coming back changes nothing now: the partition has a leader.
        assert!(unfence(&mut img, 0).is_empty());
    }

    #[test]
    fn new_partitions_have_every_live_replica_in_sync() {
        let img = image(3, &[]);
        let mut p = PartitionMeta::new_on(0, [2, 0, 1].iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect());
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 0, 1]));
        settle_new(&mut p, &img);
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch), (2, vec![2, 0, 1], 0, 0));
        let mut img = img;
        img.brokers.get_mut(&2).unwrap().fenced = true;
        let mut p = PartitionMeta::new_on(0, [2, 0, 1].iter().map(|b| ReplicaMeta { broker: *b, shard: *b as u16 }).collect());
        settle_new(&mut p, &img);
        assert_eq!((p.leader, p.isr.clone(), p.shard, p.leader_epoch), (0, vec![0, 1], 0, 0));
        for b in [0, 1] {
            img.brokers.get_mut(&b).unwrap().fenced = true;
        }
        let mut p = PartitionMeta::new_on(0, [2, 0, 1].iter().map(|b| ReplicaMeta { broker: *b, shard: *b as u16 }).collect());
        settle_new(&mut p, &img);
        assert_eq!((p.leader, p.isr.clone(), p.shard), (NO_LEADER, vec![2, 0, 1], 2), "nobody live: all in sync (empty logs), none leads");
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
            unclean in any::<bool>(),
        ) {
            let mut img = image(4, &assignments);
            for (b, up) in steps {
                let before: Vec<_> = img.topics["t"].partitions.iter().map(|p| (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone())).collect();
                if up {
                    img.brokers.get_mut(&b).unwrap().fenced = false;
                    on_unfenced(&mut img, b, unclean);
                } else {
                    img.brokers.get_mut(&b).unwrap().fenced = true;
                    on_fenced(&mut img, b, unclean);
                }
                for (p, (leader, epoch, pepoch, isr)) in img.topics["t"].partitions.iter().zip(before) {
                    prop_assert!(p.leader == NO_LEADER || img.is_live(p.leader), "fenced broker {} leads", p.leader);
                    prop_assert!(p.leader == NO_LEADER || p.isr.contains(&p.leader));
                    prop_assert!(!p.isr.is_empty());
                    prop_assert!(p.isr.len() == 1 || p.isr.iter().all(|b| img.is_live(*b)), "a fenced broker in a shared ISR: {:?}", p.isr);
                    prop_assert!(p.partition_epoch >= pepoch);
                    if p.isr != isr { prop_assert!(p.partition_epoch > pepoch); }
                    if p.leader != leader {
                        prop_assert_eq!(p.leader_epoch, epoch + 1);
                        // A clean election takes an ISR member; only an unclean one may not.
                        prop_assert!(p.leader == NO_LEADER || isr.contains(&p.leader) || (unclean && p.isr == vec![p.leader]));
                    } else {
                        prop_assert_eq!(p.leader_epoch, epoch);
                    }
                    if p.leader != NO_LEADER { prop_assert_eq!(Some(p.shard), p.replica_on(p.leader).map(|r| r.shard)); }
                    // A partition with a live ISR member has a leader.
                    prop_assert!(p.leader != NO_LEADER || !p.isr.iter().any(|b| img.is_live(*b)));
                    if unclean && p.replicas.iter().any(|r| img.is_live(r.broker)) {
                        prop_assert!(p.leader != NO_LEADER, "unclean allowed and a live replica, yet no leader");
                    }
                }
            }
        }
    }
}
