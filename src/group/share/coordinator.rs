//! Share groups on the coordinating shard: ShareGroupHeartbeat and ShareGroupDescribe
//! run against the groups of this shard's `__consumer_offsets` partitions, beside the
//! classic and consumer groups (one group type per id, as Kafka: a share group id is
//! "not a consumer group" and the reverse).
//!
//! Not durable yet: a share group's membership lives in memory on its coordinator, so a
//! coordinator restart or move loses it and members rejoin (their next heartbeat gets
//! UNKNOWN_MEMBER_ID; Kafka's clients rejoin at epoch 0). Kafka writes ShareGroup*
//! records to `__consumer_offsets`; that is the next step (see `mod.rs`).
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::share_group_describe_response::{Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{GroupId, TopicName};
use uuid::Uuid;

use super::share_group::{validate, ShareGroupSettings, ShareHeartbeat, ShareHeartbeatAnswer, ShareHeartbeatError};
use super::simple_assignor::Assignment;
use crate::cluster::image::MetadataImage;
use crate::group::context::CoordinatorContext;
use crate::group::coordinator::Coordinator;
use crate::group::ops::GroupReply;
use crate::group::state::Group;
use crate::partition::Partition;
use crate::protocol::acl_operations::{self, NOT_REQUESTED as OPERATIONS_NOT_REQUESTED};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// The simple assignor's name, as describes report it.
pub const SIMPLE_ASSIGNOR: &str = "simple";

/// Share-group operations, run on the coordinating shard (inside `GroupOp::Share`).
pub enum ShareOp {
    Heartbeat { group_id: String, heartbeat: ShareHeartbeat },
    Describe { group_id: String, include_authorized_operations: bool },
}

pub enum ShareReply {
    Heartbeat(Result<ShareHeartbeatAnswer, ShareHeartbeatError>),
    Describe(DescribedGroup),
}

/// A topic's id and partition count in `image`.
pub fn topic_in(image: &MetadataImage, name: &str) -> Option<(Uuid, i32)> {
    image.topic(name).map(|t| (Uuid::from_bytes(t.topic_id), t.partitions.len() as i32))
}

impl Coordinator {
    pub(in crate::group) fn execute_share(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, op: ShareOp) -> GroupReply {
        let reply = match op {
            ShareOp::Heartbeat { group_id, heartbeat } => ShareReply::Heartbeat(self.share_heartbeat(ctx, p, &group_id, heartbeat)),
            ShareOp::Describe { group_id, include_authorized_operations } => {
                let image = ctx.image();
                ShareReply::Describe(describe(&group_id, self.groups.borrow().get(&group_id), include_authorized_operations, &image))
            }
        };
        GroupReply::Share(Box::new(reply))
    }

    fn share_heartbeat(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        group_id: &str,
        hb: ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, ShareHeartbeatError> {
        validate(group_id, &hb)?;
        let image = ctx.image();
        let settings = ShareGroupSettings::default();
        let mut groups = self.groups.borrow_mut();
        if !groups.contains_key(group_id) {
            if hb.member_epoch != 0 {
                return Err((ErrorCode::GROUP_ID_NOT_FOUND, Some(format!("Group {group_id} not found."))));
            }
            if groups.len() >= ctx.config.max_groups_per_shard {
                tracing::warn!(shard = ctx.shard, limit = ctx.config.max_groups_per_shard, "group limit per shard reached (raise max_groups_per_shard)");
                return Err((ErrorCode::COORDINATOR_NOT_AVAILABLE, Some("Too many groups on this coordinator.".into())));
            }
            groups.insert(group_id.to_string(), Group::new(group_id.to_string(), p.index));
        }
        let g = groups.get_mut(group_id).expect("inserted above");
        if g.share.is_none() {
            // Any other group by that id, even an empty one, is not a share group (Kafka).
            let fresh = g.consumer.is_none() && g.size() == 0 && g.offsets.is_empty() && g.generation == 0 && g.protocol_type.is_none();
            if !fresh {
                return Err((ErrorCode::GROUP_ID_NOT_FOUND, Some(format!("Group {group_id} is not a share group."))));
            }
            g.share = Some(Box::default());
        }
        let share = g.share.as_deref_mut().expect("set above");
        let topic = |name: &str| topic_in(&image, name);
        share.heartbeat(group_id, hb, &topic, &settings, Instant::now())
    }
}

/// Session expiry of `g`'s share members (the coordinator's tick); the ids removed.
pub fn expire(g: &mut Group, image: &MetadataImage, now: Instant) -> Vec<String> {
    match g.share.as_deref_mut() {
        Some(s) => s.expire(now, &|name: &str| topic_in(image, name)),
        None => Vec::new(),
    }
}

fn described_assignment(a: &Assignment, image: &MetadataImage) -> DescribedAssignment {
    DescribedAssignment::default().with_topic_partitions(
        a.iter()
            .map(|(t, ps)| {
                let name = image.topic_by_id(t.as_bytes()).map(|m| m.name.as_str()).unwrap_or("");
                TopicPartitions::default().with_topic_id(*t).with_topic_name(TopicName(str_bytes(name))).with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// ShareGroupDescribe of one group, as Kafka 4.4 answers it.
pub fn describe(group_id: &str, g: Option<&Group>, include_authorized_operations: bool, image: &MetadataImage) -> DescribedGroup {
    let base = DescribedGroup::default().with_group_id(GroupId(str_bytes(group_id))).with_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let Some(g) = g else {
        return base.with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code()).with_error_message(Some(str_bytes(&format!("Group {group_id} not found."))));
    };
    let Some(s) = g.share.as_deref() else {
        return base
            .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code())
            .with_error_message(Some(str_bytes(&format!("Group {group_id} is not a share group."))));
    };
    let members = s
        .members
        .values()
        .map(|m| {
            Member::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                .with_member_epoch(m.member_epoch)
                .with_client_id(str_bytes(&m.client_id))
                .with_client_host(str_bytes(&m.client_host))
                .with_subscribed_topic_names(m.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n))).collect())
                .with_assignment(described_assignment(&m.assignment, image))
        })
        .collect();
    base.with_group_state(str_bytes(s.state().name()))
        .with_group_epoch(s.group_epoch)
        .with_assignment_epoch(s.assignment_epoch)
        .with_assignor_name(str_bytes(SIMPLE_ASSIGNOR))
        .with_members(members)
        .with_authorized_operations(acl_operations::if_requested(include_authorized_operations, acl_operations::GROUP))
}
