//! Leader elections an operator or the controller asks for: Kafka's ElectLeaders (KIP-460:
//! PREFERRED and UNCLEAN) and the automatic preferred-leader rebalance
//! (`auto_leader_rebalance_enable`). Pure functions over the image, like `leadership.rs`.
//!
//! The quorum leader `plan`s a request against its committed image (the answer for every
//! partition asked about, and the partitions that get a new leader), proposes one
//! `ElectLeaders` record naming those, and `apply.rs` runs `apply_elections` on commit. The
//! record carries no decision: each partition is checked again against the image it is
//! applied to, so every replica and every replay elects the same leaders, and a partition
//! whose state changed in between (its preferred replica fenced meanwhile) is left alone.
//!
//! Invariants (checked by the tests below): only a live broker is elected; a clean
//! election only elects an ISR member; epochs bump only when the leader changes; electing
//! twice changes nothing the second time.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::image::{BrokerId, MetadataImage, PartitionMeta, NO_LEADER};

use super::leadership::{self, ChangedTopics};

/// Kafka's ElectionType (0 = PREFERRED, 1 = UNCLEAN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica, if it is live and in the ISR.
    Preferred,
    /// Only for a partition with no leader: an ISR member if one is live, else the first
    /// live replica (which may lack acknowledged records: Kafka's unclean election).
    Unclean,
}

/// Why a partition got no new leader (Kafka's error names; `server/` maps them to codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ElectionError {
    /// The preferred replica leads already (PREFERRED), or the partition has a leader
    /// (UNCLEAN).
    #[error("Leader election not needed for topic partition.")]
    NotNeeded,
    /// PREFERRED: the preferred replica is fenced or not in the ISR.
    #[error("The preferred leader was not available.")]
    PreferredLeaderNotAvailable,
    /// UNCLEAN: no replica is live.
    #[error("Eligible topic partition leaders are not available.")]
    EligibleLeadersNotAvailable,
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
}

pub type ElectionResult = Result<(), ElectionError>;

/// One partition an `ElectLeaders` record names; the topic id guards against a topic
/// deleted and re-created under the same name since the proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRef {
    pub topic: String,
    pub topic_id: [u8; 16],
    pub partition: i32,
}

/// The answer for one topic of a request: (partition, result) in request order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicElection {
    pub topic: String,
    pub partitions: Vec<(i32, ElectionResult)>,
}

/// The leader `election` gives `p` in `image`, or why it gives none.
pub fn choose(p: &PartitionMeta, image: &MetadataImage, election: ElectionType) -> Result<BrokerId, ElectionError> {
    match election {
        ElectionType::Preferred => {
            let Some(preferred) = p.replicas.first().map(|r| r.broker) else {
                return Err(ElectionError::PreferredLeaderNotAvailable);
            };
            if p.leader == preferred {
                return Err(ElectionError::NotNeeded);
            }
            if leadership::is_valid_leader(p, preferred) && image.is_live(preferred) {
                return Ok(preferred);
            }
            // As Kafka's PREFERRED election: a valid leader is kept (no change: not
            // available); a leaderless partition gets the next live ISR member.
            match p.leader {
                NO_LEADER => match leadership::elect(p, image) {
                    NO_LEADER => Err(ElectionError::PreferredLeaderNotAvailable),
                    next => Ok(next),
                },
                _ => Err(ElectionError::PreferredLeaderNotAvailable),
            }
        }
        ElectionType::Unclean => {
            if p.leader != NO_LEADER {
                return Err(ElectionError::NotNeeded);
            }
            match leadership::elect(p, image) {
                NO_LEADER => p.replicas.iter().map(|r| r.broker).find(|b| image.is_live(*b)).ok_or(ElectionError::EligibleLeadersNotAvailable),
                clean => Ok(clean),
            }
        }
    }
}

fn find<'a>(image: &'a MetadataImage, r: &PartitionRef) -> Option<&'a PartitionMeta> {
    image.topic(&r.topic).filter(|t| t.topic_id == r.topic_id).and_then(|t| t.partition(r.partition))
}

/// Runs the elections of a committed `ElectLeaders` record: each partition is checked
/// against `image` as it is now. Results in `targets` order, and the topics that changed.
pub fn apply_elections(image: &mut MetadataImage, election: ElectionType, targets: &[PartitionRef]) -> (Vec<ElectionResult>, ChangedTopics) {
    let decisions: Vec<_> =
        targets.iter().map(|r| find(image, r).ok_or(ElectionError::UnknownTopicOrPartition).and_then(|p| choose(p, image, election))).collect();
    let mut changed = ChangedTopics::new();
    for (r, decision) in targets.iter().zip(&decisions) {
        let Ok(leader) = *decision else { continue };
        let Some(p) = image.topics.get_mut(&r.topic).and_then(|t| t.partitions.iter_mut().find(|p| p.partition == r.partition)) else {
            continue;
        };
        if p.leader == leader {
            continue; // named twice in one record: the first did it
        }
        if p.isr.is_empty() && p.elr.contains(&leader) {
            super::eligible_leaders::promote(p, leader);
        } else if !p.isr.contains(&leader) {
            // Unclean: the new leader's log is the partition now (Kafka: ISR = [leader]),
            // and the KIP-966 sets no longer say who is safe (Kafka empties them).
            p.isr = vec![leader];
            p.elr.clear();
        }
        p.last_known_elr.clear();
        leadership::set_leader(p, leader);
        changed.insert(r.topic.clone());
    }
    (decisions.into_iter().map(|d| d.map(|_| ())).collect(), changed)
}

/// An ElectLeaders request checked against the committed image: the answer for each
/// partition, and the partitions to propose (those with `Ok` answers, in answer order).
#[derive(Debug)]
pub struct Plan {
    pub results: Vec<TopicElection>,
    pub to_elect: Vec<PartitionRef>,
}

impl Plan {
    /// Replaces the planned `Ok`s by what the committed record's apply returned for them
    /// (`applied` is in `to_elect` order).
    pub fn settle(&mut self, applied: &[ElectionResult]) {
        let mut applied = applied.iter();
        for (_, res) in self.results.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            if res.is_ok() {
                *res = applied.next().copied().unwrap_or(Err(ElectionError::UnknownTopicOrPartition));
            }
        }
    }
}

/// Plans an ElectLeaders request. `topics` None = every partition of every topic, and
/// then, as Kafka, partitions needing no election are left out of the answer (a topic
/// with none left is still listed, with no partitions).
pub fn plan(image: &MetadataImage, election: ElectionType, topics: Option<&[(String, Vec<i32>)]>) -> Plan {
    let mut results = Vec::new();
    let mut to_elect = Vec::new();
    let mut add = |t: &str, id: Option<[u8; 16]>, partition: i32, res: Result<BrokerId, ElectionError>, out: &mut Vec<(i32, ElectionResult)>| {
        if let (Ok(_), Some(topic_id)) = (res, id) {
            to_elect.push(PartitionRef { topic: t.to_string(), topic_id, partition });
        }
        out.push((partition, res.map(|_| ())));
    };
    match topics {
        None => {
            for t in image.topics.values() {
                let mut out = Vec::new();
                for p in &t.partitions {
                    let res = choose(p, image, election);
                    if res != Err(ElectionError::NotNeeded) {
                        add(&t.name, Some(t.topic_id), p.partition, res, &mut out);
                    }
                }
                results.push(TopicElection { topic: t.name.clone(), partitions: out });
            }
        }
        Some(asked) => {
            for (name, partitions) in asked {
                let topic = image.topic(name);
                let mut out = Vec::with_capacity(partitions.len());
                for &partition in partitions {
                    let res = match topic.and_then(|t| t.partition(partition)) {
                        Some(p) => choose(p, image, election),
                        None => Err(ElectionError::UnknownTopicOrPartition),
                    };
                    add(name, topic.map(|t| t.topic_id), partition, res, &mut out);
                }
                results.push(TopicElection { topic: name.clone(), partitions: out });
            }
        }
    }
    Plan { results, to_elect }
}

/// Most preferred-leader elections one rebalance pass proposes (Kafka's controller caps
/// a pass at 1000 too); the rest wait for the next pass.
pub const MAX_ELECTIONS_PER_REBALANCE: usize = 1000;

/// The partitions the automatic rebalance moves back to their preferred leader, as Kafka's
/// `auto.leader.rebalance.enable` check: for each broker, the share of the partitions it
/// is the preferred leader of that it does not lead; above `percentage` (%), each of those
/// whose preferred replica is live and in the ISR. (Kafka 4.1's KRaft controller ignores
/// the percentage and balances every such partition; the ZooKeeper controller used it, and
/// the key is documented, so it is honoured here.)
pub fn imbalanced(image: &MetadataImage, percentage: u32) -> Vec<PartitionRef> {
    // broker → (partitions it is the preferred leader of, those it does not lead).
    let mut share: BTreeMap<BrokerId, (u64, u64)> = BTreeMap::new();
    for p in image.topics.values().flat_map(|t| t.partitions.iter()) {
        if let Some(first) = p.replicas.first() {
            let e = share.entry(first.broker).or_default();
            e.0 += 1;
            e.1 += u64::from(p.leader != first.broker);
        }
    }
    let over = |b: BrokerId| share.get(&b).is_some_and(|&(total, off)| off * 100 > u64::from(percentage) * total);
    let mut out = Vec::new();
    for t in image.topics.values() {
        for p in &t.partitions {
            let Some(preferred) = p.replicas.first().map(|r| r.broker) else { continue };
            if over(preferred) && choose(p, image, ElectionType::Preferred) == Ok(preferred) {
                out.push(PartitionRef { topic: t.name.clone(), topic_id: t.topic_id, partition: p.partition });
                if out.len() >= MAX_ELECTIONS_PER_REBALANCE {
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::cluster::image::{BrokerMeta, ReplicaMeta, TopicMeta};

    fn image(brokers: usize, assignments: &[Vec<BrokerId>]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 0..brokers as BrokerId {
            let b =
                BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 2, listeners: Vec::new(), fenced: false };
            img.brokers.insert(id, b);
        }
        let partitions = assignments
            .iter()
            .enumerate()
            .map(|(i, rs)| {
                let mut p = PartitionMeta::new_on(i as i32, rs.iter().map(|b| ReplicaMeta { broker: *b, shard: (*b % 2) as u16 }).collect());
                p.isr = rs.clone(); // as if replication kept every replica in sync
                p
            })
            .collect();
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions, configs: BTreeMap::new() });
        img
    }

    fn set_fenced(img: &mut MetadataImage, b: BrokerId, fenced: bool) {
        img.brokers.get_mut(&b).unwrap().fenced = fenced;
        if fenced {
            leadership::on_fenced(img, b, false)
        } else {
            leadership::on_unfenced(img, b, false)
        };
    }

    fn part(img: &MetadataImage, i: i32) -> &PartitionMeta {
        img.topics["t"].partition(i).unwrap()
    }

    fn refs(parts: &[i32]) -> Vec<PartitionRef> {
        parts.iter().map(|&partition| PartitionRef { topic: "t".into(), topic_id: [1; 16], partition }).collect()
    }

    fn elect(img: &mut MetadataImage, e: ElectionType, parts: &[i32]) -> Vec<ElectionResult> {
        apply_elections(img, e, &refs(parts)).0
    }

    #[test]
    fn preferred_leader_comes_back_once_in_sync_and_only_once() {
        let mut img = image(3, &[vec![0, 1, 2]]);
        set_fenced(&mut img, 0, true);
        assert_eq!((part(&img, 0).leader, part(&img, 0).isr.clone()), (1, vec![1, 2]));
        set_fenced(&mut img, 0, false);
        // Live again but not in the ISR (its log may lack records broker 1 acknowledged).
        assert_eq!(elect(&mut img, ElectionType::Preferred, &[0]), vec![Err(ElectionError::PreferredLeaderNotAvailable)]);
        assert_eq!(part(&img, 0).leader, 1);
        // Caught up (what replication will do): the preferred leader takes over.
        img.topics.get_mut("t").unwrap().partitions[0].isr.push(0);
        let before = (part(&img, 0).leader_epoch, part(&img, 0).partition_epoch);
        let (res, changed) = apply_elections(&mut img, ElectionType::Preferred, &refs(&[0]));
        assert_eq!((res, changed.into_iter().collect::<Vec<_>>()), (vec![Ok(())], vec!["t".to_string()]));
        let p = part(&img, 0);
        assert_eq!((p.leader, p.shard, p.leader_epoch, p.partition_epoch), (0, 0, before.0 + 1, before.1 + 1));
        // Idempotent: a second election changes nothing, epochs included.
        let (res, changed) = apply_elections(&mut img, ElectionType::Preferred, &refs(&[0]));
        assert_eq!(res, vec![Err(ElectionError::NotNeeded)]);
        assert!(changed.is_empty());
        assert_eq!((part(&img, 0).leader_epoch, part(&img, 0).partition_epoch), (before.0 + 1, before.1 + 1));
    }

    #[test]
    fn unclean_only_for_leaderless_partitions_and_never_a_fenced_broker() {
        // Without replication the ISR is the leader alone: fencing it offlines the partition.
        let mut img = image(3, &[vec![0, 1, 2], vec![1, 2, 0]]);
        for p in &mut img.topics.get_mut("t").unwrap().partitions {
            p.isr = vec![p.leader];
        }
        set_fenced(&mut img, 0, true);
        assert_eq!(part(&img, 0).leader, NO_LEADER);
        assert_eq!(elect(&mut img, ElectionType::Preferred, &[0]), vec![Err(ElectionError::PreferredLeaderNotAvailable)]);
        assert_eq!(elect(&mut img, ElectionType::Unclean, &[0, 1]), vec![Ok(()), Err(ElectionError::NotNeeded)]);
        let p = part(&img, 0);
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch, p.shard), (1, vec![1], 2, 1));
        assert_eq!(elect(&mut img, ElectionType::Unclean, &[0]), vec![Err(ElectionError::NotNeeded)]);
        // Every replica fenced: nobody to elect.
        set_fenced(&mut img, 1, true);
        set_fenced(&mut img, 2, true);
        assert_eq!(elect(&mut img, ElectionType::Unclean, &[0]), vec![Err(ElectionError::EligibleLeadersNotAvailable)]);
        assert_eq!(part(&img, 0).leader, NO_LEADER);
        // The preferred replica back while its partition is led by another: not in the ISR.
        set_fenced(&mut img, 0, false);
        set_fenced(&mut img, 1, false);
        assert_eq!(part(&img, 0).leader, 1);
        assert_eq!(elect(&mut img, ElectionType::Preferred, &[0]), vec![Err(ElectionError::PreferredLeaderNotAvailable)]);
    }

    #[test]
    fn plan_answers_as_kafka_and_settles_with_the_applied_results() {
        let mut img = image(3, &[vec![0, 1], vec![1, 2], vec![0, 2]]);
        set_fenced(&mut img, 0, true);
        set_fenced(&mut img, 0, false);
        img.topics.get_mut("t").unwrap().partitions[0].isr.push(0);
        // Every partition: the ones needing no election are left out.
        let all = plan(&img, ElectionType::Preferred, None);
        assert_eq!(all.results, vec![TopicElection { topic: "t".into(), partitions: vec![(0, Ok(())), (2, Err(ElectionError::PreferredLeaderNotAvailable))] }]);
        assert_eq!(all.to_elect, refs(&[0]));
        // Named partitions: each answered, unknown ones included.
        let asked = vec![("t".to_string(), vec![1, 0, 7]), ("nope".to_string(), vec![0])];
        let mut named = plan(&img, ElectionType::Preferred, Some(&asked));
        let want = |r0| {
            vec![
                TopicElection {
                    topic: "t".into(),
                    partitions: vec![(1, Err(ElectionError::NotNeeded)), (0, r0), (7, Err(ElectionError::UnknownTopicOrPartition))],
                },
                TopicElection { topic: "nope".into(), partitions: vec![(0, Err(ElectionError::UnknownTopicOrPartition))] },
            ]
        };
        assert_eq!(named.results, want(Ok(())));
        // The preferred replica is fenced again before the record commits: apply re-checks.
        set_fenced(&mut img, 0, true);
        let (applied, changed) = apply_elections(&mut img, ElectionType::Preferred, &named.to_elect);
        assert!(changed.is_empty());
        named.settle(&applied);
        assert_eq!(named.results, want(Err(ElectionError::PreferredLeaderNotAvailable)));
        // A re-created topic (another id) is not the one the record names.
        let mut stale = refs(&[0]);
        stale[0].topic_id = [9; 16];
        assert_eq!(apply_elections(&mut img, ElectionType::Unclean, &stale).0, vec![Err(ElectionError::UnknownTopicOrPartition)]);
    }

    #[test]
    fn rebalance_acts_above_the_percentage_only() {
        // Broker 0 is the preferred leader of 10 partitions; k of them are led by broker 1.
        let imbalance = |k: usize| {
            let mut img = image(2, &vec![vec![0, 1]; 10]);
            for p in img.topics.get_mut("t").unwrap().partitions.iter_mut().take(k) {
                leadership::set_leader(p, 1);
            }
            img
        };
        assert!(imbalanced(&imbalance(1), 10).is_empty(), "10% is not above 10%");
        assert_eq!(imbalanced(&imbalance(2), 10), refs(&[0, 1]));
        assert_eq!(imbalanced(&imbalance(2), 20), vec![]);
        // Only where the preferred replica could lead: in the ISR and live.
        let mut img = imbalance(3);
        img.topics.get_mut("t").unwrap().partitions[0].isr = vec![1];
        assert_eq!(imbalanced(&img, 10), refs(&[1, 2]));
        img.brokers.get_mut(&0).unwrap().fenced = true;
        assert!(imbalanced(&img, 10).is_empty());
        // Once elected, balanced.
        let mut img = imbalance(5);
        let todo = imbalanced(&img, 10);
        apply_elections(&mut img, ElectionType::Preferred, &todo);
        assert!(imbalanced(&img, 0).is_empty());
        assert!(img.topics["t"].partitions.iter().all(|p| p.leader == 0));
    }

    /// Through committed records (`apply.rs`): an unclean election after the only ISR
    /// member is fenced, the old leader's return, a preferred election that finds it out
    /// of the ISR. The deltas tell the shards; replaying the log gives the same image.
    #[test]
    fn elections_as_committed_records_replay_identically() {
        use super::super::apply::apply;
        use super::super::types::{Applied, Command, Response};
        use crate::cluster::image::MetadataDelta;
        let broker = |id: BrokerId, inc: u8| BrokerMeta {
            id,
            incarnation: [inc; 16],
            host: "h".into(),
            port: 9092,
            rack: None,
            shard_count: 2,
            listeners: Vec::new(),
            fenced: false,
        };
        let on = |b: BrokerId| ReplicaMeta { broker: b, shard: 1 };
        let t0 = refs(&[0]);
        let log = vec![
            Command::RegisterBroker { broker: broker(1, 1), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None },
            Command::RegisterBroker { broker: broker(2, 2), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None },
            Command::RegisterBroker { broker: broker(3, 3), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None },
            Command::CreateTopic { name: "t".into(), topic_id: [1; 16], shards: vec![], replicas: vec![vec![on(1), on(2), on(3)]], configs: BTreeMap::new() },
            // The followers lag: the leader shrinks the ISR to itself.
            Command::AlterPartition {
                topic_id: [1; 16],
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                new_isr: vec![1],
                new_isr_epochs: vec![],
            },
            Command::FenceBroker { broker: 1, incarnation: [1; 16], unclean_default: false, min_isr_default: 0 },
            Command::ElectLeaders { election: ElectionType::Preferred, partitions: t0.clone() },
            Command::ElectLeaders { election: ElectionType::Unclean, partitions: t0.clone() },
            Command::ElectLeaders { election: ElectionType::Unclean, partitions: t0.clone() },
            Command::RegisterBroker { broker: broker(1, 9), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None },
            Command::ElectLeaders { election: ElectionType::Preferred, partitions: t0.clone() },
        ];
        let run = || {
            let mut img = MetadataImage::default();
            let out: Vec<_> = log.iter().enumerate().map(|(i, c)| apply(&mut img, i as u64 + 1, c)).collect();
            (img, out)
        };
        let (img, out) = run();
        let elected = |i: usize| match &out[i].0 {
            Response(Ok(Applied::Elected(r))) => r.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(elected(6), vec![Err(ElectionError::PreferredLeaderNotAvailable)]);
        assert!(out[6].1.is_empty(), "nothing changed, nothing to tell the shards");
        assert_eq!(elected(7), vec![Ok(())]);
        assert_eq!(out[7].1, vec![MetadataDelta::LeadersChanged { name: "t".into() }]);
        assert_eq!((elected(8), out[8].1.clone()), (vec![Err(ElectionError::NotNeeded)], vec![]));
        assert_eq!(elected(10), vec![Err(ElectionError::PreferredLeaderNotAvailable)]);
        let p = part(&img, 0);
        // Leader epochs: 0 at creation, 1 when fenced (offline), 2 for the unclean leader.
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (2, vec![2], 2));
        assert_eq!(run(), (img, out));
    }

    proptest! {
        /// Any mix of fencings, unfencings, replicas rejoining the ISR and elections of
        /// either type: nobody fenced leads, a clean election elects only an ISR member,
        /// epochs move exactly when the leader does, and repeating an election is a no-op.
        #[test]
        fn elections_keep_the_invariants(
            assignments in prop::collection::vec(prop::sample::subsequence(vec![0, 1, 2, 3], 1..=3), 1..6),
            steps in prop::collection::vec((0..5u8, 0..4i32, 0..6i32), 0..40),
        ) {
            let mut img = image(4, &assignments);
            let n = assignments.len() as i32;
            for (kind, b, p) in steps {
                let p = p % n;
                let before: Vec<_> = img.topics["t"].partitions.iter().map(|p| (p.leader, p.leader_epoch, p.partition_epoch)).collect();
                match kind {
                    0 => set_fenced(&mut img, b, true),
                    1 => set_fenced(&mut img, b, false),
                    2 => {
                        // A live replica catches up and rejoins the ISR (replication's job).
                        let live = img.is_live(b);
                        let part = &mut img.topics.get_mut("t").unwrap().partitions[p as usize];
                        if live && part.replica_on(b).is_some() && !part.isr.contains(&b) && part.leader != NO_LEADER {
                            part.isr.push(b);
                        }
                    }
                    k => {
                        let e = if k == 3 { ElectionType::Preferred } else { ElectionType::Unclean };
                        let res = elect(&mut img, e, &[p]);
                        let after = part(&img, p).clone();
                        if res == vec![Ok(())] {
                            prop_assert_ne!(after.leader, before[p as usize].0);
                            if e == ElectionType::Preferred {
                                prop_assert!(after.isr.contains(&after.leader));
                            }
                        }
                        // Idempotent.
                        let again = elect(&mut img, e, &[p]);
                        prop_assert!(again[0].is_err(), "{:?} twice: {:?}", e, again);
                        prop_assert_eq!(part(&img, p), &after);
                    }
                }
                for (part, (leader, epoch, pepoch)) in img.topics["t"].partitions.iter().zip(before) {
                    prop_assert!(part.leader == NO_LEADER || img.is_live(part.leader), "fenced broker {} leads", part.leader);
                    prop_assert!(part.leader == NO_LEADER || part.isr.contains(&part.leader));
                    if part.leader != leader {
                        prop_assert_eq!(part.leader_epoch, epoch + 1);
                        prop_assert!(part.partition_epoch > pepoch);
                    } else {
                        prop_assert_eq!(part.leader_epoch, epoch);
                    }
                    if part.leader != NO_LEADER {
                        prop_assert_eq!(Some(part.shard), part.replica_on(part.leader).map(|r| r.shard));
                    }
                }
            }
        }
    }
}
