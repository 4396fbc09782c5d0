//! Streams groups on the coordinating shard: StreamsGroupHeartbeat runs against the groups
//! of this shard's `__consumer_offsets` partitions, beside the classic, consumer and share
//! groups (one group type per id, as Kafka: a streams group id is "not a streams group" to
//! the others' APIs and the reverse). Every change is written to `__consumer_offsets`
//! (`streams_group_records.rs`) before the member is answered, and replayed when a
//! coordinator loads the partition.
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse};

use super::configure::ConfiguredInternalTopic;
use super::group::StreamsGroup;
use super::heartbeat::{self, Beat, Settings};
use super::heartbeat_request::HeartbeatError;

use super::streams_group_records::StreamsRecord;
use crate::cluster::config_defs;
use crate::cluster::image::MetadataImage;
use crate::group::context::CoordinatorContext;
use crate::group::coordinator::{append, Coordinator};
use crate::group::coordinator_records::OffsetsRecord;
use crate::group::ops::GroupReply;
use crate::group::state::{Group, GroupState};
use crate::partition::Partition;
use crate::protocol::ErrorCode;
use crate::runtime::now_ms;

/// Streams-group operations, run on the coordinating shard (inside `GroupOp::Streams`).
pub enum StreamsOp {
    Heartbeat { req: Box<StreamsGroupHeartbeatRequest>, version: i16, client_id: String, client_host: String },
    Describe { group_id: String, include_authorized_operations: bool, version: i16 },
}

pub enum StreamsReply {
    /// The answer and the internal topics the broker should create.
    Heartbeat(Box<Result<(StreamsGroupHeartbeatResponse, Vec<ConfiguredInternalTopic>), HeartbeatError>>),
    Describe(Box<kafka_protocol::messages::streams_group_describe_response::DescribedGroup>),
}

impl Coordinator {
    pub(in crate::group) async fn execute_streams(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, op: StreamsOp) -> GroupReply {
        let reply = match op {
            StreamsOp::Heartbeat { req, version, client_id, client_host } => {
                StreamsReply::Heartbeat(Box::new(self.streams_heartbeat(ctx, p, &req, version, &client_id, &client_host).await))
            }
            StreamsOp::Describe { group_id, include_authorized_operations, version } => {
                let image = ctx.image();
                let partitions_of = |name: &str| image.topic(name).map(|t| t.partitions.len() as i32);
                let groups = self.groups.borrow();
                StreamsReply::Describe(Box::new(super::describe::describe(
                    &group_id,
                    groups.get(&group_id),
                    include_authorized_operations,
                    version,
                    &partitions_of,
                )))
            }
        };
        GroupReply::Streams(Box::new(reply))
    }

    /// One heartbeat; what it changed is stored (acks=all) before the member is answered.
    async fn streams_heartbeat(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        req: &StreamsGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> Result<(StreamsGroupHeartbeatResponse, Vec<ConfiguredInternalTopic>), HeartbeatError> {
        super::heartbeat_request::validate(req)?;
        let group_id = req.group_id.0.to_string();
        let outcome = {
            let image = ctx.image();
            let mut groups = self.groups.borrow_mut();
            let existed = groups.get(&group_id).is_some_and(|g| g.streams.is_some());
            if !groups.contains_key(&group_id) {
                if req.member_epoch != 0 {
                    return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Streams group {group_id} not found.")));
                }
                if groups.len() >= ctx.config.max_groups_per_shard {
                    tracing::warn!(shard = ctx.shard, limit = ctx.config.max_groups_per_shard, "group limit per shard reached (raise max_groups_per_shard)");
                    return Err((ErrorCode::COORDINATOR_NOT_AVAILABLE, "Too many groups on this coordinator.".into()));
                }
                groups.insert(group_id.clone(), Group::new(group_id.clone(), p.index));
            }
            let g = groups.get_mut(&group_id).expect("inserted above");
            if g.streams.is_none() && !classic_and_empty(g) {
                // A consumer or share group, or a classic one with members.
                return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a streams group.")));
            }
            let mut streams = g.streams.take().map(|b| *b).unwrap_or_default();
            let partitions_of = |name: &str| image.topic(name).map(|t| t.partitions.len() as i32);
            let beat = Beat {
                group_id: &group_id,
                version,
                client_id,
                client_host,
                now: Instant::now(),
                now_ms: now_ms(),
                partitions_of: &partitions_of,
                settings: settings(ctx, &image, &group_id),
            };
            let outcome = heartbeat::heartbeat(&mut streams, existed, req, &beat);
            // A group that never took a member stays unknown (as before the heartbeat).
            if existed || outcome.is_ok() {
                if !existed {
                    // An empty classic group (simple, or left by its last member) becomes
                    // the streams group, keeping its committed offsets (Kafka 4.4).
                    forget_classic_state(g);
                }
                g.streams = Some(Box::new(streams));
            }
            outcome?
        };
        if !outcome.records.is_empty() {
            let records: Vec<OffsetsRecord> = outcome.records.into_iter().map(OffsetsRecord::Streams).collect();
            // As the other groups' heartbeats: the change stays in memory and the member is
            // told to retry; its next heartbeat writes the group's state again.
            append(p, &records).await.map_err(|e| (e, "Could not store the streams group metadata.".to_string()))?;
        }
        Ok((outcome.response, outcome.internal_topics_to_create))
    }
}

/// Whether `g` is a classic group without members (or a new group): Kafka converts it to a
/// streams group on a first streams heartbeat.
fn classic_and_empty(g: &Group) -> bool {
    g.consumer.is_none() && g.share.is_none() && g.size() == 0 && g.state == GroupState::Empty
}

/// Drops what an empty classic group kept of its protocol once it is a streams group.
/// Its committed offsets stay.
fn forget_classic_state(g: &mut Group) {
    g.generation = 0;
    g.protocol_type = None;
    g.protocol = None;
    g.leader = None;
    g.initial_delay_until = None;
}

/// The heartbeat settings of `group_id`: its `streams.*` group configs, else the
/// broker's `group.streams.*` defaults.
fn settings(ctx: &CoordinatorContext, image: &MetadataImage, group_id: &str) -> Settings {
    let c = &ctx.config;
    let int = |key: &str, default: i32| config_defs::group_int(image, group_id, key).unwrap_or(default);
    Settings {
        session_timeout_ms: u64::try_from(int(config_defs::STREAMS_SESSION_TIMEOUT_MS, c.group_streams_session_timeout_ms)).unwrap_or(0),
        heartbeat_interval_ms: int(config_defs::STREAMS_HEARTBEAT_INTERVAL_MS, c.group_streams_heartbeat_interval_ms),
        num_standby_replicas: u32::try_from(int(config_defs::STREAMS_NUM_STANDBY_REPLICAS, c.group_streams_num_standby_replicas)).unwrap_or(0),
        initial_rebalance_delay_ms: u64::try_from(int(config_defs::STREAMS_INITIAL_REBALANCE_DELAY_MS, c.group_streams_initial_rebalance_delay_ms))
            .unwrap_or(0),
        max_size: c.group_max_size,
        rack_aware_assignment_tags: config_defs::streams_rack_aware_assignment_tags(image, group_id)
            .unwrap_or_else(|| c.group_streams_rack_aware_assignment_tags.clone()),
        ..Settings::default()
    }
}

/// A group's session timeout (its streams.session.timeout.ms, else the broker's).
pub fn session_timeout(ctx: &CoordinatorContext, image: &MetadataImage, group_id: &str) -> std::time::Duration {
    std::time::Duration::from_millis(settings(ctx, image, group_id).session_timeout_ms)
}

/// Session and revocation expiry of `g`'s streams members (the coordinator's tick).
pub fn expire(g: &mut Group, now: Instant) -> (Vec<String>, Vec<OffsetsRecord>) {
    let group_id = g.id.clone();
    match g.streams.as_deref_mut() {
        Some(s) => {
            let (gone, records) = heartbeat::expire(s, &group_id, now);
            (gone, records.into_iter().map(OffsetsRecord::Streams).collect())
        }
        None => (Vec::new(), Vec::new()),
    }
}

/// Replays a streams-group record while loading `__consumer_offsets`; a tombstone never
/// creates a group, and the group metadata tombstone removes it.
pub fn replay(groups: &mut HashMap<String, Group>, partition: i32, rec: StreamsRecord, now: Instant) {
    let group = match &rec {
        StreamsRecord::Ignored { .. } => return,
        StreamsRecord::GroupMetadata { group, value: None } => {
            if let Some(g) = groups.get_mut(group) {
                g.streams = None;
            }
            return;
        }
        StreamsRecord::GroupMetadata { group, .. }
        | StreamsRecord::MemberMetadata { group, .. }
        | StreamsRecord::TargetAssignmentMetadata { group, .. }
        | StreamsRecord::TargetAssignmentMember { group, .. }
        | StreamsRecord::CurrentMemberAssignment { group, .. }
        | StreamsRecord::Topology { group, .. } => group.clone(),
    };
    let tombstone = match &rec {
        StreamsRecord::MemberMetadata { value, .. } => value.is_none(),
        StreamsRecord::TargetAssignmentMember { tasks, .. } => tasks.is_none(),
        StreamsRecord::CurrentMemberAssignment { value, .. } => value.is_none(),
        StreamsRecord::Topology { topology, .. } => topology.is_none(),
        StreamsRecord::TargetAssignmentMetadata { value, .. } => value.is_none(),
        _ => false,
    };
    if tombstone {
        if let Some(s) = groups.get_mut(&group).and_then(|g| g.streams.as_deref_mut()) {
            s.replay(&rec, now);
        }
        return;
    }
    let g = groups.entry(group.clone()).or_insert_with(|| Group::new(group, partition));
    if g.streams.is_none() {
        // Written after the classic group's records: it was converted (empty) then.
        forget_classic_state(g);
    }
    g.streams.get_or_insert_with(Box::default).replay(&rec, now);
}

/// After a load: the replayed members' sessions start now, and a member that must revoke
/// gets its rebalance timeout from now.
pub fn finish_load(g: &mut Group, now: Instant, session: std::time::Duration) {
    let Some(s) = g.streams.as_deref_mut() else { return };
    // A target without its member (a record lost to a damaged log) is dropped.
    let members: Vec<String> = s.members.keys().cloned().collect();
    s.targets.retain(|id, _| members.contains(id));
    for m in s.members.values_mut() {
        m.session_deadline = now + session;
        m.revocation_deadline = (m.assignment.state == super::reconcile::MemberState::UnrevokedTasks)
            .then(|| now + std::time::Duration::from_millis(u64::try_from(m.metadata.rebalance_timeout_ms).unwrap_or(0)));
    }
}

/// The records that delete streams group `group` (DeleteGroups of an empty group), in
/// Kafka's order after the members' (none, the group being empty).
pub fn group_tombstones(group: &str) -> [OffsetsRecord; 3] {
    let group = group.to_string();
    [
        OffsetsRecord::Streams(StreamsRecord::TargetAssignmentMetadata { group: group.clone(), value: None }),
        OffsetsRecord::Streams(StreamsRecord::GroupMetadata { group: group.clone(), value: None }),
        OffsetsRecord::Streams(StreamsRecord::Topology { group, topology: None }),
    ]
}

/// Whether `image` lets the group's members heartbeat (streams.version >= 1).
pub fn enabled(image: &MetadataImage) -> bool {
    image.features.streams_groups_enabled()
}

/// The streams group of `g`, if it is one (tests).
pub fn streams_of(g: &Group) -> Option<&StreamsGroup> {
    g.streams.as_deref()
}
