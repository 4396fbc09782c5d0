//! DescribeShareGroupOffsets 0-1 (KIP-932), as Kafka 4.4 answers it: per group, its
//! share-partitions' start offsets and leader epochs as the share coordinator holds them
//! (ReadShareGroupStateSummary), and from v1 their lag: log end - start offset - the
//! records already done with (delivery complete count), -1 while either is unknown.
//!
//! - share.version below 1: UNSUPPORTED_VERSION; no DESCRIBE on the group:
//!   GROUP_AUTHORIZATION_FAILED (per group);
//! - no topics (null): the group's initialized share-partitions (asked of its coordinator),
//!   topics without DESCRIBE left out; an empty list: nothing;
//! - named topics: a topic without DESCRIBE has TOPIC_AUTHORIZATION_FAILED partitions, an
//!   unknown topic start offset -1 and topic id zero; a partition the share coordinator
//!   has no state for (or refused) start offset -1, leader epoch 0, no error.
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as GroupAnswer, DescribeShareGroupOffsetsResponsePartition as PartitionAnswer,
    DescribeShareGroupOffsetsResponseTopic as TopicAnswer,
};
use kafka_protocol::messages::{DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName};
use uuid::Uuid;

use crate::group::share::coordinator::{ShareOp, ShareReply};
use crate::group::share::state_coordinator::{ShareStateAnswer, ShareStateOpKind};
use crate::group::share::state_records::SharePartitionKey;
use crate::group::{GroupOp, GroupReply};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::partition_end_offsets::latest_offsets;
use crate::server::shard::ShardContext;

/// Groups, and partitions per group, one request may name.
const MAX_GROUPS: usize = 1_000;
const MAX_PARTITIONS: usize = 100_000;
/// Kafka's "no offset" / "no lag" / default leader epoch in these answers.
const UNINITIALIZED: i64 = -1;
const DEFAULT_LEADER_EPOCH: i32 = 0;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeShareGroupOffsetsRequest) -> Response {
    let enabled = ctx.image().features.share_groups_enabled();
    let groups = req.groups.into_iter().take(MAX_GROUPS).map(|g| describe_group(ctx, &meta, enabled, g));
    let groups = join_all(groups).await;
    meta.respond(&DescribeShareGroupOffsetsResponse::default().with_groups(groups))
}

async fn describe_group(ctx: &Rc<ShardContext>, meta: &RequestMeta, enabled: bool, g: DescribeShareGroupOffsetsRequestGroup) -> GroupAnswer {
    let group_id = g.group_id.0.to_string();
    let answer = GroupAnswer::default().with_group_id(g.group_id.clone());
    let failed = |e: ErrorCode, message: Option<&str>| answer.clone().with_error_code(e.code()).with_error_message(message.map(str_bytes));
    if !enabled {
        return failed(ErrorCode::UNSUPPORTED_VERSION, None);
    }
    let access = ctx.access(meta);
    if !access.allows_group(Operation::Describe, &group_id) {
        return failed(ErrorCode::GROUP_AUTHORIZATION_FAILED, None);
    }
    let image = ctx.image();
    // (name, id, partitions) to read from the share coordinator, and answers already known.
    let mut wanted: Vec<(String, Uuid, Vec<i32>)> = Vec::new();
    let mut known: Vec<TopicAnswer> = Vec::new();
    match g.topics {
        None => {
            let op = GroupOp::Share(ShareOp::InitializedPartitions { group_id: group_id.clone() });
            let initialized: BTreeMap<Uuid, BTreeSet<i32>> = match crate::group::ops::route(&ctx.router, &group_id, op).await {
                Ok(GroupReply::Share(r)) => match *r {
                    ShareReply::InitializedPartitions(m) => m,
                    _ => return failed(ErrorCode::UNKNOWN_SERVER_ERROR, None),
                },
                Ok(_) => return failed(ErrorCode::UNKNOWN_SERVER_ERROR, None),
                Err(e) => return failed(e, None),
            };
            for (id, partitions) in initialized {
                // A topic deleted since, or not DESCRIBE-able, is left out.
                let Some(t) = image.topic_by_id(id.as_bytes()) else { continue };
                if access.allows_topic(Operation::Describe, &t.name) {
                    wanted.push((t.name.clone(), id, partitions.into_iter().collect()));
                }
            }
        }
        Some(topics) => {
            for t in topics {
                let name = t.topic_name.0.to_string();
                let uninitialized = |p: i32| PartitionAnswer::default().with_partition_index(p).with_start_offset(UNINITIALIZED).with_lag(UNINITIALIZED);
                let topic = TopicAnswer::default().with_topic_name(TopicName(str_bytes(&name))).with_topic_id(Uuid::nil());
                if !access.allows_topic(Operation::Describe, &name) {
                    let denied = ErrorCode::TOPIC_AUTHORIZATION_FAILED;
                    let msg = "Not authorized to access topics: [Topic authorization failed.]";
                    known.push(topic.with_partitions(
                        t.partitions.iter().map(|p| uninitialized(*p).with_error_code(denied.code()).with_error_message(Some(str_bytes(msg)))).collect(),
                    ));
                    continue;
                }
                match image.topic(&name) {
                    Some(meta) => wanted.push((name, Uuid::from_bytes(meta.topic_id), t.partitions)),
                    None => known.push(topic.with_partitions(t.partitions.iter().map(|p| uninitialized(*p)).collect())),
                }
            }
        }
    }
    let mut topics = summaries(ctx, &group_id, wanted).await;
    topics.extend(known);
    answer.with_topics(topics)
}

/// The share coordinator's summary of every partition, with the lag where both the start
/// offset and the delivery complete count are known.
async fn summaries(ctx: &Rc<ShardContext>, group_id: &str, wanted: Vec<(String, Uuid, Vec<i32>)>) -> Vec<TopicAnswer> {
    let mut budget = MAX_PARTITIONS;
    let reads = wanted.iter().flat_map(|(name, id, partitions)| {
        let take = partitions.len().min(budget);
        budget -= take;
        partitions[..take].iter().map(move |&partition| {
            let key = SharePartitionKey { group_id: group_id.to_string(), topic_id: *id, partition };
            let call = (ctx.coordinator.share_persister)(key, ShareStateOpKind::Summary);
            async move { (name.clone(), *id, partition, call.await) }
        })
    });
    let read = join_all(reads).await;
    // Lag needs the log end of the partitions whose summary is complete.
    let complete: Vec<(String, i32)> = read
        .iter()
        .filter_map(|(name, _, partition, r)| match r {
            Ok(ShareStateAnswer::Summary(s)) if s.start_offset != UNINITIALIZED && s.delivery_complete_count >= 0 => Some((name.clone(), *partition)),
            _ => None,
        })
        .collect();
    let mut ends = latest_offsets(ctx, &complete).await.into_iter();
    let mut topics: Vec<TopicAnswer> = Vec::new();
    for (name, id, partition, r) in read {
        let answer = match r {
            Ok(ShareStateAnswer::Summary(s)) if s.start_offset != UNINITIALIZED && s.delivery_complete_count >= 0 => match ends.next() {
                Some(Ok(end)) => PartitionAnswer::default()
                    .with_partition_index(partition)
                    .with_start_offset(s.start_offset)
                    .with_leader_epoch(s.leader_epoch)
                    .with_lag(end - s.start_offset - i64::from(s.delivery_complete_count)),
                Some(Err(e)) => PartitionAnswer::default().with_partition_index(partition).with_error_code(e.code()),
                None => PartitionAnswer::default().with_partition_index(partition).with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
            },
            Ok(ShareStateAnswer::Summary(s)) => PartitionAnswer::default()
                .with_partition_index(partition)
                .with_start_offset(s.start_offset)
                .with_leader_epoch(s.leader_epoch)
                .with_lag(UNINITIALIZED),
            // No state there (or not answered): no offset information, as Kafka's.
            _ => PartitionAnswer::default()
                .with_partition_index(partition)
                .with_start_offset(UNINITIALIZED)
                .with_leader_epoch(DEFAULT_LEADER_EPOCH)
                .with_lag(UNINITIALIZED),
        };
        match topics.last_mut().filter(|t| t.topic_id == id) {
            Some(t) => t.partitions.push(answer),
            None => topics.push(TopicAnswer::default().with_topic_name(TopicName(str_bytes(&name))).with_topic_id(id).with_partitions(vec![answer])),
        }
    }
    topics
}
