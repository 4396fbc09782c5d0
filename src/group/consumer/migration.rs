//! Online migration between the classic protocol and KIP-848 (Kafka 4.4's
//! `group.consumer.migration.policy`): a consumer-protocol member joining a classic group
//! with members turns it into a consumer group whose classic members keep their
//! partitions and generation (`upgrade`); the last consumer-protocol member leaving a
//! group of classic members turns it back into a classic group (`maybe_downgrade`).
//! Either conversion is one batch of records: the old form's tombstones, then the new
//! form, so a replay ends in the form written last.
use std::time::Instant;

use super::consumer_group_records::{ClassicMemberMetadata, ConsumerRecord};
use super::embedded_protocol;
use super::group::{ConsumerGroup, ConsumerMember, MemberState};
use super::heartbeat::{self, HeartbeatError};
use crate::cluster::image::MetadataImage;
use crate::group::coordinator_records::OffsetsRecord;
use crate::group::state::{Group, GroupState, Member};
use crate::protocol::ErrorCode;

/// Kafka's ConsumerGroupMigrationPolicy: which conversions of a non-empty group are
/// allowed (an empty group always takes the protocol of its next member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// The broker setting's values, case-insensitive, as Kafka validates them.
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade)
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade)
    }
}

/// What the conversions need from the coordinator's settings.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    pub policy: MigrationPolicy,
    /// group.consumer.max.size on upgrade, group.max.size on downgrade (one setting here).
    pub max_size: usize,
}

fn refused(group_id: &str, why: &str) -> HeartbeatError {
    (ErrorCode::GROUP_ID_NOT_FOUND, format!("Cannot upgrade classic group {group_id} to consumer group because {why}"))
}

/// One classic member as a consumer-group member: same ids, its generation as member
/// epoch, Stable, its last assignment as both current and target.
fn converted_member(m: &Member, protocol: Option<&str>, generation: i32, image: &MetadataImage, now: Instant) -> Result<(ConsumerMember, super::group::Assignment), ()> {
    let metadata = match protocol {
        Some(p) => m.metadata_for(p),
        // No generation chosen yet: every protocol carries the same subscription.
        None => m.protocols.first().map(|(_, b)| b.clone()).unwrap_or_default(),
    };
    let subscription = embedded_protocol::parse_subscription(&metadata)?;
    let (assigned, user_data) = embedded_protocol::parse_assignment(&m.assignment)?;
    if user_data {
        return Err(());
    }
    let assigned = embedded_protocol::to_ids(&assigned, image);
    let mut c = ConsumerMember::new(m.id.clone(), now);
    c.instance_id.clone_from(&m.instance_id);
    c.rack_id = subscription.rack_id;
    c.client_id.clone_from(&m.client_id);
    c.client_host.clone_from(&m.client_host);
    c.member_epoch = generation;
    c.previous_member_epoch = generation;
    c.state = MemberState::Stable;
    c.rebalance_timeout_ms = m.rebalance_timeout_ms;
    c.subscribed_topic_names = subscription.topics;
    c.assigned = assigned.clone();
    c.sync_assignment_epochs(generation);
    c.classic = Some(ClassicMemberMetadata { session_timeout_ms: m.session_timeout_ms, protocols: m.protocols.clone() });
    Ok((c, assigned))
}

/// A ConsumerGroupHeartbeat joining (epoch 0) classic group `g`, which has members:
/// converts it into a consumer group (Kafka's convertToConsumerGroup), or refuses with
/// Kafka's GROUP_ID_NOT_FOUND and its words. Returns the conversion's records; the
/// heartbeat then goes on as in any consumer group. Members waiting in JoinGroup or
/// SyncGroup are told REBALANCE_IN_PROGRESS: they rejoin as classic members of the
/// consumer group.
pub fn upgrade(g: &mut Group, migration: Migration, image: &MetadataImage, now: Instant) -> Result<Vec<OffsetsRecord>, HeartbeatError> {
    let group_id = g.id.clone();
    if !migration.policy.upgrade_enabled() {
        return Err(refused(&group_id, "online upgrade is disabled."));
    }
    if g.protocol_type.as_deref() != Some("consumer") {
        return Err(refused(&group_id, "the group does not use the consumer embedded protocol."));
    }
    if g.members.len() > migration.max_size {
        return Err(refused(&group_id, "the group size exceeds the consumer group maximum size."));
    }
    let generation = g.generation;
    let mut c = ConsumerGroup::with_epoch(generation);
    for m in g.members.values() {
        let Ok((member, target)) = converted_member(m, g.protocol.as_deref(), generation, image, now) else {
            let (_, user_data) = embedded_protocol::parse_assignment(&m.assignment).unwrap_or((Vec::new(), false));
            return Err(if user_data {
                refused(&group_id, "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.")
            } else {
                refused(&group_id, "the embedded consumer protocol is malformed.")
            });
        };
        if let Some(iid) = &member.instance_id {
            c.static_members.insert(iid.clone(), member.id.clone());
        }
        c.target.insert(member.id.clone(), target);
        c.members.insert(member.id.clone(), member);
    }
    let ids: Vec<String> = c.members.keys().cloned().collect();
    for id in &ids {
        c.update_owners(id);
    }
    c.refresh_subscribed_names();
    c.subscription_metadata = heartbeat::subscription_metadata(&c, image);
    c.metadata_hash = super::group::metadata_hash(&c.subscription_metadata);

    // In Kafka's order: the classic group's tombstone, then the consumer group.
    let mut records = vec![OffsetsRecord::Group { group: group_id.clone(), value: None }];
    let consumer = |r: ConsumerRecord| OffsetsRecord::Consumer(r);
    for m in c.members.values() {
        records.push(consumer(ConsumerRecord::MemberMetadata { group: group_id.clone(), member: m.id.clone(), value: Some(m.metadata_value()) }));
    }
    records.push(consumer(ConsumerRecord::GroupEpoch { group: group_id.clone(), epoch: Some(c.group_epoch), metadata_hash: c.metadata_hash }));
    for (member, a) in &c.target {
        records.push(consumer(ConsumerRecord::TargetAssignmentMember { group: group_id.clone(), member: member.clone(), partitions: Some(a.clone()) }));
    }
    records.push(consumer(ConsumerRecord::TargetAssignmentMetadata { group: group_id.clone(), assignment_epoch: Some(c.assignment_epoch) }));
    for m in c.members.values() {
        records.push(consumer(ConsumerRecord::CurrentMemberAssignment {
            group: group_id.clone(),
            member: m.id.clone(),
            value: Some(m.current_assignment_value()),
        }));
    }

    tracing::info!(group = %group_id, generation, members = c.members.len(), "classic group upgraded to a consumer group");
    crate::group::membership::dissolve(g, ErrorCode::REBALANCE_IN_PROGRESS);
    g.protocol_type = Some("consumer".into());
    g.consumer = Some(Box::new(c));
    Ok(records)
}

/// After members left or were fenced (their tombstones already in `records`, the group
/// epoch not bumped yet): a group left with classic members only turns back into a
/// classic group, if the policy and group.max.size allow (Kafka's
/// convertToClassicGroup). Its generation is the group epoch; each member's assignment is
/// its target; it then rebalances (PreparingRebalance), so the members rejoin and the
/// next generation is assigned by their leader. Returns whether it did.
pub fn maybe_downgrade(g: &mut Group, migration: Migration, image: &MetadataImage, now: Instant, records: &mut Vec<OffsetsRecord>) -> bool {
    let Some(c) = g.consumer.as_deref() else { return false };
    if c.members.is_empty() || !c.members.values().all(ConsumerMember::uses_classic_protocol) {
        return false;
    }
    if !migration.policy.downgrade_enabled() || c.members.len() > migration.max_size {
        tracing::info!(group = %g.id, "consumer group of classic members stays a consumer group (group.consumer.migration.policy or group.max.size)");
        return false;
    }
    let Some(c) = g.consumer.take() else { return false };
    let group_id = g.id.clone();
    for id in c.members.keys() {
        heartbeat::member_tombstones(&group_id, id, records);
    }
    records.extend(heartbeat::group_tombstones(&group_id));
    crate::group::membership::dissolve(g, ErrorCode::REBALANCE_IN_PROGRESS);
    g.generation = c.group_epoch;
    g.protocol_type = Some("consumer".into());
    for m in c.members.values() {
        let Some(classic) = &m.classic else { continue };
        let target = c.target.get(&m.id).cloned().unwrap_or_default();
        let version = classic.protocols.first().map(|(_, b)| embedded_protocol::version_of(b)).unwrap_or(0);
        if let Some(iid) = &m.instance_id {
            g.static_members.insert(iid.clone(), m.id.clone());
        }
        g.members.insert(
            m.id.clone(),
            Member {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: classic.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: classic.protocols.clone(),
                assignment: embedded_protocol::serialize_assignment(version, &target, image),
                last_heartbeat: now,
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
            },
        );
    }
    g.protocol = g.select_protocol().or_else(|| g.members.values().next().and_then(|m| m.protocols.first()).map(|(n, _)| n.clone()));
    g.leader = g.members.keys().next().cloned();
    g.set_state(GroupState::Stable);
    records.push(crate::group::membership::group_record(g, None));
    crate::group::membership::prepare_rebalance(g, now, 0);
    tracing::info!(group = %group_id, generation = g.generation, members = g.members.len(), "consumer group downgraded to a classic group");
    true
}
