//! The share-group offset admin APIs' part on the coordinating shard, as Kafka 4.4's group
//! coordinator runs them (the handlers in `server/handlers/*_share_group_offsets.rs` check
//! the feature and the ACLs first):
//!
//! - DescribeShareGroupOffsets with no topics: the group's initialized share-partitions
//!   (the handler then reads their state summaries from the share coordinator);
//! - AlterShareGroupOffsets (the group must be empty; a missing group is created empty):
//!   the partitions are initialized again in the share coordinator at the given start
//!   offsets, state epoch = the group epoch;
//! - DeleteShareGroupOffsets (the group must be empty): the topics' share state is
//!   deleted from the share coordinator;
//! - DeleteGroups of a share group: all its share state is deleted first.
//!
//! Each stores the group's state-partition record before it calls the share coordinator
//! and again with the outcome, so a coordinator that fails between the two finds the
//! partitions "initializing" / "deleting" and the work is asked again.
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::alter_share_group_offsets_response::{AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponse, TopicName};
use uuid::Uuid;

use super::coordinator::topic_in;
use super::share_group::{ShareGroup, ShareInitialize};
use super::state_coordinator::{ShareStateFailure, ShareStateOpKind};
use super::state_records::SharePartitionKey;
use crate::group::context::CoordinatorContext;
use crate::group::coordinator::{append, Coordinator};
use crate::group::coordinator_records::OffsetsRecord;
use crate::group::state::Group;
use crate::partition::Partition;
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Kafka's message for UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";
/// Kafka's message for NON_EMPTY_GROUP.
const NON_EMPTY_MESSAGE: &str = "The group is not empty.";

/// A top-level error and its message.
pub type AdminError = (ErrorCode, String);

/// The share group `group_id` for an admin operation: Kafka's errors for a group that is
/// missing (unless `create`), of another type, or not empty.
fn empty_share_group<'a>(
    groups: &'a mut std::collections::HashMap<String, Group>,
    group_id: &str,
    partition: i32,
    create: bool,
) -> Result<&'a mut ShareGroup, AdminError> {
    if !groups.contains_key(group_id) {
        if !create {
            return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} not found.")));
        }
        let mut g = Group::new(group_id.to_string(), partition);
        g.share = Some(Box::default());
        groups.insert(group_id.to_string(), g);
    }
    let g = groups.get_mut(group_id).expect("inserted above");
    let Some(s) = g.share.as_deref_mut() else {
        return Err((ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a share group.")));
    };
    if !s.is_empty() {
        return Err((ErrorCode::NON_EMPTY_GROUP, NON_EMPTY_MESSAGE.to_string()));
    }
    Ok(s)
}

/// One share-coordinator call per partition, all at once; each partition's outcome.
async fn call_each(
    ctx: &CoordinatorContext,
    group_id: &str,
    partitions: impl Iterator<Item = (Uuid, i32, ShareStateOpKind)>,
) -> Vec<(Uuid, i32, Result<(), ShareStateFailure>)> {
    let calls = partitions.map(|(topic_id, partition, kind)| {
        let call = (ctx.share_persister)(SharePartitionKey { group_id: group_id.to_string(), topic_id, partition }, kind);
        async move { (topic_id, partition, call.await.map(|_| ())) }
    });
    futures::future::join_all(calls).await
}

impl Coordinator {
    /// Appends what the group `group_id` recorded; Err when it could not be stored.
    async fn store_share_records(&self, p: &Rc<Partition>, group_id: &str) -> Result<(), ErrorCode> {
        let records: Vec<OffsetsRecord> = {
            let mut groups = self.groups.borrow_mut();
            let Some(s) = groups.get_mut(group_id).and_then(|g| g.share.as_deref_mut()) else { return Ok(()) };
            s.take_records().into_iter().map(OffsetsRecord::Share).collect()
        };
        if records.is_empty() {
            return Ok(());
        }
        append(p, &records).await.map(|_| ())
    }

    /// DescribeShareGroupOffsets with no topics: the initialized share-partitions of the
    /// share group `group_id` (none for a missing group or one of another type).
    pub(in crate::group) fn initialized_share_partitions(&self, group_id: &str) -> BTreeMap<Uuid, BTreeSet<i32>> {
        let groups = self.groups.borrow();
        let Some(s) = groups.get(group_id).and_then(|g| g.share.as_deref()) else { return BTreeMap::new() };
        s.initialized_partitions().iter().map(|(id, (_, ps))| (*id, ps.clone())).collect()
    }

    /// AlterShareGroupOffsets: `topics` = (name, [(partition, start offset)]).
    pub(in crate::group) async fn alter_share_offsets(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        group_id: &str,
        topics: Vec<(String, Vec<(i32, i64)>)>,
    ) -> AlterShareGroupOffsetsResponse {
        let failed = |(e, m): AdminError| AlterShareGroupOffsetsResponse::default().with_error_code(e.code()).with_error_message(Some(str_bytes(&m)));
        let image = ctx.image();
        let mut responses = Vec::with_capacity(topics.len());
        let mut wanted: BTreeMap<Uuid, (String, BTreeMap<i32, i64>)> = BTreeMap::new();
        for (name, partitions) in &topics {
            let topic = AlterShareGroupOffsetsResponseTopic::default().with_topic_name(TopicName(str_bytes(name)));
            let answer = |partition: i32, e: ErrorCode| {
                AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(partition)
                    .with_error_code(e.code())
                    .with_error_message((e != ErrorCode::NONE).then(|| str_bytes(UNKNOWN_TOPIC_MESSAGE)))
            };
            let Some((id, count)) = topic_in(&image, name) else {
                responses.push(topic.with_partitions(partitions.iter().map(|(p, _)| answer(*p, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)).collect()));
                continue;
            };
            let mut answers = Vec::with_capacity(partitions.len());
            for &(partition, start) in partitions {
                if (0..count).contains(&partition) {
                    wanted.entry(id).or_insert_with(|| (name.clone(), BTreeMap::new())).1.insert(partition, start);
                    answers.push(answer(partition, ErrorCode::NONE));
                } else {
                    answers.push(answer(partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
                }
            }
            responses.push(topic.with_topic_id(id).with_partitions(answers));
        }
        let init: ShareInitialize = {
            let mut groups = self.groups.borrow_mut();
            match empty_share_group(&mut groups, group_id, p.index, true) {
                Ok(s) => s.alter_offsets(group_id, &wanted, Instant::now()),
                Err(e) => return failed(e),
            }
        };
        if let Err(e) = self.store_share_records(p, group_id).await {
            return failed((e, "Could not store the share group metadata.".into()));
        }
        let calls = init.partitions.iter().flat_map(|(t, ps)| {
            ps.iter().map(move |&(partition, start_offset)| (*t, partition, ShareStateOpKind::Initialize { state_epoch: init.state_epoch, start_offset }))
        });
        let outcomes = call_each(ctx, group_id, calls).await;
        let (mut done, mut refused) = (BTreeMap::<Uuid, BTreeSet<i32>>::new(), BTreeMap::<Uuid, BTreeSet<i32>>::new());
        for (topic_id, partition, outcome) in &outcomes {
            match outcome {
                Ok(()) => done.entry(*topic_id).or_default().insert(*partition),
                Err(f) => {
                    // The partition's answer carries the share coordinator's error.
                    let answer = responses
                        .iter_mut()
                        .filter(|t| t.topic_id == *topic_id)
                        .flat_map(|t| t.partitions.iter_mut())
                        .find(|a| a.partition_index == *partition);
                    if let Some(a) = answer {
                        a.error_code = f.code.code();
                        a.error_message = Some(str_bytes(f.message.as_deref().unwrap_or("")));
                    }
                    refused.entry(*topic_id).or_default().insert(*partition)
                }
            };
        }
        if let Some(s) = self.groups.borrow_mut().get_mut(group_id).and_then(|g| g.share.as_deref_mut()) {
            s.initialization_answered(group_id, &done, &refused);
        }
        if let Err(e) = self.store_share_records(p, group_id).await {
            return failed((e, "Could not store the share group metadata.".into()));
        }
        AlterShareGroupOffsetsResponse::default().with_responses(responses)
    }

    /// DeleteShareGroupOffsets: the named topics' share state.
    pub(in crate::group) async fn delete_share_offsets(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        group_id: &str,
        topics: Vec<String>,
    ) -> DeleteShareGroupOffsetsResponse {
        let failed = |(e, m): AdminError| DeleteShareGroupOffsetsResponse::default().with_error_code(e.code()).with_error_message(Some(str_bytes(&m)));
        let image = ctx.image();
        let topic_answer = |name: &str, id: Uuid, e: ErrorCode, message: Option<&str>| {
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(str_bytes(name)))
                .with_topic_id(id)
                .with_error_code(e.code())
                .with_error_message(message.map(str_bytes))
        };
        let mut responses = Vec::new();
        let mut existing: BTreeMap<Uuid, (String, i32)> = BTreeMap::new();
        for name in &topics {
            match topic_in(&image, name) {
                Some((id, count)) => {
                    existing.insert(id, (name.clone(), count));
                }
                None => responses.push(topic_answer(name, Uuid::nil(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, Some(UNKNOWN_TOPIC_MESSAGE))),
            }
        }
        let to_delete = {
            let mut groups = self.groups.borrow_mut();
            match empty_share_group(&mut groups, group_id, p.index, false) {
                Ok(s) => s.begin_delete_offsets(group_id, &existing),
                Err(e) => return failed(e),
            }
        };
        for (name, _) in existing.iter().filter(|(id, _)| !to_delete.contains_key(id)).map(|(_, v)| v) {
            responses.push(topic_answer(name, Uuid::nil(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, Some("There is no offset information to delete.")));
        }
        if let Err(e) = self.store_share_records(p, group_id).await {
            return failed((e, "Could not store the share group metadata.".into()));
        }
        let calls = to_delete.iter().flat_map(|(t, ps)| ps.iter().map(move |&partition| (*t, partition, ShareStateOpKind::Delete)));
        let outcomes = call_each(ctx, group_id, calls).await;
        let mut deleted: BTreeSet<Uuid> = to_delete.keys().copied().collect();
        for (topic_id, _, outcome) in &outcomes {
            if let Err(f) = outcome {
                if deleted.remove(topic_id) {
                    let name = existing.get(topic_id).map_or("", |(n, _)| n.as_str());
                    responses.push(topic_answer(name, *topic_id, f.code, Some(f.message.as_deref().unwrap_or(""))));
                }
            }
        }
        if let Some(s) = self.groups.borrow_mut().get_mut(group_id).and_then(|g| g.share.as_deref_mut()) {
            s.finish_delete_offsets(group_id, &deleted);
        }
        if let Err(e) = self.store_share_records(p, group_id).await {
            return failed((e, "Could not store the share group metadata.".into()));
        }
        for id in &deleted {
            let name = existing.get(id).map_or("", |(n, _)| n.as_str());
            responses.push(topic_answer(name, *id, ErrorCode::NONE, None));
        }
        DeleteShareGroupOffsetsResponse::default().with_responses(responses)
    }

    /// DeleteGroups of an empty share group, first part: all its share state is deleted
    /// from the share coordinator (the group's records are deleted after, by the caller).
    /// The first error of the share coordinator, if any: the group is then not deleted.
    pub(in crate::group) async fn delete_share_group_state(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, group_id: &str) -> Result<(), ErrorCode> {
        let image = ctx.image();
        let to_delete = {
            let mut groups = self.groups.borrow_mut();
            let Some(s) = groups.get_mut(group_id).and_then(|g| g.share.as_deref_mut()) else { return Ok(()) };
            s.begin_delete_group(group_id, &|id: &Uuid| image.topic_by_id(id.as_bytes()).map(|t| t.partitions.len() as i32))
        };
        self.store_share_records(p, group_id).await?;
        let calls = to_delete.iter().flat_map(|(t, ps)| ps.iter().map(move |&partition| (*t, partition, ShareStateOpKind::Delete)));
        let outcomes = call_each(ctx, group_id, calls).await;
        match outcomes.into_iter().find_map(|(_, _, o)| o.err()) {
            Some(f) => {
                tracing::warn!(group = group_id, code = %f.code, "share group state not deleted; the group stays");
                Err(f.code)
            }
            None => Ok(()),
        }
    }
}
