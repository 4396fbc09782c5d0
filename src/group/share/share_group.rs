//! One share group's membership (KIP-932), as Kafka 4.4's group coordinator runs
//! ShareGroupHeartbeat: members join with epoch 0 and their subscription, heartbeat with
//! their epoch, leave with -1, and are removed when their session ends. A change of
//! members, subscriptions or the subscribed topics' partitions bumps the group epoch and
//! recomputes the target assignment (`simple_assignor.rs`); a member takes its target at
//! its next heartbeat, with no revocation step: share-partitions may be read by several
//! members at once, the records themselves are what is locked (`share_partition.rs`).
//!
//! Pure: the caller gives the time and the topics' metadata, and stores what changed.
//! Errors carry Kafka's codes and words (checked against Kafka 4.4's answers).
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::share_group_records::{CurrentAssignmentValue, MemberMetadataValue, ShareRecord, StatePartitionMetadataValue, MEMBER_STATE_STABLE};
use super::simple_assignor::{self, Assignment};
use crate::group::consumer::group::metadata_hash;
use crate::protocol::ErrorCode;

/// The member epoch a member sends to leave.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Longest member, rack or client id kept (they are echoed in describes).
const MAX_ID_BYTES: usize = 1024;
/// Topics one member may subscribe to.
const MAX_SUBSCRIBED_TOPICS: usize = 10_000;
/// Kafka's longest topic name.
const MAX_TOPIC_NAME_BYTES: usize = 249;

/// An error answered to the member: Kafka's code and message (None where Kafka sends none).
pub type ShareHeartbeatError = (ErrorCode, Option<String>);

/// The group settings a heartbeat needs (`group.share.*`, overridable per group).
#[derive(Clone, Copy, Debug)]
pub struct ShareGroupSettings {
    /// `group.share.heartbeat.interval.ms` (Kafka: 5000).
    pub heartbeat_interval_ms: i32,
    /// `group.share.session.timeout.ms` (Kafka: 45000).
    pub session_timeout_ms: i32,
    /// `group.share.max.size` (Kafka: 200).
    pub max_size: usize,
}

impl Default for ShareGroupSettings {
    fn default() -> Self {
        use crate::cluster::config_defs::ShareGroupDefaults;
        ShareGroupSettings {
            heartbeat_interval_ms: ShareGroupDefaults::HEARTBEAT_INTERVAL_MS,
            session_timeout_ms: ShareGroupDefaults::SESSION_TIMEOUT_MS,
            max_size: crate::config::SHARE_GROUP_MAX_SIZE,
        }
    }
}

/// One ShareGroupHeartbeat, as decoded.
#[derive(Clone, Debug, Default)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// What the member is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareHeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent on join and whenever it changed; None otherwise.
    pub assignment: Option<Assignment>,
    /// Share-partitions the coordinator must now initialize (after storing the records).
    pub initialize: Option<ShareInitialize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    pub assignment: Assignment,
    session_deadline: Instant,
}

/// Kafka's ShareGroupState as describes report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The target of every member, computed at `assignment_epoch`.
    target: BTreeMap<String, Assignment>,
    /// Hash of the subscribed topics' names, ids and partition counts when last looked at
    /// (stored with the group epoch, so a load does not count as a metadata change).
    metadata_hash: i64,
    /// What changed since the coordinator last took them (`take_records`): the records
    /// it stores in `__consumer_offsets` before it answers.
    records: Vec<ShareRecord>,
    /// Share-partitions whose state the share coordinator holds (InitializeShareGroupState
    /// answered, and stored): topic id → (name, partitions). Only these are assigned.
    initialized: BTreeMap<Uuid, (String, BTreeSet<i32>)>,
    /// Asked to be initialized and not answered yet.
    initializing: BTreeMap<Uuid, Initializing>,
    /// Topics whose share state is being deleted (kept as read; written back unchanged).
    deleting: BTreeMap<Uuid, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Initializing {
    name: String,
    partitions: BTreeSet<i32>,
    /// When last asked; asked again after INITIALIZE_RETRY_INTERVAL without an answer.
    since: Instant,
}

/// Kafka's `group.share.initialize.retry.interval.ms` default: partitions asked to be
/// initialized and not answered by then are asked again.
pub const INITIALIZE_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// Share-partitions to initialize in the share coordinator (InitializeShareGroupState),
/// asked by the coordinator once the heartbeat's records are stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareInitialize {
    /// The group epoch, as Kafka's coordinator sets it.
    pub state_epoch: i32,
    /// Topic id → (partition, start offset): -1 for a topic new to the group (the
    /// group's share.auto.offset.reset applies), 0 for new partitions of a known topic
    /// (so nothing written while they are initialized is skipped).
    pub partitions: BTreeMap<Uuid, Vec<(i32, i64)>>,
}

/// Kafka's request checks (before the group is looked at).
pub fn validate(group_id: &str, hb: &ShareHeartbeat) -> Result<(), ShareHeartbeatError> {
    let invalid = |m: &str| Err((ErrorCode::INVALID_REQUEST, Some(m.to_string())));
    if group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.member_id.is_empty() {
        // Kafka 4.4 answers this one without a message.
        return Err((ErrorCode::INVALID_REQUEST, None));
    }
    if hb.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    if hb.member_id.len() > MAX_ID_BYTES || hb.rack_id.as_ref().is_some_and(|r| r.len() > MAX_ID_BYTES) || hb.client_id.len() > MAX_ID_BYTES {
        return invalid("An id is longer than this broker accepts.");
    }
    if hb.subscribed_topic_names.as_ref().is_some_and(|t| t.len() > MAX_SUBSCRIBED_TOPICS || t.iter().any(|n| n.len() > MAX_TOPIC_NAME_BYTES)) {
        return invalid("Too many subscribed topics, or a topic name longer than 249 bytes.");
    }
    match hb.member_epoch {
        0 if hb.subscribed_topic_names.as_ref().is_none_or(|t| t.is_empty()) => invalid("SubscribedTopicNames must be set in first request."),
        e if e >= 0 || e == LEAVE_GROUP_MEMBER_EPOCH => Ok(()),
        _ => invalid("MemberEpoch is invalid."),
    }
}

impl ShareMember {
    fn new(member_id: String, now: Instant) -> ShareMember {
        ShareMember {
            member_id,
            member_epoch: 0,
            previous_member_epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            assignment: Assignment::new(),
            session_deadline: now,
        }
    }

    fn metadata_value(&self) -> MemberMetadataValue {
        MemberMetadataValue {
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed_topic_names: self.subscribed_topic_names.iter().cloned().collect(),
        }
    }

    fn current_assignment_value(&self) -> CurrentAssignmentValue {
        CurrentAssignmentValue {
            member_epoch: self.member_epoch,
            previous_member_epoch: self.previous_member_epoch,
            state: MEMBER_STATE_STABLE,
            assigned_partitions: self.assignment.clone(),
        }
    }
}

impl ShareGroup {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<&str> {
        self.members.values().flat_map(|m| m.subscribed_topic_names.iter().map(String::as_str)).collect()
    }

    /// The records of what changed since the last call, in the order Kafka writes them
    /// (member, group epoch, target, current assignment); the coordinator stores them
    /// before it answers.
    pub fn take_records(&mut self) -> Vec<ShareRecord> {
        std::mem::take(&mut self.records)
    }

    /// Handles one heartbeat of group `group_id` (already validated). `topic` gives a
    /// topic's id and partition count, None when it does not exist.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        hb: ShareHeartbeat,
        topic: &dyn Fn(&str) -> Option<(Uuid, i32)>,
        settings: &ShareGroupSettings,
        now: Instant,
    ) -> Result<ShareHeartbeatAnswer, ShareHeartbeatError> {
        let session = Duration::from_millis(settings.session_timeout_ms.max(0) as u64);
        let epoch_before = self.group_epoch;
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            if !self.members.contains_key(&hb.member_id) {
                return Err(unknown_member(group_id, &hb.member_id));
            }
            self.remove_member(group_id, &hb.member_id);
            self.refresh(group_id, topic, epoch_before);
            return Ok(ShareHeartbeatAnswer {
                member_id: hb.member_id,
                member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                heartbeat_interval_ms: 0,
                assignment: None,
                initialize: None,
            });
        }
        let joining = hb.member_epoch == 0;
        match self.members.get(&hb.member_id) {
            None if !joining => return Err(unknown_member(group_id, &hb.member_id)),
            None if self.members.len() >= settings.max_size => {
                return Err((
                    ErrorCode::GROUP_MAX_SIZE_REACHED,
                    Some(format!("The share group has reached its maximum capacity of {} members.", settings.max_size)),
                ));
            }
            Some(m) if !joining => fence_check(hb.member_epoch, m)?,
            _ => {}
        }
        let stored_before = self.members.get(&hb.member_id).map(ShareMember::metadata_value);
        let member = self.members.entry(hb.member_id.clone()).or_insert_with(|| ShareMember::new(hb.member_id.clone(), now));
        let mut changed = joining && member.member_epoch != 0;
        if joining {
            // A (re)join starts from nothing: the member's epoch is its group's next one.
            member.member_epoch = 0;
            member.assignment.clear();
        }
        member.session_deadline = now + session;
        member.client_id = hb.client_id;
        member.client_host = hb.client_host;
        if hb.rack_id.is_some() {
            member.rack_id = hb.rack_id;
        }
        if let Some(names) = hb.subscribed_topic_names {
            let names: BTreeSet<String> = names.into_iter().collect();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                changed = true;
            }
        }
        let stored = member.metadata_value();
        if stored_before.as_ref() != Some(&stored) {
            self.records.push(ShareRecord::MemberMetadata { group: group_id.to_string(), member: hb.member_id.clone(), value: Some(stored) });
        }
        if joining || changed {
            self.group_epoch += 1;
        }
        let metadata = self.refresh(group_id, topic, epoch_before);
        // The member takes its target now (no revocation step in share groups).
        let member = self.members.get_mut(&hb.member_id).expect("inserted above");
        let target = self.target.get(&hb.member_id).cloned().unwrap_or_default();
        let mut assignment = None;
        if member.member_epoch != self.assignment_epoch || member.assignment != target || joining {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = self.assignment_epoch;
            member.assignment = target;
            assignment = Some(member.assignment.clone());
            let value = Some(member.current_assignment_value());
            self.records.push(ShareRecord::CurrentMemberAssignment { group: group_id.to_string(), member: hb.member_id.clone(), value });
        }
        let member_epoch = member.member_epoch;
        let initialize = self.maybe_initialize(group_id, &metadata, now);
        Ok(ShareHeartbeatAnswer { member_id: hb.member_id, member_epoch, heartbeat_interval_ms: settings.heartbeat_interval_ms, assignment, initialize })
    }

    /// Members whose session ended by `now` are removed (their records are released by
    /// the share-partitions); their ids.
    pub fn expire(&mut self, group_id: &str, now: Instant, topic: &dyn Fn(&str) -> Option<(Uuid, i32)>) -> Vec<String> {
        let gone: Vec<String> = self.members.values().filter(|m| m.session_deadline <= now).map(|m| m.member_id.clone()).collect();
        if gone.is_empty() {
            return gone;
        }
        let epoch_before = self.group_epoch;
        for id in &gone {
            self.remove_member(group_id, id);
        }
        self.refresh(group_id, topic, epoch_before);
        gone
    }

    /// Removes a member, with Kafka's tombstones of its current assignment and metadata
    /// (its target's goes with the next target, `refresh`).
    fn remove_member(&mut self, group_id: &str, member_id: &str) {
        self.members.remove(member_id);
        let (group, member) = (group_id.to_string(), member_id.to_string());
        self.records.push(ShareRecord::CurrentMemberAssignment { group: group.clone(), member: member.clone(), value: None });
        self.records.push(ShareRecord::MemberMetadata { group, member, value: None });
    }

    /// Recomputes the target when members, subscriptions, the subscribed topics'
    /// partitions or the initialized share-partitions changed since it was last computed
    /// (bumping the group epoch for all but the first, as Kafka's coordinator does). The
    /// topics are compared by hash: after a load only the stored hash is known, and
    /// unchanged topics must not move members. Returns the subscribed topics' metadata
    /// (name → id, partition count).
    fn refresh(&mut self, group_id: &str, topic: &dyn Fn(&str) -> Option<(Uuid, i32)>, epoch_before: i32) -> BTreeMap<String, (Uuid, i32)> {
        let metadata: BTreeMap<String, (Uuid, i32)> = self.subscribed_topics().into_iter().filter_map(|t| topic(t).map(|m| (t.to_string(), m))).collect();
        let hash = metadata_hash(&metadata);
        // Only initialized share-partitions are assigned.
        let assignable: BTreeMap<Uuid, BTreeSet<i32>> = metadata
            .values()
            .filter_map(|(id, count)| self.initialized.get(id).map(|(_, ps)| (*id, ps.iter().copied().filter(|p| p < count).collect())))
            .collect();
        let members_changed = self.target.len() != self.members.len() || self.members.keys().any(|m| !self.target.contains_key(m));
        let metadata_changed = hash != self.metadata_hash;
        if (members_changed || metadata_changed || self.initialized_assignment_pending(&assignable)) && self.group_epoch == self.assignment_epoch {
            self.group_epoch += 1;
        }
        self.metadata_hash = hash;
        let group = group_id.to_string();
        if self.group_epoch != epoch_before || metadata_changed {
            self.records.push(ShareRecord::GroupEpoch { group: group.clone(), epoch: Some(self.group_epoch), metadata_hash: hash });
        }
        if self.group_epoch == self.assignment_epoch {
            return metadata;
        }
        let subscriptions = self
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.subscribed_topic_names.iter().filter_map(|t| metadata.get(t).map(|(id, _)| *id)).collect()))
            .collect();
        let target = simple_assignor::assign(&subscriptions, &assignable);
        for member in self.target.keys().filter(|m| !target.contains_key(*m)) {
            self.records.push(ShareRecord::TargetAssignmentMember { group: group.clone(), member: member.clone(), partitions: None });
        }
        for (member, a) in &target {
            if self.target.get(member) != Some(a) {
                self.records.push(ShareRecord::TargetAssignmentMember { group: group.clone(), member: member.clone(), partitions: Some(a.clone()) });
            }
        }
        self.target = target;
        self.assignment_epoch = self.group_epoch;
        self.records.push(ShareRecord::TargetAssignmentMetadata { group, assignment_epoch: Some((self.assignment_epoch, 0)) });
        metadata
    }

    /// Kafka's `initializedAssignmentPending`: some subscribed share-partition was
    /// initialized since the target was computed (the target does not cover exactly the
    /// initialized partitions of a subscribed topic).
    fn initialized_assignment_pending(&self, assignable: &BTreeMap<Uuid, BTreeSet<i32>>) -> bool {
        if self.members.is_empty() {
            return false;
        }
        let mut assigned: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        for a in self.target.values() {
            for (t, ps) in a {
                assigned.entry(*t).or_default().extend(ps);
            }
        }
        assignable.iter().any(|(t, ps)| !ps.is_empty() && assigned.get(t) != Some(ps))
    }

    /// The subscribed share-partitions neither initialized nor asked for recently become
    /// "initializing" (stored) and are returned to be initialized, as Kafka's
    /// `maybeCreateInitializeShareGroupStateRequest`.
    fn maybe_initialize(&mut self, group_id: &str, metadata: &BTreeMap<String, (Uuid, i32)>, now: Instant) -> Option<ShareInitialize> {
        let mut missing: BTreeMap<Uuid, (String, BTreeSet<i32>)> = BTreeMap::new();
        for (name, (id, count)) in metadata {
            let mut known: BTreeSet<i32> = self.initialized.get(id).map(|(_, ps)| ps.clone()).unwrap_or_default();
            if let Some(i) = self.initializing.get(id).filter(|i| now.saturating_duration_since(i.since) < INITIALIZE_RETRY_INTERVAL) {
                known.extend(&i.partitions);
            }
            let absent: BTreeSet<i32> = (0..*count).filter(|p| !known.contains(p)).collect();
            if !absent.is_empty() {
                missing.insert(*id, (name.clone(), absent));
            }
        }
        if missing.is_empty() {
            return None;
        }
        let known_topics: BTreeSet<Uuid> = self.initialized.keys().chain(self.initializing.keys()).copied().collect();
        let partitions = missing
            .iter()
            .map(|(id, (_, ps))| {
                let start_offset = if known_topics.contains(id) { 0 } else { -1 };
                (*id, ps.iter().map(|p| (*p, start_offset)).collect())
            })
            .collect();
        for (id, (name, ps)) in missing {
            let entry = self.initializing.entry(id).or_insert_with(|| Initializing { name, partitions: BTreeSet::new(), since: now });
            entry.partitions.extend(ps);
            entry.since = now;
            self.deleting.remove(&id);
        }
        self.records.push(self.state_partitions_record(group_id));
        Some(ShareInitialize { state_epoch: self.group_epoch, partitions })
    }

    /// The share coordinator answered an initialization: `done` partitions are initialized
    /// (assigned from the members' next heartbeats), `failed` ones are no longer
    /// initializing (asked again at a later heartbeat), as Kafka's
    /// `initializeShareGroupState` / `uninitializeShareGroupState` (the record goes with
    /// `take_records`).
    pub fn initialization_answered(&mut self, group_id: &str, done: &BTreeMap<Uuid, BTreeSet<i32>>, failed: &BTreeMap<Uuid, BTreeSet<i32>>) {
        if done.is_empty() && failed.is_empty() {
            return;
        }
        for (answered, was_done) in [(done, true), (failed, false)] {
            for (id, ps) in answered {
                let Some(i) = self.initializing.get_mut(id) else { continue };
                i.partitions.retain(|p| !ps.contains(p));
                if was_done {
                    let name = i.name.clone();
                    self.initialized.entry(*id).or_insert_with(|| (name, BTreeSet::new())).1.extend(ps);
                }
                if i.partitions.is_empty() {
                    self.initializing.remove(id);
                }
            }
        }
        self.records.push(self.state_partitions_record(group_id));
    }

    /// The share-partitions whose state is initialized (DescribeShareGroupOffsets with no
    /// topics lists these).
    pub fn initialized_partitions(&self) -> &BTreeMap<Uuid, (String, BTreeSet<i32>)> {
        &self.initialized
    }

    /// AlterShareGroupOffsets' part (the caller checked the group is empty): the given
    /// share-partitions become initializing (stored) and are to be initialized at the
    /// given start offsets, state epoch = the group epoch, as Kafka's
    /// `alterShareGroupOffsets`. `partitions`: topic id → (name, partition → start offset).
    pub fn alter_offsets(&mut self, group_id: &str, partitions: &BTreeMap<Uuid, (String, BTreeMap<i32, i64>)>, now: Instant) -> ShareInitialize {
        for (id, (name, starts)) in partitions {
            let entry = self.initializing.entry(*id).or_insert_with(|| Initializing { name: name.clone(), partitions: BTreeSet::new(), since: now });
            entry.partitions.extend(starts.keys());
            entry.since = now;
            self.deleting.remove(id);
        }
        self.records.push(self.state_partitions_record(group_id));
        let partitions = partitions.iter().map(|(id, (_, starts))| (*id, starts.iter().map(|(p, o)| (*p, *o)).collect())).collect();
        ShareInitialize { state_epoch: self.group_epoch, partitions }
    }

    /// DeleteShareGroupOffsets' first part (the group is empty), as Kafka's
    /// `sharePartitionsEligibleForOffsetDeletion`: of `topics` (id → name, partition
    /// count), an initialized one moves to "deleting" (stored) and its initialized
    /// partitions are returned to delete; one still deleting (an earlier delete that did
    /// not finish) is returned with all its partitions; the others are not returned.
    pub fn begin_delete_offsets(&mut self, group_id: &str, topics: &BTreeMap<Uuid, (String, i32)>) -> BTreeMap<Uuid, BTreeSet<i32>> {
        let mut to_delete = BTreeMap::new();
        for (id, (name, count)) in topics {
            if let Some((_, ps)) = self.initialized.remove(id) {
                to_delete.insert(*id, ps);
                self.deleting.insert(*id, name.clone());
            } else if self.deleting.contains_key(id) {
                to_delete.insert(*id, (0..*count).collect());
            }
        }
        self.records.push(self.state_partitions_record(group_id));
        to_delete
    }

    /// The share coordinator deleted these topics' state: they are no longer "deleting".
    pub fn finish_delete_offsets(&mut self, group_id: &str, deleted: &BTreeSet<Uuid>) {
        if deleted.is_empty() {
            return;
        }
        self.deleting.retain(|id, _| !deleted.contains(id));
        self.records.push(self.state_partitions_record(group_id));
    }

    /// DeleteGroups of this (empty) share group, first part, as Kafka's
    /// `shareGroupBuildPartitionDeleteRequest`: every initialized or initializing
    /// share-partition, and every topic still deleting (all its partitions, by `count`;
    /// a topic gone from the metadata is skipped), becomes "deleting" (stored); all of
    /// them are returned to delete from the share coordinator.
    pub fn begin_delete_group(&mut self, group_id: &str, count: &dyn Fn(&Uuid) -> Option<i32>) -> BTreeMap<Uuid, BTreeSet<i32>> {
        let mut to_delete: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        let mut names: BTreeMap<Uuid, String> = BTreeMap::new();
        for (id, (name, ps)) in std::mem::take(&mut self.initialized) {
            to_delete.entry(id).or_default().extend(ps);
            names.insert(id, name);
        }
        for (id, i) in std::mem::take(&mut self.initializing) {
            to_delete.entry(id).or_default().extend(i.partitions);
            names.insert(id, i.name);
        }
        for (id, name) in std::mem::take(&mut self.deleting) {
            if let Some(n) = count(&id) {
                to_delete.entry(id).or_default().extend(0..n);
                names.insert(id, name);
            }
        }
        self.deleting = names;
        self.records.push(self.state_partitions_record(group_id));
        to_delete
    }

    fn state_partitions_record(&self, group_id: &str) -> ShareRecord {
        let value = StatePartitionMetadataValue {
            initializing: self.initializing.iter().map(|(id, i)| (*id, (i.name.clone(), i.partitions.clone()))).collect(),
            initialized: self.initialized.clone(),
            deleting: self.deleting.clone(),
        };
        ShareRecord::StatePartitionMetadata { group: group_id.to_string(), value: Some(value) }
    }

    /// Replays one stored record of this group while `__consumer_offsets` loads (in log
    /// order; the latest record of each key wins, as after compaction). A tombstone of
    /// the group epoch is the caller's (it removes the group).
    pub fn replay(&mut self, rec: ShareRecord, now: Instant) {
        let blank = |member_id: String| ShareMember::new(member_id, now);
        match rec {
            ShareRecord::GroupEpoch { epoch: Some(epoch), metadata_hash, .. } => {
                self.group_epoch = self.group_epoch.max(epoch);
                self.metadata_hash = metadata_hash;
            }
            ShareRecord::MemberMetadata { member, value: Some(v), .. } => {
                let m = self.members.entry(member.clone()).or_insert_with(|| blank(member));
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed_topic_names = v.subscribed_topic_names.into_iter().collect();
            }
            ShareRecord::MemberMetadata { member, value: None, .. } => {
                self.members.remove(&member);
            }
            ShareRecord::TargetAssignmentMetadata { assignment_epoch, .. } => self.assignment_epoch = assignment_epoch.map_or(0, |(e, _)| e),
            ShareRecord::TargetAssignmentMember { member, partitions: Some(a), .. } => {
                self.target.insert(member, a);
            }
            ShareRecord::TargetAssignmentMember { member, partitions: None, .. } => {
                self.target.remove(&member);
            }
            ShareRecord::CurrentMemberAssignment { member, value: Some(v), .. } => {
                let m = self.members.entry(member.clone()).or_insert_with(|| blank(member));
                m.member_epoch = v.member_epoch;
                m.previous_member_epoch = v.previous_member_epoch;
                m.assignment = v.assigned_partitions;
            }
            ShareRecord::CurrentMemberAssignment { member, value: None, .. } => {
                // Kafka resets the assignment; the metadata tombstone that follows removes the member.
                if let Some(m) = self.members.get_mut(&member) {
                    (m.member_epoch, m.previous_member_epoch, m.assignment) = (0, 0, Assignment::new());
                }
            }
            ShareRecord::StatePartitionMetadata { value: Some(v), .. } => {
                self.initialized = v.initialized;
                // Asked before the load: asked again at the first heartbeat after the retry interval.
                self.initializing = v.initializing.into_iter().map(|(id, (name, partitions))| (id, Initializing { name, partitions, since: now })).collect();
                self.deleting = v.deleting;
            }
            ShareRecord::StatePartitionMetadata { value: None, .. } => {
                self.initialized.clear();
                self.initializing.clear();
                self.deleting.clear();
            }
            ShareRecord::GroupEpoch { epoch: None, .. } => {}
        }
    }

    /// After a replay: every member's session starts now (as Kafka's coordinator restarts
    /// its timers on load), and a target without its member (a damaged log) is dropped.
    pub fn finish_load(&mut self, settings: &ShareGroupSettings, now: Instant) {
        let session = Duration::from_millis(settings.session_timeout_ms.max(0) as u64);
        let members = &self.members;
        self.target.retain(|id, _| members.contains_key(id));
        for m in self.members.values_mut() {
            m.session_deadline = now + session;
        }
    }
}

fn unknown_member(group_id: &str, member_id: &str) -> ShareHeartbeatError {
    (ErrorCode::UNKNOWN_MEMBER_ID, Some(format!("Member {member_id} is not a member of group {group_id}.")))
}

/// Kafka's epoch check: a member one epoch behind (it missed the answer that moved it)
/// is still accepted.
fn fence_check(epoch: i32, m: &ShareMember) -> Result<(), ShareHeartbeatError> {
    if epoch > m.member_epoch {
        return Err((ErrorCode::FENCED_MEMBER_EPOCH, Some(format!("The share group member has a greater member epoch ({epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", m.member_epoch))));
    }
    if epoch < m.member_epoch && epoch != m.previous_member_epoch {
        return Err((ErrorCode::FENCED_MEMBER_EPOCH, Some(format!("The share group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({}), and it does not match the previous member epoch ({}). The member must abandon all its partitions and rejoin.", m.member_epoch, m.previous_member_epoch))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(name: &str) -> Option<(Uuid, i32)> {
        match name {
            "t1" => Some((Uuid::from_bytes([1; 16]), 1)),
            "t3" => Some((Uuid::from_bytes([3; 16]), 3)),
            _ => None,
        }
    }

    fn join(member: &str, subscribed: &[&str]) -> ShareHeartbeat {
        ShareHeartbeat {
            member_id: member.into(),
            member_epoch: 0,
            subscribed_topic_names: Some(subscribed.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    fn beat(member: &str, epoch: i32) -> ShareHeartbeat {
        ShareHeartbeat { member_id: member.into(), member_epoch: epoch, ..Default::default() }
    }

    /// A group whose share-partitions of t1, t3 and "later" are all initialized (as a
    /// record, so a replay sees it too).
    fn initialized_group() -> ShareGroup {
        let mut g = ShareGroup::default();
        for (name, id, count) in [("t1", 1u8, 1), ("t3", 3, 3), ("later", 9, 2)] {
            g.initialized.insert(Uuid::from_bytes([id; 16]), (name.to_string(), (0..count).collect()));
        }
        g.records.push(g.state_partitions_record("g"));
        g
    }

    fn partitions(a: &Option<Assignment>) -> usize {
        a.as_ref().map(|a| a.values().map(|p| p.len()).sum()).unwrap_or(0)
    }

    #[test]
    fn members_join_share_and_leave() {
        let (mut g, s, now) = (initialized_group(), ShareGroupSettings::default(), Instant::now());
        let a = g.heartbeat("g", join("a", &["t1", "t3"]), &topics, &s, now).unwrap();
        assert_eq!((a.member_epoch, partitions(&a.assignment)), (1, 4), "alone: every partition");
        let b = g.heartbeat("g", join("b", &["t1"]), &topics, &s, now).unwrap();
        assert_eq!((b.member_epoch, partitions(&b.assignment)), (2, 1), "b shares t1-0");
        // a learns the new epoch at its next heartbeat; its target is unchanged here.
        let a = g.heartbeat("g", beat("a", 1), &topics, &s, now).unwrap();
        assert_eq!(a.member_epoch, 2);
        // A heartbeat with nothing new carries no assignment.
        assert_eq!(g.heartbeat("g", beat("a", 2), &topics, &s, now).unwrap().assignment, None);
        let left = g.heartbeat("g", beat("b", LEAVE_GROUP_MEMBER_EPOCH), &topics, &s, now).unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!((g.members.len(), g.group_epoch), (1, 3));
        assert_eq!(g.state(), ShareGroupState::Stable);
    }

    #[test]
    fn kafka_errors_and_words() {
        let (mut g, s, now) = (initialized_group(), ShareGroupSettings::default(), Instant::now());
        g.heartbeat("g", join("a", &["t1"]), &topics, &s, now).unwrap();
        g.heartbeat("g", join("b", &["t1"]), &topics, &s, now).unwrap();
        // a is at 1, its target moved to 2: 1 is accepted once (its previous epoch after the move).
        assert_eq!(g.heartbeat("g", beat("a", 1), &topics, &s, now).unwrap().member_epoch, 2);
        assert_eq!(g.heartbeat("g", beat("a", 1), &topics, &s, now).unwrap().member_epoch, 2, "the previous epoch is still accepted");
        let e = g.heartbeat("g", beat("a", 5), &topics, &s, now).unwrap_err();
        assert_eq!(e, (ErrorCode::FENCED_MEMBER_EPOCH, Some("The share group member has a greater member epoch (5) than the one known by the group coordinator (2). The member must abandon all its partitions and rejoin.".into())));
        let rejoined = g.heartbeat("g", join("a", &["t1"]), &topics, &s, now).unwrap();
        assert_eq!(rejoined.member_epoch, g.group_epoch, "epoch 0 rejoins at the group's new epoch");
        let e = g.heartbeat("g", beat("nope", 1), &topics, &s, now).unwrap_err();
        assert_eq!(e, (ErrorCode::UNKNOWN_MEMBER_ID, Some("Member nope is not a member of group g.".into())));
        let small = ShareGroupSettings { max_size: 2, ..s };
        let e = g.heartbeat("g", join("c", &["t1"]), &topics, &small, now).unwrap_err();
        assert_eq!(e, (ErrorCode::GROUP_MAX_SIZE_REACHED, Some("The share group has reached its maximum capacity of 2 members.".into())));
        assert_eq!(validate("g", &join("", &["t1"])), Err((ErrorCode::INVALID_REQUEST, None)));
        assert_eq!(validate("g", &beat("x", 0)), Err((ErrorCode::INVALID_REQUEST, Some("SubscribedTopicNames must be set in first request.".into()))));
        assert_eq!(validate("g", &beat("x", -2)), Err((ErrorCode::INVALID_REQUEST, Some("MemberEpoch is invalid.".into()))));
        assert_eq!(validate("", &beat("x", 1)), Err((ErrorCode::INVALID_REQUEST, Some("GroupId can't be empty.".into()))));
        assert!(validate("g", &beat("x", 3)).is_ok());
    }

    #[test]
    fn sessions_end_and_topics_appear() {
        let (mut g, s, now) = (initialized_group(), ShareGroupSettings::default(), Instant::now());
        let a = g.heartbeat("g", join("a", &["later"]), &topics, &s, now).unwrap();
        assert_eq!(partitions(&a.assignment), 0, "the topic does not exist yet");
        g.heartbeat("g", join("b", &["t1"]), &topics, &s, now + Duration::from_secs(30)).unwrap();
        // The topic appears: a's next heartbeat gets a new epoch and the partitions.
        let appeared = |n: &str| if n == "later" { Some((Uuid::from_bytes([9; 16]), 2)) } else { topics(n) };
        let epoch = g.group_epoch;
        let a = g.heartbeat("g", beat("a", 1), &appeared, &s, now + Duration::from_secs(31)).unwrap();
        assert_eq!((a.member_epoch, partitions(&a.assignment)), (epoch + 1, 2));
        // b's session is 45 s from its last heartbeat; a heartbeated at 31 s.
        assert!(g.expire("g", now + Duration::from_secs(60), &appeared).is_empty());
        assert_eq!(g.expire("g", now + Duration::from_secs(76), &appeared), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(g.state(), ShareGroupState::Empty);
    }

    #[test]
    fn share_partitions_are_assigned_once_initialized() {
        let (mut g, s, t0) = (ShareGroup::default(), ShareGroupSettings::default(), Instant::now());
        let t3 = Uuid::from_bytes([3; 16]);
        let a = g.heartbeat("g", join("a", &["t3"]), &topics, &s, t0).unwrap();
        assert_eq!((a.member_epoch, partitions(&a.assignment)), (1, 0), "nothing is initialized yet: nothing assigned");
        let want = ShareInitialize { state_epoch: 1, partitions: [(t3, vec![(0, -1), (1, -1), (2, -1)])].into() };
        assert_eq!(a.initialize, Some(want), "a topic new to the group starts where share.auto.offset.reset says");
        assert!(matches!(g.take_records().last(), Some(ShareRecord::StatePartitionMetadata { value: Some(v), .. }) if v.initializing[&t3].1.len() == 3));
        let again = g.heartbeat("g", beat("a", 1), &topics, &s, t0).unwrap();
        assert_eq!((again.initialize, again.assignment), (None, None), "asked already: not asked twice");

        // Two answered, one refused: the two are assigned at the next heartbeat, the third asked again.
        g.initialization_answered("g", &[(t3, BTreeSet::from([0, 1]))].into(), &[(t3, BTreeSet::from([2]))].into());
        let a = g.heartbeat("g", beat("a", 1), &topics, &s, t0).unwrap();
        assert_eq!((a.member_epoch, a.assignment.clone()), (2, Some([(t3, BTreeSet::from([0, 1]))].into())));
        assert_eq!(
            a.initialize,
            Some(ShareInitialize { state_epoch: 2, partitions: [(t3, vec![(2, 0)])].into() }),
            "a known topic's new partition starts at 0"
        );
        g.initialization_answered("g", &[(t3, BTreeSet::from([2]))].into(), &BTreeMap::new());
        let a = g.heartbeat("g", beat("a", 2), &topics, &s, t0).unwrap();
        assert_eq!((a.member_epoch, partitions(&a.assignment), a.initialize), (3, 3, None));

        // Not answered within the retry interval: asked again.
        let t1 = Uuid::from_bytes([1; 16]);
        let b = g.heartbeat("g", join("b", &["t1"]), &topics, &s, t0).unwrap();
        assert_eq!(b.initialize.map(|i| i.partitions), Some([(t1, vec![(0, -1)])].into()));
        assert_eq!(g.heartbeat("g", beat("b", b.member_epoch), &topics, &s, t0 + Duration::from_secs(29)).unwrap().initialize, None);
        let retried = g.heartbeat("g", beat("b", b.member_epoch), &topics, &s, t0 + INITIALIZE_RETRY_INTERVAL).unwrap();
        // Kafka 4.4 counts a topic still initializing as known: the retry starts at 0.
        assert_eq!(retried.initialize.map(|i| i.partitions), Some([(t1, vec![(0, 0)])].into()));

        // What is initialized is stored: a reloaded group has it.
        let mut log = vec![];
        log.extend(g.take_records());
        let back = reloaded(&log, t0);
        assert_eq!(back.initialized_partitions(), g.initialized_partitions());
        assert_eq!(back.initialized_partitions()[&t3].1, BTreeSet::from([0, 1, 2]));
    }

    /// Replays `records` (each through its stored bytes) into a fresh group, as a loading
    /// coordinator does.
    fn reloaded(records: &[ShareRecord], now: Instant) -> ShareGroup {
        use crate::group::coordinator_records::OffsetsRecord;
        let mut g = ShareGroup::default();
        for r in records {
            let stored = OffsetsRecord::Share(r.clone());
            let Ok(OffsetsRecord::Share(back)) = OffsetsRecord::parse(Some(stored.key()), stored.value()) else { panic!("{r:?} does not read back") };
            g.replay(back, now);
        }
        g.finish_load(&ShareGroupSettings::default(), now);
        g
    }

    #[test]
    fn every_change_is_recorded_and_the_records_rebuild_the_group() {
        let (mut g, s, t0) = (initialized_group(), ShareGroupSettings::default(), Instant::now());
        let mut log = Vec::new();
        let appeared = |n: &str| if n == "later" { Some((Uuid::from_bytes([9; 16]), 2)) } else { topics(n) };
        g.heartbeat("g", join("a", &["t1", "t3"]), &topics, &s, t0).unwrap();
        log.extend(g.take_records());
        g.heartbeat("g", join("b", &["t1", "later"]), &topics, &s, t0).unwrap();
        g.heartbeat("g", join("c", &["t3"]), &topics, &s, t0).unwrap();
        log.extend(g.take_records());
        // Nothing changed: nothing to store.
        let epoch = g.members["a"].member_epoch;
        g.heartbeat("g", beat("a", epoch), &topics, &s, t0).unwrap();
        g.heartbeat("g", beat("a", g.group_epoch), &topics, &s, t0).unwrap();
        log.extend(g.take_records());
        assert!(g.heartbeat("g", beat("a", g.group_epoch), &topics, &s, t0).unwrap().assignment.is_none());
        assert_eq!(g.take_records(), vec![], "a heartbeat that changes nothing stores nothing");
        // A topic appears, a member leaves, another's session ends.
        g.heartbeat("g", beat("b", g.members["b"].member_epoch), &appeared, &s, t0 + Duration::from_secs(40)).unwrap();
        g.heartbeat("g", beat("c", LEAVE_GROUP_MEMBER_EPOCH), &appeared, &s, t0 + Duration::from_secs(40)).unwrap();
        log.extend(g.take_records());
        assert_eq!(g.expire("g", t0 + Duration::from_secs(50), &appeared), vec!["a".to_string()]);
        log.extend(g.take_records());
        let b_epoch = g.members["b"].member_epoch;
        g.heartbeat("g", beat("b", b_epoch), &appeared, &s, t0 + Duration::from_secs(50)).unwrap();
        log.extend(g.take_records());

        let now = t0 + Duration::from_secs(60);
        let mut back = reloaded(&log, now);
        let mut original = g.clone();
        original.finish_load(&s, now);
        assert_eq!(back, original, "the replayed records rebuild the group exactly");
        assert_eq!((back.group_epoch, back.members.len()), (g.group_epoch, 1));
        // The member keeps heartbeating into the reloaded group: same epoch, no rebalance, nothing stored.
        let answer = back.heartbeat("g", beat("b", g.members["b"].member_epoch), &appeared, &s, now).unwrap();
        assert_eq!((answer.member_epoch, answer.assignment), (g.members["b"].member_epoch, None));
        assert_eq!((back.group_epoch, back.take_records()), (g.group_epoch, vec![]));
        // Every member gone: the group stays, empty, at its epoch.
        back.heartbeat("g", beat("b", LEAVE_GROUP_MEMBER_EPOCH), &appeared, &s, now).unwrap();
        log.extend(back.take_records());
        let empty = reloaded(&log, now);
        assert_eq!((empty.state(), empty.group_epoch), (ShareGroupState::Empty, back.group_epoch));
        assert!(empty.target.is_empty(), "the departed members' targets are tombstoned");
    }
}
