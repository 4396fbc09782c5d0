//! Partition reassignment (Kafka's AlterPartitionReassignments, KIP-455), as pure
//! functions over the image, like `leadership.rs`: the quorum leader `plan`s each
//! partition of a request against its committed image (a refused one writes nothing),
//! proposes one `AlterPartitionReassignments` record per partition, and `apply.rs` runs
//! `apply` on commit, checking again, so every replica and every replay decides the same.
//!
//! A move runs in Kafka's three steps (`ReplicationControlManager`,
//! `PartitionReassignmentReplicas`, `PartitionChangeBuilder`):
//! 1. start: `replicas` becomes the target followed by the current replicas not in it
//!    (`removing_replicas`); the target's brokers not yet replicas are `adding_replicas`.
//!    The ISR is unchanged. The leader tracks the added replicas, which open as followers
//!    on their brokers and catch up by fetching;
//! 2. each caught-up added replica joins the ISR through the leader's AlterPartition;
//! 3. once every adding replica is in the ISR (`complete_if_ready`, run on every ISR
//!    change and broker change): `replicas` = the target, ISR = ISR ∩ target, adding and
//!    removing cleared; a leader not in the target hands over to the first live target
//!    replica in the ISR; a leader that stays gets a new leader epoch when a replica was
//!    removed (Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`: the removed
//!    followers are fenced and the leader re-reads its replica set). The removed brokers
//!    close their replicas and delete the files.
//!
//! A reassignment with nothing to add (only removals) completes at once. Cancelling
//! (`target` None) reverts to the replicas before it: the adding ones leave the replicas
//! and the ISR (refused, as Kafka without unclean election, when that would empty the ISR).
//!
//! One deliberate difference: a new target given while one is ongoing keeps a broker that
//! is still being added (not in the ISR yet) as adding, where Kafka would count it as a
//! current replica and could complete without it in the ISR.
//!
//! Invariants (`debug_assert!`ed in `settle`): adding and removing are disjoint subsets
//! of `replicas`; `replicas` ends with the removing ones; the ISR holds only replicas; a
//! leader is in the ISR; every change bumps the partition epoch once.
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cluster::image::{BrokerId, MetadataImage, PartitionMeta, ReplicaMeta, NO_LEADER};

use super::leadership::{self, ChangedTopics};
use super::placement;

/// Why a partition's reassignment was refused (Kafka's exception names; `server/` maps
/// them to UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
/// INVALID_REPLICATION_FACTOR and NO_REASSIGNMENT_IN_PROGRESS).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ReassignmentError {
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("No partition reassignment is in progress.")]
    NoReassignmentInProgress,
}

/// A checked request for one partition: what the record carries. `target` None cancels;
/// otherwise each target broker with the shard its replica lives on (an existing replica
/// keeps its shard, a new one gets `placement::follower_shard`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub target: Option<Vec<ReplicaMeta>>,
}

/// One partition of an AlterPartitionReassignments request: its index and the target
/// brokers (None = cancel).
pub type PartitionReassignment = (i32, Option<Vec<BrokerId>>);

/// The answer for one topic of a request: (partition, result) in request order.
pub type TopicReassignmentResult = (String, Vec<(i32, Result<(), ReassignmentError>)>);

fn find<'a>(image: &'a MetadataImage, topic: &str, partition: i32) -> Result<(&'a [u8; 16], &'a PartitionMeta), ReassignmentError> {
    let t = image.topic(topic).ok_or_else(|| ReassignmentError::UnknownTopicOrPartition(format!("Unable to find a topic named {topic}.")))?;
    let p = t.partition(partition).ok_or_else(|| ReassignmentError::UnknownTopicOrPartition(format!("Unable to find partition {topic}:{partition}.")))?;
    Ok((&t.topic_id, p))
}

/// Kafka's `validateManualPartitionAssignment`: non-empty, no broker twice, every broker
/// registered (fenced is fine).
fn validate_target(image: &MetadataImage, target: &[BrokerId]) -> Result<(), ReassignmentError> {
    if target.is_empty() {
        return Err(ReassignmentError::InvalidReplicaAssignment("The manual partition assignment includes an empty replica list.".into()));
    }
    for (i, b) in target.iter().enumerate() {
        if target[..i].contains(b) {
            return Err(ReassignmentError::InvalidReplicaAssignment(format!("The manual partition assignment includes broker {b} more than once.")));
        }
        if !image.brokers.contains_key(b) {
            return Err(ReassignmentError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            )));
        }
    }
    Ok(())
}

/// Checks one partition of a request against the committed image (Kafka's order: topic,
/// partition, target, replication factor; cancel: a reassignment must be ongoing).
/// `Ok(None)`: nothing to do (the target is the current assignment, none ongoing).
pub fn plan(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    target: Option<&[BrokerId]>,
    allow_replication_factor_change: bool,
) -> Result<Option<Proposal>, ReassignmentError> {
    let (topic_id, p) = find(image, topic, partition)?;
    let Some(target) = target else {
        if !p.is_reassigning() {
            return Err(ReassignmentError::NoReassignmentInProgress);
        }
        revert(&mut p.clone())?;
        return Ok(Some(Proposal { topic_id: *topic_id, partition, target: None }));
    };
    validate_target(image, target)?;
    if !allow_replication_factor_change {
        // The replication factor before any ongoing reassignment (Kafka's check).
        let current = p.replicas.len() - p.adding_replicas.len();
        if current != target.len() {
            return Err(ReassignmentError::InvalidReplicationFactor(format!("The replication factor is changed from {current} to {}", target.len())));
        }
    }
    if !p.is_reassigning() && p.replicas.iter().map(|r| r.broker).eq(target.iter().copied()) {
        return Ok(None);
    }
    let metas = target
        .iter()
        .map(|&b| {
            p.replica_on(b).copied().or_else(|| placement::follower_shard(image, b).map(|shard| ReplicaMeta { broker: b, shard })).ok_or_else(|| {
                ReassignmentError::InvalidReplicaAssignment(format!(
                    "The manual partition assignment includes broker {b}, which has no shard to hold a replica."
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Proposal { topic_id: *topic_id, partition, target: Some(metas) }))
}

/// Step 1: `replicas` = target (existing replicas keep their shard) + the removing ones.
fn start(p: &mut PartitionMeta, target: &[ReplicaMeta]) {
    // A broker still being added by an ongoing reassignment stays "adding" (see the
    // module comment): it is a replica, but has not proven it caught up.
    let settled: Vec<BrokerId> = p.replicas.iter().map(|r| r.broker).filter(|b| !p.adding_replicas.contains(b)).collect();
    let removing: Vec<ReplicaMeta> = p.replicas.iter().filter(|r| !target.iter().any(|t| t.broker == r.broker)).copied().collect();
    let mut replicas: Vec<ReplicaMeta> = target.iter().map(|t| p.replica_on(t.broker).copied().unwrap_or(*t)).collect();
    p.adding_replicas = target.iter().map(|t| t.broker).filter(|b| !settled.contains(b)).collect();
    p.removing_replicas = removing.iter().map(|r| r.broker).collect();
    replicas.extend(removing);
    p.replicas = replicas;
    // The ISR may have held a removed broker only while it was a replica.
    p.isr.retain(|b| p.replicas.iter().any(|r| r.broker == *b));
}

/// Cancel: back to the replicas before the reassignment (Kafka's
/// `PartitionReassignmentRevert`): the adding ones leave the replicas and the ISR.
fn revert(p: &mut PartitionMeta) -> Result<(), ReassignmentError> {
    let adding = std::mem::take(&mut p.adding_replicas);
    let isr: Vec<BrokerId> = p.isr.iter().copied().filter(|b| !adding.contains(b)).collect();
    if isr.is_empty() {
        return Err(ReassignmentError::InvalidReplicaAssignment(format!(
            "Unable to revert partition assignment for partition {} because it would require an unclean leader election.",
            p.partition
        )));
    }
    p.replicas.retain(|r| !adding.contains(&r.broker));
    p.isr = p.replicas.iter().map(|r| r.broker).filter(|b| isr.contains(b)).collect();
    p.removing_replicas.clear();
    Ok(())
}

/// Step 3 (Kafka's `maybeCompleteReassignment`): completes `p`'s reassignment if every
/// adding replica is in the ISR and some ISR member stays. Epochs and the leader are
/// `settle`'s job. True if it completed.
pub fn complete_if_ready(p: &mut PartitionMeta) -> bool {
    if !p.is_reassigning() {
        return false;
    }
    let isr: Vec<BrokerId> = p.isr.iter().copied().filter(|b| !p.removing_replicas.contains(b)).collect();
    if isr.is_empty() || p.adding_replicas.iter().any(|b| !isr.contains(b)) {
        return false;
    }
    let removing = std::mem::take(&mut p.removing_replicas);
    p.replicas.retain(|r| !removing.contains(&r.broker));
    // In replica order, as AlterPartition keeps it (equal sets compare equal).
    p.isr = p.replicas.iter().map(|r| r.broker).filter(|b| isr.contains(b)).collect();
    p.adding_replicas.clear();
    true
}

/// After a change of `p` from `before`: a leader that left the ISR hands over to the first
/// live target replica in it (bumping both epochs; none if no such replica); a leader that
/// stays while a replica was removed gets a new leader epoch; the partition epoch rises
/// once for the change; `shard` follows the leader.
pub fn settle(p: &mut PartitionMeta, before: &PartitionMeta, live: &BTreeSet<BrokerId>) {
    let removed = before.replicas.iter().any(|r| p.replica_on(r.broker).is_none());
    if removed {
        // A removed replica is no eligible leader (KIP-966 sets hold replicas only).
        let replicas: Vec<BrokerId> = p.replicas.iter().map(|r| r.broker).collect();
        p.elr.retain(|b| replicas.contains(b));
        p.last_known_elr.retain(|b| replicas.contains(b));
    }
    if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
        let next = leadership::elect_in(p, live);
        leadership::set_leader(p, next);
    } else {
        if removed && p.leader != NO_LEADER && p.leader_epoch == before.leader_epoch {
            p.leader_epoch = p.leader_epoch.saturating_add(1);
        }
        // Unchanged leader: only `shard` is brought in step (a leaderless partition's
        // first replica may be another now).
        leadership::set_leader(p, p.leader);
    }
    if p.partition_epoch == before.partition_epoch && p != before {
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
    debug_assert!(
        p.adding_replicas.iter().all(|b| p.replica_on(*b).is_some() && !p.removing_replicas.contains(b)),
        "adding ⊆ replicas, disjoint from removing"
    );
    debug_assert!(
        p.replicas.iter().rev().take(p.removing_replicas.len()).all(|r| p.removing_replicas.contains(&r.broker)),
        "replicas = target, then the removing ones"
    );
    debug_assert!(p.isr.iter().all(|b| p.replica_on(*b).is_some()), "the ISR holds replicas only");
    debug_assert!(p.leader == NO_LEADER || p.isr.contains(&p.leader), "a leader is in its ISR");
}

/// Applies a committed `AlterPartitionReassignments` record, checked again on this image.
/// Returns the topic whose shards must look again (None when nothing changed).
pub fn apply(image: &mut MetadataImage, topic_id: &[u8; 16], partition: i32, target: Option<&[ReplicaMeta]>) -> Result<Option<String>, ReassignmentError> {
    let name =
        image.topic_by_id(topic_id).map(|t| t.name.clone()).ok_or_else(|| ReassignmentError::UnknownTopicOrPartition("Unable to find the topic.".into()))?;
    if let Some(target) = target {
        let brokers: Vec<BrokerId> = target.iter().map(|r| r.broker).collect();
        validate_target(image, &brokers)?;
    }
    let live = leadership::live_set(image);
    let p = image
        .topics
        .get_mut(&name)
        .and_then(|t| t.partitions.iter_mut().find(|p| p.partition == partition))
        .ok_or_else(|| ReassignmentError::UnknownTopicOrPartition(format!("Unable to find partition {name}:{partition}.")))?;
    let before = p.clone();
    match target {
        Some(target) => start(p, target),
        None if !p.is_reassigning() => return Err(ReassignmentError::NoReassignmentInProgress),
        None => revert(p)?,
    }
    complete_if_ready(p);
    if *p == before {
        return Ok(None);
    }
    settle(p, &before, &live);
    tracing::info!(topic = %name, partition, replicas = ?p.replicas.iter().map(|r| r.broker).collect::<Vec<_>>(), adding = ?p.adding_replicas,
        removing = ?p.removing_replicas, leader = p.leader, isr = ?p.isr, "controller: partition reassignment");
    Ok(Some(name))
}

/// Completes every reassignment that can complete now (run after a broker change).
pub fn complete_ready(image: &mut MetadataImage) -> ChangedTopics {
    let live = leadership::live_set(image);
    let mut changed = ChangedTopics::new();
    for (name, t) in image.topics.iter_mut() {
        for p in t.partitions.iter_mut().filter(|p| p.is_reassigning()) {
            let before = p.clone();
            if complete_if_ready(p) {
                settle(p, &before, &live);
                changed.insert(name.clone());
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::image::{BrokerMeta, TopicMeta};

    const T: [u8; 16] = [1; 16];

    /// Brokers 1..=4 (4 fenced), each with 2 shards; "t"-0 on [1, 2, 3] led by 1, all in
    /// sync, epochs (leader 3, partition 5).
    fn image() -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 1..=4 {
            img.brokers.insert(
                id,
                BrokerMeta {
                    id,
                    incarnation: [id as u8; 16],
                    host: "h".into(),
                    port: 9092,
                    rack: None,
                    shard_count: 2,
                    listeners: Vec::new(),
                    fenced: id == 4,
                },
            );
        }
        let mut p = PartitionMeta::new_on(0, [1, 2, 3].iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect());
        (p.leader_epoch, p.partition_epoch) = (3, 5);
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: T, partitions: vec![p], configs: BTreeMap::new() });
        img
    }

    fn p(img: &MetadataImage) -> PartitionMeta {
        img.topics["t"].partitions[0].clone()
    }

    fn brokers(p: &PartitionMeta) -> Vec<BrokerId> {
        p.replicas.iter().map(|r| r.broker).collect()
    }

    /// Plans and applies `target` (None: cancel), as the quorum leader and apply do.
    fn reassign(img: &mut MetadataImage, target: Option<&[BrokerId]>) -> Result<Option<String>, ReassignmentError> {
        match plan(img, "t", 0, target, true)? {
            None => Ok(None),
            Some(prop) => apply(img, &prop.topic_id, prop.partition, prop.target.as_deref()),
        }
    }

    /// The leader's AlterPartition, as `alter_partition::apply` runs it.
    fn set_isr(img: &mut MetadataImage, isr: &[BrokerId]) {
        let live = leadership::live_set(img);
        let p = &mut img.topics.get_mut("t").unwrap().partitions[0];
        let before = p.clone();
        p.isr = isr.to_vec();
        complete_if_ready(p);
        settle(p, &before, &live);
    }

    #[test]
    fn each_refusal_as_kafka() {
        use ReassignmentError::*;
        let img = image();
        assert!(matches!(plan(&img, "nope", 0, Some(&[1]), true), Err(UnknownTopicOrPartition(m)) if m.contains("topic named nope")));
        assert!(matches!(plan(&img, "t", 1, Some(&[1]), true), Err(UnknownTopicOrPartition(_))));
        assert!(matches!(plan(&img, "t", -1, None, true), Err(UnknownTopicOrPartition(_))));
        assert!(matches!(plan(&img, "t", 0, Some(&[]), true), Err(InvalidReplicaAssignment(m)) if m.contains("empty")));
        assert!(matches!(plan(&img, "t", 0, Some(&[1, 2, 1]), true), Err(InvalidReplicaAssignment(m)) if m.contains("more than once")));
        assert!(matches!(plan(&img, "t", 0, Some(&[1, 9]), true), Err(InvalidReplicaAssignment(m)) if m.contains("no such broker")));
        assert!(matches!(plan(&img, "t", 0, Some(&[1, -1]), true), Err(InvalidReplicaAssignment(_))));
        assert!(matches!(plan(&img, "t", 0, Some(&[1, 2]), false), Err(InvalidReplicationFactor(m)) if m.contains("from 3 to 2")));
        assert_eq!(plan(&img, "t", 0, None, true), Err(NoReassignmentInProgress));
        // A fenced broker may be named (it catches up when it returns), and the same
        // assignment is nothing to do.
        assert!(plan(&img, "t", 0, Some(&[2, 3, 4]), false).unwrap().is_some());
        assert_eq!(plan(&img, "t", 0, Some(&[1, 2, 3]), false), Ok(None));
    }

    #[test]
    fn a_move_adds_catches_up_then_drops_and_hands_leadership_over() {
        let mut img = image();
        assert_eq!(reassign(&mut img, Some(&[2, 3, 4])).unwrap().as_deref(), Some("t"));
        let q = p(&img);
        assert_eq!((brokers(&q), q.adding_replicas.clone(), q.removing_replicas.clone()), (vec![2, 3, 4, 1], vec![4], vec![1]));
        assert_eq!((q.leader, q.isr.clone(), q.leader_epoch, q.partition_epoch), (1, vec![1, 2, 3], 3, 6), "the ISR and leader stay while 4 catches up");
        assert_eq!(q.replica_on(4).map(|r| r.shard), Some(0), "the least loaded shard of broker 4");
        // An ISR change without 4 completes nothing.
        set_isr(&mut img, &[1, 2]);
        assert!(p(&img).is_reassigning());
        // 4 joins the ISR: done; 1 (the leader) is gone, 2 leads in a new epoch.
        img.brokers.get_mut(&4).unwrap().fenced = false;
        set_isr(&mut img, &[1, 2, 4]);
        let q = p(&img);
        assert_eq!((brokers(&q), q.isr.clone(), q.leader, q.leader_epoch, q.partition_epoch), (vec![2, 3, 4], vec![2, 4], 2, 4, 8));
        assert!(!q.is_reassigning());
        assert_eq!(q.shard, q.replica_on(2).unwrap().shard);
    }

    #[test]
    fn a_removal_completes_at_once_and_bumps_the_leader_epoch_of_a_leader_that_stays() {
        let mut img = image();
        reassign(&mut img, Some(&[1, 2])).unwrap();
        let q = p(&img);
        assert_eq!((brokers(&q), q.isr.clone(), q.leader, q.leader_epoch, q.partition_epoch, q.is_reassigning()), (vec![1, 2], vec![1, 2], 1, 4, 6, false));
    }

    #[test]
    fn the_leader_moves_at_once_when_the_target_is_in_sync_already() {
        let mut img = image();
        reassign(&mut img, Some(&[3, 2])).unwrap();
        let q = p(&img);
        assert_eq!((brokers(&q), q.isr.clone(), q.leader, q.leader_epoch, q.partition_epoch), (vec![3, 2], vec![3, 2], 3, 4, 6));
    }

    #[test]
    fn cancel_reverts_to_the_original_replicas() {
        let mut img = image();
        let original = p(&img);
        reassign(&mut img, Some(&[2, 3, 4])).unwrap();
        assert!(reassign(&mut img, None).unwrap().is_some());
        let q = p(&img);
        // As Kafka's revert: the replicas before it, in the order the reassignment left
        // them (the target's first), so the preferred leader may differ.
        assert_eq!((brokers(&q), q.isr.clone(), q.leader, q.is_reassigning()), (vec![2, 3, 1], vec![2, 3, 1], 1, false));
        assert_eq!(original.isr, vec![1, 2, 3]);
        assert_eq!((q.leader_epoch, q.partition_epoch), (4, 7), "4 was removed: the leader's epoch rises");
        assert_eq!(reassign(&mut img, None), Err(ReassignmentError::NoReassignmentInProgress));
    }

    #[test]
    fn a_new_target_replaces_an_ongoing_one_and_keeps_an_unproven_adding_replica() {
        let mut img = image();
        img.brokers.get_mut(&4).unwrap().fenced = false;
        reassign(&mut img, Some(&[2, 3, 4])).unwrap();
        reassign(&mut img, Some(&[4, 1, 2])).unwrap();
        let q = p(&img);
        assert_eq!((brokers(&q), q.adding_replicas.clone(), q.removing_replicas.clone()), (vec![4, 1, 2, 3], vec![4], vec![3]));
        set_isr(&mut img, &[1, 2, 3, 4]);
        let q = p(&img);
        assert_eq!((brokers(&q), q.isr.clone(), q.leader, q.is_reassigning()), (vec![4, 1, 2], vec![4, 1, 2], 1, false));
    }

    #[test]
    fn a_refused_apply_changes_nothing() {
        let mut img = image();
        let before = img.clone();
        let ghost = [ReplicaMeta { broker: 9, shard: 0 }];
        assert!(matches!(apply(&mut img, &T, 0, Some(&ghost)), Err(ReassignmentError::InvalidReplicaAssignment(_))));
        assert!(matches!(apply(&mut img, &[7; 16], 0, None), Err(ReassignmentError::UnknownTopicOrPartition(_))));
        assert_eq!(apply(&mut img, &T, 0, None), Err(ReassignmentError::NoReassignmentInProgress));
        assert_eq!(img, before);
    }

    #[test]
    fn a_broker_change_completes_what_is_ready() {
        let mut img = image();
        reassign(&mut img, Some(&[2, 3, 4])).unwrap();
        // As if 4 had joined the ISR in a record that did not complete it.
        img.topics.get_mut("t").unwrap().partitions[0].isr = vec![1, 2, 3, 4];
        img.brokers.get_mut(&4).unwrap().fenced = false;
        assert_eq!(complete_ready(&mut img).len(), 1);
        let q = p(&img);
        assert_eq!((brokers(&q), q.leader, q.is_reassigning()), (vec![2, 3, 4], 2, false));
        assert!(complete_ready(&mut img).is_empty());
    }
}
