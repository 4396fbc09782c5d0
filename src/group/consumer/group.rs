//! One KIP-848 consumer group: members, the group epoch, the target assignment and its
//! epoch, the subscribed topics' metadata, and which member owns each partition.
//! Kept in `Group::consumer` (state.rs) so committed offsets stay with the group id.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use uuid::Uuid;

use super::consumer_group_records::{ClassicMemberMetadata, CurrentAssignmentValue, MemberMetadataValue};
use super::subscription_regex::GroupRegexes;
use crate::group::flexible_records::AssignmentEpochs;
use crate::protocol::ErrorCode;

/// Partitions by topic id (Kafka's `Map<Uuid, Set<Integer>>`).
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Member epoch sent to leave the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch sent by a static member leaving temporarily (it keeps its assignment).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Kafka's ConsumerGroupState.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// Kafka's MemberState (where a member is in moving toward its target assignment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Owns exactly its target at the target epoch.
    Stable,
    /// Must give back partitions first; keeps its epoch until it acknowledges.
    UnrevokedPartitions,
    /// At the target epoch but waits for partitions other members still own.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's MemberState value, as stored in ConsumerGroupCurrentMemberAssignmentValue.
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
        }
    }

    /// An unknown stored value reads as UnreleasedPartitions: the member's next heartbeat
    /// recomputes its state from its assignment (reconcile.rs), which is always safe.
    pub fn from_value(v: i8) -> MemberState {
        match v {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            _ => MemberState::UnreleasedPartitions,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ConsumerMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Vec<String>,
    /// KIP-848 regex subscription (subscription_regex.rs), besides the names.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// Partitions the member may consume now.
    pub assigned: Assignment,
    /// Partitions the member was asked to give back and has not acknowledged yet.
    pub pending_revocation: Assignment,
    /// The epoch at which each partition of `assigned` and `pending_revocation` was given
    /// to the member (Kafka's assignment epochs): a commit at an older member epoch is
    /// taken for the partitions held since then. Invariant: its keys are `owned()`
    /// (`sync_assignment_epochs` restores it after the sets change).
    pub assignment_epochs: AssignmentEpochs,
    pub last_heartbeat: Instant,
    /// While partitions are pending revocation: when the member is fenced if it has not
    /// given them back (its rebalance timeout). Never set for a classic member (its join
    /// deadline plays that part).
    pub revocation_deadline: Option<Instant>,
    /// Set for a member speaking the classic protocol (JoinGroup / SyncGroup / Heartbeat)
    /// inside this consumer group (classic_member.rs); its session timeout is its own.
    pub classic: Option<ClassicMemberMetadata>,
    /// A classic member after its JoinGroup: fenced if no SyncGroup by then (its
    /// rebalance timeout; Kafka's sync timer).
    pub classic_sync_deadline: Option<Instant>,
    /// A classic member told to rejoin (REBALANCE_IN_PROGRESS): fenced if no JoinGroup by
    /// then (its rebalance timeout; Kafka's join timer).
    pub classic_join_deadline: Option<Instant>,
}

impl ConsumerMember {
    pub fn new(id: String, now: Instant) -> ConsumerMember {
        ConsumerMember {
            id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout_ms: 0,
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            assignment_epochs: AssignmentEpochs::new(),
            last_heartbeat: now,
            revocation_deadline: None,
            classic: None,
            classic_sync_deadline: None,
            classic_join_deadline: None,
        }
    }

    pub fn uses_classic_protocol(&self) -> bool {
        self.classic.is_some()
    }

    /// What ConsumerGroupMemberMetadataValue stores of this member.
    pub fn metadata_value(&self) -> MemberMetadataValue {
        MemberMetadataValue {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed_topic_names: self.subscribed_topic_names.clone(),
            subscribed_topic_regex: self.subscribed_topic_regex.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: self.server_assignor.clone(),
            classic: self.classic.clone(),
        }
    }

    /// What ConsumerGroupCurrentMemberAssignmentValue stores of this member.
    pub fn current_assignment_value(&self) -> CurrentAssignmentValue {
        CurrentAssignmentValue {
            member_epoch: self.member_epoch,
            previous_member_epoch: self.previous_member_epoch,
            state: self.state.value(),
            assigned_partitions: self.assigned.clone(),
            partitions_pending_revocation: self.pending_revocation.clone(),
            assignment_epochs: self.assignment_epochs.clone(),
        }
    }

    pub fn apply_metadata_value(&mut self, v: MemberMetadataValue) {
        self.instance_id = v.instance_id;
        self.rack_id = v.rack_id;
        self.client_id = v.client_id;
        self.client_host = v.client_host;
        self.subscribed_topic_names = v.subscribed_topic_names;
        self.subscribed_topic_regex = v.subscribed_topic_regex.filter(|r| !r.is_empty());
        self.rebalance_timeout_ms = v.rebalance_timeout_ms;
        self.server_assignor = v.server_assignor;
        self.classic = v.classic;
    }

    pub fn apply_current_assignment_value(&mut self, v: CurrentAssignmentValue) {
        self.member_epoch = v.member_epoch;
        self.previous_member_epoch = v.previous_member_epoch;
        // An unknown state with partitions to give back must still wait for them.
        self.state = match MemberState::from_value(v.state) {
            MemberState::UnreleasedPartitions if v.state != 2 && !v.partitions_pending_revocation.is_empty() => MemberState::UnrevokedPartitions,
            s => s,
        };
        self.assigned = v.assigned_partitions;
        self.pending_revocation = v.partitions_pending_revocation;
        self.assignment_epochs = v.assignment_epochs;
        self.sync_assignment_epochs(self.member_epoch.max(0));
    }

    /// Restores the invariant of `assignment_epochs` after the owned sets changed: a
    /// partition no longer owned is forgotten, one newly owned was given at `granted_at`;
    /// the others keep the epoch they were given at.
    pub fn sync_assignment_epochs(&mut self, granted_at: i32) {
        let owned: BTreeSet<(Uuid, i32)> = self.owned().collect();
        self.assignment_epochs.retain(|k, _| owned.contains(k));
        for k in owned {
            self.assignment_epochs.entry(k).or_insert(granted_at);
        }
        debug_assert!(self.assignment_epochs.keys().copied().eq(self.owned().collect::<BTreeSet<_>>()), "assignment epochs of exactly the owned partitions");
    }

    /// Assigned plus pending revocation: what the member may still be consuming.
    pub fn owned(&self) -> impl Iterator<Item = (Uuid, i32)> + '_ {
        self.assigned.iter().chain(self.pending_revocation.iter()).flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
    }
}

/// Topic name → (topic id, partition count) for every subscribed topic that exists.
pub type SubscriptionMetadata = BTreeMap<String, (Uuid, i32)>;

/// A stable 64-bit hash (FNV-1a) of the subscribed topics' names, ids and partition
/// counts; 0 for none, as Kafka's metadata hash of an empty subscription.
pub fn metadata_hash(meta: &SubscriptionMetadata) -> i64 {
    if meta.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, (id, partitions)) in meta {
        eat(&(name.len() as u32).to_be_bytes()[..]);
        eat(name.as_bytes());
        eat(&id.as_bytes()[..]);
        eat(&partitions.to_be_bytes()[..]);
    }
    h as i64
}

#[derive(Debug, Default)]
pub struct ConsumerGroup {
    pub group_epoch: i32,
    /// Epoch of `target`; below `group_epoch` until the target is recomputed.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// group.instance.id → member id.
    pub static_members: HashMap<String, String>,
    /// Target assignment per member id.
    pub target: HashMap<String, Assignment>,
    /// Every topic name some member subscribes to (kept current by
    /// `refresh_subscribed_names` when subscriptions or members change).
    pub subscribed_names: BTreeSet<String>,
    /// The members' regex subscriptions, compiled (kept current with `subscribed_names`);
    /// the topics they match are resolved against the image at each heartbeat.
    pub regexes: GroupRegexes,
    /// The subscribed topics as last seen (empty after a load until the next heartbeat).
    pub subscription_metadata: SubscriptionMetadata,
    /// Kafka's metadata hash of `subscription_metadata`, stored with the group epoch: a
    /// change bumps the epoch, and a restarted coordinator compares against it (so an
    /// unchanged topic set does not rebalance the group after a load).
    pub metadata_hash: i64,
    /// Partition → the member owning it (assigned or pending revocation). A partition
    /// is handed to a member only when it is absent here or owned by that member.
    pub owners: HashMap<(Uuid, i32), String>,
}

impl ConsumerGroup {
    pub fn with_epoch(epoch: i32) -> ConsumerGroup {
        ConsumerGroup { group_epoch: epoch, assignment_epoch: epoch, ..Default::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.assignment_epoch < self.group_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub fn refresh_subscribed_names(&mut self) {
        self.subscribed_names = self.members.values().flat_map(|m| m.subscribed_topic_names.iter().cloned()).collect();
        self.regexes.refresh(self.members.values().filter_map(|m| m.subscribed_topic_regex.as_deref()));
    }

    /// The ids of the existing topics `m` subscribes to, by name or by its regex, in name
    /// order (from `subscription_metadata`).
    pub fn member_topics(&self, m: &ConsumerMember) -> Vec<Uuid> {
        let meta = &self.subscription_metadata;
        let mut topics: BTreeMap<&str, Uuid> =
            m.subscribed_topic_names.iter().filter_map(|n| meta.get_key_value(n).map(|(n, (id, _))| (n.as_str(), *id))).collect();
        if let Some(r) = m.subscribed_topic_regex.as_deref() {
            topics.extend(meta.iter().filter(|(n, _)| self.regexes.matches(r, n)).map(|(n, (id, _))| (n.as_str(), *id)));
        }
        topics.into_values().collect()
    }

    /// The assignor the group uses: the one most members ask for (ties: by name), else
    /// the default, as Kafka's computePreferredServerAssignor.
    pub fn preferred_assignor(&self) -> &'static str {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let best = votes.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(n, _)| *n);
        super::assignor::canonical(best.unwrap_or(super::assignor::DEFAULT_ASSIGNOR))
    }

    /// Records `member_id`'s new ownership in `owners` (after its assigned/pending sets
    /// changed): drops entries it no longer owns, adds the new ones.
    pub fn update_owners(&mut self, member_id: &str) {
        let owned: BTreeSet<(Uuid, i32)> = self.members.get(member_id).map(|m| m.owned().collect()).unwrap_or_default();
        self.owners.retain(|k, owner| owner != member_id || owned.contains(k));
        for k in owned {
            let previous = self.owners.insert(k, member_id.to_string());
            // Reconciliation only hands out free partitions: two owners is a broken invariant.
            debug_assert!(previous.as_deref().is_none_or(|o| o == member_id), "partition {k:?} owned by {previous:?} and {member_id}");
        }
    }

    /// Removes a member and everything it owned (leave, session expiry, fencing).
    pub fn remove_member(&mut self, member_id: &str) -> Option<ConsumerMember> {
        let m = self.members.remove(member_id)?;
        if let Some(iid) = &m.instance_id {
            if self.static_members.get(iid).map(String::as_str) == Some(member_id) {
                self.static_members.remove(iid);
            }
        }
        self.target.remove(member_id);
        self.owners.retain(|_, owner| owner != member_id);
        Some(m)
    }

    /// Kafka's ConsumerGroup.validateOffsetCommit for a commit to this group: a member
    /// commits with OffsetCommit v9+ (an admin or a consumer without group management
    /// with epoch -1 only while the group has no members), at its current epoch, or at an
    /// older one for partitions it was given at or before that epoch and still holds
    /// (assigned or pending revocation: `assignment_epochs`), so a commit sent just before
    /// an epoch bump lands for the partitions that did not move. `partitions` are the
    /// (topic id, partition) pairs committed, None for a topic that does not exist; one
    /// that fails refuses the whole request, as in Kafka (its validator throws).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        version: i16,
        partitions: impl IntoIterator<Item = Option<(Uuid, i32)>>,
    ) -> Result<(), ErrorCode> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        // A classic member commits with its generation, in any version, and is told
        // ILLEGAL_GENERATION as in a classic group.
        let stale = if m.uses_classic_protocol() { ErrorCode::ILLEGAL_GENERATION } else { ErrorCode::STALE_MEMBER_EPOCH };
        if version < 9 && !m.uses_classic_protocol() {
            // KIP-848 members must commit with OffsetCommit v9+.
            return Err(ErrorCode::UNSUPPORTED_VERSION);
        }
        if member_epoch == m.member_epoch {
            return Ok(());
        }
        if member_epoch > m.member_epoch {
            return Err(stale);
        }
        for k in partitions {
            match k.and_then(|k| m.assignment_epochs.get(&k)) {
                Some(&granted_at) if member_epoch >= granted_at => {}
                _ => return Err(stale),
            }
        }
        Ok(())
    }

    /// Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9 with member id / epoch).
    pub fn validate_offset_fetch(&self, member_id: Option<&str>, member_epoch: i32) -> Result<(), ErrorCode> {
        let Some(member_id) = member_id else {
            return Ok(());
        };
        if member_epoch < 0 && member_id.is_empty() {
            return Ok(());
        }
        let m = self.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if member_epoch != m.member_epoch {
            return Err(if m.uses_classic_protocol() { ErrorCode::ILLEGAL_GENERATION } else { ErrorCode::STALE_MEMBER_EPOCH });
        }
        Ok(())
    }
}
