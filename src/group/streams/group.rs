//! One streams group's state, as Kafka 4.4's StreamsGroup keeps it: the group epoch and the
//! target assignment's epoch, the topology (as stored) and what it was validated against,
//! the members (client, process, endpoint, tags, current tasks), each member's target tasks,
//! and the task → process indexes the reconciliation reads. Everything but the in-memory
//! parts (task offsets, the configured topology, the endpoint information epoch, a
//! requested shutdown) is rebuilt by replaying the group's records
//! (`streams_group_records.rs`), in the order the coordinator wrote them.
use std::collections::BTreeMap;
use std::time::Instant;

use super::reconcile::{MemberAssignment, MemberState, ProcessIndexes};
use super::streams_group_records::{CurrentAssignmentValue, Endpoint, GroupMetadataValue, MemberMetadataValue, StreamsRecord};
use super::tasks::TasksTuple;
use super::topology::StreamsTopology;

/// Kafka's StreamsGroupState, with the names DescribeGroups / ListGroups report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamsGroupState {
    Empty,
    /// No topology yet, or it is not valid against the metadata (missing topics).
    NotReady,
    /// The group epoch is ahead of the target assignment's.
    Assigning,
    /// Some member has not reached the target yet.
    Reconciling,
    Stable,
}

impl StreamsGroupState {
    pub fn name(self) -> &'static str {
        match self {
            StreamsGroupState::Empty => "Empty",
            StreamsGroupState::NotReady => "NotReady",
            StreamsGroupState::Assigning => "Assigning",
            StreamsGroupState::Reconciling => "Reconciling",
            StreamsGroupState::Stable => "Stable",
        }
    }

    /// The lower-case form ListGroups' state filter compares with (Kafka's toLowerCaseString).
    pub fn filter_name(self) -> &'static str {
        match self {
            StreamsGroupState::Empty => "empty",
            StreamsGroupState::NotReady => "not_ready",
            StreamsGroupState::Assigning => "assigning",
            StreamsGroupState::Reconciling => "reconciling",
            StreamsGroupState::Stable => "stable",
        }
    }
}

/// One member (Kafka's StreamsGroupMember).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsMember {
    pub metadata: MemberMetadataValue,
    pub assignment: MemberAssignment,
    /// When the member is removed unless it heartbeats again (not stored: a loaded member
    /// gets a fresh session).
    pub session_deadline: Instant,
    /// While it must revoke tasks (UnrevokedTasks): when it is removed unless it did.
    pub revocation_deadline: Option<Instant>,
    /// In memory only: the changelog offset sums it last reported, by task.
    pub task_offsets: BTreeMap<(String, i32), i64>,
    pub task_end_offsets: BTreeMap<(String, i32), i64>,
}

impl StreamsMember {
    /// A member joining with no history (Kafka's StreamsGroupMember.Builder.withDefaults).
    pub fn new(now: Instant) -> StreamsMember {
        StreamsMember {
            metadata: MemberMetadataValue {
                instance_id: None,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                rebalance_timeout_ms: -1,
                topology_epoch: -1,
                process_id: String::new(),
                user_endpoint: None,
                client_tags: Vec::new(),
            },
            assignment: MemberAssignment::default(),
            session_deadline: now,
            revocation_deadline: None,
            task_offsets: BTreeMap::new(),
            task_end_offsets: BTreeMap::new(),
        }
    }

    pub fn endpoint(&self) -> Option<&Endpoint> {
        self.metadata.user_endpoint.as_ref()
    }
}

/// A streams group: the records' state plus what the coordinator keeps in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsGroup {
    pub group_epoch: i32,
    pub metadata_hash: i64,
    /// The topology epoch last validated against the metadata (-1: not valid).
    pub validated_topology_epoch: i32,
    /// `num.standby.replicas` (and rack tags) the last target was computed with.
    pub last_assignment_configs: Option<Vec<(String, String)>>,
    pub assignment_epoch: i32,
    /// When the last target assignment was computed (ms; 0: never).
    pub assignment_timestamp_ms: i64,
    pub topology: Option<StreamsTopology>,
    pub members: BTreeMap<String, StreamsMember>,
    /// Each member's target tasks at `assignment_epoch`.
    pub targets: BTreeMap<String, TasksTuple>,
    /// Who holds each task now (every member's assigned and pending-revocation tasks).
    pub processes: ProcessIndexes,
    /// In memory only: bumped when an endpoint or the tasks behind one change, so members
    /// learn the new endpoint → partitions map.
    pub endpoint_information_epoch: i32,
    /// In memory only: the member that asked the whole application to shut down.
    pub shutdown_requested_by: Option<String>,
    /// In memory only: the first target of an empty group waits until then for more
    /// members (`streams.initial.rebalance.delay.ms`).
    pub initial_delay_until: Option<Instant>,
}

impl Default for StreamsGroup {
    /// A new group: epochs 1 and 1, as Kafka 4.4 starts one (KAFKA-20268), so the first
    /// join bumps it to 2.
    fn default() -> Self {
        StreamsGroup {
            group_epoch: 1,
            metadata_hash: 0,
            validated_topology_epoch: -1,
            last_assignment_configs: None,
            assignment_epoch: 1,
            assignment_timestamp_ms: 0,
            topology: None,
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
            processes: ProcessIndexes::default(),
            endpoint_information_epoch: 0,
            shutdown_requested_by: None,
            initial_delay_until: None,
        }
    }
}

impl StreamsGroup {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's StreamsGroup.state().
    pub fn state(&self) -> StreamsGroupState {
        if self.members.is_empty() {
            StreamsGroupState::Empty
        } else if self.topology.as_ref().is_none_or(|t| t.epoch != self.validated_topology_epoch) {
            StreamsGroupState::NotReady
        } else if self.group_epoch > self.assignment_epoch {
            StreamsGroupState::Assigning
        } else if self.members.values().any(|m| !m.assignment.is_reconciled_to(self.assignment_epoch)) {
            StreamsGroupState::Reconciling
        } else {
            StreamsGroupState::Stable
        }
    }

    /// Kafka's StreamsGroup.validateOffsetCommit: a member commits with OffsetCommit v9+
    /// (an admin with epoch -1 only while the group has no members), at its current epoch,
    /// or at an older one for partitions of active tasks it was granted at or before that
    /// epoch and still holds (assigned or pending revocation): a commit sent just before an
    /// epoch bump still lands for the tasks that did not move. `partitions` are the
    /// (topic, partition) pairs committed; one that fails refuses the whole request, as in
    /// Kafka (its validator throws).
    pub fn validate_offset_commit<'a>(
        &self,
        member_id: &str,
        member_epoch: i32,
        version: i16,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) -> Result<(), crate::protocol::ErrorCode> {
        use crate::protocol::ErrorCode;
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if version < 9 {
            return Err(ErrorCode::UNSUPPORTED_VERSION);
        }
        let current = m.assignment.member_epoch;
        if member_epoch == current {
            return Ok(());
        }
        if member_epoch > current {
            return Err(ErrorCode::STALE_MEMBER_EPOCH);
        }
        let topology = self.topology.as_ref().ok_or(ErrorCode::STALE_MEMBER_EPOCH)?;
        for (topic, partition) in partitions {
            // The subtopology reading the topic (a source or repartition source topic).
            let subtopology = topology
                .subtopologies
                .iter()
                .find(|s| s.source_topics.iter().any(|t| t == topic) || s.repartition_source_topics.iter().any(|t| t.name == topic))
                .ok_or(ErrorCode::STALE_MEMBER_EPOCH)?;
            let granted = [&m.assignment.assigned, &m.assignment.pending_revocation]
                .into_iter()
                .find_map(|tasks| tasks.active.get(&subtopology.id).and_then(|ps| ps.get(&partition)).copied());
            match granted {
                Some(assignment_epoch) if member_epoch >= assignment_epoch => {}
                _ => return Err(ErrorCode::STALE_MEMBER_EPOCH),
            }
        }
        Ok(())
    }

    /// Kafka's StreamsGroup.validateOffsetFetch: a member fetches at its current epoch.
    pub fn validate_offset_fetch(&self, member_id: Option<&str>, member_epoch: i32) -> Result<(), crate::protocol::ErrorCode> {
        use crate::protocol::ErrorCode;
        let Some(member_id) = member_id else { return Ok(()) };
        if member_epoch < 0 && member_id.is_empty() {
            return Ok(());
        }
        let m = self.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if member_epoch != m.assignment.member_epoch {
            return Err(ErrorCode::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// The member holding static `instance_id`, if any.
    pub fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.members.iter().find(|(_, m)| m.metadata.instance_id.as_deref() == Some(instance_id)).map(|(id, _)| id.as_str())
    }

    /// Sets `member_id`'s current assignment, keeping the process indexes in step.
    pub fn set_assignment(&mut self, member_id: &str, assignment: MemberAssignment) {
        let Some(m) = self.members.get_mut(member_id) else { return };
        self.processes.remove_member(&m.metadata.process_id, &m.assignment);
        m.assignment = assignment;
        self.processes.add_member(&m.metadata.process_id, &m.assignment);
    }

    /// Applies one of the group's records (Kafka's replay of StreamsGroup* records); `now`
    /// starts the session of a member seen for the first time.
    pub fn replay(&mut self, rec: &StreamsRecord, now: Instant) {
        match rec {
            StreamsRecord::GroupMetadata { value: Some(v), .. } => {
                let GroupMetadataValue { epoch, metadata_hash, validated_topology_epoch, last_assignment_configs } = v.clone();
                self.group_epoch = epoch;
                self.metadata_hash = metadata_hash;
                self.validated_topology_epoch = validated_topology_epoch;
                self.last_assignment_configs = last_assignment_configs;
            }
            // The group itself goes with its last tombstone (the coordinator drops it).
            StreamsRecord::GroupMetadata { value: None, .. } => {}
            StreamsRecord::MemberMetadata { member, value: Some(v), .. } => {
                let m = self.members.entry(member.clone()).or_insert_with(|| StreamsMember::new(now));
                if m.metadata.process_id != v.process_id {
                    // The indexes are per process: move the member's tasks to its new one.
                    self.processes.remove_member(&m.metadata.process_id, &m.assignment);
                    self.processes.add_member(&v.process_id, &m.assignment);
                }
                m.metadata = v.clone();
            }
            StreamsRecord::MemberMetadata { member, value: None, .. } => {
                if let Some(m) = self.members.remove(member) {
                    self.processes.remove_member(&m.metadata.process_id, &m.assignment);
                }
            }
            StreamsRecord::TargetAssignmentMetadata { value, .. } => {
                let (epoch, timestamp) = value.unwrap_or((-1, 0));
                self.assignment_epoch = epoch;
                self.assignment_timestamp_ms = timestamp;
            }
            StreamsRecord::TargetAssignmentMember { member, tasks, .. } => match tasks {
                Some(t) => {
                    self.targets.insert(member.clone(), t.clone());
                }
                None => {
                    self.targets.remove(member);
                }
            },
            StreamsRecord::CurrentMemberAssignment { member, value, .. } => {
                let assignment = match value {
                    Some(CurrentAssignmentValue { member_epoch, previous_member_epoch, state, assigned, pending_revocation }) => MemberAssignment {
                        member_epoch: *member_epoch,
                        previous_member_epoch: *previous_member_epoch,
                        state: MemberState::from_value(*state),
                        assigned: assigned.clone(),
                        pending_revocation: pending_revocation.clone(),
                    },
                    // Kafka's tombstone: epoch -1 and no tasks, the member record follows.
                    None => MemberAssignment { member_epoch: -1, previous_member_epoch: -1, ..Default::default() },
                };
                self.members.entry(member.clone()).or_insert_with(|| StreamsMember::new(now));
                self.set_assignment(member, assignment);
            }
            StreamsRecord::Topology { topology, .. } => self.topology = topology.clone(),
            StreamsRecord::Ignored { .. } => {}
        }
    }

    /// The current-assignment record of `member_id` as it stands.
    pub fn current_assignment_record(&self, group: &str, member_id: &str) -> Option<StreamsRecord> {
        let m = self.members.get(member_id)?;
        let a = &m.assignment;
        Some(StreamsRecord::CurrentMemberAssignment {
            group: group.to_string(),
            member: member_id.to_string(),
            value: Some(CurrentAssignmentValue {
                member_epoch: a.member_epoch,
                previous_member_epoch: a.previous_member_epoch,
                state: a.state.value(),
                assigned: a.assigned.clone(),
                pending_revocation: a.pending_revocation.clone(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::streams::reconcile::TaskOwnership;
    use crate::group::streams::tasks::{task_set, TasksWithEpochs};
    use crate::group::streams::topology::Subtopology;

    fn metadata(process: &str) -> MemberMetadataValue {
        MemberMetadataValue { process_id: process.into(), client_id: "c".into(), client_host: "/h".into(), ..StreamsMember::new(Instant::now()).metadata }
    }

    #[test]
    fn replayed_records_make_the_group_and_its_states() {
        let now = Instant::now();
        let g = "app".to_string();
        let mut group = StreamsGroup::default();
        assert_eq!(group.state(), StreamsGroupState::Empty);
        let topology =
            StreamsTopology { epoch: 0, subtopologies: vec![Subtopology { id: "0".into(), source_topics: vec!["in".into()], ..Default::default() }] };
        let tasks = TasksTuple { active: task_set([("0", &[0, 1][..])]), ..Default::default() };
        let records = [
            StreamsRecord::MemberMetadata { group: g.clone(), member: "m".into(), value: Some(metadata("p1")) },
            StreamsRecord::Topology { group: g.clone(), topology: Some(topology) },
            StreamsRecord::GroupMetadata {
                group: g.clone(),
                value: Some(GroupMetadataValue { epoch: 2, metadata_hash: 9, validated_topology_epoch: -1, last_assignment_configs: None }),
            },
        ];
        for r in &records {
            group.replay(r, now);
        }
        assert_eq!(group.state(), StreamsGroupState::NotReady);
        for r in [
            StreamsRecord::GroupMetadata {
                group: g.clone(),
                value: Some(GroupMetadataValue { epoch: 3, metadata_hash: 9, validated_topology_epoch: 0, last_assignment_configs: Some(vec![]) }),
            },
            StreamsRecord::TargetAssignmentMember { group: g.clone(), member: "m".into(), tasks: Some(tasks.clone()) },
        ] {
            group.replay(&r, now);
        }
        assert_eq!(group.state(), StreamsGroupState::Assigning);
        group.replay(&StreamsRecord::TargetAssignmentMetadata { group: g.clone(), value: Some((3, 1000)) }, now);
        assert_eq!(group.state(), StreamsGroupState::Reconciling);
        let assigned = TasksWithEpochs { active: [("0".to_string(), [(0, 3), (1, 3)].into())].into(), ..Default::default() };
        let current = StreamsRecord::CurrentMemberAssignment {
            group: g.clone(),
            member: "m".into(),
            value: Some(CurrentAssignmentValue {
                member_epoch: 3,
                previous_member_epoch: 2,
                state: 1,
                assigned,
                pending_revocation: TasksWithEpochs::default(),
            }),
        };
        group.replay(&current, now);
        assert_eq!(group.state(), StreamsGroupState::Stable);
        assert_eq!(group.processes.active_process("0", 1), Some("p1"));
        assert_eq!(group.current_assignment_record(&g, "m"), Some(current));
        // A new process id moves the member's tasks in the indexes.
        group.replay(&StreamsRecord::MemberMetadata { group: g.clone(), member: "m".into(), value: Some(metadata("p2")) }, now);
        assert_eq!(group.processes.active_process("0", 1), Some("p2"));
        // Removal, in Kafka's order: current assignment, target, member.
        for r in [
            StreamsRecord::CurrentMemberAssignment { group: g.clone(), member: "m".into(), value: None },
            StreamsRecord::TargetAssignmentMember { group: g.clone(), member: "m".into(), tasks: None },
            StreamsRecord::MemberMetadata { group: g.clone(), member: "m".into(), value: None },
        ] {
            group.replay(&r, now);
        }
        assert!(group.members.is_empty() && group.targets.is_empty() && group.processes.is_empty());
        assert_eq!(group.state(), StreamsGroupState::Empty);
        assert_eq!(StreamsGroupState::NotReady.filter_name(), "not_ready");
    }

    #[test]
    fn an_older_epoch_commits_only_tasks_held_since_then() {
        use crate::group::streams::topology::TopicInfo;
        use crate::protocol::ErrorCode;
        let now = Instant::now();
        let g = "app".to_string();
        let mut group = StreamsGroup::default();
        let repartition = TopicInfo { name: "app-rep".into(), ..Default::default() };
        let topology = StreamsTopology {
            epoch: 0,
            subtopologies: vec![
                Subtopology { id: "0".into(), source_topics: vec!["in".into()], ..Default::default() },
                Subtopology { id: "1".into(), repartition_source_topics: vec![repartition], ..Default::default() },
            ],
        };
        group.replay(&StreamsRecord::Topology { group: g.clone(), topology: Some(topology) }, now);
        group.replay(&StreamsRecord::MemberMetadata { group: g.clone(), member: "m".into(), value: Some(metadata("p1")) }, now);
        // At epoch 5: in-0 granted at 2, in-1 at 5, app-rep-0 granted at 3 and being revoked.
        let assigned = TasksWithEpochs { active: [("0".to_string(), [(0, 2), (1, 5)].into())].into(), ..Default::default() };
        let pending_revocation = TasksWithEpochs { active: [("1".to_string(), [(0, 3)].into())].into(), ..Default::default() };
        group.replay(
            &StreamsRecord::CurrentMemberAssignment {
                group: g.clone(),
                member: "m".into(),
                value: Some(CurrentAssignmentValue { member_epoch: 5, previous_member_epoch: 4, state: 2, assigned, pending_revocation }),
            },
            now,
        );
        let commit = |epoch: i32, parts: &[(&str, i32)]| group.validate_offset_commit("m", epoch, 9, parts.iter().copied());
        assert_eq!(commit(5, &[("in", 0), ("in", 1), ("elsewhere", 0)]), Ok(()));
        assert_eq!(commit(6, &[]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(commit(3, &[("in", 0), ("app-rep", 0)]), Ok(()));
        assert_eq!(commit(2, &[("in", 0)]), Ok(()));
        // Granted after the epoch the member committed at, not held, or not in the topology.
        assert_eq!(commit(4, &[("in", 0), ("in", 1)]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(commit(2, &[("app-rep", 0)]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(commit(4, &[("in", 2)]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(commit(4, &[("elsewhere", 0)]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(group.validate_offset_commit("x", 5, 9, []), Err(ErrorCode::UNKNOWN_MEMBER_ID));
        assert_eq!(group.validate_offset_commit("m", 5, 8, []), Err(ErrorCode::UNSUPPORTED_VERSION));
    }
}
