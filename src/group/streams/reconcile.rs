//! One streams-group member's current assignment moving toward its target, as Kafka 4.4's
//! streams `CurrentAssignmentBuilder` does (with `MemberState` and the group's task → process
//! indexes of `StreamsGroup`):
//!
//! - tasks the member holds but the target does not are revoked first: the member keeps its
//!   epoch (UnrevokedTasks) until a heartbeat's owned tasks no longer list them;
//! - a task of the target is granted only once it is released: an active task once no member
//!   anywhere holds it active, and no other member of this member's process holds it as a
//!   standby or warm-up; a standby or warm-up task once no other member of the process holds
//!   it in any role. Until then the member is at the target epoch but UnreleasedTasks;
//! - role changes of the member's own task happen in place, so the client recycles the task's
//!   state: active → standby (the standby is granted at once, the active still needs its
//!   revocation acknowledged), standby ↔ warm-up (no acknowledgement), standby / warm-up →
//!   active (the replica is kept until the active task is granted);
//! - active tasks carry the epoch they were granted in (kept while held, the target epoch for
//!   new grants); OffsetCommit fences zombie commits with it.
//!
//! So no active task is ever held by two members, and no task is ever on two members of one
//! process (only a member's own active task being demoted is briefly both active and standby).
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::tasks::{self, TaskEpochs, TaskSet, TasksTuple, TasksWithEpochs};
use crate::protocol::ErrorCode;

/// Kafka's streams MemberState, with the values stored in StreamsGroupCurrentMemberAssignment
/// (not the consumer groups' 0/1/2).
#[repr(i8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemberState {
    /// Holds its target at the target epoch (or is about to move on to a newer one).
    #[default]
    Stable = 1,
    /// Must revoke tasks first; keeps its epoch until it acknowledges.
    UnrevokedTasks = 2,
    /// At the target epoch but waits for tasks others still hold.
    UnreleasedTasks = 3,
    /// A value this broker does not know (a newer version's state): the member is fenced.
    Unknown = 127,
}

impl MemberState {
    /// The record's int8.
    pub fn value(self) -> i8 {
        self as i8
    }

    /// Any unknown value reads as Unknown, as in Kafka.
    pub fn from_value(v: i8) -> MemberState {
        match v {
            1 => MemberState::Stable,
            2 => MemberState::UnrevokedTasks,
            3 => MemberState::UnreleasedTasks,
            _ => MemberState::Unknown,
        }
    }
}

impl From<i8> for MemberState {
    fn from(v: i8) -> Self {
        MemberState::from_value(v)
    }
}

impl From<MemberState> for i8 {
    fn from(s: MemberState) -> Self {
        s.value()
    }
}

/// The reconciliation part of a member (the StreamsGroupCurrentMemberAssignment record's
/// fields). Pending-revocation active tasks keep their epochs: the member may still commit
/// offsets for them until it acknowledges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: TasksWithEpochs,
    pub pending_revocation: TasksWithEpochs,
}

impl MemberAssignment {
    /// Kafka's isReconciledTo: Stable at the target epoch (nothing to do for this member).
    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == target_epoch
    }
}

/// Kafka's FencedMemberEpochException from the reconciliation (a member in an unknown state
/// that still holds tasks): the member must drop its tasks and rejoin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedMemberEpoch {
    pub message: String,
}

impl FencedMemberEpoch {
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::FENCED_MEMBER_EPOCH
    }
}

impl fmt::Display for FencedMemberEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FencedMemberEpoch {}

/// Who holds each task now, over every member's assigned and pending-revocation tasks
/// (Kafka's currentActiveTaskProcessId / currentStandbyTaskProcessIds /
/// currentWarmupTaskProcessIds of StreamsGroup).
pub trait TaskOwnership {
    /// The process of the member holding `(subtopology, partition)` as an active task.
    fn active_process(&self, subtopology: &str, partition: i32) -> Option<&str>;
    /// Whether a member of `process_id` holds `(subtopology, partition)` as a standby task.
    fn standby_processes_contain(&self, subtopology: &str, partition: i32, process_id: &str) -> bool;
    /// Whether a member of `process_id` holds `(subtopology, partition)` as a warm-up task.
    fn warmup_processes_contain(&self, subtopology: &str, partition: i32, process_id: &str) -> bool;
}

/// Process id → how many members of it hold the replica.
type ReplicaIndex = BTreeMap<String, BTreeMap<i32, BTreeMap<String, u32>>>;

/// The group's task → process indexes, kept incrementally: when a member's assignment changes,
/// remove its old tasks then add its new ones (Kafka's updateMember); remove them when it leaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessIndexes {
    active: BTreeMap<String, BTreeMap<i32, String>>,
    standby: ReplicaIndex,
    warmup: ReplicaIndex,
}

impl ProcessIndexes {
    /// The indexes of a whole group: `(process id, member)` for every member.
    pub fn from_members<'a>(members: impl IntoIterator<Item = (&'a str, &'a MemberAssignment)>) -> Self {
        let mut ix = ProcessIndexes::default();
        for (process_id, m) in members {
            ix.add_member(process_id, m);
        }
        ix
    }

    /// Adds a member's assigned and pending-revocation tasks.
    pub fn add_member(&mut self, process_id: &str, m: &MemberAssignment) {
        self.add_tasks(process_id, &m.assigned);
        self.add_tasks(process_id, &m.pending_revocation);
    }

    /// Removes what `add_member` added (with the same process id and assignment).
    pub fn remove_member(&mut self, process_id: &str, m: &MemberAssignment) {
        self.remove_tasks(process_id, &m.assigned);
        self.remove_tasks(process_id, &m.pending_revocation);
    }

    /// Records `process_id` as holding `tasks`. An active task has one process: the last added
    /// wins, as in Kafka (reconciliation never gives an active task to two members).
    pub fn add_tasks(&mut self, process_id: &str, tasks: &TasksWithEpochs) {
        for (s, ps) in &tasks.active {
            if ps.is_empty() {
                continue;
            }
            let entry = self.active.entry(s.clone()).or_default();
            for &p in ps.keys() {
                entry.insert(p, process_id.to_string());
            }
        }
        add_replicas(&mut self.standby, &tasks.standby, process_id);
        add_replicas(&mut self.warmup, &tasks.warmup, process_id);
    }

    /// Forgets `process_id` holding `tasks`. An active task is forgotten only if it is still
    /// recorded at this process (Kafka's expectedProcessId check).
    pub fn remove_tasks(&mut self, process_id: &str, tasks: &TasksWithEpochs) {
        for (s, ps) in &tasks.active {
            if let Some(entry) = self.active.get_mut(s) {
                for p in ps.keys() {
                    if entry.get(p).is_some_and(|owner| owner == process_id) {
                        entry.remove(p);
                    }
                }
                if entry.is_empty() {
                    self.active.remove(s);
                }
            }
        }
        remove_replicas(&mut self.standby, &tasks.standby, process_id);
        remove_replicas(&mut self.warmup, &tasks.warmup, process_id);
    }

    /// No task is held by anyone.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }
}

// Counted per process rather than a plain set (as Kafka's is): removing one member's replica
// never forgets another member of the same process still holding it. Under the reconciliation's
// own rules two members of a process never hold the same replica, so the two agree.
fn add_replicas(index: &mut ReplicaIndex, set: &TaskSet, process_id: &str) {
    for (s, p) in tasks::iter(set) {
        *index.entry(s.to_string()).or_default().entry(p).or_default().entry(process_id.to_string()).or_default() += 1;
    }
}

fn remove_replicas(index: &mut ReplicaIndex, set: &TaskSet, process_id: &str) {
    for (s, p) in tasks::iter(set) {
        let Some(partitions) = index.get_mut(s) else { continue };
        if let Some(processes) = partitions.get_mut(&p) {
            if let Some(n) = processes.get_mut(process_id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    processes.remove(process_id);
                }
            }
            if processes.is_empty() {
                partitions.remove(&p);
            }
        }
        if partitions.is_empty() {
            index.remove(s);
        }
    }
}

fn replica_held(index: &ReplicaIndex, subtopology: &str, partition: i32, process_id: &str) -> bool {
    index.get(subtopology).and_then(|ps| ps.get(&partition)).is_some_and(|procs| procs.contains_key(process_id))
}

impl TaskOwnership for ProcessIndexes {
    fn active_process(&self, subtopology: &str, partition: i32) -> Option<&str> {
        self.active.get(subtopology).and_then(|ps| ps.get(&partition)).map(String::as_str)
    }

    fn standby_processes_contain(&self, subtopology: &str, partition: i32, process_id: &str) -> bool {
        replica_held(&self.standby, subtopology, partition, process_id)
    }

    fn warmup_processes_contain(&self, subtopology: &str, partition: i32, process_id: &str) -> bool {
        replica_held(&self.warmup, subtopology, partition, process_id)
    }
}

/// Moves `member` (of process `process_id`) toward `target` at `target_epoch` (Kafka's
/// CurrentAssignmentBuilder.build). `owned` is what the member's heartbeat reported holding
/// (None when it did not report all three lists); `ownership` is the group's indexes as they
/// are before this step (this member's current tasks included). Returns the member unchanged
/// when it cannot move.
pub fn reconcile(
    member: &MemberAssignment,
    process_id: &str,
    target_epoch: i32,
    target: &TasksTuple,
    owned: Option<&TasksTuple>,
    ownership: &dyn TaskOwnership,
) -> Result<MemberAssignment, FencedMemberEpoch> {
    let step = Step { member, process_id, target_epoch, target, owned, ownership };
    Ok(match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::Stable | MemberState::UnreleasedTasks => step.next(member.member_epoch),
        // Acknowledged once a heartbeat lists none of the revoked tasks; the member then moves
        // to the next epoch (not straight to the target: it may be several epochs behind).
        MemberState::UnrevokedTasks if step.not_released(&member.pending_revocation) => member.clone(),
        MemberState::UnrevokedTasks => step.next(member.member_epoch.wrapping_add(1)),
        // Only after a downgrade from a version with more states: start over from nothing.
        // Kafka's isEmpty counts subtopology entries, even ones without partitions.
        MemberState::Unknown => match owned {
            Some(o) if o.active.is_empty() && o.standby.is_empty() && o.warmup.is_empty() => step.next(target_epoch),
            _ => {
                return Err(FencedMemberEpoch {
                    message: "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.".to_string(),
                })
            }
        },
    })
}

struct Step<'a> {
    member: &'a MemberAssignment,
    process_id: &'a str,
    target_epoch: i32,
    target: &'a TasksTuple,
    owned: Option<&'a TasksTuple>,
    ownership: &'a dyn TaskOwnership,
}

/// One role's split of current against target (Kafka's computeAssignmentDifference).
struct Diff<T> {
    /// Current ∩ target.
    keep: T,
    /// Current − target.
    revoke: T,
    /// Target − current, without the unreleased tasks.
    grant: T,
    /// Some task of target − current is unreleased.
    unreleased: bool,
}

impl Step<'_> {
    /// Revocation is acknowledged only by a report of owned tasks that lists none of them.
    fn not_released(&self, pending: &TasksWithEpochs) -> bool {
        self.owned.is_none_or(|o| {
            o.active.iter().any(|(s, ps)| pending.active.get(s).is_some_and(|e| ps.iter().any(|p| e.contains_key(p))))
                || intersects(&o.standby, &pending.standby)
                || intersects(&o.warmup, &pending.warmup)
        })
    }

    /// Kafka's computeNextAssignment; `epoch` is the member's epoch while it must still revoke.
    fn next(&self, epoch: i32) -> MemberAssignment {
        let mine = &self.member.assigned;
        let active = diff_active(&mine.active, &self.target.active, self.target_epoch, |s, p| self.active_unreleased(s, p));
        let mut standby = diff_replicas(&mine.standby, &self.target.standby, |s, p| self.standby_unreleased(s, p));
        let mut warmup = diff_replicas(&mine.warmup, &self.target.warmup, |s, p| self.warmup_unreleased(s, p));
        let unreleased = active.unreleased || standby.unreleased || warmup.unreleased;

        // In-place role changes of the member's own tasks, granted in this step. A demoted active
        // task stays pending revocation: its next owner may run it only once it is released.
        for (s, p) in mine.active.iter().flat_map(|(s, ps)| ps.keys().map(move |p| (s.as_str(), *p))) {
            if take(&mut standby.grant, s, p) {
                tasks::insert(&mut standby.keep, s, p);
            }
        }
        // Standby and warm-up run the same code on the client: relabelling needs no acknowledgement.
        for (s, p) in tasks::iter(&mine.standby) {
            if take(&mut warmup.grant, s, p) {
                tasks::insert(&mut warmup.keep, s, p);
                tasks::remove(&mut standby.revoke, s, p);
            }
        }
        for (s, p) in tasks::iter(&mine.warmup) {
            if take(&mut standby.grant, s, p) {
                tasks::insert(&mut standby.keep, s, p);
                tasks::remove(&mut warmup.revoke, s, p);
            }
        }

        // A replica promoted to active is never revoked: it is superseded by the active task,
        // and kept until that is granted (the previous owner may still hold it, or this member
        // must first finish revoking other tasks).
        for (s, p) in tasks::iter(&mine.standby) {
            if tasks::contains(&self.target.active, s, p) {
                tasks::remove(&mut standby.revoke, s, p);
            }
        }
        for (s, p) in tasks::iter(&mine.warmup) {
            if tasks::contains(&self.target.active, s, p) {
                tasks::remove(&mut warmup.revoke, s, p);
            }
        }
        let pending = TasksWithEpochs { active: active.revoke, standby: standby.revoke, warmup: warmup.revoke };
        let must_revoke = !pending.is_empty() && self.not_released(&pending);
        let promoted_now = |s: &str, p: i32| !must_revoke && active.grant.get(s).is_some_and(|ps| ps.contains_key(&p));
        for (s, p) in tasks::iter(&mine.standby) {
            if tasks::contains(&self.target.active, s, p) && !promoted_now(s, p) {
                tasks::insert(&mut standby.keep, s, p);
            }
        }
        for (s, p) in tasks::iter(&mine.warmup) {
            if tasks::contains(&self.target.active, s, p) && !promoted_now(s, p) {
                tasks::insert(&mut warmup.keep, s, p);
            }
        }

        let keep = TasksWithEpochs { active: active.keep, standby: standby.keep, warmup: warmup.keep };
        let grant = TasksWithEpochs { active: active.grant, standby: standby.grant, warmup: warmup.grant };
        let moved = |member_epoch: i32, state: MemberState, assigned: TasksWithEpochs, pending_revocation: TasksWithEpochs| MemberAssignment {
            member_epoch,
            previous_member_epoch: self.member.member_epoch,
            state,
            assigned,
            pending_revocation,
        };
        if must_revoke {
            // Nothing is granted before the member acknowledged its revocations.
            moved(epoch, MemberState::UnrevokedTasks, keep, pending)
        } else {
            let state = if unreleased { MemberState::UnreleasedTasks } else { MemberState::Stable };
            moved(self.target_epoch, state, merge(keep, grant), TasksWithEpochs::default())
        }
    }

    /// An active task has one owner in the whole group, and a process runs a task once: it waits
    /// for any active holder, and for another member of this process holding it as a replica
    /// (this member's own replica is promoted in place).
    fn active_unreleased(&self, s: &str, p: i32) -> bool {
        let mine = &self.member.assigned;
        self.ownership.active_process(s, p).is_some()
            || (self.ownership.standby_processes_contain(s, p, self.process_id) && !tasks::contains(&mine.standby, s, p))
            || (self.ownership.warmup_processes_contain(s, p, self.process_id) && !tasks::contains(&mine.warmup, s, p))
    }

    /// Replicas on other processes do not block; on this process, any other holder does (this
    /// member's own active task is demoted, its own warm-up relabelled, in place).
    fn standby_unreleased(&self, s: &str, p: i32) -> bool {
        let mine = &self.member.assigned;
        (self.ownership.active_process(s, p) == Some(self.process_id) && !mine.active.get(s).is_some_and(|ps| ps.contains_key(&p)))
            || self.ownership.standby_processes_contain(s, p, self.process_id)
            || (self.ownership.warmup_processes_contain(s, p, self.process_id) && !tasks::contains(&mine.warmup, s, p))
    }

    /// As for standby tasks; only this member's own standby is relabelled in place.
    fn warmup_unreleased(&self, s: &str, p: i32) -> bool {
        let mine = &self.member.assigned;
        self.ownership.active_process(s, p) == Some(self.process_id)
            || (self.ownership.standby_processes_contain(s, p, self.process_id) && !tasks::contains(&mine.standby, s, p))
            || self.ownership.warmup_processes_contain(s, p, self.process_id)
    }
}

/// Active tasks keep the epoch they were granted in; new grants get the target epoch.
fn diff_active(current: &TaskEpochs, target: &TaskSet, target_epoch: i32, unreleased: impl Fn(&str, i32) -> bool) -> Diff<TaskEpochs> {
    let mut d = Diff { keep: TaskEpochs::new(), revoke: TaskEpochs::new(), grant: TaskEpochs::new(), unreleased: false };
    let (no_epochs, no_partitions) = (BTreeMap::new(), BTreeSet::new());
    for s in current.keys().chain(target.keys()).collect::<BTreeSet<_>>() {
        let cur = current.get(s).unwrap_or(&no_epochs);
        let tgt = target.get(s).unwrap_or(&no_partitions);
        let (keep, revoke) = cur.iter().map(|(p, e)| (*p, *e)).partition(|(p, _)| tgt.contains(p));
        let mut grant = BTreeMap::new();
        for &p in tgt.iter().filter(|p| !cur.contains_key(p)) {
            if unreleased(s, p) {
                d.unreleased = true;
            } else {
                grant.insert(p, target_epoch);
            }
        }
        d.keep.insert(s.clone(), keep);
        d.revoke.insert(s.clone(), revoke);
        d.grant.insert(s.clone(), grant);
    }
    // No empty subtopology entries, as in Kafka.
    for m in [&mut d.keep, &mut d.revoke, &mut d.grant] {
        m.retain(|_, ps| !ps.is_empty());
    }
    d
}

fn diff_replicas(current: &TaskSet, target: &TaskSet, unreleased: impl Fn(&str, i32) -> bool) -> Diff<TaskSet> {
    let mut d = Diff { keep: TaskSet::new(), revoke: TaskSet::new(), grant: TaskSet::new(), unreleased: false };
    let none = BTreeSet::new();
    for s in current.keys().chain(target.keys()).collect::<BTreeSet<_>>() {
        let cur = current.get(s).unwrap_or(&none);
        let tgt = target.get(s).unwrap_or(&none);
        let mut grant = BTreeSet::new();
        for &p in tgt.difference(cur) {
            if unreleased(s, p) {
                d.unreleased = true;
            } else {
                grant.insert(p);
            }
        }
        d.keep.insert(s.clone(), cur.intersection(tgt).copied().collect());
        d.revoke.insert(s.clone(), cur.difference(tgt).copied().collect());
        d.grant.insert(s.clone(), grant);
    }
    for m in [&mut d.keep, &mut d.revoke, &mut d.grant] {
        m.retain(|_, ps| !ps.is_empty());
    }
    d
}

/// Removes `(s, p)` from `set`, saying whether it was there.
fn take(set: &mut TaskSet, s: &str, p: i32) -> bool {
    let present = tasks::contains(set, s, p);
    tasks::remove(set, s, p);
    present
}

fn intersects(a: &TaskSet, b: &TaskSet) -> bool {
    a.iter().any(|(s, ps)| b.get(s).is_some_and(|qs| !ps.is_disjoint(qs)))
}

/// `a ∪ b`; for an active task in both, `b`'s epoch (Kafka's merge).
fn merge(mut a: TasksWithEpochs, b: TasksWithEpochs) -> TasksWithEpochs {
    for (s, ps) in b.active {
        a.active.entry(s).or_default().extend(ps);
    }
    for (s, ps) in b.standby {
        a.standby.entry(s).or_default().extend(ps);
    }
    for (s, ps) in b.warmup {
        a.warmup.entry(s).or_default().extend(ps);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "s1";
    const S2: &str = "s2";
    const P: &str = "process_id";
    const OTHER: &str = "other_process_id";

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Role {
        Active,
        Standby,
        Warmup,
    }
    const ROLES: [Role; 3] = [Role::Active, Role::Standby, Role::Warmup];

    type Pairs<'a> = &'a [(&'a str, &'a [i32])];

    /// A target (or owned) tuple with all tasks in one role.
    fn tuple(role: Role, pairs: Pairs) -> TasksTuple {
        let set = tasks::task_set(pairs.iter().copied());
        match role {
            Role::Active => TasksTuple { active: set, ..Default::default() },
            Role::Standby => TasksTuple { standby: set, ..Default::default() },
            Role::Warmup => TasksTuple { warmup: set, ..Default::default() },
        }
    }

    /// Current tasks in one role, active ones all granted at `epoch`.
    fn held(role: Role, epoch: i32, pairs: Pairs) -> TasksWithEpochs {
        let t = tuple(role, pairs);
        TasksWithEpochs {
            active: t.active.into_iter().map(|(s, ps)| (s, ps.into_iter().map(|p| (p, epoch)).collect())).collect(),
            standby: t.standby,
            warmup: t.warmup,
        }
    }

    /// Current tasks in one role, active ones with their own epochs (replicas drop them).
    fn held_with_epochs(role: Role, pairs: &[(&str, &[(i32, i32)])]) -> TasksWithEpochs {
        let active: TaskEpochs = pairs.iter().map(|(s, pe)| (s.to_string(), pe.iter().copied().collect())).collect();
        let set: TaskSet = pairs.iter().map(|(s, pe)| (s.to_string(), pe.iter().map(|(p, _)| *p).collect())).collect();
        match role {
            Role::Active => TasksWithEpochs { active, ..Default::default() },
            Role::Standby => TasksWithEpochs { standby: set, ..Default::default() },
            Role::Warmup => TasksWithEpochs { warmup: set, ..Default::default() },
        }
    }

    fn member(state: MemberState, epoch: i32, previous: i32, assigned: TasksWithEpochs, pending: TasksWithEpochs) -> MemberAssignment {
        MemberAssignment { member_epoch: epoch, previous_member_epoch: previous, state, assigned, pending_revocation: pending }
    }

    fn none() -> TasksWithEpochs {
        TasksWithEpochs::default()
    }

    /// The group's indexes as functions, as Kafka's tests give them.
    struct Own<A, S, W>(A, S, W);

    impl<A, S, W> TaskOwnership for Own<A, S, W>
    where
        A: Fn(&str, i32) -> Option<&'static str>,
        S: Fn(&str, i32) -> Vec<&'static str>,
        W: Fn(&str, i32) -> Vec<&'static str>,
    {
        fn active_process(&self, s: &str, p: i32) -> Option<&str> {
            (self.0)(s, p)
        }
        fn standby_processes_contain(&self, s: &str, p: i32, process_id: &str) -> bool {
            (self.1)(s, p).contains(&process_id)
        }
        fn warmup_processes_contain(&self, s: &str, p: i32, process_id: &str) -> bool {
            (self.2)(s, p).contains(&process_id)
        }
    }

    fn owners(active: Option<&'static str>, standby: &[&'static str], warmup: &[&'static str]) -> impl TaskOwnership {
        let (standby, warmup) = (standby.to_vec(), warmup.to_vec());
        Own(move |_: &str, _: i32| active, move |_: &str, _: i32| standby.clone(), move |_: &str, _: i32| warmup.clone())
    }

    fn free() -> impl TaskOwnership {
        owners(None, &[], &[])
    }

    fn run(m: &MemberAssignment, process: &str, epoch: i32, target: &TasksTuple, owned: Option<&TasksTuple>, own: &dyn TaskOwnership) -> MemberAssignment {
        reconcile(m, process, epoch, target, owned, own).expect("not fenced")
    }

    #[test]
    fn member_state_values_are_the_streams_ones() {
        for (s, v) in [(MemberState::Stable, 1), (MemberState::UnrevokedTasks, 2), (MemberState::UnreleasedTasks, 3), (MemberState::Unknown, 127)] {
            assert_eq!((s.value(), MemberState::from_value(v), i8::from(s), MemberState::from(v)), (v, s, v, s));
        }
        for v in [0, 4, -1, 126, i8::MIN] {
            assert_eq!(MemberState::from_value(v), MemberState::Unknown);
        }
    }

    #[test]
    fn stable_to_stable() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[1, 2]), (S2, &[3, 4])];
            let m = member(MemberState::Stable, 10, 10, held(role, 10, tasks), none());
            let got = run(&m, P, 11, &tuple(role, tasks), None, &owners(Some(P), &[], &[]));
            assert_eq!(got, member(MemberState::Stable, 11, 10, held(role, 10, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn stable_to_stable_at_target_epoch() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[1, 2]), (S2, &[3, 4])];
            let m = member(MemberState::Stable, 10, 10, held(role, 10, tasks), none());
            assert_eq!(run(&m, P, 10, &tuple(role, tasks), None, &owners(Some(P), &[], &[])), m, "{role:?}");
            assert!(m.is_reconciled_to(10) && !m.is_reconciled_to(11));
        }
    }

    #[test]
    fn stable_to_stable_with_new_tasks() {
        for role in ROLES {
            let m = member(MemberState::Stable, 10, 10, held_with_epochs(role, &[(S1, &[(1, 9), (2, 8)]), (S2, &[(3, 9), (4, 8)])]), none());
            let got = run(&m, P, 11, &tuple(role, &[(S1, &[1, 2, 4]), (S2, &[3, 4, 7])]), None, &free());
            let want = held_with_epochs(role, &[(S1, &[(1, 9), (2, 8), (4, 11)]), (S2, &[(3, 9), (4, 8), (7, 11)])]);
            assert_eq!(got, member(MemberState::Stable, 11, 10, want, none()), "{role:?}");
        }
    }

    #[test]
    fn stable_to_unrevoked_tasks() {
        for role in ROLES {
            let m = member(MemberState::Stable, 10, 10, held(role, 10, &[(S1, &[1, 2]), (S2, &[3, 4])]), none());
            let got = run(&m, P, 11, &tuple(role, &[(S1, &[2, 3]), (S2, &[4, 5])]), None, &free());
            let want = member(MemberState::UnrevokedTasks, 10, 10, held(role, 10, &[(S1, &[2]), (S2, &[4])]), held(role, 10, &[(S1, &[1]), (S2, &[3])]));
            assert_eq!(got, want, "{role:?}");
        }
    }

    #[test]
    fn stable_to_unrevoked_with_empty_assignment() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[1, 2]), (S2, &[3, 4])];
            let m = member(MemberState::Stable, 10, 10, held(role, 10, tasks), none());
            let got = run(&m, P, 11, &TasksTuple::default(), None, &owners(Some(P), &[], &[]));
            assert_eq!(got, member(MemberState::UnrevokedTasks, 10, 10, none(), held(role, 10, tasks)), "{role:?}");
        }
    }

    #[test]
    fn stable_to_unreleased_tasks() {
        for role in ROLES {
            // Active: held active elsewhere; standby / warm-up: this process runs it active.
            let tasks: Pairs = &[(S1, &[1, 2]), (S2, &[3, 4])];
            let m = member(MemberState::Stable, 10, 10, held(role, 10, tasks), none());
            let got = run(&m, P, 11, &tuple(role, &[(S1, &[1, 2, 4]), (S2, &[3, 4, 7])]), None, &owners(Some(P), &[], &[]));
            assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, held(role, 10, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn stable_to_unreleased_tasks_with_owned_tasks_not_having_revoked_tasks() {
        for role in ROLES {
            // The member already reports not holding the task to revoke: no revocation round.
            let m = member(MemberState::Stable, 10, 10, held(role, 10, &[(S1, &[1, 2]), (S2, &[3, 4])]), none());
            let own = Own(|s: &str, _: i32| (s == S2).then_some(P), |_: &str, _: i32| vec![], |_: &str, _: i32| vec![]);
            let got = run(&m, P, 11, &tuple(role, &[(S1, &[1, 2]), (S2, &[3, 5])]), Some(&tuple(role, &[])), &own);
            assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, held(role, 10, &[(S1, &[1, 2]), (S2, &[3])]), none()), "{role:?}");
        }
    }

    #[test]
    fn unrevoked_tasks_to_stable() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[2, 3]), (S2, &[5, 6])];
            let m = member(MemberState::UnrevokedTasks, 10, 10, held(role, 10, tasks), held(role, 10, &[(S1, &[1]), (S2, &[4])]));
            let got = run(&m, P, 11, &tuple(role, tasks), Some(&tuple(role, tasks)), &free());
            assert_eq!(got, member(MemberState::Stable, 11, 10, held(role, 10, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn remains_in_unrevoked_tasks() {
        for role in ROLES {
            let m = member(MemberState::UnrevokedTasks, 10, 10, held(role, 10, &[(S1, &[2, 3]), (S2, &[5, 6])]), held(role, 10, &[(S1, &[1]), (S2, &[4])]));
            let target = tuple(role, &[(S1, &[3]), (S2, &[6])]);
            // Not reported, or still holding a revoked task: no progress.
            assert_eq!(run(&m, P, 12, &target, None, &free()), m, "{role:?}");
            assert_eq!(run(&m, P, 12, &target, Some(&tuple(role, &[(S1, &[1, 2, 3]), (S2, &[5, 6])])), &free()), m, "{role:?}");
            assert_eq!(run(&m, P, 12, &target, Some(&tuple(role, &[(S1, &[2, 3]), (S2, &[4, 5, 6])])), &free()), m, "{role:?}");
        }
    }

    #[test]
    fn unrevoked_tasks_to_unrevoked_tasks() {
        for role in ROLES {
            // Acknowledged, but the target moved on: the member steps one epoch and revokes again.
            let m = member(MemberState::UnrevokedTasks, 10, 10, held(role, 10, &[(S1, &[2, 3]), (S2, &[5, 6])]), held(role, 10, &[(S1, &[1]), (S2, &[4])]));
            let got = run(&m, P, 12, &tuple(role, &[(S1, &[3]), (S2, &[6])]), Some(&tuple(role, &[(S1, &[2, 3]), (S2, &[5, 6])])), &free());
            let want = member(MemberState::UnrevokedTasks, 11, 10, held(role, 10, &[(S1, &[3]), (S2, &[6])]), held(role, 10, &[(S1, &[2]), (S2, &[5])]));
            assert_eq!(got, want, "{role:?}");
        }
    }

    #[test]
    fn unrevoked_tasks_to_unreleased_tasks() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[2, 3]), (S2, &[5, 6])];
            let m = member(MemberState::UnrevokedTasks, 11, 10, held(role, 11, tasks), held(role, 11, &[(S1, &[1]), (S2, &[4])]));
            let got = run(&m, P, 11, &tuple(role, &[(S1, &[2, 3, 4]), (S2, &[5, 6, 7])]), Some(&tuple(role, tasks)), &owners(Some(P), &[], &[]));
            assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn unreleased_tasks_to_stable() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[2, 3]), (S2, &[5, 6])];
            let m = member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, tasks), none());
            let got = run(&m, "process1", 12, &tuple(role, tasks), None, &owners(Some(P), &[P], &[P]));
            assert_eq!(got, member(MemberState::Stable, 12, 11, held(role, 11, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn unreleased_tasks_to_stable_with_new_tasks() {
        for role in ROLES {
            let m = member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, &[(S1, &[2, 3]), (S2, &[5, 6])]), none());
            let all: Pairs = &[(S1, &[2, 3, 4]), (S2, &[5, 6, 7])];
            let got = run(&m, "process1", 11, &tuple(role, all), None, &free());
            assert_eq!(got, member(MemberState::Stable, 11, 11, held(role, 11, all), none()), "{role:?}");
        }
    }

    #[test]
    fn unreleased_tasks_to_unreleased_tasks() {
        for role in ROLES {
            let m = member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, &[(S1, &[2, 3]), (S2, &[5, 6])]), none());
            let target = tuple(role, &[(S1, &[2, 3, 4]), (S2, &[5, 6, 7])]);
            assert_eq!(run(&m, P, 11, &target, None, &owners(Some(P), &[P], &[P])), m, "{role:?}");
        }
    }

    #[test]
    fn unreleased_tasks_to_unreleased_tasks_other_unreleased_task_role() {
        for role in ROLES {
            // The task is held in another replica role by another member of this process.
            let m = member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, &[(S1, &[2, 3]), (S2, &[5, 6])]), none());
            let target = tuple(role, &[(S1, &[2, 3, 4]), (S2, &[5, 6, 7])]);
            let own = if role == Role::Standby { owners(None, &[], &[P]) } else { owners(None, &[P], &[]) };
            assert_eq!(run(&m, P, 11, &target, None, &own), m, "{role:?}");
        }
    }

    #[test]
    fn unreleased_tasks_to_unreleased_tasks_any_active_owner() {
        // An active task held active anywhere waits; the free one is granted.
        let m = member(MemberState::UnreleasedTasks, 11, 11, held(Role::Active, 11, &[(S1, &[2, 3]), (S2, &[5, 6])]), none());
        let own = Own(|s: &str, p: i32| (s == S1 && p == 4).then_some("anyOtherProcess"), |_: &str, _: i32| vec![], |_: &str, _: i32| vec![]);
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[2, 3, 4]), (S2, &[5, 6, 7])]), None, &own);
        assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 11, held(Role::Active, 11, &[(S1, &[2, 3]), (S2, &[5, 6, 7])]), none()));
    }

    #[test]
    fn unreleased_tasks_to_unrevoked_tasks() {
        for role in ROLES {
            let m = member(MemberState::UnreleasedTasks, 11, 11, held(role, 11, &[(S1, &[2, 3]), (S2, &[5, 6])]), held(role, 11, &[(S1, &[4]), (S2, &[7])]));
            let got = run(&m, "process1", 12, &tuple(role, &[(S1, &[3]), (S2, &[6])]), None, &owners(Some(P), &[], &[]));
            let want = member(MemberState::UnrevokedTasks, 11, 11, held(role, 11, &[(S1, &[3]), (S2, &[6])]), held(role, 11, &[(S1, &[2]), (S2, &[5])]));
            assert_eq!(got, want, "{role:?}");
        }
    }

    #[test]
    fn unknown_state_fences_until_the_member_holds_nothing() {
        for role in ROLES {
            let tasks: Pairs = &[(S1, &[3]), (S2, &[6])];
            let m = member(MemberState::Unknown, 11, 11, held(role, 11, tasks), held(role, 11, &[(S1, &[2]), (S2, &[5])]));
            let target = tuple(role, tasks);
            let err = reconcile(&m, P, 12, &target, None, &owners(Some(P), &[], &[])).unwrap_err();
            assert_eq!(err.to_string(), "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.");
            assert_eq!(err.error_code(), ErrorCode::FENCED_MEMBER_EPOCH);
            assert!(reconcile(&m, P, 12, &target, Some(&tuple(role, &[(S1, &[3])])), &free()).is_err());
            // Kafka counts a subtopology entry without partitions as holding something.
            let hollow = TasksTuple { standby: [(S1.to_string(), BTreeSet::new())].into(), ..Default::default() };
            assert!(reconcile(&m, P, 12, &target, Some(&hollow), &free()).is_err());
            // Rejoined with nothing owned: reconciled from scratch at the target epoch.
            let got = run(&m, P, 12, &target, Some(&TasksTuple::default()), &owners(Some(P), &[], &[]));
            assert_eq!(got, member(MemberState::Stable, 12, 11, held(role, 11, tasks), none()), "{role:?}");
        }
    }

    #[test]
    fn assignment_epochs_are_preserved_from_previous_assignment() {
        let epochs: &[(&str, &[(i32, i32)])] = &[(S1, &[(1, 5), (2, 6)]), (S2, &[(3, 7), (4, 8)])];
        let m = member(MemberState::Stable, 10, 10, held_with_epochs(Role::Active, epochs), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[1, 2]), (S2, &[3, 4])]), None, &owners(Some(P), &[], &[]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held_with_epochs(Role::Active, epochs), none()));
    }

    #[test]
    fn newly_assigned_tasks_get_target_assignment_epoch() {
        let tasks: Pairs = &[(S1, &[1, 2]), (S2, &[3, 4])];
        let m = member(MemberState::Stable, 10, 10, none(), none());
        let got = run(&m, P, 11, &tuple(Role::Active, tasks), None, &free());
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Active, 11, tasks), none()));
    }

    #[test]
    fn mixed_preserved_and_new_assignment_epochs() {
        // 1 and 2 keep their epochs (whether or not the client runs them yet); 3 and 4 were
        // revoked, 3 comes straight back and, like the new 5, gets the target epoch.
        let m = member(
            MemberState::UnrevokedTasks,
            10,
            10,
            held_with_epochs(Role::Active, &[(S1, &[(1, 5), (2, 6)])]),
            held_with_epochs(Role::Active, &[(S2, &[(3, 7), (4, 8)])]),
        );
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[1, 2]), (S2, &[3, 5])]), Some(&tuple(Role::Active, &[(S1, &[1])])), &free());
        let want = held_with_epochs(Role::Active, &[(S1, &[(1, 5), (2, 6)]), (S2, &[(3, 11), (5, 11)])]);
        assert_eq!(got, member(MemberState::Stable, 11, 10, want, none()));
    }

    #[test]
    fn warmup_promotion_holds_warmup_while_active_owned_by_another_member() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Warmup, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(Some(OTHER), &[], &[P]));
        assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, held(Role::Warmup, 10, &[(S1, &[0])]), none()));
    }

    #[test]
    fn warmup_promoted_to_active_when_active_is_released() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Warmup, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(None, &[], &[P]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Active, 11, &[(S1, &[0])]), none()));
    }

    #[test]
    fn warmup_promoted_to_active_from_unreleased_state() {
        let m = member(MemberState::UnreleasedTasks, 11, 10, held(Role::Warmup, 11, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(None, &[], &[P]));
        assert_eq!(got, member(MemberState::Stable, 11, 11, held(Role::Active, 11, &[(S1, &[0])]), none()));
    }

    #[test]
    fn active_not_granted_while_another_member_on_same_process_holds_warmup() {
        let m = member(MemberState::Stable, 10, 10, none(), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(None, &[], &[P]));
        assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, none(), none()));
    }

    #[test]
    fn warmup_not_dropped_while_promotion_is_blocked_by_another_revocation() {
        // Active 1 must be revoked first, so active 0 cannot be granted yet: warm-up 0 is kept.
        let assigned = TasksWithEpochs { active: [(S1.to_string(), [(1, 10)].into())].into(), warmup: tasks::task_set([(S1, &[0][..])]), ..Default::default() };
        let m = member(MemberState::Stable, 10, 10, assigned, none());
        let own = Own(|_: &str, p: i32| (p == 1).then_some(P), |_: &str, _: i32| vec![], |_: &str, p: i32| if p == 0 { vec![P] } else { vec![] });
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &own);
        assert_eq!(got, member(MemberState::UnrevokedTasks, 10, 10, held(Role::Warmup, 10, &[(S1, &[0])]), held(Role::Active, 10, &[(S1, &[1])])));
    }

    #[test]
    fn standby_promoted_to_active_when_active_is_released() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(None, &[P], &[]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Active, 11, &[(S1, &[0])]), none()));
    }

    #[test]
    fn standby_promotion_holds_standby_while_active_owned_by_another_member() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(Some(OTHER), &[P], &[]));
        assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, held(Role::Standby, 10, &[(S1, &[0])]), none()));
    }

    #[test]
    fn active_not_granted_while_another_member_on_same_process_holds_standby() {
        let m = member(MemberState::Stable, 10, 10, none(), none());
        let got = run(&m, P, 11, &tuple(Role::Active, &[(S1, &[0])]), None, &owners(None, &[P], &[]));
        assert_eq!(got, member(MemberState::UnreleasedTasks, 11, 10, none(), none()));
    }

    #[test]
    fn active_demoted_to_standby_in_place() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Active, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Standby, &[(S1, &[0])]), None, &owners(Some(P), &[], &[]));
        assert_eq!(got, member(MemberState::UnrevokedTasks, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), held(Role::Active, 10, &[(S1, &[0])])));
    }

    #[test]
    fn active_demotion_completes_when_revocation_is_acknowledged() {
        let m = member(MemberState::UnrevokedTasks, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), held(Role::Active, 10, &[(S1, &[0])]));
        let target = tuple(Role::Standby, &[(S1, &[0])]);
        let got = run(&m, P, 11, &target, Some(&target), &owners(Some(P), &[P], &[]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Standby, 10, &[(S1, &[0])]), none()));
    }

    #[test]
    fn active_not_demoted_in_place_while_another_member_on_same_process_holds_standby() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Active, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Standby, &[(S1, &[0])]), None, &owners(Some(P), &[P], &[]));
        assert_eq!(got, member(MemberState::UnrevokedTasks, 10, 10, none(), held(Role::Active, 10, &[(S1, &[0])])));
    }

    #[test]
    fn standby_converted_to_warmup_in_place() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Warmup, &[(S1, &[0])]), None, &owners(None, &[P], &[]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Warmup, 10, &[(S1, &[0])]), none()));
    }

    #[test]
    fn warmup_converted_to_standby_in_place() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Warmup, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Standby, &[(S1, &[0])]), None, &owners(None, &[], &[P]));
        assert_eq!(got, member(MemberState::Stable, 11, 10, held(Role::Standby, 10, &[(S1, &[0])]), none()));
    }

    #[test]
    fn standby_revoked_normally_when_conversion_is_blocked_by_another_member_on_same_process() {
        let m = member(MemberState::Stable, 10, 10, held(Role::Standby, 10, &[(S1, &[0])]), none());
        let got = run(&m, P, 11, &tuple(Role::Warmup, &[(S1, &[0])]), None, &owners(None, &[P], &[P]));
        assert_eq!(got, member(MemberState::UnrevokedTasks, 10, 10, none(), held(Role::Standby, 10, &[(S1, &[0])])));
    }

    #[test]
    fn unrevoked_at_max_epoch_does_not_panic() {
        let m = member(MemberState::UnrevokedTasks, i32::MAX, i32::MAX, none(), held(Role::Active, 1, &[(S1, &[0])]));
        let got = run(&m, P, 3, &TasksTuple::default(), Some(&TasksTuple::default()), &free());
        assert_eq!((got.state, got.member_epoch, got.previous_member_epoch), (MemberState::Stable, 3, i32::MAX));
    }

    #[test]
    fn process_indexes_follow_members() {
        let a = member(
            MemberState::UnrevokedTasks,
            3,
            2,
            TasksWithEpochs { active: [(S1.to_string(), [(0, 2)].into())].into(), standby: tasks::task_set([(S2, &[1][..])]), ..Default::default() },
            TasksWithEpochs { active: [(S1.to_string(), [(1, 2)].into())].into(), warmup: tasks::task_set([(S2, &[2][..])]), ..Default::default() },
        );
        let b = member(MemberState::Stable, 3, 2, held(Role::Standby, 3, &[(S2, &[1])]), none());
        let mut ix = ProcessIndexes::from_members([("pa", &a), ("pb", &b)]);
        assert_eq!((ix.active_process(S1, 0), ix.active_process(S1, 1), ix.active_process(S1, 2)), (Some("pa"), Some("pa"), None));
        assert!(ix.standby_processes_contain(S2, 1, "pa") && ix.standby_processes_contain(S2, 1, "pb"));
        assert!(ix.warmup_processes_contain(S2, 2, "pa") && !ix.warmup_processes_contain(S2, 2, "pb"));
        // A second member of the same process holding the same standby: removing one keeps the other.
        let c = member(MemberState::Stable, 3, 2, held(Role::Standby, 3, &[(S2, &[1])]), none());
        ix.add_member("pb", &c);
        ix.remove_member("pb", &b);
        assert!(ix.standby_processes_contain(S2, 1, "pb"));
        ix.remove_member("pb", &c);
        assert!(!ix.standby_processes_contain(S2, 1, "pb"));
        // An active task re-recorded at another process is not forgotten by the old holder's removal.
        let d = member(MemberState::Stable, 3, 2, held(Role::Active, 3, &[(S1, &[0])]), none());
        ix.add_member("pd", &d);
        ix.remove_member("pa", &a);
        assert_eq!(ix.active_process(S1, 0), Some("pd"));
        ix.remove_member("pd", &d);
        ix.remove_member("pd", &d);
        assert!(ix.is_empty(), "{ix:?}");
    }

    /// A group of members heartbeating against fixed targets; clients acknowledge revocations
    /// by reporting exactly their assigned tasks.
    struct Sim {
        members: BTreeMap<&'static str, (&'static str, MemberAssignment)>,
        targets: BTreeMap<&'static str, TasksTuple>,
        epoch: i32,
        ix: ProcessIndexes,
    }

    impl Sim {
        fn new(members: &[(&'static str, &'static str)]) -> Sim {
            let members = members.iter().map(|(id, process)| (*id, (*process, MemberAssignment::default()))).collect();
            Sim { members, targets: BTreeMap::new(), epoch: 0, ix: ProcessIndexes::default() }
        }

        fn retarget(&mut self, targets: &[(&'static str, TasksTuple)]) {
            self.epoch += 1;
            self.targets = targets.iter().cloned().collect();
        }

        fn hb(&mut self, id: &str, report: bool) -> MemberAssignment {
            let target = self.targets.get(id).cloned().unwrap_or_default();
            let Some((process, m)) = self.members.get_mut(id) else { panic!("no member {id}") };
            let owned = report.then(|| m.assigned.tasks());
            let new = run(m, process, self.epoch, &target, owned.as_ref(), &self.ix);
            self.ix.remove_member(process, m);
            self.ix.add_member(process, &new);
            *m = new.clone();
            // The incremental indexes match ones built from scratch.
            assert_eq!(self.ix, ProcessIndexes::from_members(self.members.values().map(|(p, m)| (*p, m))));
            self.check();
            new
        }

        /// An active task has one holder; a process never has one task on two of its members.
        fn check(&self) {
            let mut active = BTreeSet::new();
            let mut per_process: BTreeMap<(&str, String, i32), &str> = BTreeMap::new();
            for (id, (process, m)) in &self.members {
                let mut mine = BTreeSet::new();
                for t in [&m.assigned, &m.pending_revocation] {
                    for (s, ps) in &t.active {
                        for p in ps.keys() {
                            assert!(active.insert((s.clone(), *p)), "active {s}-{p} held twice: {:?}", self.members);
                            mine.insert((s.clone(), *p));
                        }
                    }
                    for (s, p) in tasks::iter(&t.standby).chain(tasks::iter(&t.warmup)) {
                        mine.insert((s.to_string(), p));
                    }
                }
                for (s, p) in mine {
                    let prev = per_process.insert((process, s.clone(), p), id);
                    assert!(prev.is_none(), "{s}-{p} on two members of {process}: {:?}", self.members);
                }
            }
        }
    }

    fn at(role: Role, ps: &[i32]) -> TasksTuple {
        tuple(role, &[(S1, ps)])
    }

    #[test]
    fn active_task_moves_only_after_its_owner_released_it() {
        let mut g = Sim::new(&[("a", "pa"), ("b", "pb")]);
        g.retarget(&[("a", at(Role::Active, &[0, 1]))]);
        assert_eq!(g.hb("a", true).assigned, held(Role::Active, 1, &[(S1, &[0, 1])]));
        g.retarget(&[("a", at(Role::Active, &[0])), ("b", at(Role::Active, &[1]))]);
        let b = g.hb("b", true);
        assert_eq!((b.state, b.member_epoch, b.assigned.is_empty()), (MemberState::UnreleasedTasks, 2, true));
        // a must give 1 back: it stays at epoch 1 until it reports no longer running it.
        let a = g.hb("a", false);
        assert_eq!((a.state, a.member_epoch, a.pending_revocation.clone()), (MemberState::UnrevokedTasks, 1, held(Role::Active, 1, &[(S1, &[1])])));
        assert!(g.hb("b", true).assigned.is_empty());
        let a = g.hb("a", true);
        assert_eq!((a.state, a.member_epoch, a.previous_member_epoch), (MemberState::Stable, 2, 1));
        let b = g.hb("b", false);
        assert_eq!((b.state, b.assigned), (MemberState::Stable, held(Role::Active, 2, &[(S1, &[1])])));
    }

    #[test]
    fn active_and_standby_swap_between_processes_in_place() {
        let mut g = Sim::new(&[("a", "pa"), ("b", "pb")]);
        g.retarget(&[("a", at(Role::Active, &[0])), ("b", at(Role::Standby, &[0]))]);
        g.hb("a", true);
        g.hb("b", true);
        g.retarget(&[("a", at(Role::Standby, &[0])), ("b", at(Role::Active, &[0]))]);
        // b keeps its standby while a still runs the active task.
        let b = g.hb("b", true);
        assert_eq!((b.state, b.assigned.clone()), (MemberState::UnreleasedTasks, held(Role::Standby, 1, &[(S1, &[0])])));
        // a is demoted in place: standby now, the active task pending revocation.
        let a = g.hb("a", true);
        assert_eq!(
            (a.state, a.assigned, a.pending_revocation),
            (MemberState::UnrevokedTasks, held(Role::Standby, 1, &[(S1, &[0])]), held(Role::Active, 1, &[(S1, &[0])]))
        );
        assert_eq!(g.hb("a", true).state, MemberState::Stable);
        // b's standby becomes the active task in one step.
        let b = g.hb("b", true);
        assert_eq!((b.state, b.assigned), (MemberState::Stable, held(Role::Active, 2, &[(S1, &[0])])));
    }

    #[test]
    fn same_process_member_waits_for_sibling_to_drop_the_task() {
        let mut g = Sim::new(&[("a", "p"), ("c", "p")]);
        g.retarget(&[("a", at(Role::Active, &[0]))]);
        g.hb("a", true);
        g.retarget(&[("c", at(Role::Standby, &[0]))]);
        assert_eq!(g.hb("c", true).state, MemberState::UnreleasedTasks);
        assert_eq!(g.hb("a", false).state, MemberState::UnrevokedTasks);
        assert!(g.hb("c", true).assigned.is_empty());
        assert_eq!(g.hb("a", true).state, MemberState::Stable);
        let c = g.hb("c", true);
        assert_eq!((c.state, c.assigned), (MemberState::Stable, held(Role::Standby, 2, &[(S1, &[0])])));
    }
}
