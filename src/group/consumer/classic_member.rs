//! Members speaking the classic protocol (JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup) inside a KIP-848 consumer group, as Kafka 4.4's GroupMetadataManager runs
//! them (`classicGroup*ToConsumerGroup`): the coordinator assigns, so a classic member is
//! never the leader and runs no assignor.
//!
//! - JoinGroup updates the member from its subscription (topics, rack, the partitions it
//!   owns) and moves it toward its target like a heartbeat would; the answer comes at
//!   once, with generation = the member's epoch and no leader.
//! - SyncGroup returns its assigned partitions (those pending revocation left out), or
//!   REBALANCE_IN_PROGRESS when a newer target awaits it.
//! - Heartbeat answers REBALANCE_IN_PROGRESS whenever the member must rejoin to move on:
//!   a newer target (or a new group epoch without one yet), partitions to revoke, or
//!   partitions it waited for now free. Only a JoinGroup advances a classic member.
//! - Three timers fence it (heartbeat.rs `expire`): its own session timeout, a sync
//!   deadline after its JoinGroup and a join deadline after it was told to rejoin (both
//!   its rebalance timeout).
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{JoinGroupResponse, SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::consumer_group_records::ClassicMemberMetadata;
use super::embedded_protocol;
use super::group::{ConsumerGroup, ConsumerMember, MemberState};
use super::heartbeat;
use super::migration::{Migration, MigrationPolicy};
use crate::cluster::image::MetadataImage;
use crate::group::coordinator_records::OffsetsRecord;
use crate::group::membership::{join_error, sync_error};
use crate::group::state::Group;
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// A JoinGroup for a consumer group, as the classic handler read it.
pub struct ClassicJoin {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub protocol_type: String,
    /// Refused when empty (`supports_protocols`).
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub version: i16,
}

/// Kafka's supportsClassicProtocols: the consumer embedded protocol, and one protocol name
/// every classic member of the group supports (any, when it has none).
fn supports_protocols(c: &ConsumerGroup, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
    if protocol_type != "consumer" || protocols.is_empty() {
        return false;
    }
    let classic: Vec<&ClassicMemberMetadata> = c.members.values().filter_map(|m| m.classic.as_ref()).collect();
    protocols.iter().any(|(name, _)| classic.iter().all(|k| k.protocols.iter().any(|(n, _)| n == name)))
}

/// The member a classic request names, checked as Kafka's validateConsumerGroupMember:
/// an unknown member or instance is UNKNOWN_MEMBER_ID, an instance held by another member
/// FENCED_INSTANCE_ID, a member not speaking the classic protocol UNKNOWN_MEMBER_ID.
fn classic_member<'a>(c: &'a mut ConsumerGroup, member_id: &str, instance_id: Option<&str>) -> Result<&'a mut ConsumerMember, ErrorCode> {
    if let Some(iid) = instance_id {
        match c.static_members.get(iid) {
            None => return Err(ErrorCode::UNKNOWN_MEMBER_ID),
            Some(holder) if holder != member_id => return Err(ErrorCode::FENCED_INSTANCE_ID),
            Some(_) => {}
        }
    }
    let m = c.members.get_mut(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
    if !m.uses_classic_protocol() {
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    }
    Ok(m)
}

/// A JoinGroup into consumer group `g` (which has members): the answer, and the records to
/// store before it is sent.
pub fn join(g: &mut Group, a: ClassicJoin, image: &MetadataImage, migration: Migration, now: Instant) -> (JoinGroupResponse, Vec<OffsetsRecord>) {
    let group_id = g.id.clone();
    let Some(c) = g.consumer.as_deref_mut() else { return (join_error(ErrorCode::UNKNOWN_SERVER_ERROR, &a.member_id), Vec::new()) };
    let fail = |code: ErrorCode, why: &str| {
        tracing::info!(group = %group_id, member = %a.member_id, error = ?code, "classic JoinGroup refused: {why}");
        (join_error(code, ""), Vec::new())
    };
    if migration.policy == MigrationPolicy::Disabled {
        return fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "the group migration is disabled (group.consumer.migration.policy)");
    }
    let new_member = a.member_id.is_empty();
    let member_id = if new_member { Uuid::new_v4().to_string() } else { a.member_id.clone() };
    let holder = a.instance_id.as_ref().and_then(|iid| c.static_members.get(iid).cloned());
    if holder.is_none() && !c.members.contains_key(&member_id) && c.members.len() >= migration.max_size {
        return fail(ErrorCode::GROUP_MAX_SIZE_REACHED, "the group is full");
    }
    if !supports_protocols(c, &a.protocol_type, &a.protocols) {
        return fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "no protocol common to every classic member");
    }
    if new_member && a.instance_id.is_none() && a.version >= 4 {
        // KIP-394: the member comes back with this id (an unknown id is then created).
        return (join_error(ErrorCode::MEMBER_ID_REQUIRED, &member_id), Vec::new());
    }
    let Some(Ok(subscription)) = a.protocols.first().map(|(_, metadata)| embedded_protocol::parse_subscription(metadata)) else {
        return fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "malformed embedded consumer protocol in the subscription");
    };
    // Kafka's second downgrade trigger: this JoinGroup takes the instance of the group's
    // only consumer-protocol member (the policy and size are checked by maybe_downgrade).
    // The new classic group rebalances only if the target was stale or the subscription
    // changes; otherwise the joiner is reconciled first and the group stays Stable.
    let replaces_last_consumer_member = holder.as_ref().and_then(|h| c.members.get(h)).is_some_and(|m| !m.uses_classic_protocol())
        && c.members.values().filter(|m| Some(&m.id) != holder.as_ref()).all(ConsumerMember::uses_classic_protocol);
    let stale_target = c.assignment_epoch < c.group_epoch;
    let mut records = Vec::new();
    match (&a.instance_id, holder) {
        (Some(_), Some(old)) if new_member => {
            // A static member back under a new id takes its place, whatever protocol the
            // old one spoke.
            heartbeat::replace_static_member(c, &group_id, &old, &member_id, &mut records);
        }
        (Some(_), Some(old)) if old != member_id => return fail(ErrorCode::FENCED_INSTANCE_ID, "the instance id is held by another member"),
        (Some(_), None) if !new_member => return fail(ErrorCode::UNKNOWN_MEMBER_ID, "unknown instance id"),
        _ => {}
    }
    let stored_before = c.members.get(&member_id).map(|m| (m.metadata_value(), m.current_assignment_value()));
    let is_new = !c.members.contains_key(&member_id);
    if is_new {
        tracing::info!(group = %group_id, member = %member_id, "classic member joins the consumer group");
    }
    let m = c.members.entry(member_id.clone()).or_insert_with(|| ConsumerMember::new(member_id.clone(), now));
    let subscription_changed = is_new || m.subscribed_topic_names != subscription.topics || m.subscribed_topic_regex.is_some();
    m.subscribed_topic_names = subscription.topics;
    m.subscribed_topic_regex = None;
    m.rack_id = subscription.rack_id;
    m.rebalance_timeout_ms = a.rebalance_timeout_ms;
    if a.instance_id.is_some() {
        m.instance_id.clone_from(&a.instance_id);
    }
    m.client_id = a.client_id;
    m.client_host = a.client_host;
    m.classic = Some(ClassicMemberMetadata { session_timeout_ms: a.session_timeout_ms, protocols: a.protocols });
    let owned = embedded_protocol::to_ids(&subscription.owned, image);
    if let Err((code, why)) = heartbeat::settle(c, &group_id, &member_id, stored_before.as_ref(), subscription_changed, Some(&owned), image, now, &mut records)
    {
        return fail(code, &why);
    }
    let Some(m) = c.members.get_mut(&member_id) else { return fail(ErrorCode::UNKNOWN_SERVER_ERROR, "member vanished") };
    // Joined: the join timer stops, the session starts again, the sync timer starts.
    m.last_heartbeat = now;
    m.classic_join_deadline = None;
    m.classic_sync_deadline = Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
    let protocol_name = m.classic.as_ref().and_then(|k| k.protocols.first()).map(|(n, _)| n.clone()).unwrap_or_default();
    let resp = JoinGroupResponse::default()
        .with_generation_id(m.member_epoch)
        .with_protocol_type(Some(str_bytes("consumer")))
        .with_protocol_name(Some(str_bytes(&protocol_name)))
        .with_leader(StrBytes::default())
        .with_member_id(str_bytes(&member_id));
    if replaces_last_consumer_member {
        super::migration::maybe_downgrade(g, migration, image, now, stale_target || subscription_changed, &mut records);
    }
    (resp, records)
}

/// A SyncGroup of a classic member of consumer group `g`.
pub fn sync(g: &mut Group, req: &SyncGroupRequest, image: &MetadataImage, now: Instant) -> SyncGroupResponse {
    let Some(c) = g.consumer.as_deref_mut().filter(|c| !c.is_empty()) else { return sync_error(ErrorCode::UNKNOWN_MEMBER_ID) };
    let assignment_epoch = c.assignment_epoch;
    let m = match classic_member(c, &req.member_id, req.group_instance_id.as_deref()) {
        Ok(m) => m,
        Err(e) => return sync_error(e),
    };
    if req.generation_id != m.member_epoch {
        return sync_error(ErrorCode::ILLEGAL_GENERATION);
    }
    let Some(first) = m.classic.as_ref().and_then(|k| k.protocols.first()) else { return sync_error(ErrorCode::UNKNOWN_MEMBER_ID) };
    if req.protocol_type.as_ref().is_some_and(|t| t.as_str() != "consumer") || req.protocol_name.as_ref().is_some_and(|n| n.as_str() != first.0) {
        return sync_error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    if assignment_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
        ask_to_rejoin(m, now);
        return sync_error(ErrorCode::REBALANCE_IN_PROGRESS);
    }
    let version = embedded_protocol::version_of(&first.1);
    m.classic_sync_deadline = None;
    m.last_heartbeat = now;
    SyncGroupResponse::default()
        .with_protocol_type(req.protocol_type.clone())
        .with_protocol_name(req.protocol_name.clone())
        .with_assignment(embedded_protocol::serialize_assignment(version, &m.assigned, image))
}

/// REBALANCE_IN_PROGRESS was answered: the member must rejoin within its rebalance timeout.
fn ask_to_rejoin(m: &mut ConsumerMember, now: Instant) {
    if m.classic_join_deadline.is_none() {
        m.classic_join_deadline = Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
    }
}

/// Kafka's waitingOnUnreleasedPartition: a partition of the member's target that it does
/// not have yet is still owned by another member.
fn waiting_on_unreleased(c: &ConsumerGroup, m: &ConsumerMember) -> bool {
    let Some(target) = c.target.get(&m.id) else { return false };
    target
        .iter()
        .any(|(t, ps)| ps.iter().any(|p| !m.assigned.get(t).is_some_and(|a| a.contains(p)) && c.owners.get(&(*t, *p)).is_some_and(|owner| *owner != m.id)))
}

/// A Heartbeat of a classic member of consumer group `g`.
pub fn heartbeat(g: &mut Group, member_id: &str, instance_id: Option<&str>, generation: i32, now: Instant) -> ErrorCode {
    let Some(c) = g.consumer.as_deref_mut().filter(|c| !c.is_empty()) else { return ErrorCode::UNKNOWN_MEMBER_ID };
    let rejoin = {
        let m = match classic_member(c, member_id, instance_id) {
            Ok(m) => m,
            Err(e) => return e,
        };
        if generation != m.member_epoch {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        m.last_heartbeat = now;
        let m = &c.members[member_id];
        // A bumped group epoch whose target is not computed yet (members left or were
        // fenced): only a heartbeat or a JoinGroup computes it, so a group of classic
        // members must rejoin, or the partitions of those gone would stay unassigned.
        c.group_epoch > c.assignment_epoch
            || m.member_epoch < c.assignment_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting_on_unreleased(c, m))
    };
    if !rejoin {
        return ErrorCode::NONE;
    }
    if let Some(m) = c.members.get_mut(member_id) {
        ask_to_rejoin(m, now);
    }
    ErrorCode::REBALANCE_IN_PROGRESS
}

/// A LeaveGroup on consumer group `g` (classic members leaving, or an admin removing
/// members of either protocol): (top-level error, per-member results, records).
pub fn leave(
    g: &mut Group,
    members: Vec<MemberIdentity>,
    migration: Migration,
    image: &MetadataImage,
    now: Instant,
) -> (ErrorCode, Vec<MemberResponse>, Vec<OffsetsRecord>) {
    let Some(c) = g.consumer.as_deref() else { return (ErrorCode::UNKNOWN_MEMBER_ID, Vec::new(), Vec::new()) };
    let mut results = Vec::with_capacity(members.len());
    let mut leaving: Vec<String> = Vec::new();
    for ident in members {
        let code = match ident.group_instance_id.as_deref() {
            Some(iid) => match c.static_members.get(iid) {
                None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
                // An empty member id (an admin's removal) removes whoever holds the instance.
                Some(holder) if ident.member_id.is_empty() || *holder == ident.member_id.as_str() => Ok(holder.clone()),
                Some(_) => Err(ErrorCode::FENCED_INSTANCE_ID),
            },
            None if c.members.contains_key(ident.member_id.as_str()) => Ok(ident.member_id.to_string()),
            None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
        };
        let code = match code {
            Ok(id) => {
                if !leaving.contains(&id) {
                    leaving.push(id);
                }
                ErrorCode::NONE
            }
            Err(e) => e,
        };
        results.push(MemberResponse::default().with_member_id(ident.member_id).with_group_instance_id(ident.group_instance_id).with_error_code(code.code()));
    }
    let records = if leaving.is_empty() { Vec::new() } else { heartbeat::fence_members(g, &leaving, migration, image, now) };
    (ErrorCode::NONE, results, records)
}
