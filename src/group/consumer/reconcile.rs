//! Moving one member's current assignment toward its target, as Kafka's
//! CurrentAssignmentBuilder does:
//!
//! - partitions the member owns but the target does not are revoked first: the member
//!   keeps its epoch (UnrevokedPartitions) until a heartbeat's `topicPartitions` shows it
//!   no longer owns them;
//! - partitions in the target are given only once no other member owns them (assigned or
//!   pending revocation); until then the member is at the target epoch but
//!   UnreleasedPartitions;
//! - with nothing to revoke or wait for, the member is Stable at the target epoch.
//!
//! Each partition owned remembers the epoch it was given at (`assignment_epochs`): a
//! partition gained takes the target epoch, one kept keeps its own.
//!
//! So no partition is ever owned by two members at once.
use std::collections::{BTreeSet, HashMap};

use uuid::Uuid;

use super::group::{Assignment, ConsumerMember, MemberState};

/// Moves `m` toward `target` (at `target_epoch`). `owned` is the request's
/// `topicPartitions` (None when the member did not send them); `owners` says who owns
/// each partition now. Returns whether the member changed.
pub fn reconcile(m: &mut ConsumerMember, target_epoch: i32, target: &Assignment, owned: Option<&Assignment>, owners: &HashMap<(Uuid, i32), String>) -> bool {
    let before = (m.member_epoch, m.state, m.assigned.clone(), m.pending_revocation.clone());
    match m.state {
        MemberState::Stable if m.member_epoch == target_epoch => {}
        MemberState::UnrevokedPartitions => {
            // Still owning a revoked partition (or not telling): wait.
            let released = owned.is_some_and(|o| !intersects(o, &m.pending_revocation));
            if released {
                m.pending_revocation.clear();
                next(m, target_epoch, target, owned, owners);
            }
        }
        _ => next(m, target_epoch, target, owned, owners),
    }
    (m.member_epoch, m.state, &m.assigned, &m.pending_revocation) != (before.0, before.1, &before.2, &before.3)
}

/// Kafka's computeNextAssignment.
fn next(m: &mut ConsumerMember, target_epoch: i32, target: &Assignment, owned: Option<&Assignment>, owners: &HashMap<(Uuid, i32), String>) {
    let mut keep = Assignment::new();
    let mut revoke = Assignment::new();
    let mut gained = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
    for t in topics {
        let empty = BTreeSet::new();
        let want = target.get(&t).unwrap_or(&empty);
        let have = m.assigned.get(&t).unwrap_or(&empty);
        let k: BTreeSet<i32> = have.intersection(want).copied().collect();
        let r: BTreeSet<i32> = have.difference(want).copied().collect();
        let mut g = BTreeSet::new();
        for &p in want.difference(have) {
            match owners.get(&(t, p)) {
                Some(owner) if owner != &m.id => unreleased = true,
                _ => {
                    g.insert(p);
                }
            }
        }
        if !k.is_empty() {
            keep.insert(t, k);
        }
        if !r.is_empty() {
            revoke.insert(t, r);
        }
        if !g.is_empty() {
            gained.insert(t, g);
        }
    }
    // A member that says it no longer owns the revoked partitions needs no revocation round.
    let must_revoke = !revoke.is_empty() && owned.is_none_or(|o| intersects(o, &revoke));
    if must_revoke {
        m.assigned = keep;
        m.pending_revocation = revoke;
        m.state = MemberState::UnrevokedPartitions;
        // Nothing new: each kept or revoked partition keeps the epoch it was given at.
        m.sync_assignment_epochs(target_epoch);
        return;
    }
    for (t, ps) in gained {
        keep.entry(t).or_default().extend(ps);
    }
    m.assigned = keep;
    m.pending_revocation.clear();
    // The partitions gained are given at the target epoch; kept ones keep theirs.
    m.sync_assignment_epochs(target_epoch);
    if m.member_epoch != target_epoch {
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = target_epoch;
    }
    m.state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(t, ps)| b.get(t).is_some_and(|qs| ps.iter().any(|p| qs.contains(p))))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::group::ConsumerGroup;
    use super::*;

    fn topic() -> Uuid {
        Uuid::from_u128(7)
    }

    fn a(ps: &[i32]) -> Assignment {
        let mut x = Assignment::new();
        if !ps.is_empty() {
            x.insert(topic(), ps.iter().copied().collect());
        }
        x
    }

    fn add(g: &mut ConsumerGroup, id: &str) {
        g.members.insert(id.into(), ConsumerMember::new(id.into(), Instant::now()));
    }

    /// One heartbeat of `id` reporting `owned` against the group's target.
    fn hb(g: &mut ConsumerGroup, id: &str, owned: Option<Assignment>) {
        let target = g.target.get(id).cloned().unwrap_or_default();
        let epoch = g.assignment_epoch;
        let owners = std::mem::take(&mut g.owners);
        let m = g.members.get_mut(id).unwrap();
        reconcile(m, epoch, &target, owned.as_ref(), &owners);
        g.owners = owners;
        g.update_owners(id);
        check_exclusive(g);
    }

    /// No partition is in two members' assigned ∪ pending sets.
    fn check_exclusive(g: &ConsumerGroup) {
        let mut seen = std::collections::HashSet::new();
        for m in g.members.values() {
            for k in m.owned() {
                assert!(seen.insert(k), "partition {k:?} owned twice: {:?}", g.members);
            }
        }
    }

    #[test]
    fn join_then_leave_never_double_owns() {
        let mut g = ConsumerGroup::default();
        add(&mut g, "a");
        g.group_epoch = 1;
        g.assignment_epoch = 1;
        g.target.insert("a".into(), a(&[0, 1, 2, 3]));
        hb(&mut g, "a", Some(a(&[])));
        let ma = &g.members["a"];
        assert_eq!((ma.member_epoch, ma.state, ma.assigned.clone()), (1, MemberState::Stable, a(&[0, 1, 2, 3])));

        // b joins: target moves 2,3 to b. b must wait until a gave them back.
        add(&mut g, "b");
        g.group_epoch = 2;
        g.assignment_epoch = 2;
        g.target.insert("a".into(), a(&[0, 1]));
        g.target.insert("b".into(), a(&[2, 3]));
        hb(&mut g, "b", Some(a(&[])));
        let mb = &g.members["b"];
        assert_eq!((mb.member_epoch, mb.state, mb.assigned.clone()), (2, MemberState::UnreleasedPartitions, a(&[])));
        // a is told to revoke; it keeps epoch 1 until it acknowledges.
        hb(&mut g, "a", None);
        let ma = &g.members["a"];
        assert_eq!(
            (ma.member_epoch, ma.state, ma.assigned.clone(), ma.pending_revocation.clone()),
            (1, MemberState::UnrevokedPartitions, a(&[0, 1]), a(&[2, 3]))
        );
        // Pending revocation, 2 and 3 keep the epoch they were given at.
        assert!(ma.assignment_epochs.values().all(|&e| e == 1) && ma.assignment_epochs.len() == 4);
        // A heartbeat still owning the partitions changes nothing; b still waits.
        hb(&mut g, "a", Some(a(&[0, 1, 2, 3])));
        assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
        hb(&mut g, "b", None);
        assert!(g.members["b"].assigned.is_empty());
        // a acknowledges: it moves to epoch 2; then b gets 2 and 3.
        hb(&mut g, "a", Some(a(&[0, 1])));
        let ma = &g.members["a"];
        assert_eq!((ma.member_epoch, ma.previous_member_epoch, ma.state), (2, 1, MemberState::Stable));
        hb(&mut g, "b", None);
        let mb = &g.members["b"];
        assert_eq!((mb.member_epoch, mb.state, mb.assigned.clone()), (2, MemberState::Stable, a(&[2, 3])));

        // a leaves: its partitions are free at once; b gets everything at epoch 3.
        g.remove_member("a");
        g.group_epoch = 3;
        g.assignment_epoch = 3;
        g.target.insert("b".into(), a(&[0, 1, 2, 3]));
        hb(&mut g, "b", Some(a(&[2, 3])));
        let mb = &g.members["b"];
        assert_eq!((mb.member_epoch, mb.state, mb.assigned.clone()), (3, MemberState::Stable, a(&[0, 1, 2, 3])));
        // Each partition keeps the epoch it was given at: 2 and 3 at epoch 2, 0 and 1 now.
        let given: Vec<(i32, i32)> = mb.assignment_epochs.iter().map(|((_, p), e)| (*p, *e)).collect();
        assert_eq!(given, vec![(0, 3), (1, 3), (2, 2), (3, 2)]);
    }

    #[test]
    fn swap_between_members_waits_for_both_revocations() {
        let mut g = ConsumerGroup { group_epoch: 1, assignment_epoch: 1, ..Default::default() };
        add(&mut g, "a");
        add(&mut g, "b");
        g.target.insert("a".into(), a(&[0, 1]));
        g.target.insert("b".into(), a(&[2, 3]));
        hb(&mut g, "a", Some(a(&[])));
        hb(&mut g, "b", Some(a(&[])));
        // New target swaps 1 and 2.
        g.group_epoch = 2;
        g.assignment_epoch = 2;
        g.target.insert("a".into(), a(&[0, 2]));
        g.target.insert("b".into(), a(&[1, 3]));
        hb(&mut g, "a", Some(a(&[0, 1])));
        hb(&mut g, "b", Some(a(&[2, 3])));
        assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
        assert_eq!(g.members["b"].state, MemberState::UnrevokedPartitions);
        hb(&mut g, "a", Some(a(&[0])));
        // a released 1 but 2 is still b's: a waits at epoch 2.
        assert_eq!((g.members["a"].member_epoch, g.members["a"].state), (2, MemberState::UnreleasedPartitions));
        hb(&mut g, "b", Some(a(&[3])));
        assert_eq!(g.members["b"].assigned, a(&[1, 3]));
        hb(&mut g, "a", None);
        assert_eq!((g.members["a"].state, g.members["a"].assigned.clone()), (MemberState::Stable, a(&[0, 2])));
    }

    #[test]
    fn lost_response_previous_epoch_is_reconciled_again() {
        let mut g = ConsumerGroup { group_epoch: 3, assignment_epoch: 3, ..Default::default() };
        add(&mut g, "a");
        g.target.insert("a".into(), a(&[0]));
        hb(&mut g, "a", Some(a(&[])));
        // Nothing changes on a repeated heartbeat at the target epoch.
        let before = g.members["a"].clone();
        hb(&mut g, "a", None);
        assert_eq!(g.members["a"].member_epoch, before.member_epoch);
        assert_eq!(g.members["a"].assigned, before.assigned);
    }
}
