//! ConsumerGroupHeartbeat as Kafka 4.1's GroupMetadataManager runs it: join (member
//! epoch 0), heartbeat (the current epoch), leave (-1), static leave (-2), and the
//! fencing rules; then the group epoch bump, the target assignment and the member's
//! reconciliation. Pure functions on `Group`: the caller stores the returned records.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopicPartitions;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment as ResponseAssignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use uuid::Uuid;

use super::assignor::{self, MemberSpec};
use super::consumer_group_records::ConsumerRecord;
use super::group::{Assignment, ConsumerGroup, ConsumerMember, MemberState, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::migration::Migration;
use super::subscription_regex;
use crate::cluster::image::MetadataImage;
use crate::group::coordinator_records::OffsetsRecord;
use crate::group::state::Group;
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Longest member / instance / rack / client id kept (they are echoed in describes).
const MAX_ID_BYTES: usize = 1024;
/// Topics one member may subscribe to.
const MAX_SUBSCRIBED_TOPICS: usize = 10_000;
/// Kafka's longest topic name: a longer subscribed name can never match a topic.
const MAX_TOPIC_NAME_BYTES: usize = 249;
/// Partitions one heartbeat may report as owned.
const MAX_OWNED_PARTITIONS: usize = 1_000_000;

/// An error answered to the member: code and message.
pub type HeartbeatError = (ErrorCode, String);

/// Coordinator settings a heartbeat needs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    pub migration: Migration,
}

fn invalid(msg: &str) -> HeartbeatError {
    (ErrorCode::INVALID_REQUEST, msg.to_string())
}

/// Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (before the group is looked at).
pub fn validate(req: &ConsumerGroupHeartbeatRequest, version: i16) -> Result<(), HeartbeatError> {
    if req.group_id.0.is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if req.instance_id.as_ref().is_some_and(|s| s.is_empty()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if req.rack_id.as_ref().is_some_and(|s| s.is_empty()) {
        return Err(invalid("RackId can't be empty."));
    }
    // Bounds on what the group keeps from a request.
    if req.member_id.len() > MAX_ID_BYTES
        || req.instance_id.as_ref().is_some_and(|s| s.len() > MAX_ID_BYTES)
        || req.rack_id.as_ref().is_some_and(|s| s.len() > MAX_ID_BYTES)
        || req.server_assignor.as_ref().is_some_and(|s| s.len() > MAX_ID_BYTES)
    {
        return Err(invalid("An id is longer than this broker accepts."));
    }
    if req.subscribed_topic_names.as_ref().is_some_and(|t| t.len() > MAX_SUBSCRIBED_TOPICS || t.iter().any(|n| n.0.len() > MAX_TOPIC_NAME_BYTES)) {
        return Err(invalid("Too many subscribed topics, or a topic name longer than 249 bytes."));
    }
    if req.topic_partitions.as_ref().is_some_and(|t| t.iter().map(|x| x.partitions.len()).sum::<usize>() > MAX_OWNED_PARTITIONS) {
        return Err(invalid("Too many owned partitions."));
    }
    // v1+ (KIP-1082): the client generates its member id, so it is never empty.
    if version >= 1 && req.member_id.is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    match req.member_epoch {
        e if e > 0 || e == LEAVE_GROUP_MEMBER_EPOCH => {
            if req.member_id.is_empty() {
                return Err(invalid("MemberId can't be empty."));
            }
        }
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return Err(invalid("RebalanceTimeoutMs must be provided in first request."));
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return Err(invalid("TopicPartitions must be empty when (re-)joining."));
            }
            let names = req.subscribed_topic_names.as_ref().is_some_and(|t| !t.is_empty());
            if !names && req.subscribed_topic_regex.is_none() {
                return Err(invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request."));
            }
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            if req.member_id.is_empty() {
                return Err(invalid("MemberId can't be empty."));
            }
            if req.instance_id.is_none() {
                return Err(invalid("InstanceId can't be null."));
            }
        }
        _ => return Err(invalid("MemberEpoch is invalid.")),
    }
    // Kafka's throwIfRegularExpressionIsInvalid. An empty pattern means no regex (librdkafka
    // sends "" with a names-only subscription).
    if let Some(pattern) = req.subscribed_topic_regex.as_deref().filter(|p| !p.is_empty()) {
        if let Err(reason) = subscription_regex::compile(pattern) {
            return Err((ErrorCode::INVALID_REGULAR_EXPRESSION, subscription_regex::invalid_message(pattern, &reason)));
        }
    }
    if let Some(a) = req.server_assignor.as_deref() {
        if !assignor::is_supported(a) {
            return Err((
                ErrorCode::UNSUPPORTED_ASSIGNOR,
                format!("ServerAssignor {a} is not supported. Supported assignors: {}.", assignor::ASSIGNORS.join(", ")),
            ));
        }
    }
    Ok(())
}

pub fn error_response((code, msg): HeartbeatError) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default().with_error_code(code.code()).with_error_message(Some(str_bytes(&msg)))
}

fn epoch_record(group: &str, epoch: i32, metadata_hash: i64) -> OffsetsRecord {
    OffsetsRecord::Consumer(ConsumerRecord::GroupEpoch { group: group.to_string(), epoch: Some(epoch), metadata_hash })
}

fn member_record(group: &str, m: &ConsumerMember) -> OffsetsRecord {
    OffsetsRecord::Consumer(ConsumerRecord::MemberMetadata { group: group.to_string(), member: m.id.clone(), value: Some(m.metadata_value()) })
}

fn current_assignment_record(group: &str, m: &ConsumerMember) -> OffsetsRecord {
    OffsetsRecord::Consumer(ConsumerRecord::CurrentMemberAssignment {
        group: group.to_string(),
        member: m.id.clone(),
        value: Some(m.current_assignment_value()),
    })
}

fn target_record(group: &str, member: &str, partitions: Option<&Assignment>) -> OffsetsRecord {
    OffsetsRecord::Consumer(ConsumerRecord::TargetAssignmentMember { group: group.to_string(), member: member.to_string(), partitions: partitions.cloned() })
}

/// A departed member's records, in Kafka's order (current assignment, target, metadata),
/// so a replay never sees an assignment without its member.
pub(super) fn member_tombstones(group: &str, member: &str, records: &mut Vec<OffsetsRecord>) {
    let (group, member) = (group.to_string(), member.to_string());
    records.push(OffsetsRecord::Consumer(ConsumerRecord::CurrentMemberAssignment { group: group.clone(), member: member.clone(), value: None }));
    records.push(OffsetsRecord::Consumer(ConsumerRecord::TargetAssignmentMember { group: group.clone(), member: member.clone(), partitions: None }));
    records.push(OffsetsRecord::Consumer(ConsumerRecord::MemberMetadata { group, member, value: None }));
}

/// The records `delete_group` writes for a consumer group besides its offsets.
pub fn group_tombstones(group: &str) -> [OffsetsRecord; 2] {
    [
        OffsetsRecord::Consumer(ConsumerRecord::TargetAssignmentMetadata { group: group.to_string(), assignment_epoch: None }),
        OffsetsRecord::Consumer(ConsumerRecord::GroupEpoch { group: group.to_string(), epoch: None, metadata_hash: 0 }),
    ]
}

fn to_assignment(owned: &[OwnedTopicPartitions]) -> Assignment {
    let mut a = Assignment::new();
    for t in owned {
        if !t.partitions.is_empty() {
            a.entry(t.topic_id).or_default().extend(t.partitions.iter().copied());
        }
    }
    a
}

fn is_subset(owned: Option<&Assignment>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned.iter().all(|(t, ps)| assigned.get(t).is_some_and(|qs| ps.is_subset(qs)))
}

/// Bumps the group epoch (stored by the caller).
fn bump(c: &mut ConsumerGroup, group_id: &str, records: &mut Vec<OffsetsRecord>) {
    c.group_epoch = c.group_epoch.saturating_add(1);
    records.push(epoch_record(group_id, c.group_epoch, c.metadata_hash));
    tracing::info!(group = group_id, epoch = c.group_epoch, "consumer group epoch bumped");
}

/// The subscribed topics (by name, or matched by a member's regex) as the metadata image
/// has them now.
pub(super) fn subscription_metadata(c: &ConsumerGroup, image: &MetadataImage) -> super::group::SubscriptionMetadata {
    let entry = |t: &crate::cluster::image::TopicMeta| (t.name.clone(), (Uuid::from_bytes(t.topic_id), i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)));
    let mut meta: super::group::SubscriptionMetadata = c.subscribed_names.iter().filter_map(|n| image.topic(n).map(entry)).collect();
    if !c.regexes.is_empty() {
        // Every topic of the image is tried: O(topics x distinct patterns) per heartbeat,
        // paid only by groups that subscribe by regex.
        meta.extend(image.topics.values().filter(|t| c.regexes.any_matches(&t.name)).map(entry));
    }
    meta
}

/// Recomputes every member's target with the group's assignor (Kafka's
/// updateTargetAssignment), at the group epoch; stores the targets that changed and the
/// new assignment epoch (keys 7 and 6).
pub fn update_target(c: &mut ConsumerGroup, group_id: &str, records: &mut Vec<OffsetsRecord>) {
    let topics = c.subscription_metadata.values().copied().collect();
    let specs: Vec<MemberSpec> = c
        .members
        .values()
        .map(|m| MemberSpec { id: &m.id, instance_id: m.instance_id.as_deref(), topics: c.member_topics(m), current: c.target.get(&m.id) })
        .collect();
    let target = assignor::assign(c.preferred_assignor(), &specs, &topics);
    let old = std::mem::replace(&mut c.target, target);
    for (member, a) in &c.target {
        if old.get(member) != Some(a) {
            records.push(target_record(group_id, member, Some(a)));
        }
    }
    for member in old.keys().filter(|m| !c.target.contains_key(*m)) {
        records.push(target_record(group_id, member, None));
    }
    c.assignment_epoch = c.group_epoch;
    records.push(OffsetsRecord::Consumer(ConsumerRecord::TargetAssignmentMetadata { group: group_id.to_string(), assignment_epoch: Some(c.assignment_epoch) }));
}

/// A new member id takes over a static member's place (Kafka's static member
/// replacement): the old member is tombstoned and its assignment and target move to the
/// new id at epoch 0. Returns whether there was an old member.
pub(super) fn replace_static_member(c: &mut ConsumerGroup, group_id: &str, old: &str, new: &str, records: &mut Vec<OffsetsRecord>) -> bool {
    let Some(mut m) = c.members.remove(old) else { return false };
    member_tombstones(group_id, old, records);
    m.id = new.to_string();
    m.member_epoch = 0;
    m.previous_member_epoch = 0;
    m.state = MemberState::Stable;
    if let Some(t) = c.target.remove(old) {
        records.push(target_record(group_id, new, Some(&t)));
        c.target.insert(new.to_string(), t);
    }
    for owner in c.owners.values_mut() {
        if owner == old {
            *owner = new.to_string();
        }
    }
    c.members.insert(new.to_string(), m);
    true
}

/// Handles a heartbeat of epoch >= 0 (join or heartbeat) on group `g`.
pub fn heartbeat(
    g: &mut Group,
    req: &ConsumerGroupHeartbeatRequest,
    client_id: &str,
    client_host: &str,
    image: &MetadataImage,
    settings: Settings,
    now: Instant,
) -> Result<(ConsumerGroupHeartbeatResponse, Vec<OffsetsRecord>), HeartbeatError> {
    let group_id = g.id.clone();
    let member_epoch = req.member_epoch;
    let mut records = Vec::new();
    if g.share.is_some() || g.streams.is_some() {
        return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a consumer group.")));
    }
    if g.consumer.is_none() {
        if member_epoch != 0 {
            // As Kafka 4.1 (the Java client treats it as fatal). After a restart the
            // group and its members are replayed from their records (consumer/mod.rs),
            // so members keep their ids and epochs.
            return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a consumer group.")));
        }
        if g.members.is_empty() {
            // An empty classic group (or a new one) becomes a consumer group; its committed
            // offsets stay.
            super::super::membership::dissolve(g, ErrorCode::REBALANCE_IN_PROGRESS);
            g.consumer = Some(Box::default());
            g.protocol_type = Some("consumer".into());
        } else {
            // One with members is converted, its members kept (migration.rs).
            records = super::migration::upgrade(g, settings.migration, image, now)?;
        }
    }
    let Some(c) = g.consumer.as_deref_mut() else { return Err((ErrorCode::UNKNOWN_SERVER_ERROR, "no consumer group".into())) };

    let mut member_id = req.member_id.to_string();
    if c.members.len() >= settings.max_size && (member_id.is_empty() || !c.members.contains_key(&member_id)) {
        return Err((ErrorCode::GROUP_MAX_SIZE_REACHED, format!("The consumer group has reached its maximum capacity of {} members.", settings.max_size)));
    }
    if member_id.is_empty() {
        // v0: the coordinator names the member.
        member_id = Uuid::new_v4().to_string();
    }
    let instance_id = req.instance_id.as_ref().map(|s| s.to_string());
    let owned = req.topic_partitions.as_deref().map(to_assignment);
    // What is stored of the member now: records are written only for what changes.
    let stored_before = c.members.get(&member_id).map(|m| (m.metadata_value(), m.current_assignment_value()));

    // Find (or create) the member, fencing as Kafka does.
    let mut replaced_static = false;
    if let Some(iid) = &instance_id {
        match c.static_members.get(iid).cloned() {
            Some(old) if old != member_id => {
                if member_epoch != 0 {
                    return Err((ErrorCode::FENCED_INSTANCE_ID, format!("Static member {member_id} with instance id {iid} is fenced by {old}.")));
                }
                // A classic member holding the instance is replaced at once (Kafka checks the
                // release only between two consumer-protocol members).
                let old_epoch = c.members.get(&old).filter(|m| !m.uses_classic_protocol()).map(|m| m.member_epoch);
                if old_epoch.is_some_and(|e| e != LEAVE_GROUP_STATIC_MEMBER_EPOCH) {
                    return Err((ErrorCode::UNRELEASED_INSTANCE_ID, format!("Static member {old} with instance id {iid} is not released yet.")));
                }
                replaced_static = replace_static_member(c, &group_id, &old, &member_id, &mut records);
                c.static_members.insert(iid.clone(), member_id.clone());
            }
            Some(_) => {}
            None => {
                if member_epoch != 0 {
                    return Err((ErrorCode::UNKNOWN_MEMBER_ID, format!("Instance id {iid} is unknown.")));
                }
            }
        }
    }
    let is_new = !c.members.contains_key(&member_id);
    match c.members.get_mut(&member_id) {
        None => {
            if member_epoch != 0 {
                return Err((ErrorCode::UNKNOWN_MEMBER_ID, format!("Member {member_id} is not a member of group {group_id}.")));
            }
            c.members.insert(member_id.clone(), ConsumerMember::new(member_id.clone(), now));
            tracing::info!(group = %group_id, member = %member_id, "member joins the consumer group");
        }
        Some(m) if member_epoch == 0 && !replaced_static => {
            // A rejoin: the member gave up all its partitions (onPartitionsLost).
            m.assigned.clear();
            m.pending_revocation.clear();
            m.assignment_epochs.clear();
            m.member_epoch = 0;
            m.previous_member_epoch = 0;
            m.state = MemberState::Stable;
            m.revocation_deadline = None;
            c.update_owners(&member_id);
        }
        Some(m) if member_epoch > m.member_epoch => {
            return Err((ErrorCode::FENCED_MEMBER_EPOCH, format!("The consumer group member has a greater member epoch ({member_epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", m.member_epoch)));
        }
        Some(m) if member_epoch < m.member_epoch && member_epoch != 0 => {
            // The previous epoch with a subset of the assignment is accepted: the
            // response carrying the bump may have been lost.
            if member_epoch != m.previous_member_epoch || !is_subset(owned.as_ref(), &m.assigned) {
                return Err((ErrorCode::FENCED_MEMBER_EPOCH, format!("The consumer group member has a smaller member epoch ({member_epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", m.member_epoch)));
            }
        }
        Some(_) => {}
    }
    let Some(m) = c.members.get_mut(&member_id) else { return Err((ErrorCode::UNKNOWN_SERVER_ERROR, "member vanished".into())) };

    // 1. Update the member; a new member or a new subscription bumps the group epoch.
    let mut subscription_changed = is_new;
    if let Some(names) = &req.subscribed_topic_names {
        let mut names: Vec<String> = names.iter().map(|t| t.0.to_string()).collect::<BTreeSet<_>>().into_iter().collect();
        names.retain(|n| !n.is_empty());
        if names != m.subscribed_topic_names {
            m.subscribed_topic_names = names;
            subscription_changed = true;
        }
    }
    if let Some(r) = req.subscribed_topic_regex.as_deref() {
        // Validated in `validate`; "" clears it.
        let regex = Some(r.to_string()).filter(|r| !r.is_empty());
        if regex != m.subscribed_topic_regex {
            m.subscribed_topic_regex = regex;
            subscription_changed = true;
        }
    }
    if let Some(a) = req.server_assignor.as_deref() {
        if m.server_assignor.as_deref() != Some(a) {
            m.server_assignor = Some(a.to_string());
            subscription_changed = true;
        }
    }
    if req.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if instance_id.is_some() {
        m.instance_id.clone_from(&instance_id);
    }
    if let Some(r) = &req.rack_id {
        m.rack_id = Some(r.to_string());
    }
    m.client_id = client_id.to_string();
    m.client_host = client_host.to_string();
    m.last_heartbeat = now;
    // A ConsumerGroupHeartbeat speaks the consumer protocol: a classic member (same id, or
    // a static one replaced) stops being one, as in Kafka.
    m.classic = None;
    m.classic_sync_deadline = None;
    m.classic_join_deadline = None;
    let assigned_changed = settle(c, &group_id, &member_id, stored_before.as_ref(), subscription_changed, owned.as_ref(), image, now, &mut records)?;
    let Some(m) = c.members.get(&member_id) else { return Err((ErrorCode::UNKNOWN_SERVER_ERROR, "member vanished".into())) };
    let (epoch, assignment) = (m.member_epoch, m.assigned.clone());

    let mut resp = ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(str_bytes(&member_id)))
        .with_member_epoch(epoch)
        .with_heartbeat_interval_ms(settings.heartbeat_interval_ms);
    // The assignment goes out on a full request (join, or after an error) or a change.
    let subscription_sent = req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some();
    let full = member_epoch == 0 || (req.rebalance_timeout_ms != -1 && subscription_sent && req.topic_partitions.is_some());
    if full || assigned_changed {
        resp.assignment = Some(ResponseAssignment::default().with_topic_partitions(
            assignment.into_iter().map(|(t, ps)| TopicPartitions::default().with_topic_id(t).with_partitions(ps.into_iter().collect())).collect(),
        ));
    }
    Ok((resp, records))
}

/// What the member stored before this request: (metadata, current assignment).
pub(super) type StoredMember = (super::consumer_group_records::MemberMetadataValue, super::consumer_group_records::CurrentAssignmentValue);

/// After member `member_id` was updated from its request (a heartbeat or a classic
/// JoinGroup): stores what changed of it, bumps the group epoch on a new subscription or
/// changed subscribed topics, computes a new target for a new epoch and moves the member
/// toward its target (`owned`: the partitions it says it owns). Returns whether its
/// assigned partitions changed.
#[allow(clippy::too_many_arguments)]
pub(super) fn settle(
    c: &mut ConsumerGroup,
    group_id: &str,
    member_id: &str,
    stored_before: Option<&StoredMember>,
    subscription_changed: bool,
    owned: Option<&Assignment>,
    image: &MetadataImage,
    now: Instant,
    records: &mut Vec<OffsetsRecord>,
) -> Result<bool, HeartbeatError> {
    let vanished = || (ErrorCode::UNKNOWN_SERVER_ERROR, "member vanished".to_string());
    let m = c.members.get(member_id).ok_or_else(vanished)?;
    if stored_before.is_none_or(|(meta, _)| *meta != m.metadata_value()) {
        records.push(member_record(group_id, m));
    }
    if let Some(iid) = m.instance_id.clone() {
        c.static_members.insert(iid, member_id.to_string());
    }
    if subscription_changed {
        c.refresh_subscribed_names();
    }
    // Topics created or grown since the last look also bump the epoch. Compared by hash:
    // after a load only the stored hash is known, and an unchanged topic set must not
    // rebalance the group.
    let meta = subscription_metadata(c, image);
    let hash = super::group::metadata_hash(&meta);
    c.subscription_metadata = meta;
    let mut bump_epoch = subscription_changed;
    if hash != c.metadata_hash {
        c.metadata_hash = hash;
        bump_epoch = true;
    }
    if bump_epoch {
        bump(c, group_id, records);
    }

    // A new group epoch gets a new target assignment.
    if c.group_epoch > c.assignment_epoch {
        update_target(c, group_id, records);
    }

    // Move the member toward its target.
    let target = c.target.get(member_id).cloned().unwrap_or_default();
    let assignment_epoch = c.assignment_epoch;
    let m = c.members.get_mut(member_id).ok_or_else(vanished)?;
    let assigned_before = m.assigned.clone();
    let changed = super::reconcile::reconcile(m, assignment_epoch, &target, owned, &c.owners);
    // A classic member has no revocation deadline: its join deadline plays that part.
    if m.state == MemberState::UnrevokedPartitions && !m.uses_classic_protocol() {
        if m.revocation_deadline.is_none() {
            m.revocation_deadline = Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
        }
    } else {
        m.revocation_deadline = None;
    }
    if changed {
        tracing::debug!(group = %group_id, member = %member_id, epoch = m.member_epoch, state = ?m.state,
            assigned = m.assigned.values().map(|s| s.len()).sum::<usize>(),
            pending_revocation = m.pending_revocation.values().map(|s| s.len()).sum::<usize>(), "member reconciled");
    }
    let assigned_changed = m.assigned != assigned_before;
    if stored_before.is_none_or(|(_, current)| *current != m.current_assignment_value()) {
        records.push(current_assignment_record(group_id, m));
    }
    if changed {
        c.update_owners(member_id);
    }
    Ok(assigned_changed)
}

/// Handles a leave (epoch -1) or a static member's temporary leave (-2).
pub fn leave(
    g: &mut Group,
    req: &ConsumerGroupHeartbeatRequest,
    migration: Migration,
    image: &MetadataImage,
    now: Instant,
) -> Result<(ConsumerGroupHeartbeatResponse, Vec<OffsetsRecord>), HeartbeatError> {
    let group_id = g.id.clone();
    let member_id = req.member_id.to_string();
    let unknown = || (ErrorCode::UNKNOWN_MEMBER_ID, format!("Member {member_id} is not a member of group {group_id}."));
    let Some(c) = g.consumer.as_deref_mut() else {
        return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a consumer group.")));
    };
    let mut records = Vec::new();
    let resp = ConsumerGroupHeartbeatResponse::default().with_member_id(Some(str_bytes(&member_id))).with_member_epoch(req.member_epoch);
    if let Some(iid) = req.instance_id.as_deref() {
        let Some(holder) = c.static_members.get(iid).cloned() else {
            return Err((ErrorCode::UNKNOWN_MEMBER_ID, format!("Instance id {iid} is unknown.")));
        };
        if holder != member_id {
            return Err((ErrorCode::FENCED_INSTANCE_ID, format!("Static member {member_id} with instance id {iid} is fenced by {holder}.")));
        }
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            // Leaves for a while: keeps its assignment for its return (no epoch bump).
            if let Some(m) = c.members.get_mut(&member_id) {
                m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                m.pending_revocation.clear();
                // As Kafka: the partitions count as given at epoch 0, so a member rejoining
                // with this instance id (a new member id) takes them from epoch 0.
                m.sync_assignment_epochs(0);
                m.assignment_epochs.values_mut().for_each(|e| *e = 0);
                m.state = MemberState::Stable;
                m.revocation_deadline = None;
                records.push(current_assignment_record(&group_id, m));
            }
            c.update_owners(&member_id);
            tracing::info!(group = %group_id, member = %member_id, instance = iid, "static member left temporarily");
            return Ok((resp, records));
        }
    }
    if !c.members.contains_key(&member_id) {
        return Err(unknown());
    }
    tracing::info!(group = %group_id, member = %member_id, "member left the consumer group");
    records.extend(fence_members(g, std::slice::from_ref(&member_id), migration, image, now));
    Ok((resp, records))
}

/// Removes members `ids` (they left or were fenced): their records are tombstoned; a group
/// left with classic members only may turn back into a classic group (migration.rs),
/// otherwise the group epoch is bumped once. Returns the records to store.
pub fn fence_members(g: &mut Group, ids: &[String], migration: Migration, image: &MetadataImage, now: Instant) -> Vec<OffsetsRecord> {
    let group_id = g.id.clone();
    let mut records = Vec::new();
    let Some(c) = g.consumer.as_deref_mut() else { return records };
    for id in ids {
        if c.remove_member(id).is_some() {
            member_tombstones(&group_id, id, &mut records);
        }
    }
    if records.is_empty() || super::migration::maybe_downgrade(g, migration, image, now, true, &mut records) {
        return records;
    }
    if let Some(c) = g.consumer.as_deref_mut() {
        c.refresh_subscribed_names();
        bump(c, &group_id, &mut records);
    }
    records
}

/// Session and revocation timeouts (called by the coordinator's tick): expired members
/// are removed (their records tombstoned) and the group epoch bumped once, or the group
/// turns classic again (`fence_members`); the caller stores the records in one append. A
/// classic member has its own session timeout and its sync and join deadlines instead of
/// the revocation one.
pub fn expire(g: &mut Group, now: Instant, session_timeout_ms: u64, migration: Migration, image: &MetadataImage) -> Vec<OffsetsRecord> {
    let group_id = g.id.clone();
    let Some(c) = g.consumer.as_deref_mut() else { return Vec::new() };
    let passed = |d: Option<Instant>| d.is_some_and(|d| now >= d);
    let expired: Vec<String> = c
        .members
        .values()
        .filter(|m| {
            let session = match &m.classic {
                Some(k) => Duration::from_millis(u64::try_from(k.session_timeout_ms).unwrap_or(0)),
                None => Duration::from_millis(session_timeout_ms),
            };
            now.saturating_duration_since(m.last_heartbeat) > session
                || passed(m.revocation_deadline)
                || passed(m.classic_sync_deadline)
                || passed(m.classic_join_deadline)
        })
        .map(|m| m.id.clone())
        .collect();
    if expired.is_empty() {
        return Vec::new();
    }
    for id in &expired {
        tracing::info!(group = %group_id, member = %id, "consumer group member fenced (session, rebalance, sync or join timeout)");
    }
    fence_members(g, &expired, migration, image, now)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{GroupId, TopicName};

    use super::*;
    use crate::cluster::image::{PartitionMeta, TopicMeta};

    const MIGRATION: Migration = Migration { policy: super::super::migration::MigrationPolicy::Bidirectional, max_size: 3 };
    const SETTINGS: Settings = Settings { heartbeat_interval_ms: 5000, max_size: 3, migration: MIGRATION };

    fn image(topics: &[(&str, u8, i32)]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for &(name, id, n) in topics {
            let partitions = (0..n).map(|p| PartitionMeta::unassigned(p, 0)).collect();
            img.topics.insert(name.into(), TopicMeta { name: name.into(), topic_id: [id; 16], partitions, configs: Default::default() });
        }
        img
    }

    fn join(member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("g")))
            .with_member_id(str_bytes(member))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(str_bytes(t))).collect()))
            .with_topic_partitions(Some(Vec::new()))
    }

    fn beat(member: &str, epoch: i32, owned: Option<Vec<OwnedTopicPartitions>>) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("g")))
            .with_member_id(str_bytes(member))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(-1)
            .with_topic_partitions(owned)
    }

    fn run(g: &mut Group, req: &ConsumerGroupHeartbeatRequest, img: &MetadataImage) -> Result<ConsumerGroupHeartbeatResponse, ErrorCode> {
        validate(req, 1).map_err(|e| e.0)?;
        let r = if req.member_epoch < 0 { leave(g, req, MIGRATION, img, Instant::now()) } else { heartbeat(g, req, "c", "/h", img, SETTINGS, Instant::now()) };
        r.map(|(resp, _)| resp).map_err(|e| e.0)
    }

    fn assigned(resp: &ConsumerGroupHeartbeatResponse) -> Vec<i32> {
        let mut v: Vec<i32> = resp.assignment.iter().flat_map(|a| a.topic_partitions.iter().flat_map(|t| t.partitions.iter().copied())).collect();
        v.sort_unstable();
        v
    }

    fn owned(ps: &[i32]) -> Option<Vec<OwnedTopicPartitions>> {
        Some(vec![OwnedTopicPartitions::default().with_topic_id(Uuid::from_bytes([1; 16])).with_partitions(ps.to_vec())])
    }

    #[test]
    fn join_heartbeat_fence_and_leave() {
        let img = image(&[("t", 1, 4)]);
        let mut g = Group::new("g".into(), 0);
        let r = run(&mut g, &join("a", &["t"]), &img).unwrap();
        assert_eq!((r.member_epoch, assigned(&r)), (1, vec![0, 1, 2, 3]));
        // b joins: b waits for a's revocation; a keeps epoch 1 until it acknowledges.
        let rb = run(&mut g, &join("b", &["t"]), &img).unwrap();
        assert_eq!((rb.member_epoch, assigned(&rb)), (2, vec![]));
        let ra = run(&mut g, &beat("a", 1, None), &img).unwrap();
        assert_eq!(ra.member_epoch, 1);
        let kept = assigned(&ra);
        assert_eq!(kept.len(), 2);
        let ra = run(&mut g, &beat("a", 1, owned(&kept)), &img).unwrap();
        assert_eq!(ra.member_epoch, 2);
        let rb = run(&mut g, &beat("b", 2, None), &img).unwrap();
        let theirs = assigned(&rb);
        assert_eq!(theirs.len(), 2);
        assert!(theirs.iter().all(|p| !kept.contains(p)));
        // Fencing.
        assert_eq!(run(&mut g, &beat("a", 7, None), &img).unwrap_err(), ErrorCode::FENCED_MEMBER_EPOCH);
        assert_eq!(run(&mut g, &beat("a", 1, None), &img).unwrap_err(), ErrorCode::FENCED_MEMBER_EPOCH);
        // The previous epoch with a subset of the assignment is accepted (lost response).
        assert_eq!(run(&mut g, &beat("a", 1, owned(&kept)), &img).unwrap().member_epoch, 2);
        assert_eq!(run(&mut g, &beat("zz", 2, None), &img).unwrap_err(), ErrorCode::UNKNOWN_MEMBER_ID);
        // Offsets: the member epoch is the generation.
        let c = g.consumer.as_deref().unwrap();
        let ids = |ps: &[i32]| ps.iter().map(|&p| Some((Uuid::from_bytes([1; 16]), p))).collect::<Vec<_>>();
        assert_eq!(c.validate_offset_commit("a", 2, 9, ids(&[0, 1, 2, 3])), Ok(()), "the current epoch: anything");
        // An older epoch (KIP-848, Kafka 4.4): taken for the partitions a has held since
        // then (given at epoch 1, kept at 2), not for one it gave back to b, nor for a
        // topic that does not exist; b's partitions were given at epoch 2.
        assert_eq!(c.members["a"].assignment_epochs.values().copied().collect::<Vec<_>>(), vec![1, 1]);
        assert_eq!(c.validate_offset_commit("a", 1, 9, ids(&kept)), Ok(()));
        assert_eq!(c.validate_offset_commit("a", 1, 9, ids(&[kept[0], theirs[0]])), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(c.validate_offset_commit("a", 1, 9, [None]), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(c.validate_offset_commit("a", 0, 9, ids(&kept)), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(c.validate_offset_commit("a", 3, 9, ids(&kept)), Err(ErrorCode::STALE_MEMBER_EPOCH), "newer than the member's");
        assert_eq!(c.validate_offset_commit("b", 1, 9, ids(&theirs)), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(c.validate_offset_commit("x", 2, 9, []), Err(ErrorCode::UNKNOWN_MEMBER_ID));
        assert_eq!(c.validate_offset_commit("a", 2, 8, []), Err(ErrorCode::UNSUPPORTED_VERSION));
        assert_eq!(c.validate_offset_fetch(Some("a"), 1), Err(ErrorCode::STALE_MEMBER_EPOCH));
        assert_eq!(c.validate_offset_fetch(None, -1), Ok(()));
        // Leave: b gets everything at the next epoch.
        let lv = run(&mut g, &beat("a", -1, None), &img).unwrap();
        assert_eq!(lv.member_epoch, -1);
        let rb = run(&mut g, &beat("b", 2, owned(&theirs)), &img).unwrap();
        assert_eq!((rb.member_epoch, assigned(&rb)), (3, vec![0, 1, 2, 3]));
        assert_eq!(run(&mut g, &beat("a", 2, None), &img).unwrap_err(), ErrorCode::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn bad_requests_and_limits() {
        let img = image(&[("t", 1, 2)]);
        let mut g = Group::new("g".into(), 0);
        assert_eq!(run(&mut g, &join("a", &["t"]).with_server_assignor(Some(str_bytes("bogus"))), &img).unwrap_err(), ErrorCode::UNSUPPORTED_ASSIGNOR);
        assert_eq!(run(&mut g, &join("a", &[]), &img).unwrap_err(), ErrorCode::INVALID_REQUEST);
        assert_eq!(run(&mut g, &join("a", &["t"]).with_topic_partitions(None), &img).unwrap_err(), ErrorCode::INVALID_REQUEST);
        assert_eq!(run(&mut g, &join("a", &["t"]).with_rebalance_timeout_ms(-1), &img).unwrap_err(), ErrorCode::INVALID_REQUEST);
        assert_eq!(run(&mut g, &beat("a", -5, None), &img).unwrap_err(), ErrorCode::INVALID_REQUEST);
        assert_eq!(run(&mut g, &join("", &["t"]), &img).unwrap_err(), ErrorCode::INVALID_REQUEST);
        // No consumer group: GROUP_ID_NOT_FOUND, as Kafka.
        assert_eq!(run(&mut g, &beat("a", 3, None), &img).unwrap_err(), ErrorCode::GROUP_ID_NOT_FOUND);
        assert_eq!(run(&mut g, &beat("a", -1, None), &img).unwrap_err(), ErrorCode::GROUP_ID_NOT_FOUND);
        // Static members: the instance id is held until its member leaves with -2.
        run(&mut g, &join("s1", &["t"]).with_instance_id(Some(str_bytes("i"))), &img).unwrap();
        assert_eq!(run(&mut g, &join("s2", &["t"]).with_instance_id(Some(str_bytes("i"))), &img).unwrap_err(), ErrorCode::UNRELEASED_INSTANCE_ID);
        let lv = run(&mut g, &beat("s1", -2, None).with_instance_id(Some(str_bytes("i"))), &img).unwrap();
        assert_eq!(lv.member_epoch, -2);
        let r = run(&mut g, &join("s2", &["t"]).with_instance_id(Some(str_bytes("i"))), &img).unwrap();
        assert_eq!(assigned(&r), vec![0, 1], "the returning instance keeps its partitions");
        // group max size 3.
        run(&mut g, &join("b", &["t"]), &img).unwrap();
        run(&mut g, &join("c", &["t"]), &img).unwrap();
        assert_eq!(run(&mut g, &join("d", &["t"]), &img).unwrap_err(), ErrorCode::GROUP_MAX_SIZE_REACHED);
    }

    #[test]
    fn new_partitions_and_new_topics_bump_the_epoch() {
        let mut g = Group::new("g".into(), 0);
        let img = image(&[("t", 1, 2)]);
        let r = run(&mut g, &join("a", &["t", "later"]), &img).unwrap();
        assert_eq!((r.member_epoch, assigned(&r)), (1, vec![0, 1]));
        let img = image(&[("t", 1, 3), ("later", 2, 1)]);
        let r = run(&mut g, &beat("a", 1, None), &img).unwrap();
        assert_eq!((r.member_epoch, assigned(&r)), (2, vec![0, 0, 1, 2]));
    }

    fn join_regex(member: &str, regex: &str) -> ConsumerGroupHeartbeatRequest {
        join(member, &[]).with_subscribed_topic_names(None).with_subscribed_topic_regex(Some(str_bytes(regex)))
    }

    fn assigned_topics(resp: &ConsumerGroupHeartbeatResponse) -> Vec<Uuid> {
        resp.assignment.iter().flat_map(|a| a.topic_partitions.iter().map(|t| t.topic_id)).collect()
    }

    #[test]
    fn regex_subscriptions_follow_created_and_deleted_topics() {
        let mut g = Group::new("g".into(), 0);
        let img = image(&[("t-a", 1, 1), ("other", 2, 1), ("__consumer_offsets", 3, 1)]);
        let r = run(&mut g, &join_regex("a", "t-.*"), &img).unwrap();
        assert_eq!((r.member_epoch, assigned_topics(&r)), (1, vec![Uuid::from_bytes([1; 16])]));
        // A second member by name; a regex `.*` takes the internal topic too, as Kafka 4.4's.
        let r = run(&mut g, &join_regex("b", ".*"), &img).unwrap();
        assert_eq!(r.member_epoch, 2);
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.subscription_metadata.keys().collect::<Vec<_>>(), vec!["__consumer_offsets", "other", "t-a"]);
        // A topic created: the next heartbeat bumps the epoch and a's target includes it.
        let img = image(&[("t-a", 1, 1), ("other", 2, 1), ("t-b", 4, 2), ("__consumer_offsets", 3, 1)]);
        run(&mut g, &beat("a", 1, None), &img).unwrap();
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.group_epoch, 3);
        assert!(c.target["a"].keys().chain(c.target["b"].keys()).any(|t| *t == Uuid::from_bytes([4; 16])));
        assert!(c.target["a"].keys().all(|t| [[1; 16], [4; 16]].contains(t.as_bytes())), "a only gets t-* topics");
        // Deleted: gone from every target at the next bump.
        let img = image(&[("other", 2, 1), ("t-b", 4, 2)]);
        run(&mut g, &beat("b", 2, None), &img).unwrap();
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.group_epoch, 4);
        assert!(c.target.values().all(|a| !a.contains_key(&Uuid::from_bytes([1; 16]))));
        // Described with its regex.
        let d = super::super::describe::describe("g", Some(&g), false, &img);
        let a = d.members.iter().find(|m| m.member_id.as_str() == "a").unwrap();
        assert_eq!(a.subscribed_topic_regex.as_deref(), Some("t-.*"));
    }

    #[test]
    fn invalid_regex_is_refused_and_empty_means_none() {
        let img = image(&[("t", 1, 1)]);
        let mut g = Group::new("g".into(), 0);
        let e = validate(&join_regex("a", "t-("), 1).unwrap_err();
        assert_eq!(e.0, ErrorCode::INVALID_REGULAR_EXPRESSION);
        assert!(e.1.starts_with("SubscribedTopicRegex `t-(` is not a valid regular expression: "), "{}", e.1);
        // librdkafka sends "" beside its names: no regex.
        let r = run(&mut g, &join("a", &["t"]).with_subscribed_topic_regex(Some(str_bytes(""))), &img).unwrap();
        assert_eq!(assigned(&r), vec![0]);
        assert_eq!(g.consumer.as_deref().unwrap().members["a"].subscribed_topic_regex, None);
    }

    #[test]
    fn regex_survives_a_reload() {
        let img = image(&[("t-a", 1, 2)]);
        let mut g = Group::new("g".into(), 0);
        let mut log = Vec::new();
        run_rec(&mut g, &join_regex("a", "t-.*"), &img, &mut log);
        let r = reload(&log);
        assert_restored(&g, &r);
        assert_eq!(r.consumer.as_deref().unwrap().members["a"].subscribed_topic_regex.as_deref(), Some("t-.*"));
        assert!(!r.consumer.as_deref().unwrap().regexes.is_empty());
    }

    /// Runs a request on `g`, appending the records it stores to `log`.
    fn run_rec(g: &mut Group, req: &ConsumerGroupHeartbeatRequest, img: &MetadataImage, log: &mut Vec<OffsetsRecord>) -> ConsumerGroupHeartbeatResponse {
        validate(req, 1).unwrap();
        let r = if req.member_epoch < 0 { leave(g, req, MIGRATION, img, Instant::now()) } else { heartbeat(g, req, "c", "/h", img, SETTINGS, Instant::now()) };
        let (resp, recs) = r.unwrap();
        log.extend(recs);
        resp
    }

    /// A restarted coordinator: `log` replayed, through its stored bytes, into a new map.
    fn reload(log: &[OffsetsRecord]) -> Group {
        let mut groups = std::collections::HashMap::new();
        for r in log {
            match OffsetsRecord::parse(Some(r.key()), r.value()).unwrap() {
                OffsetsRecord::Consumer(c) => super::super::replay(&mut groups, 0, c),
                other => panic!("unexpected record {other:?}"),
            }
        }
        let mut g = groups.remove("g").expect("group replayed");
        super::super::finish_load(g.consumer.as_deref_mut().unwrap(), Instant::now());
        g
    }

    fn assert_restored(live: &Group, restored: &Group) {
        let (a, b) = (live.consumer.as_deref().unwrap(), restored.consumer.as_deref().unwrap());
        assert_eq!((b.group_epoch, b.assignment_epoch, b.metadata_hash), (a.group_epoch, a.assignment_epoch, a.metadata_hash));
        assert_eq!(b.target, a.target);
        assert_eq!(b.owners, a.owners);
        assert_eq!(b.static_members, a.static_members);
        assert_eq!(b.subscribed_names, a.subscribed_names);
        assert_eq!(b.members.keys().collect::<Vec<_>>(), a.members.keys().collect::<Vec<_>>());
        for (id, m) in &a.members {
            let r = &b.members[id];
            assert_eq!(r.metadata_value(), m.metadata_value(), "{id}");
            assert_eq!(r.current_assignment_value(), m.current_assignment_value(), "{id}");
            assert_eq!(r.revocation_deadline.is_some(), m.revocation_deadline.is_some(), "{id}");
        }
        assert_eq!(b.state(), a.state());
    }

    #[test]
    fn replay_restores_members_epochs_and_assignments() {
        let img = image(&[("t", 1, 4)]);
        let mut g = Group::new("g".into(), 0);
        let mut log = Vec::new();
        let ra = run_rec(&mut g, &join("a", &["t"]).with_server_assignor(Some(str_bytes("range"))), &img, &mut log);
        assert_eq!((ra.member_epoch, assigned(&ra)), (1, vec![0, 1, 2, 3]));
        let rb = run_rec(&mut g, &join("b", &["t"]).with_instance_id(Some(str_bytes("ib"))), &img, &mut log);
        assert_eq!((rb.member_epoch, assigned(&rb)), (2, vec![]));
        let ra = run_rec(&mut g, &beat("a", 1, None), &img, &mut log);
        assert_eq!((ra.member_epoch, assigned(&ra)), (1, vec![0, 1]));

        // Restart in the middle of a reconciliation: a still has 2 and 3 to give back.
        let mut r = reload(&log);
        assert_restored(&g, &r);
        assert_eq!(r.consumer.as_deref().unwrap().members["a"].state, MemberState::UnrevokedPartitions);
        // The live and the restored group go on alike.
        for req in [beat("a", 1, owned(&[0, 1])), beat("b", 2, None), beat("a", 2, None), beat("b", 2, owned(&[2, 3]))] {
            let x = run_rec(&mut g, &req, &img, &mut log);
            let y = run(&mut r, &req, &img).unwrap();
            assert_eq!((x.member_epoch, assigned(&x)), (y.member_epoch, assigned(&y)));
        }
        assert_eq!(g.consumer.as_deref().unwrap().state(), super::super::group::ConsumerGroupState::Stable);

        // Restart of a Stable group: the members' full heartbeats (as after a reconnect)
        // keep their epochs and partitions; nothing is bumped or stored.
        let mut r = reload(&log);
        assert_restored(&g, &r);
        let full =
            |id: &str, ps: &[i32]| beat(id, 2, owned(ps)).with_rebalance_timeout_ms(30_000).with_subscribed_topic_names(Some(vec![TopicName(str_bytes("t"))]));
        let mut after = Vec::new();
        let x = run_rec(&mut r, &full("a", &[0, 1]), &img, &mut after);
        assert_eq!((x.error_code, x.member_epoch, assigned(&x)), (0, 2, vec![0, 1]));
        let x = run_rec(&mut r, &full("b", &[2, 3]).with_instance_id(Some(str_bytes("ib"))), &img, &mut after);
        assert_eq!((x.error_code, x.member_epoch, assigned(&x)), (0, 2, vec![2, 3]));
        assert!(after.is_empty(), "{after:?}");
        assert_eq!(r.consumer.as_deref().unwrap().group_epoch, 2);
        // A commit with the member epoch is accepted after the restart.
        assert_eq!(r.consumer.as_deref().unwrap().validate_offset_commit("a", 2, 9, []), Ok(()));

        // A member that left is gone after a restart (its records are tombstoned).
        run_rec(&mut g, &join("c", &["t"]), &img, &mut log);
        run_rec(&mut g, &beat("c", -1, None), &img, &mut log);
        let r = reload(&log);
        assert_restored(&g, &r);
        assert!(!r.consumer.as_deref().unwrap().members.contains_key("c"));
        assert!(!r.consumer.as_deref().unwrap().target.contains_key("c"));

        // A static member's temporary leave (-2) is stored too: it comes back with its epoch.
        run_rec(&mut g, &beat("b", -2, None).with_instance_id(Some(str_bytes("ib"))), &img, &mut log);
        let r = reload(&log);
        assert_restored(&g, &r);
        assert_eq!(r.consumer.as_deref().unwrap().members["b"].member_epoch, LEAVE_GROUP_STATIC_MEMBER_EPOCH);

        // An expired member is tombstoned as well.
        let mut recs = expire(&mut g, Instant::now() + Duration::from_secs(600), 45_000, MIGRATION, &img);
        log.append(&mut recs);
        let r = reload(&log);
        assert!(r.consumer.as_deref().unwrap().members.is_empty());
        assert_restored(&g, &r);
    }

    #[test]
    fn session_expiry_removes_members_and_bumps() {
        let img = image(&[("t", 1, 2)]);
        let mut g = Group::new("g".into(), 0);
        run(&mut g, &join("a", &["t"]), &img).unwrap();
        let later = Instant::now() + Duration::from_secs(60);
        let recs = expire(&mut g, later, 45_000, MIGRATION, &img);
        // The member's three tombstones, then the epoch.
        assert_eq!(recs.len(), 4);
        let c = g.consumer.as_deref().unwrap();
        assert!(c.members.is_empty() && c.owners.is_empty());
        assert_eq!(c.group_epoch, 2);
    }
}
