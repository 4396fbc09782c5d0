//! AlterPartition: a partition leader asks the controller to change its ISR (shrink a
//! lagging follower out, or expand a caught-up one back in). Kafka's
//! `ReplicationControlManager.alterPartition` / `validateAlterPartitionData`, as a pure
//! check over the image, run twice: by the quorum leader before it proposes (a refused
//! request writes nothing), and again on apply (`apply.rs`), so every replica and every
//! replay decides the same, whatever committed in between.
//!
//! Checks, in Kafka's order:
//! - unknown topic id or partition → `UnknownTopicOrPartition`;
//! - leader epoch below the current one → `FencedLeaderEpoch` (a deposed leader). Above it
//!   (Kafka: NOT_CONTROLLER, the controller is behind) cannot happen here: apply runs on
//!   the committed image, which is at least as new as anything a broker saw; refused the
//!   same way;
//! - requester not the current leader (with the current epoch: a bug, not a race) →
//!   `InvalidRequest`, as Kafka;
//! - partition epoch other than the current one → `InvalidUpdateVersion` (another change,
//!   e.g. a fencing that shrank the ISR, committed since the leader last looked);
//! - empty ISR, duplicates, a member that is not a replica, or an ISR without the leader
//!   → `InvalidRequest`;
//! - a member that is not registered or is fenced → `IneligibleReplica`;
//! - a member whose broker epoch, as the leader sent it, is not the registered one →
//!   `IneligibleReplica` (KIP-903: the leader judged a previous process of that broker,
//!   which may have had records the restarted one lost; a re-registration that changed
//!   nothing in this partition leaves its partition epoch as it was, so only this catches
//!   an expansion proposed on the old process's position and committed after the new
//!   process registered).
//!
//! Success sets the ISR (kept in replica order, so equal sets compare equal), bumps the
//! partition epoch and leaves the leader epoch alone, unless it completes a reassignment
//! (`reassignment.rs`: the last adding replica joined). An ISR equal to the current one
//! changes nothing (no epoch bump), as Kafka's PartitionChangeBuilder writes no record.
use serde::{Deserialize, Serialize};

use crate::cluster::image::{broker_epoch, BrokerId, MetadataImage, PartitionMeta, NO_LEADER};

use super::eligible_leaders::{self, ElrPolicy};
use super::reassignment;

/// Why an AlterPartition was refused (Kafka's error names; `server/` maps them to codes:
/// UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
/// INVALID_REQUEST, INELIGIBLE_REPLICA).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AlterPartitionError {
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
    #[error("The leader epoch in the request is older than the epoch on the controller.")]
    FencedLeaderEpoch,
    #[error("The given update version was invalid.")]
    InvalidUpdateVersion,
    #[error("invalid AlterPartition: {0}")]
    InvalidRequest(String),
    #[error("The new ISR contains at least one ineligible replica.")]
    IneligibleReplica,
}

/// One AlterPartition as the leader sends it.
#[derive(Clone, Copy, Debug)]
pub struct AlterIsr<'a> {
    pub topic_id: &'a [u8; 16],
    pub partition: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: &'a [BrokerId],
    /// Broker epoch of each `new_isr` member as the leader knew it (-1 or missing: not
    /// checked, as Kafka's AlterPartition before v3).
    pub new_isr_epochs: &'a [i64],
}

/// The outcome of a valid request: the topic's name and the ISR to set (in replica
/// order), or `None` when it equals the current one.
pub struct Checked {
    pub topic: String,
    pub isr: Option<Vec<BrokerId>>,
}

/// Kafka's `validateAlterPartitionData` against `image`.
pub fn check(image: &MetadataImage, req: AlterIsr<'_>) -> Result<Checked, AlterPartitionError> {
    let topic = image.topic_by_id(req.topic_id).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    let p = topic.partition(req.partition).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    if req.leader_epoch != p.leader_epoch {
        return Err(AlterPartitionError::FencedLeaderEpoch);
    }
    if req.leader != p.leader {
        return Err(AlterPartitionError::InvalidRequest(format!(
            "broker {} is not the leader of {}-{} (leader {})",
            req.leader, topic.name, p.partition, p.leader
        )));
    }
    if req.partition_epoch != p.partition_epoch {
        return Err(AlterPartitionError::InvalidUpdateVersion);
    }
    let isr = in_replica_order(p, req.new_isr).map_err(|why| AlterPartitionError::InvalidRequest(format!("{}-{}: {why}", topic.name, p.partition)))?;
    if !isr.contains(&p.leader) {
        return Err(AlterPartitionError::InvalidRequest(format!(
            "{}-{}: the ISR {:?} does not include the leader {}",
            topic.name, p.partition, req.new_isr, p.leader
        )));
    }
    if isr.iter().any(|b| !image.is_live(*b)) {
        return Err(AlterPartitionError::IneligibleReplica);
    }
    let registered = |b: &BrokerId| image.brokers.get(b).map(|m| broker_epoch(&m.incarnation));
    if req.new_isr.iter().zip(req.new_isr_epochs).any(|(b, e)| *e >= 0 && registered(b) != Some(*e)) {
        return Err(AlterPartitionError::IneligibleReplica);
    }
    let changed = isr != p.isr;
    Ok(Checked { topic: topic.name.clone(), isr: changed.then_some(isr) })
}

/// `new_isr` sorted in `p`'s replica order; refused when empty, with a duplicate or with
/// a broker that holds no replica (Kafka's `Replicas.validateIsr`).
fn in_replica_order(p: &PartitionMeta, new_isr: &[BrokerId]) -> Result<Vec<BrokerId>, String> {
    if new_isr.is_empty() {
        return Err("the ISR is empty".into());
    }
    if let Some(b) = new_isr.iter().find(|b| p.replica_on(**b).is_none()) {
        return Err(format!("broker {b} in the ISR {new_isr:?} is not a replica"));
    }
    let isr: Vec<BrokerId> = p.replicas.iter().map(|r| r.broker).filter(|b| new_isr.contains(b)).collect();
    if isr.len() != new_isr.len() {
        return Err(format!("the ISR {new_isr:?} names a broker twice"));
    }
    Ok(isr)
}

/// Applies a committed AlterPartition: checks it again on this image and, if valid,
/// sets the ISR and bumps the partition epoch. Returns the partition as it is now, and
/// the topic whose shards must look again (None when nothing changed).
pub fn apply(image: &mut MetadataImage, req: AlterIsr<'_>) -> Result<(PartitionMeta, Option<String>), AlterPartitionError> {
    let Checked { topic, isr } = check(image, req)?;
    let live = super::leadership::live_set(image);
    let elr_policy = ElrPolicy::of(image);
    let t = image.topics.get_mut(&topic).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    let configs = &t.configs;
    let p = t.partitions.iter_mut().find(|p| p.partition == req.partition).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    let Some(isr) = isr else { return Ok((p.clone(), None)) };
    let before = p.clone();
    p.isr = isr;
    // KIP-966: members leaving an ISR below min.insync.replicas become eligible leaders;
    // an ISR back at it keeps none.
    let min_isr = elr_policy.min_isr(configs, p.replicas.len());
    if elr_policy.enabled() {
        eligible_leaders::after_isr_change(p, &before.isr, min_isr, None);
    }
    // The last adding replica joining the ISR completes a reassignment (Kafka completes
    // it in the same PartitionChangeRecord); `settle` bumps the partition epoch once and
    // moves leadership if the leader was removed.
    reassignment::complete_if_ready(p);
    reassignment::settle(p, &before, &live);
    if elr_policy.enabled() {
        eligible_leaders::note_last_leader(p, &before);
        eligible_leaders::check(p, elr_policy.min_isr(configs, p.replicas.len()));
    }
    debug_assert!(p.partition_epoch > before.partition_epoch);
    debug_assert!(
        (p.leader == NO_LEADER || p.isr.contains(&p.leader)) && p.isr.iter().all(|b| p.replica_on(*b).is_some()),
        "ISR holds the leader and only replicas"
    );
    Ok((p.clone(), Some(topic)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::image::{BrokerMeta, ReplicaMeta, TopicMeta};

    const T: [u8; 16] = [1; 16];

    /// Brokers 0..4 (3 fenced, 4 unregistered); "t"-0 on [0, 1, 2, 3] led by 0 at
    /// epochs (leader 2, partition 5), ISR [0, 1].
    fn image() -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 0..4 {
            img.brokers.insert(
                id,
                BrokerMeta {
                    id,
                    incarnation: [id as u8; 16],
                    host: "h".into(),
                    port: 9092,
                    rack: None,
                    shard_count: 1,
                    listeners: Vec::new(),
                    fenced: id == 3,
                },
            );
        }
        let mut p = PartitionMeta::new_on(0, [0, 1, 2, 3, 4].iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect());
        (p.isr, p.leader_epoch, p.partition_epoch) = (vec![0, 1], 2, 5);
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: T, partitions: vec![p], configs: BTreeMap::new() });
        img
    }

    fn req(isr: &[BrokerId]) -> AlterIsr<'_> {
        AlterIsr { topic_id: &T, partition: 0, leader: 0, leader_epoch: 2, partition_epoch: 5, new_isr: isr, new_isr_epochs: &[] }
    }

    fn err(img: &MetadataImage, r: AlterIsr<'_>) -> AlterPartitionError {
        match check(img, r) {
            Err(e) => e,
            Ok(c) => panic!("accepted: {:?}", c.isr),
        }
    }

    #[test]
    fn each_refusal_as_kafka() {
        use AlterPartitionError::*;
        let img = image();
        let isr = [0, 1, 2];
        assert_eq!(err(&img, AlterIsr { topic_id: &[9; 16], ..req(&isr) }), UnknownTopicOrPartition);
        assert_eq!(err(&img, AlterIsr { partition: 1, ..req(&isr) }), UnknownTopicOrPartition);
        assert_eq!(err(&img, AlterIsr { partition: -1, ..req(&isr) }), UnknownTopicOrPartition);
        assert_eq!(err(&img, AlterIsr { leader_epoch: 1, ..req(&isr) }), FencedLeaderEpoch);
        assert_eq!(err(&img, AlterIsr { leader_epoch: 3, ..req(&isr) }), FencedLeaderEpoch);
        // The epoch check comes first: a deposed leader is fenced, whoever it is.
        assert_eq!(err(&img, AlterIsr { leader: 1, leader_epoch: 1, ..req(&isr) }), FencedLeaderEpoch);
        assert!(matches!(err(&img, AlterIsr { leader: 1, ..req(&isr) }), InvalidRequest(m) if m.contains("not the leader")));
        assert_eq!(err(&img, AlterIsr { partition_epoch: 4, ..req(&isr) }), InvalidUpdateVersion);
        assert_eq!(err(&img, AlterIsr { partition_epoch: 6, ..req(&isr) }), InvalidUpdateVersion);
        assert!(matches!(err(&img, req(&[])), InvalidRequest(m) if m.contains("empty")));
        assert!(matches!(err(&img, req(&[0, 7])), InvalidRequest(m) if m.contains("not a replica")));
        assert!(matches!(err(&img, req(&[0, 1, 0])), InvalidRequest(m) if m.contains("twice")));
        assert!(matches!(err(&img, req(&[1, 2])), InvalidRequest(m) if m.contains("leader")));
        assert_eq!(err(&img, req(&[0, 3])), IneligibleReplica, "fenced");
        assert_eq!(err(&img, req(&[0, 4])), IneligibleReplica, "not registered");
    }

    #[test]
    fn a_member_judged_in_a_previous_process_is_ineligible() {
        let img = image();
        let epoch = |b: u8| broker_epoch(&[b; 16]);
        let (now, before) = ([epoch(0), epoch(1), epoch(2)], [epoch(0), epoch(1), epoch(9)]);
        assert!(check(&img, AlterIsr { new_isr_epochs: &now, ..req(&[0, 1, 2]) }).is_ok(), "the registered epochs");
        // Broker 2 re-registered since the leader judged it: KIP-903's refusal.
        assert_eq!(err(&img, AlterIsr { new_isr_epochs: &before, ..req(&[0, 1, 2]) }), AlterPartitionError::IneligibleReplica);
        // -1 (unknown) is not checked, as requests before KIP-903.
        assert!(check(&img, AlterIsr { new_isr_epochs: &[epoch(0), -1, -1], ..req(&[0, 1, 2]) }).is_ok());
    }

    #[test]
    fn expand_then_shrink_bumps_only_the_partition_epoch_and_refuses_the_stale() {
        let mut img = image();
        let (p, changed) = apply(&mut img, req(&[2, 0, 1])).unwrap();
        assert_eq!((p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch), (vec![0, 1, 2], 0, 2, 6));
        assert_eq!(changed.as_deref(), Some("t"));
        // The same request again: its partition epoch is stale now.
        let before = img.clone();
        assert_eq!(apply(&mut img, req(&[0, 1, 2])).unwrap_err(), AlterPartitionError::InvalidUpdateVersion);
        assert_eq!(img, before, "a refused request changes nothing");
        let (p, _) = apply(&mut img, AlterIsr { partition_epoch: 6, ..req(&[0]) }).unwrap();
        assert_eq!((p.isr, p.leader_epoch, p.partition_epoch), (vec![0], 2, 7));
        // An ISR equal to the current one is no change: no epoch bump, nothing to tell.
        let (p, changed) = apply(&mut img, AlterIsr { partition_epoch: 7, ..req(&[0]) }).unwrap();
        assert_eq!((p.partition_epoch, changed), (7, None));
    }
}
