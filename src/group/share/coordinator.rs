//! Share groups on the coordinating shard: ShareGroupHeartbeat and ShareGroupDescribe
//! run against the groups of this shard's `__consumer_offsets` partitions, beside the
//! classic and consumer groups (one group type per id, as Kafka: a share group id is
//! "not a consumer group" and the reverse).
//!
//! Durable as Kafka's: every change of a share group (epoch, members, target and current
//! assignments) is written to `__consumer_offsets` as Kafka 4.4's ShareGroup* records
//! (`share_group_records.rs`) before the heartbeat is answered, and replayed when a
//! coordinator loads the partition, so members keep heartbeating into their group across
//! a coordinator restart or move.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::share_group_describe_response::{Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponse, GroupId, TopicName};
use uuid::Uuid;

use super::share_group::{validate, ShareGroupSettings, ShareHeartbeat, ShareHeartbeatAnswer, ShareHeartbeatError, ShareInitialize};
use super::share_group_records::ShareRecord;
use super::simple_assignor::Assignment;
use super::state_coordinator::ShareStateOpKind;
use super::state_records::SharePartitionKey;
use crate::cluster::config_defs;
use crate::cluster::image::MetadataImage;
use crate::group::context::CoordinatorContext;
use crate::group::coordinator::{append, Coordinator};
use crate::group::coordinator_records::OffsetsRecord;
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
    Heartbeat {
        group_id: String,
        heartbeat: ShareHeartbeat,
    },
    Describe {
        group_id: String,
        include_authorized_operations: bool,
    },
    /// DescribeShareGroupOffsets with no topics: the initialized share-partitions.
    InitializedPartitions {
        group_id: String,
    },
    /// AlterShareGroupOffsets: (topic name, [(partition, start offset)]).
    AlterOffsets {
        group_id: String,
        topics: Vec<(String, Vec<(i32, i64)>)>,
    },
    /// DeleteShareGroupOffsets: topic names.
    DeleteOffsets {
        group_id: String,
        topics: Vec<String>,
    },
}

pub enum ShareReply {
    Heartbeat(Result<ShareHeartbeatAnswer, ShareHeartbeatError>),
    Describe(DescribedGroup),
    InitializedPartitions(BTreeMap<Uuid, BTreeSet<i32>>),
    AlteredOffsets(AlterShareGroupOffsetsResponse),
    DeletedOffsets(DeleteShareGroupOffsetsResponse),
}

/// A topic's id and partition count in `image`.
pub fn topic_in(image: &MetadataImage, name: &str) -> Option<(Uuid, i32)> {
    image.topic(name).map(|t| (Uuid::from_bytes(t.topic_id), t.partitions.len() as i32))
}

impl Coordinator {
    pub(in crate::group) async fn execute_share(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, op: ShareOp) -> GroupReply {
        let reply = match op {
            ShareOp::Heartbeat { group_id, heartbeat } => ShareReply::Heartbeat(self.share_heartbeat(ctx, p, &group_id, heartbeat).await),
            ShareOp::Describe { group_id, include_authorized_operations } => {
                let image = ctx.image();
                ShareReply::Describe(describe(&group_id, self.groups.borrow().get(&group_id), include_authorized_operations, &image))
            }
            ShareOp::InitializedPartitions { group_id } => ShareReply::InitializedPartitions(self.initialized_share_partitions(&group_id)),
            ShareOp::AlterOffsets { group_id, topics } => ShareReply::AlteredOffsets(self.alter_share_offsets(ctx, p, &group_id, topics).await),
            ShareOp::DeleteOffsets { group_id, topics } => ShareReply::DeletedOffsets(self.delete_share_offsets(ctx, p, &group_id, topics).await),
        };
        GroupReply::Share(Box::new(reply))
    }

    /// One heartbeat; what it changed is stored (acks=all) before the member is answered,
    /// as Kafka's coordinator answers only once its records are committed.
    async fn share_heartbeat(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        group_id: &str,
        hb: ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, ShareHeartbeatError> {
        validate(group_id, &hb)?;
        let (answer, records) = {
            let image = ctx.image();
            let settings = group_settings(&image, group_id);
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
                let fresh =
                    g.consumer.is_none() && g.streams.is_none() && g.size() == 0 && g.offsets.is_empty() && g.generation == 0 && g.protocol_type.is_none();
                if !fresh {
                    return Err((ErrorCode::GROUP_ID_NOT_FOUND, Some(format!("Group {group_id} is not a share group."))));
                }
                g.share = Some(Box::default());
            }
            let share = g.share.as_deref_mut().expect("set above");
            let topic = |name: &str| topic_in(&image, name);
            let answer = share.heartbeat(group_id, hb, &topic, &settings, Instant::now());
            (answer, share.take_records())
        };
        let mut answer = answer?;
        if !records.is_empty() {
            let records: Vec<OffsetsRecord> = records.into_iter().map(OffsetsRecord::Share).collect();
            // As the consumer groups' heartbeat: the change stays in memory and the member
            // is told to retry; its next heartbeat writes the group's state again.
            append(p, &records).await.map_err(|e| (e, Some("Could not store the share group metadata.".to_string())))?;
        }
        if let Some(init) = answer.initialize.take() {
            // Asked once the "initializing" record is stored, and answered to the member
            // without waiting, as Kafka's coordinator does.
            let (ctx, p, group_id) = (ctx.clone(), p.clone(), group_id.to_string());
            glommio::spawn_local(async move { ctx.groups.initialize_share_partitions(&ctx, &p, &group_id, init).await }).detach();
        }
        Ok(answer)
    }

    /// Asks the share coordinator to initialize `init`'s share-partitions (one
    /// InitializeShareGroupState per partition, all at once, state epoch = the group
    /// epoch), then stores which were initialized; the members are assigned those at
    /// their next heartbeats. Refused ones are asked again at a later heartbeat.
    async fn initialize_share_partitions(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, group_id: &str, init: ShareInitialize) {
        let calls = init.partitions.iter().flat_map(|(topic_id, ps)| {
            ps.iter().map(move |&(partition, start_offset)| {
                let key = SharePartitionKey { group_id: group_id.to_string(), topic_id: *topic_id, partition };
                let call = (ctx.share_persister)(key, ShareStateOpKind::Initialize { state_epoch: init.state_epoch, start_offset });
                async move { (*topic_id, partition, call.await) }
            })
        });
        let (mut done, mut failed) = (BTreeMap::<Uuid, BTreeSet<i32>>::new(), BTreeMap::<Uuid, BTreeSet<i32>>::new());
        for (topic_id, partition, answer) in futures::future::join_all(calls).await {
            match answer {
                Ok(_) => done.entry(topic_id).or_default().insert(partition),
                Err(f) => {
                    tracing::warn!(group = group_id, topic_id = %topic_id, partition, code = %f.code, "share-partition state not initialized; asked again later");
                    failed.entry(topic_id).or_default().insert(partition)
                }
            };
        }
        let records: Vec<OffsetsRecord> = {
            let mut groups = self.groups.borrow_mut();
            let Some(s) = groups.get_mut(group_id).and_then(|g| g.share.as_deref_mut()) else { return };
            s.initialization_answered(group_id, &done, &failed);
            s.take_records().into_iter().map(OffsetsRecord::Share).collect()
        };
        if !records.is_empty() {
            if let Err(e) = append(p, &records).await {
                tracing::warn!(group = group_id, error = %e, "could not store the share group's initialized partitions");
            }
        }
    }
}

/// The group's membership settings: its share.heartbeat.interval.ms and
/// share.session.timeout.ms group configs, else Kafka's defaults.
fn group_settings(image: &MetadataImage, group_id: &str) -> ShareGroupSettings {
    let d = ShareGroupSettings::default();
    ShareGroupSettings {
        heartbeat_interval_ms: config_defs::group_int(image, group_id, config_defs::SHARE_HEARTBEAT_INTERVAL_MS).unwrap_or(d.heartbeat_interval_ms),
        session_timeout_ms: config_defs::group_int(image, group_id, config_defs::SHARE_SESSION_TIMEOUT_MS).unwrap_or(d.session_timeout_ms),
        max_size: d.max_size,
    }
}

/// Session expiry of `g`'s share members (the coordinator's tick): the ids removed and
/// the records to store.
pub fn expire(g: &mut Group, image: &MetadataImage, now: Instant) -> (Vec<String>, Vec<OffsetsRecord>) {
    let group_id = g.id.clone();
    match g.share.as_deref_mut() {
        Some(s) => {
            let gone = s.expire(&group_id, now, &|name: &str| topic_in(image, name));
            (gone, s.take_records().into_iter().map(OffsetsRecord::Share).collect())
        }
        None => (Vec::new(), Vec::new()),
    }
}

/// Replays a share-group record while loading `__consumer_offsets`; tombstones never
/// create a group.
pub fn replay(groups: &mut HashMap<String, Group>, partition: i32, rec: ShareRecord, now: Instant) {
    let group = match &rec {
        ShareRecord::GroupEpoch { group, epoch: None, .. } => {
            if let Some(g) = groups.get_mut(group) {
                g.share = None;
            }
            return;
        }
        ShareRecord::MemberMetadata { group, value: None, .. }
        | ShareRecord::TargetAssignmentMetadata { group, assignment_epoch: None }
        | ShareRecord::TargetAssignmentMember { group, partitions: None, .. }
        | ShareRecord::CurrentMemberAssignment { group, value: None, .. }
        | ShareRecord::StatePartitionMetadata { group, value: None } => {
            if let Some(s) = groups.get_mut(group).and_then(|g| g.share.as_deref_mut()) {
                s.replay(rec, now);
            }
            return;
        }
        ShareRecord::GroupEpoch { group, .. }
        | ShareRecord::MemberMetadata { group, .. }
        | ShareRecord::TargetAssignmentMetadata { group, .. }
        | ShareRecord::TargetAssignmentMember { group, .. }
        | ShareRecord::CurrentMemberAssignment { group, .. }
        | ShareRecord::StatePartitionMetadata { group, .. } => group.clone(),
    };
    let g = groups.entry(group.clone()).or_insert_with(|| Group::new(group, partition));
    g.share.get_or_insert_with(Box::default).replay(rec, now);
}

/// After a load: the replayed share groups' member sessions start now.
pub fn finish_load(g: &mut Group, now: Instant) {
    if let Some(s) = g.share.as_deref_mut() {
        s.finish_load(&ShareGroupSettings::default(), now);
    }
}

/// The records that delete share group `group` (DeleteGroups of an empty group).
pub fn group_tombstones(group: &str) -> [OffsetsRecord; 3] {
    let group = group.to_string();
    [
        OffsetsRecord::Share(ShareRecord::TargetAssignmentMetadata { group: group.clone(), assignment_epoch: None }),
        OffsetsRecord::Share(ShareRecord::StatePartitionMetadata { group: group.clone(), value: None }),
        OffsetsRecord::Share(ShareRecord::GroupEpoch { group, epoch: None, metadata_hash: 0 }),
    ]
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
