//! KIP-848 consumer groups (`group.protocol=consumer`), as Apache Kafka 4.1 runs them:
//! the coordinator owns the assignment. Members heartbeat (ConsumerGroupHeartbeat) with
//! their subscription and owned partitions; a change of membership, subscription or
//! subscribed topics' metadata bumps the group epoch; a new epoch gets a new target
//! assignment from a server-side assignor; each member then moves toward its target
//! (revoke first, receive a partition only once nobody else owns it).
//!
//! A consumer group is the same `Group` (state.rs) as a classic one, with its KIP-848
//! state in `Group::consumer`: one protocol per group id, committed offsets shared.
//!
//! - `group.rs`      members, group epoch, target assignment and epoch, ownership
//! - `heartbeat.rs`  join / heartbeat / leave / fencing / session expiry
//! - `reconcile.rs`  one member's current assignment → its target
//! - `subscription_regex.rs` regex subscriptions (SubscribedTopicRegex) matched against topics
//! - `classic_member.rs` members speaking the classic protocol inside a consumer group
//! - `migration.rs`  online upgrade (classic → consumer) and downgrade (group.consumer.migration.policy)
//! - `embedded_protocol.rs` the consumer embedded protocol (subscriptions, assignments) classic members speak
//! - `assignor/`     `uniform` (default) and `range`
//! - `describe.rs`   ConsumerGroupDescribe; what DescribeGroups / ListGroups report
//! - `consumer_group_records.rs` the group's records in `__consumer_offsets` (epoch, members, target
//!   and current assignments), replayed here (`replay`, `finish_load`)
//!
//! Part of `group/`: never imports `server::` or `controller::`.
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::coordinator::{append, Coordinator};
use super::ops::GroupReply;
use super::state::Group;
use crate::group::context::CoordinatorContext;
use crate::group::coordinator_records::OffsetsRecord;
use crate::partition::Partition;
use crate::protocol::ErrorCode;

pub mod assignor;
pub mod classic_member;
pub mod consumer_group_records;
pub mod describe;
pub mod embedded_protocol;
pub mod group;
pub mod heartbeat;
pub mod migration;
pub mod reconcile;
pub mod subscription_regex;

pub use group::ConsumerGroup;
use group::{ConsumerMember, MemberState};
pub use heartbeat::expire;

/// KIP-848 operations, run on the coordinating shard (inside `GroupOp::Consumer`).
pub enum ConsumerOp {
    Heartbeat {
        req: Box<ConsumerGroupHeartbeatRequest>,
        version: i16,
        client_id: String,
        client_host: String,
    },
    Describe {
        group_id: String,
        include_authorized_operations: bool,
    },
    /// OffsetFetch v9 naming a member: validated against the group, then fetched.
    FetchOffsets {
        group_id: String,
        member_id: Option<String>,
        member_epoch: i32,
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
}

pub enum ConsumerReply {
    Heartbeat(ConsumerGroupHeartbeatResponse),
    Describe(DescribedGroup),
}

/// The consumer group `group` while replaying, created if missing.
fn replayed(groups: &mut HashMap<String, Group>, group: String, partition: i32) -> &mut ConsumerGroup {
    let g = groups.entry(group.clone()).or_insert_with(|| Group::new(group, partition));
    g.consumer.get_or_insert_with(Box::default)
}

/// The consumer group `group` while replaying a tombstone (never created by one).
fn replayed_existing<'a>(groups: &'a mut HashMap<String, Group>, group: &str) -> Option<&'a mut ConsumerGroup> {
    groups.get_mut(group).and_then(|g| g.consumer.as_deref_mut())
}

/// Replays a consumer-group record while loading `__consumer_offsets` (in log order; the
/// latest record of each key wins, as after compaction). `finish_load` then rebuilds what
/// is derived from them.
pub fn replay(groups: &mut HashMap<String, Group>, partition: i32, rec: consumer_group_records::ConsumerRecord) {
    use consumer_group_records::ConsumerRecord as R;
    let now = Instant::now();
    match rec {
        R::GroupEpoch { group, epoch: Some(epoch), metadata_hash } => {
            let c = replayed(groups, group, partition);
            c.group_epoch = c.group_epoch.max(epoch);
            c.metadata_hash = metadata_hash;
        }
        R::GroupEpoch { group, epoch: None, .. } => {
            if let Some(g) = groups.get_mut(&group) {
                g.consumer = None;
            }
        }
        R::MemberMetadata { group, member, value: Some(v) } => {
            let c = replayed(groups, group, partition);
            c.members.entry(member.clone()).or_insert_with(|| ConsumerMember::new(member, now)).apply_metadata_value(v);
        }
        R::MemberMetadata { group, member, value: None } => {
            if let Some(c) = replayed_existing(groups, &group) {
                c.remove_member(&member);
            }
        }
        // The target assignment is stored rather than recomputed on load, so members are
        // not moved by a load (an assignor's result depends on the members' order and the
        // previous target).
        R::TargetAssignmentMetadata { group, assignment_epoch: Some(epoch) } => {
            replayed(groups, group, partition).assignment_epoch = epoch;
        }
        R::TargetAssignmentMetadata { group, assignment_epoch: None } => {
            if let Some(c) = replayed_existing(groups, &group) {
                c.assignment_epoch = 0;
            }
        }
        R::TargetAssignmentMember { group, member, partitions: Some(a) } => {
            replayed(groups, group, partition).target.insert(member, a);
        }
        R::TargetAssignmentMember { group, member, partitions: None } => {
            if let Some(c) = replayed_existing(groups, &group) {
                c.target.remove(&member);
            }
        }
        R::CurrentMemberAssignment { group, member, value: Some(v) } => {
            let c = replayed(groups, group, partition);
            c.members.entry(member.clone()).or_insert_with(|| ConsumerMember::new(member, now)).apply_current_assignment_value(v);
        }
        R::CurrentMemberAssignment { group, member, value: None } => {
            // Kafka resets the assignment; the member metadata tombstone that follows
            // removes the member.
            if let Some(m) = replayed_existing(groups, &group).and_then(|c| c.members.get_mut(&member)) {
                m.apply_current_assignment_value(consumer_group_records::CurrentAssignmentValue {
                    member_epoch: 0,
                    previous_member_epoch: 0,
                    state: MemberState::Stable.value(),
                    assigned_partitions: Default::default(),
                    partitions_pending_revocation: Default::default(),
                    assignment_epochs: Default::default(),
                });
            }
        }
        R::Ignored { .. } => {}
    }
}

/// After a replay: rebuilds what is derived from the stored records (static members,
/// partition owners, subscribed names) and restarts every member's session timer and
/// revocation deadline at load time, as classic groups do in `load_group_value`. The
/// subscribed topics' metadata is recomputed at the next heartbeat and compared with the
/// stored hash.
pub fn finish_load(c: &mut ConsumerGroup, now: Instant) {
    c.static_members.clear();
    c.owners.clear();
    // A target without its member (a record lost to a damaged log) is dropped.
    let members = &c.members;
    c.target.retain(|id, _| members.contains_key(id));
    for m in c.members.values_mut() {
        m.last_heartbeat = now;
        // A classic member has no revocation deadline (its join deadline, not stored,
        // starts again when it is next told to rejoin).
        m.revocation_deadline = (m.state == MemberState::UnrevokedPartitions && !m.uses_classic_protocol())
            .then(|| now + std::time::Duration::from_millis(u64::try_from(m.rebalance_timeout_ms).unwrap_or(0)));
        if let Some(iid) = &m.instance_id {
            c.static_members.insert(iid.clone(), m.id.clone());
        }
        let owned: Vec<_> = m.owned().collect();
        for k in owned {
            match c.owners.get(&k) {
                None => {
                    c.owners.insert(k, m.id.clone());
                }
                Some(other) if *other != m.id => {
                    // Stored data, not an invariant: a partition claimed by two members
                    // stays with the first, so ownership is exclusive again (reconcile.rs
                    // relies on it).
                    tracing::warn!(member = %m.id, owner = %other, partition = k.1, "partition owned by two members in the stored group; keeping the first owner");
                    for set in [&mut m.assigned, &mut m.pending_revocation] {
                        if let Some(ps) = set.get_mut(&k.0) {
                            ps.remove(&k.1);
                            if ps.is_empty() {
                                set.remove(&k.0);
                            }
                        }
                    }
                    m.assignment_epochs.remove(&k);
                }
                Some(_) => {}
            }
        }
    }
    c.refresh_subscribed_names();
    c.subscription_metadata.clear();
}

impl Coordinator {
    pub(super) async fn execute_consumer(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, op: ConsumerOp) -> GroupReply {
        match op {
            ConsumerOp::Heartbeat { req, version, client_id, client_host } => {
                let resp = self.consumer_heartbeat(ctx, p, *req, version, &client_id, &client_host).await;
                GroupReply::Consumer(Box::new(ConsumerReply::Heartbeat(resp)))
            }
            ConsumerOp::Describe { group_id, include_authorized_operations } => {
                let image = ctx.image();
                let groups = self.groups.borrow();
                let d = describe::describe(&group_id, groups.get(&group_id), include_authorized_operations, &image);
                GroupReply::Consumer(Box::new(ConsumerReply::Describe(d)))
            }
            ConsumerOp::FetchOffsets { group_id, member_id, member_epoch, topics } => {
                let check = self.groups.borrow().get(&group_id).and_then(|g| match (g.consumer.as_ref(), g.streams.as_ref()) {
                    (Some(c), _) => Some(c.validate_offset_fetch(member_id.as_deref(), member_epoch)),
                    (None, Some(s)) => Some(s.validate_offset_fetch(member_id.as_deref(), member_epoch)),
                    (None, None) => None,
                });
                if let Some(Err(e)) = check {
                    return GroupReply::Offsets(e, Vec::new());
                }
                let (e, topics) = self.fetch_offsets(&group_id, topics);
                GroupReply::Offsets(e, topics)
            }
        }
    }

    async fn consumer_heartbeat(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        req: ConsumerGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> ConsumerGroupHeartbeatResponse {
        if let Err(e) = heartbeat::validate(&req, version) {
            return heartbeat::error_response(e);
        }
        let cfg = &ctx.config;
        let group_id = req.group_id.0.to_string();
        let image = ctx.image();
        let (_, heartbeat_interval_ms) = ctx.consumer_timeouts(&image, &group_id);
        let settings = heartbeat::Settings { heartbeat_interval_ms, max_size: cfg.group_max_size, migration: ctx.migration() };
        let outcome: Result<(ConsumerGroupHeartbeatResponse, Vec<OffsetsRecord>), heartbeat::HeartbeatError> = {
            let mut groups = self.groups.borrow_mut();
            if !groups.contains_key(&group_id) {
                if req.member_epoch != 0 {
                    return heartbeat::error_response((ErrorCode::GROUP_ID_NOT_FOUND, format!("Consumer group {group_id} not found.")));
                }
                if groups.len() >= cfg.max_groups_per_shard {
                    tracing::warn!(shard = ctx.shard, limit = cfg.max_groups_per_shard, "group limit per shard reached (raise max_groups_per_shard)");
                    return heartbeat::error_response((ErrorCode::COORDINATOR_NOT_AVAILABLE, "Too many groups on this coordinator.".into()));
                }
                groups.insert(group_id.clone(), Group::new(group_id.clone(), p.index));
            }
            let Some(g) = groups.get_mut(&group_id) else { return heartbeat::error_response((ErrorCode::UNKNOWN_SERVER_ERROR, String::new())) };
            let r = if req.member_epoch < 0 {
                heartbeat::leave(g, &req, ctx.migration(), &image, Instant::now())
            } else {
                heartbeat::heartbeat(g, &req, client_id, client_host, &image, settings, Instant::now())
            };
            if g.is_disposable() {
                groups.remove(&group_id);
            }
            r
        };
        match outcome {
            Err(e) => heartbeat::error_response(e),
            Ok((resp, records)) => {
                if !records.is_empty() {
                    if let Err(e) = append(p, &records).await {
                        return heartbeat::error_response((e, "Could not store the group metadata.".into()));
                    }
                }
                resp
            }
        }
    }
}
