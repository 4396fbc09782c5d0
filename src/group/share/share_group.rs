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

use super::simple_assignor::{self, Assignment};
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
        ShareGroupSettings { heartbeat_interval_ms: 5000, session_timeout_ms: 45_000, max_size: 200 }
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
    /// Subscribed topic → (id, partition count) when the target was computed.
    subscribed_metadata: BTreeMap<String, (Uuid, i32)>,
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
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            if self.members.remove(&hb.member_id).is_none() {
                return Err(unknown_member(group_id, &hb.member_id));
            }
            self.refresh(topic);
            return Ok(ShareHeartbeatAnswer { member_id: hb.member_id, member_epoch: LEAVE_GROUP_MEMBER_EPOCH, heartbeat_interval_ms: 0, assignment: None });
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
        let member = self.members.entry(hb.member_id.clone()).or_insert_with(|| ShareMember {
            member_id: hb.member_id.clone(),
            member_epoch: 0,
            previous_member_epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            assignment: Assignment::new(),
            session_deadline: now,
        });
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
        if joining || changed {
            self.group_epoch += 1;
        }
        self.refresh(topic);
        // The member takes its target now (no revocation step in share groups).
        let member = self.members.get_mut(&hb.member_id).expect("inserted above");
        let target = self.target.get(&hb.member_id).cloned().unwrap_or_default();
        let mut assignment = None;
        if member.member_epoch != self.assignment_epoch || member.assignment != target || joining {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = self.assignment_epoch;
            member.assignment = target;
            assignment = Some(member.assignment.clone());
        }
        Ok(ShareHeartbeatAnswer {
            member_id: hb.member_id,
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            assignment,
        })
    }

    /// Members whose session ended by `now` are removed (their records are released by
    /// the share-partitions); their ids.
    pub fn expire(&mut self, now: Instant, topic: &dyn Fn(&str) -> Option<(Uuid, i32)>) -> Vec<String> {
        let gone: Vec<String> = self.members.values().filter(|m| m.session_deadline <= now).map(|m| m.member_id.clone()).collect();
        for id in &gone {
            self.members.remove(id);
        }
        if !gone.is_empty() {
            self.refresh(topic);
        }
        gone
    }

    /// Recomputes the target when members, subscriptions or the subscribed topics'
    /// partitions changed since it was last computed (bumping the group epoch for the
    /// latter two, as Kafka's metadata check does).
    fn refresh(&mut self, topic: &dyn Fn(&str) -> Option<(Uuid, i32)>) {
        let metadata: BTreeMap<String, (Uuid, i32)> = self.subscribed_topics().into_iter().filter_map(|t| topic(t).map(|m| (t.to_string(), m))).collect();
        let members_changed = self.target.len() != self.members.len() || self.members.keys().any(|m| !self.target.contains_key(m));
        if metadata != self.subscribed_metadata {
            self.subscribed_metadata = metadata;
            if !members_changed && self.group_epoch == self.assignment_epoch {
                self.group_epoch += 1;
            }
        } else if !members_changed && self.group_epoch == self.assignment_epoch {
            return;
        }
        if members_changed && self.group_epoch == self.assignment_epoch {
            self.group_epoch += 1;
        }
        let subscriptions = self
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.subscribed_topic_names.iter().filter_map(|t| self.subscribed_metadata.get(t).map(|(id, _)| *id)).collect()))
            .collect();
        let partitions = self.subscribed_metadata.values().copied().collect();
        self.target = simple_assignor::assign(&subscriptions, &partitions);
        self.assignment_epoch = self.group_epoch;
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

    fn partitions(a: &Option<Assignment>) -> usize {
        a.as_ref().map(|a| a.values().map(|p| p.len()).sum()).unwrap_or(0)
    }

    #[test]
    fn members_join_share_and_leave() {
        let (mut g, s, now) = (ShareGroup::default(), ShareGroupSettings::default(), Instant::now());
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
        let (mut g, s, now) = (ShareGroup::default(), ShareGroupSettings::default(), Instant::now());
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
        let (mut g, s, now) = (ShareGroup::default(), ShareGroupSettings::default(), Instant::now());
        let a = g.heartbeat("g", join("a", &["later"]), &topics, &s, now).unwrap();
        assert_eq!(partitions(&a.assignment), 0, "the topic does not exist yet");
        g.heartbeat("g", join("b", &["t1"]), &topics, &s, now + Duration::from_secs(30)).unwrap();
        // The topic appears: a's next heartbeat gets a new epoch and the partitions.
        let appeared = |n: &str| if n == "later" { Some((Uuid::from_bytes([9; 16]), 2)) } else { topics(n) };
        let epoch = g.group_epoch;
        let a = g.heartbeat("g", beat("a", 1), &appeared, &s, now + Duration::from_secs(31)).unwrap();
        assert_eq!((a.member_epoch, partitions(&a.assignment)), (epoch + 1, 2));
        // b's session is 45 s from its last heartbeat; a heartbeated at 31 s.
        assert!(g.expire(now + Duration::from_secs(60), &appeared).is_empty());
        assert_eq!(g.expire(now + Duration::from_secs(76), &appeared), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(g.state(), ShareGroupState::Empty);
    }
}
