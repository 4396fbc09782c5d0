//! KIP-966 eligible leader replicas, as Kafka 4.4's controller keeps them
//! (`PartitionChangeBuilder`): pure functions over one partition, called by
//! `leadership.rs`, `alter_partition.rs` and `reassignment.rs` wherever an ISR or a leader
//! changes, so every replica of the metadata log computes the same sets.
//!
//! Why: without ELR the last ISR member stays in the ISR whatever happens to it, and after
//! a crash that cost it unsynced records it leads again, while a replica that left the
//! ISR earlier (and holds them) may not (simulation finding 3). With ELR:
//! - a leader does not move its high watermark while its ISR is below min.insync.replicas
//!   (`partition/replication.rs`), so a replica that leaves an ISR that is (or becomes)
//!   that small holds every record up to the high watermark: it joins the ELR;
//! - a fenced broker leaves the ISR even as its last member (the ISR may be empty) and,
//!   the ISR being below min.insync.replicas, joins the ELR;
//! - a broker that restarts after an unclean shutdown leaves every ELR (its log may have
//!   lost records);
//! - with an empty ISR, a live ELR member is elected (it becomes the ISR); with both
//!   empty, the last known leader is, when it returns (Kafka's balanced recovery: it may
//!   lack records, as the lone survivor of every copy);
//! - the ELR empties once the ISR reaches min.insync.replicas; an unclean election
//!   empties both sets.
//!
//! Invariants (asserted in `check`): ELR members are replicas outside the ISR; the ELR is
//! empty when the ISR has at least min.insync.replicas members; the last known leader is
//! set only while the partition has no leader.
use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::image::{BrokerId, ConfigResource, MetadataImage, PartitionMeta, NO_LEADER};
use crate::cluster::topic_config::MIN_INSYNC_REPLICAS;

/// Whether ELR is on (eligible.leader.replicas.version >= 1) and the min.insync.replicas
/// that applies to each topic.
#[derive(Clone, Debug)]
pub struct ElrPolicy {
    enabled: bool,
    cluster: Option<i32>,
    default: i32,
}

impl ElrPolicy {
    /// From the image: its finalized features, the cluster-wide dynamic broker default of
    /// min.insync.replicas, and the controllers' static default it recorded.
    pub fn of(image: &MetadataImage) -> ElrPolicy {
        let cluster = image.configs_of(&ConfigResource::Broker(String::new())).get(MIN_INSYNC_REPLICAS).and_then(|v| v.trim().parse().ok());
        ElrPolicy { enabled: image.features.elr_enabled(), cluster, default: image.min_insync_replicas_default.max(1) }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The topic's effective min.insync.replicas (Kafka's `getTopicEffectiveMinIsr`): its
    /// own key, else the cluster's, else the controllers' default, at most its replica
    /// count.
    pub fn min_isr(&self, topic_configs: &BTreeMap<String, String>, replicas: usize) -> usize {
        let configured = topic_configs.get(MIN_INSYNC_REPLICAS).and_then(|v| v.trim().parse::<i32>().ok()).or(self.cluster).unwrap_or(self.default);
        usize::try_from(configured.max(1)).unwrap_or(1).min(replicas.max(1))
    }
}

/// The ISR of `p` changed from `old_isr` (Kafka's `maybePopulateTargetElr`): at or above
/// `min_isr` the ELR empties; below it, the members that left join the ELR, which keeps
/// no ISR member and no `unclean` broker (one that restarted after an unclean shutdown).
pub fn after_isr_change(p: &mut PartitionMeta, old_isr: &[BrokerId], min_isr: usize, unclean: Option<BrokerId>) {
    if p.isr.len() >= min_isr {
        p.elr.clear();
        return;
    }
    let mut candidates: BTreeSet<BrokerId> = p.elr.iter().chain(old_isr).copied().collect();
    candidates.retain(|b| !p.isr.contains(b) && Some(*b) != unclean && p.replica_on(*b).is_some());
    // Replica order, so that every node lists them alike (and elects the same one).
    p.elr = p.replicas.iter().map(|r| r.broker).filter(|b| candidates.contains(b)).collect();
}

/// With an empty ISR: the first live ELR member (replica order).
pub fn eligible_leader(p: &PartitionMeta, live: &BTreeSet<BrokerId>) -> Option<BrokerId> {
    if !p.isr.is_empty() {
        return None;
    }
    p.replicas.iter().map(|r| r.broker).find(|b| p.elr.contains(b) && live.contains(b))
}

/// With an empty ISR and an empty ELR: the last known leader, if it is live (Kafka's
/// `canElectLastKnownLeader`, which also asks that it be the only one recorded).
pub fn last_known_leader(p: &PartitionMeta, live: &BTreeSet<BrokerId>) -> Option<BrokerId> {
    match p.last_known_elr[..] {
        [b] if p.isr.is_empty() && p.elr.is_empty() && live.contains(&b) => Some(b),
        _ => None,
    }
}

/// `leader`, an ELR member, leads: it is the ISR now and leaves the ELR.
pub fn promote(p: &mut PartitionMeta, leader: BrokerId) {
    p.isr = vec![leader];
    p.elr.retain(|b| *b != leader);
}

/// An unclean election (or the last known leader's): the sets no longer describe what
/// is safe, Kafka empties both.
pub fn clear(p: &mut PartitionMeta) {
    p.elr.clear();
    p.last_known_elr.clear();
}

/// After a change from `before` (Kafka's `maybeUpdateLastKnownLeader`): the ISR became
/// empty, so its last leader is remembered; a partition with a leader forgets it.
pub fn note_last_leader(p: &mut PartitionMeta, before: &PartitionMeta) {
    if p.leader != NO_LEADER {
        p.last_known_elr.clear();
    } else if p.isr.is_empty() && !before.isr.is_empty() && before.leader != NO_LEADER && p.last_known_elr != [before.leader] {
        p.last_known_elr = vec![before.leader];
    }
}

/// The invariants above (debug builds; `min_isr` as the policy gives it).
pub fn check(p: &PartitionMeta, min_isr: usize) {
    debug_assert!(p.elr.iter().all(|b| !p.isr.contains(b) && p.replica_on(*b).is_some()), "ELR {:?} outside ISR {:?}, replicas only", p.elr, p.isr);
    debug_assert!(p.elr.is_empty() || p.isr.len() < min_isr, "ELR {:?} with ISR {:?} at min ISR {min_isr}", p.elr, p.isr);
    debug_assert!(p.last_known_elr.is_empty() || p.leader == NO_LEADER, "last known leader {:?} while {} leads", p.last_known_elr, p.leader);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::ReplicaMeta;

    fn part(replicas: &[BrokerId], isr: &[BrokerId], leader: BrokerId) -> PartitionMeta {
        let mut p = PartitionMeta::new_on(0, replicas.iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect());
        p.isr = isr.to_vec();
        p.leader = leader;
        p
    }

    fn live(b: &[BrokerId]) -> BTreeSet<BrokerId> {
        b.iter().copied().collect()
    }

    #[test]
    fn members_that_leave_an_isr_below_min_join_the_elr_in_replica_order() {
        let mut p = part(&[1, 2, 3], &[1], 1);
        after_isr_change(&mut p, &[3, 1, 2], 2, None);
        assert_eq!(p.elr, vec![2, 3]);
        // The ISR grows back to min: the ELR empties.
        let old = p.isr.clone();
        p.isr = vec![1, 2];
        after_isr_change(&mut p, &old, 2, None);
        assert!(p.elr.is_empty());
    }

    #[test]
    fn an_isr_at_min_keeps_no_elr_and_an_unclean_broker_is_never_one() {
        let mut p = part(&[1, 2, 3], &[1, 2], 1);
        after_isr_change(&mut p, &[1, 2, 3], 2, None);
        assert!(p.elr.is_empty(), "ISR [1, 2] meets min 2: 3 may lack records below the high watermark");
        let mut p = part(&[1, 2, 3], &[], NO_LEADER);
        p.elr = vec![2];
        after_isr_change(&mut p, &[1], 2, Some(1));
        assert_eq!(p.elr, vec![2], "1 restarted uncleanly");
        after_isr_change(&mut p, &[], 2, Some(2));
        assert!(p.elr.is_empty());
    }

    #[test]
    fn elections_from_the_elr_then_the_last_known_leader() {
        let mut p = part(&[1, 2, 3], &[], NO_LEADER);
        p.elr = vec![1, 2];
        p.last_known_elr = vec![1];
        assert_eq!(eligible_leader(&p, &live(&[2, 3])), Some(2));
        assert_eq!(eligible_leader(&p, &live(&[3])), None, "3 is not eligible");
        assert_eq!(last_known_leader(&p, &live(&[1])), None, "the ELR is not empty");
        promote(&mut p, 2);
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![2], vec![1]));
        let mut p = part(&[1, 2, 3], &[], NO_LEADER);
        p.last_known_elr = vec![1];
        assert_eq!(last_known_leader(&p, &live(&[2, 3])), None, "not back yet");
        assert_eq!(last_known_leader(&p, &live(&[1])), Some(1));
    }

    #[test]
    fn the_last_leader_is_noted_when_the_isr_empties_and_forgotten_with_a_leader() {
        let before = part(&[1, 2], &[1], 1);
        let mut p = part(&[1, 2], &[], NO_LEADER);
        note_last_leader(&mut p, &before);
        assert_eq!(p.last_known_elr, vec![1]);
        let before = p.clone();
        p.leader = 2;
        p.isr = vec![2];
        note_last_leader(&mut p, &before);
        assert!(p.last_known_elr.is_empty());
    }

    #[test]
    fn min_isr_is_the_topic_then_the_cluster_then_the_default_at_most_the_replicas() {
        let mut img = MetadataImage::default();
        let none = BTreeMap::new();
        assert_eq!(ElrPolicy::of(&img).min_isr(&none, 3), 1, "0 recorded counts as 1");
        img.min_insync_replicas_default = 2;
        assert_eq!(ElrPolicy::of(&img).min_isr(&none, 3), 2);
        img.resource_configs.insert(ConfigResource::Broker(String::new()), [(MIN_INSYNC_REPLICAS.to_string(), "3".to_string())].into());
        assert_eq!(ElrPolicy::of(&img).min_isr(&none, 3), 3);
        let topic: BTreeMap<String, String> = [(MIN_INSYNC_REPLICAS.to_string(), "2".to_string())].into();
        assert_eq!(ElrPolicy::of(&img).min_isr(&topic, 3), 2);
        assert_eq!(ElrPolicy::of(&img).min_isr(&none, 1), 1, "at most the replica count");
    }
}
