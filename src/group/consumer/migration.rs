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

/// Why a classic member cannot be carried into a consumer group (Kafka's words, after
/// "because ").
const MALFORMED: &str = "the embedded consumer protocol is malformed.";
const CUSTOM_ASSIGNOR: &str =
    "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.";

/// One classic member as a consumer-group member: same ids, its generation as member
/// epoch, Stable, its last assignment as both current and target.
fn converted_member(
    m: &Member,
    protocol: Option<&str>,
    generation: i32,
    image: &MetadataImage,
    now: Instant,
) -> Result<(ConsumerMember, super::group::Assignment), &'static str> {
    let metadata = match protocol {
        Some(p) => m.metadata_for(p),
        // No generation chosen yet: every protocol carries the same subscription.
        None => m.protocols.first().map(|(_, b)| b.clone()).unwrap_or_default(),
    };
    let subscription = embedded_protocol::parse_subscription(&metadata).map_err(|_| MALFORMED)?;
    let (assigned, user_data) = embedded_protocol::parse_assignment(&m.assignment).map_err(|_| MALFORMED)?;
    if user_data {
        return Err(CUSTOM_ASSIGNOR);
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
        let (member, target) = converted_member(m, g.protocol.as_deref(), generation, image, now).map_err(|why| refused(&group_id, why))?;
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
    crate::metrics::shard_metrics::with(|m| m.group_conversions.0 += 1);
    crate::group::membership::dissolve(g, ErrorCode::REBALANCE_IN_PROGRESS);
    g.protocol_type = Some("consumer".into());
    g.consumer = Some(Box::new(c));
    Ok(records)
}

/// A group left with classic members only turns back into a classic group, if the policy
/// and group.max.size allow (Kafka's convertToClassicGroup). Called after members left or
/// were fenced (their tombstones already in `records`, the group epoch not bumped yet),
/// and after a classic JoinGroup took the instance of the last consumer-protocol member
/// (classic_member.rs). Its generation is the group epoch; each member's assignment is its
/// target; with `rebalance` it then rebalances (PreparingRebalance), so the members rejoin
/// and the next generation is assigned by their leader, else it stays Stable. Returns
/// whether it did.
pub fn maybe_downgrade(g: &mut Group, migration: Migration, image: &MetadataImage, now: Instant, rebalance: bool, records: &mut Vec<OffsetsRecord>) -> bool {
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
    if rebalance {
        crate::group::membership::prepare_rebalance(g, now, 0);
    }
    tracing::info!(group = %group_id, generation = g.generation, members = g.members.len(), rebalance, "consumer group downgraded to a classic group");
    crate::metrics::shard_metrics::with(|m| m.group_conversions.1 += 1);
    true
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerProtocolSubscription, GroupId, SyncGroupRequest, TopicName};
    use kafka_protocol::protocol::Encodable;

    use super::super::classic_member::{self, ClassicJoin};
    use super::super::heartbeat::{self, Settings};
    use super::*;
    use crate::cluster::image::{PartitionMeta, TopicMeta};
    use crate::protocol::strings::str_bytes;

    const BOTH: Migration = Migration { policy: MigrationPolicy::Bidirectional, max_size: 100 };

    fn image() -> MetadataImage {
        let mut img = MetadataImage::default();
        let partitions = (0..4).map(|p| PartitionMeta::unassigned(p, 0)).collect();
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions, configs: Default::default() });
        img
    }

    fn subscription(owned: &[i32]) -> Bytes {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![str_bytes("t")])
            .with_owned_partitions(vec![OwnedTopic::default().with_topic(TopicName(str_bytes("t"))).with_partitions(owned.to_vec())]);
        let mut b = BytesMut::new();
        b.put_i16(1);
        s.encode(&mut b, 1).unwrap();
        b.freeze()
    }

    fn assignment(ps: &[i32], img: &MetadataImage) -> Bytes {
        let mut a = super::super::group::Assignment::new();
        a.insert(uuid::Uuid::from_bytes([1; 16]), ps.iter().copied().collect());
        embedded_protocol::serialize_assignment(1, &a, img)
    }

    /// A Stable classic group of generation 5: a owns t-0 and t-1, b t-2 and t-3.
    fn classic_group(img: &MetadataImage) -> Group {
        let mut g = Group::new("g".into(), 0);
        g.protocol_type = Some("consumer".into());
        g.protocol = Some("range".into());
        g.generation = 5;
        g.set_state(GroupState::Stable);
        for (id, ps) in [("a", [0, 1]), ("b", [2, 3])] {
            g.members.insert(
                id.into(),
                Member {
                    id: id.into(),
                    instance_id: None,
                    client_id: "classic".into(),
                    client_host: "/h".into(),
                    session_timeout_ms: 45_000,
                    rebalance_timeout_ms: 60_000,
                    protocols: vec![("range".into(), subscription(&[])), ("cooperative-sticky".into(), subscription(&[]))],
                    assignment: assignment(&ps, img),
                    last_heartbeat: Instant::now(),
                    join_waiter: None,
                    sync_waiter: None,
                    is_new: false,
                },
            );
        }
        g.offsets.entry("t".into()).or_default().insert(0, crate::group::state::CommittedOffset::new(Default::default(), 0));
        g
    }

    fn consumer_join(member: &str) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("g")))
            .with_member_id(str_bytes(member))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(str_bytes("t"))]))
            .with_topic_partitions(Some(Vec::new()))
    }

    fn settings(migration: Migration) -> Settings {
        Settings { heartbeat_interval_ms: 5000, max_size: 100, migration }
    }

    fn classic_join(member: &str, owned: &[i32]) -> ClassicJoin {
        ClassicJoin {
            member_id: member.into(),
            instance_id: None,
            client_id: "classic".into(),
            client_host: "/h".into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription(owned))],
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 60_000,
            version: 9,
        }
    }

    fn sync(member: &str, generation: i32) -> SyncGroupRequest {
        SyncGroupRequest::default().with_group_id(GroupId(str_bytes("g"))).with_member_id(str_bytes(member)).with_generation_id(generation)
    }

    fn partitions(bytes: &Bytes) -> Vec<i32> {
        let (named, _) = embedded_protocol::parse_assignment(bytes).unwrap();
        let mut ps: Vec<i32> = named.into_iter().flat_map(|(_, ps)| ps).collect();
        ps.sort_unstable();
        ps
    }

    /// No partition is owned by two members.
    fn exclusive(g: &Group) {
        let mut seen = std::collections::HashSet::new();
        for m in g.consumer.as_deref().unwrap().members.values() {
            for k in m.owned() {
                assert!(seen.insert(k), "{k:?} owned twice");
            }
        }
    }

    #[test]
    fn upgrade_then_classic_members_rebalance_then_downgrade() {
        let img = image();
        let now = Instant::now();
        let mut g = classic_group(&img);
        let mut log = Vec::new();

        // A consumer-protocol member joins: the group is upgraded, a and b keep their
        // partitions at epoch 5; c joins at epoch 6 and waits for what it is given.
        let (resp, recs) = heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(BOTH), now).unwrap();
        log.extend(recs);
        assert_eq!(resp.member_epoch, 6);
        assert!(matches!(&log[0], OffsetsRecord::Group { value: None, .. }), "the classic form's tombstone first");
        assert!(g.members.is_empty() && g.state == GroupState::Empty && g.offsets.len() == 1, "classic form gone, offsets kept");
        let c = g.consumer.as_deref().unwrap();
        assert_eq!((c.group_epoch, c.assignment_epoch), (6, 6));
        assert!(c.members["a"].uses_classic_protocol() && !c.members["c"].uses_classic_protocol());
        assert_eq!(c.members["a"].member_epoch, 5);
        exclusive(&g);

        // The classic members are told to rejoin; an eager one (owning nothing) gets its
        // new target at once, the partitions still held by b excepted.
        assert_eq!(classic_member::heartbeat(&mut g, "a", None, 5, now), ErrorCode::REBALANCE_IN_PROGRESS);
        assert_eq!(classic_member::heartbeat(&mut g, "a", None, 4, now), ErrorCode::ILLEGAL_GENERATION);
        assert_eq!(classic_member::heartbeat(&mut g, "c", None, 6, now), ErrorCode::UNKNOWN_MEMBER_ID, "c speaks the consumer protocol");
        let (j, recs) = classic_member::join(&mut g, classic_join("a", &[]), &img, BOTH, now);
        log.extend(recs);
        assert_eq!((j.error_code, j.generation_id, j.leader.as_str(), j.protocol_name.as_deref()), (0, 6, "", Some("range")));
        assert_eq!(classic_member::sync(&mut g, &sync("a", 5), &img, now).error_code, ErrorCode::ILLEGAL_GENERATION.code());
        let s = classic_member::sync(&mut g, &sync("a", 6), &img, now);
        assert_eq!(s.error_code, 0);
        let a_first = partitions(&s.assignment);
        exclusive(&g);
        // A cooperative one (still owning its partitions) keeps its epoch and is asked to revoke.
        let (j, recs) = classic_member::join(&mut g, classic_join("b", &[2, 3]), &img, BOTH, now);
        log.extend(recs);
        let c = g.consumer.as_deref().unwrap();
        let b = &c.members["b"];
        if b.pending_revocation.is_empty() {
            assert_eq!(j.generation_id, 6);
        } else {
            assert_eq!((j.generation_id, b.state), (5, MemberState::UnrevokedPartitions));
            let kept = partitions(&classic_member::sync(&mut g, &sync("b", 5), &img, now).assignment);
            assert_eq!(classic_member::heartbeat(&mut g, "b", None, 5, now), ErrorCode::REBALANCE_IN_PROGRESS);
            let (j, recs) = classic_member::join(&mut g, classic_join("b", &kept), &img, BOTH, now);
            log.extend(recs);
            assert_eq!(j.generation_id, 6);
        }
        exclusive(&g);
        // Everyone converges: c takes what a and b released; each partition once.
        for _ in 0..3 {
            for id in ["a", "b"] {
                if classic_member::heartbeat(&mut g, id, None, 6, now) == ErrorCode::REBALANCE_IN_PROGRESS {
                    let owned: Vec<i32> = g.consumer.as_deref().unwrap().members[id].assigned.values().flatten().copied().collect();
                    let (_, recs) = classic_member::join(&mut g, classic_join(id, &owned), &img, BOTH, now);
                    log.extend(recs);
                }
            }
            let owned = g.consumer.as_deref().unwrap().members["c"].assigned.clone();
            let beat = consumer_join("c").with_member_epoch(6).with_topic_partitions(Some(
                owned
                    .iter()
                    .map(|(t, ps)| {
                        kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions::default()
                            .with_topic_id(*t)
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect(),
            ));
            let (_, recs) = heartbeat::heartbeat(&mut g, &beat, "c", "/h", &img, settings(BOTH), now).unwrap();
            log.extend(recs);
            exclusive(&g);
        }
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.state(), super::super::group::ConsumerGroupState::Stable, "{:?}", c.members);
        let total: usize = c.members.values().map(|m| m.assigned.values().map(|s| s.len()).sum::<usize>()).sum();
        assert_eq!(total, 4);
        assert!(!a_first.is_empty());
        // A classic member commits with its generation, in any version.
        assert_eq!(c.validate_offset_commit("a", 6, 7, []), Ok(()));
        assert_eq!(c.validate_offset_commit("a", 7, 7, []), Err(ErrorCode::ILLEGAL_GENERATION));
        // Described as classic (0) and consumer (1).
        let d = super::super::describe::describe("g", Some(&g), false, &img);
        let types: Vec<(String, i8)> = d.members.iter().map(|m| (m.member_id.to_string(), m.member_type)).collect();
        assert_eq!(types, vec![("a".into(), 0), ("b".into(), 0), ("c".into(), 1)]);

        // A replay of the records rebuilds the same consumer group, classic members included.
        let replayed = replay(&log);
        let (x, y) = (g.consumer.as_deref().unwrap(), replayed.consumer.as_deref().unwrap());
        assert_eq!((y.group_epoch, y.assignment_epoch, &y.target), (x.group_epoch, x.assignment_epoch, &x.target));
        for (id, m) in &x.members {
            assert_eq!(y.members[id].metadata_value(), m.metadata_value(), "{id}");
            assert_eq!(y.members[id].current_assignment_value(), m.current_assignment_value(), "{id}");
        }
        assert_eq!(replayed.offsets.len(), 1, "the classic tombstone kept the offsets");

        // c leaves: only classic members are left, so the group turns classic again at
        // generation = the group epoch, each member assigned its target, and rebalances.
        let epoch = g.consumer.as_deref().unwrap().group_epoch;
        let targets: Vec<(String, Vec<i32>)> = g
            .consumer
            .as_deref()
            .unwrap()
            .target
            .iter()
            .filter(|(id, _)| *id != "c")
            .map(|(id, a)| (id.clone(), a.values().flatten().copied().collect()))
            .collect();
        let (_, recs) = heartbeat::leave(&mut g, &consumer_join("c").with_member_epoch(-1), BOTH, &img, now).unwrap();
        log.extend(recs);
        assert!(g.consumer.is_none());
        assert_eq!((g.generation, g.state, g.protocol.as_deref()), (epoch, GroupState::PreparingRebalance, Some("range")));
        for (id, ps) in targets {
            assert_eq!(partitions(&g.members[&id].assignment), ps, "{id}");
        }
        let replayed = replay(&log);
        assert!(replayed.consumer.is_none());
        assert_eq!((replayed.generation, replayed.members.len(), replayed.offsets.len()), (epoch, 2, 1));
    }

    #[test]
    fn the_policy_and_the_protocol_refuse_conversions() {
        let img = image();
        let now = Instant::now();
        for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
            let mut g = classic_group(&img);
            let e = heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(Migration { policy, max_size: 100 }), now).unwrap_err();
            assert_eq!(e, (ErrorCode::GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because online upgrade is disabled.".to_string()));
            assert_eq!(g.members.len(), 2, "still classic");
        }
        // A custom assignor's user data cannot be carried over.
        let mut g = classic_group(&img);
        let custom = kafka_protocol::messages::ConsumerProtocolAssignment::default().with_user_data(Some(Bytes::from_static(b"x")));
        let mut b = BytesMut::new();
        b.put_i16(1);
        custom.encode(&mut b, 1).unwrap();
        g.members.get_mut("a").unwrap().assignment = b.freeze();
        let e = heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(BOTH), now).unwrap_err();
        assert!(e.1.contains("an unsupported custom assignor is in use"), "{}", e.1);
        // Too many members for a consumer group.
        let mut g = classic_group(&img);
        let e = heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(Migration { policy: MigrationPolicy::Upgrade, max_size: 1 }), now)
            .unwrap_err();
        assert!(e.1.ends_with("because the group size exceeds the consumer group maximum size."), "{}", e.1);
        // Not the consumer embedded protocol (e.g. Connect).
        let mut g = classic_group(&img);
        g.protocol_type = Some("connect".into());
        let e = heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(BOTH), now).unwrap_err();
        assert!(e.1.ends_with("because the group does not use the consumer embedded protocol."), "{}", e.1);

        // Upgrade only: the last consumer member leaving leaves a consumer group of classic members.
        let upgrade = Migration { policy: MigrationPolicy::Upgrade, max_size: 100 };
        let mut g = classic_group(&img);
        heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(upgrade), now).unwrap();
        heartbeat::leave(&mut g, &consumer_join("c").with_member_epoch(-1), upgrade, &img, now).unwrap();
        assert_eq!(g.consumer.as_deref().map(|c| c.members.len()), Some(2));
        // The epoch was bumped without a target: the classic members are told to rejoin, and
        // a rejoin computes it, handing out c's partitions.
        let epoch = g.consumer.as_deref().unwrap().group_epoch;
        assert!(epoch > g.consumer.as_deref().unwrap().assignment_epoch);
        for id in ["a", "b"] {
            let generation = g.consumer.as_deref().unwrap().members[id].member_epoch;
            assert_eq!(classic_member::heartbeat(&mut g, id, None, generation, now), ErrorCode::REBALANCE_IN_PROGRESS, "{id}");
            let (j, _) = classic_member::join(&mut g, classic_join(id, &[]), &img, upgrade, now);
            assert_eq!(j.error_code, 0);
        }
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.assignment_epoch, epoch);
        assert_eq!(c.target.values().map(|a| a.values().map(|s| s.len()).sum::<usize>()).sum::<usize>(), 4, "every partition targeted");

        // Disabled: a classic JoinGroup into a consumer group is refused.
        let disabled = Migration { policy: MigrationPolicy::Disabled, max_size: 100 };
        let (j, recs) = classic_member::join(&mut g, classic_join("d", &[]), &img, disabled, now);
        assert_eq!((j.error_code, recs.len()), (ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code(), 0));
        // A new classic member first gets its id (KIP-394), then joins.
        let (j, _) = classic_member::join(&mut g, classic_join("", &[]), &img, upgrade, now);
        assert_eq!(j.error_code, ErrorCode::MEMBER_ID_REQUIRED.code());
        let id = j.member_id.to_string();
        let (j, _) = classic_member::join(&mut g, classic_join(&id, &[]), &img, upgrade, now);
        assert_eq!((j.error_code, j.member_id.as_str()), (0, id.as_str()));
        // A protocol no classic member supports is refused.
        let mut other = classic_join("e", &[]);
        other.protocols[0].0 = "roundrobin".into();
        assert_eq!(classic_member::join(&mut g, other, &img, upgrade, now).0.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code());
        // Malformed subscription.
        let mut bad = classic_join("e", &[]);
        bad.protocols[0].1 = Bytes::from_static(b"\x00\x01\x00");
        assert_eq!(classic_member::join(&mut g, bad, &img, upgrade, now).0.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code());
    }

    #[test]
    fn a_consumer_member_takes_a_classic_static_members_place_at_once() {
        let img = image();
        let now = Instant::now();
        let mut g = classic_group(&img);
        g.members.get_mut("a").unwrap().instance_id = Some("i".into());
        g.static_members.insert("i".into(), "a".into());
        heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(BOTH), now).unwrap();
        // The classic instance i (a, never released) is replaced by a consumer-protocol
        // member with the same instance id: no UNRELEASED_INSTANCE_ID between protocols.
        let (resp, _) =
            heartbeat::heartbeat(&mut g, &consumer_join("a2").with_instance_id(Some(str_bytes("i"))), "c", "/h", &img, settings(BOTH), now).unwrap();
        assert_eq!(resp.error_code, 0);
        let c = g.consumer.as_deref().unwrap();
        assert!(!c.members.contains_key("a") && !c.members["a2"].uses_classic_protocol());
        assert_eq!(c.static_members["i"], "a2");
        // Between two consumer-protocol members, the instance must be released first.
        let e = heartbeat::heartbeat(&mut g, &consumer_join("a3").with_instance_id(Some(str_bytes("i"))), "c", "/h", &img, settings(BOTH), now).unwrap_err();
        assert_eq!(e.0, ErrorCode::UNRELEASED_INSTANCE_ID);
    }

    /// The classic group after a consumer-protocol static member "i" (c) joined it, and
    /// the records so far.
    fn upgraded_with_static_member(img: &MetadataImage, now: Instant) -> (Group, Vec<OffsetsRecord>) {
        let mut g = classic_group(img);
        let (_, log) = heartbeat::heartbeat(&mut g, &consumer_join("c").with_instance_id(Some(str_bytes("i"))), "c", "/h", img, settings(BOTH), now).unwrap();
        let c = g.consumer.as_deref().unwrap();
        assert_eq!((c.group_epoch, c.assignment_epoch, c.static_members["i"].as_str()), (6, 6, "c"));
        (g, log)
    }

    #[test]
    fn a_classic_join_taking_the_last_consumer_members_instance_downgrades() {
        let img = image();
        let now = Instant::now();

        // Same subscription, target up to date: the group turns classic at once and stays
        // Stable (Kafka's static-replacement downgrade), the joiner holding c's target.
        let (mut g, mut log) = upgraded_with_static_member(&img, now);
        let c_target: Vec<i32> = g.consumer.as_deref().unwrap().target["c"].values().flatten().copied().collect();
        let join = ClassicJoin { instance_id: Some("i".into()), ..classic_join("", &[]) };
        let (resp, recs) = classic_member::join(&mut g, join, &img, BOTH, now);
        log.extend(recs);
        assert_eq!((resp.error_code, resp.generation_id), (0, 6));
        let joiner = resp.member_id.to_string();
        assert!(!joiner.is_empty() && joiner != "c");
        assert!(g.consumer.is_none(), "a classic group again");
        assert_eq!((g.generation, g.state, g.protocol.as_deref()), (6, GroupState::Stable, Some("range")));
        assert_eq!(g.members.keys().cloned().collect::<std::collections::BTreeSet<_>>(), ["a".to_string(), "b".into(), joiner.clone()].into());
        assert_eq!(g.static_members["i"], joiner);
        assert_eq!(partitions(&g.members[&joiner].assignment), c_target);
        assert!(matches!(log.last(), Some(OffsetsRecord::Group { value: Some(_), .. })), "the classic group's record last");
        let replayed = replay(&log);
        assert!(replayed.consumer.is_none());
        assert_eq!((replayed.generation, replayed.members.len(), replayed.static_members.get("i")), (6, 3, Some(&joiner)));
        assert_eq!(partitions(&replayed.members[&joiner].assignment), c_target);

        // A new subscription: the classic group rebalances at once.
        let (mut g, _) = upgraded_with_static_member(&img, now);
        let mut b = BytesMut::new();
        b.put_i16(1);
        ConsumerProtocolSubscription::default().with_topics(vec![str_bytes("t"), str_bytes("u")]).encode(&mut b, 1).unwrap();
        let join = ClassicJoin { instance_id: Some("i".into()), protocols: vec![("range".into(), b.freeze())], ..classic_join("", &[]) };
        assert_eq!(classic_member::join(&mut g, join, &img, BOTH, now).0.error_code, 0);
        assert!(g.consumer.is_none());
        assert_eq!(g.state, GroupState::PreparingRebalance);

        // Policy `upgrade`: the joiner takes c's place and the group stays a consumer group
        // of classic members.
        let upgrade = Migration { policy: MigrationPolicy::Upgrade, max_size: 100 };
        let (mut g, _) = upgraded_with_static_member(&img, now);
        let join = ClassicJoin { instance_id: Some("i".into()), ..classic_join("", &[]) };
        let (resp, _) = classic_member::join(&mut g, join, &img, upgrade, now);
        let c = g.consumer.as_deref().expect("still a consumer group");
        assert!(c.members[resp.member_id.as_str()].uses_classic_protocol() && !c.members.contains_key("c"));

        // Not the last consumer-protocol member (d is another): no downgrade.
        let (mut g, _) = upgraded_with_static_member(&img, now);
        heartbeat::heartbeat(&mut g, &consumer_join("d"), "c", "/h", &img, settings(BOTH), now).unwrap();
        let join = ClassicJoin { instance_id: Some("i".into()), ..classic_join("", &[]) };
        assert_eq!(classic_member::join(&mut g, join, &img, BOTH, now).0.error_code, 0);
        assert!(g.consumer.is_some(), "d still speaks the consumer protocol");
    }

    #[test]
    fn classic_members_are_fenced_by_their_own_timers() {
        let img = image();
        let now = Instant::now();
        let mut g = classic_group(&img);
        heartbeat::heartbeat(&mut g, &consumer_join("c"), "c", "/h", &img, settings(BOTH), now).unwrap();
        // a joins but never syncs: fenced after its rebalance timeout (60 s), not before.
        classic_member::join(&mut g, classic_join("a", &[]), &img, BOTH, now);
        assert!(heartbeat::expire(&mut g, now + std::time::Duration::from_secs(30), 45_000, BOTH, &img).is_empty());
        // b is told to rejoin and never does: fenced after its rebalance timeout too. c's
        // consumer session (45 s default here) is kept alive meanwhile.
        assert_eq!(classic_member::heartbeat(&mut g, "b", None, 5, now), ErrorCode::REBALANCE_IN_PROGRESS);
        let later = now + std::time::Duration::from_secs(61);
        let c_beat = consumer_join("c").with_member_epoch(6).with_topic_partitions(None).with_subscribed_topic_names(None).with_rebalance_timeout_ms(-1);
        heartbeat::heartbeat(&mut g, &c_beat, "c", "/h", &img, settings(BOTH), later).unwrap();
        let recs = heartbeat::expire(&mut g, later, 45_000, BOTH, &img);
        assert!(!recs.is_empty());
        let c = g.consumer.as_deref().unwrap();
        assert_eq!(c.members.keys().collect::<Vec<_>>(), vec!["c"], "a (no sync) and b (no rejoin) fenced");
    }

    /// A coordinator's replay of `log` (through its stored bytes) after a commit of t-0.
    fn replay(log: &[OffsetsRecord]) -> Group {
        let coordinator = crate::group::Coordinator::default();
        let commit = OffsetsRecord::Offset { group: "g".into(), topic: "t".into(), partition: 0, value: Some(Default::default()) };
        for (offset, r) in std::iter::once(&commit).chain(log).enumerate() {
            let parsed = OffsetsRecord::parse(Some(r.key()), r.value()).unwrap();
            coordinator.replay(0, parsed, offset as i64, None);
        }
        let mut g = coordinator.groups.borrow_mut().remove("g").expect("group replayed");
        if let Some(c) = g.consumer.as_deref_mut() {
            super::super::finish_load(c, Instant::now());
        }
        g
    }
}
