//! DescribeTopicPartitions 0 (KIP-966): topics and their partitions, paginated, as Kafka
//! 4.1's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse:
//! - an empty topic list means every topic; topics are answered in name order, starting at
//!   the cursor's topic (and, in it, at the cursor's partition);
//! - at most `min(ResponsePartitionLimit, max.request.partition.size.limit = 2000)`
//!   partitions (at least 1) per response; when a topic is cut, `NextCursor` names the
//!   topic and the first partition left out; when the limit is reached exactly at a topic
//!   boundary and topics remain, it names the next topic at partition 0;
//! - named topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
//!   for an illegal name) and take nothing from the limit; when listing all topics there
//!   are none;
//! - a cursor topic missing from a non-empty topic list, or a negative cursor partition,
//!   makes the whole request INVALID_REQUEST (each named topic answered with it);
//! - every topic answered carries its authorized operations (always, no flag).
use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::BrokerId as WireBrokerId;
use kafka_protocol::messages::DescribeTopicPartitionsRequest;

use super::cluster_view::partition_view;
use super::{topic_name, uuid};
use crate::cluster::image::{MetadataImage, TopicMeta};
use crate::cluster::topic_config::is_internal_topic;
use crate::protocol::{acl_operations, ErrorCode};
use crate::security::acl::{Operation, ResourceType};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Kafka's `max.request.partition.size.limit` default.
const MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeTopicPartitionsRequest) -> Response {
    // What the controller committed, even if this shard is still applying it (a topic
    // created a moment ago on another connection).
    let named: Vec<&str> = req.topics.iter().map(|t| t.name.0.as_str()).collect();
    ctx.catch_up_for_topics(if named.is_empty() { None } else { Some(&named) }).await;
    let image = ctx.image();
    let all_topics = req.topics.is_empty();
    let cursor_topic = req.cursor.as_ref().map(|c| c.topic_name.0.to_string()).unwrap_or_default();
    let names: BTreeSet<String> = if all_topics {
        image.topics.keys().filter(|n| **n >= cursor_topic).cloned().collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).filter(|n| *n >= cursor_topic).collect()
    };
    let bad_cursor = match &req.cursor {
        Some(c) => c.partition_index < 0 || (!all_topics && !names.contains(&cursor_topic)),
        None => false,
    };
    if bad_cursor {
        let topics = req
            .topics
            .iter()
            .map(|t| DescribeTopicPartitionsResponseTopic::default().with_name(Some(t.name.clone())).with_error_code(ErrorCode::INVALID_REQUEST.code()))
            .collect();
        return meta.respond(&DescribeTopicPartitionsResponse::default().with_topics(topics));
    }

    let mut remaining = req.response_partition_limit.clamp(1, MAX_REQUEST_PARTITION_SIZE_LIMIT);
    let mut resp = DescribeTopicPartitionsResponse::default();
    // ACLs: DESCRIBE on each topic; all topics: the others are left out; named: they are
    // TOPIC_AUTHORIZATION_FAILED, existing or not.
    let access = ctx.access(&meta);
    for name in &names {
        if remaining == 0 {
            resp.next_cursor = Some(Cursor::default().with_topic_name(topic_name(name)).with_partition_index(0));
            break;
        }
        if !access.allows_topic(Operation::Describe, name) {
            if !all_topics {
                let mut refused = missing_topic(name);
                refused.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
                resp.topics.push(refused);
            }
            continue;
        }
        let Some(t) = image.topic(name) else {
            if !all_topics {
                resp.topics.push(missing_topic(name));
            }
            continue;
        };
        let start = if *name == cursor_topic { req.cursor.as_ref().map_or(0, |c| c.partition_index) } else { 0 };
        let (topic, next) = describe(&image, t, start, remaining);
        remaining -= topic.partitions.len() as i32;
        resp.topics.push(topic);
        if let Some(next) = next {
            resp.next_cursor = Some(Cursor::default().with_topic_name(topic_name(name)).with_partition_index(next));
            break;
        }
    }
    for t in &mut resp.topics {
        let name = t.name.as_ref().map_or("", |n| n.as_str());
        t.topic_authorized_operations = access.authorized_operations(ResourceType::Topic, name, acl_operations::TOPIC);
    }
    meta.respond(&resp)
}

/// Partitions `start..` of `t`, at most `limit`; and the first partition left out, if any.
fn describe(image: &MetadataImage, t: &TopicMeta, start: i32, limit: i32) -> (DescribeTopicPartitionsResponseTopic, Option<i32>) {
    debug_assert!(limit > 0 && start >= 0);
    let count = t.partitions.len() as i32;
    let end = count.min(start.saturating_add(limit));
    let partitions = (start..end)
        .filter_map(|i| t.partition(i))
        .map(|p| {
            let v = partition_view(image, p);
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(v.error)
                .with_partition_index(p.partition)
                .with_leader_id(v.leader)
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(v.replicas)
                .with_isr_nodes(v.isr)
                .with_offline_replicas(v.offline)
                // KIP-966's sets (`controller/eligible_leaders.rs`).
                .with_eligible_leader_replicas(Some(p.elr.iter().map(|b| WireBrokerId(*b)).collect()))
                .with_last_known_elr(Some(p.last_known_elr.iter().map(|b| WireBrokerId(*b)).collect()))
        })
        .collect();
    let topic = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_topic_id(uuid(&t.topic_id))
        .with_is_internal(is_internal_topic(&t.name))
        .with_partitions(partitions);
    (topic, (end < count).then_some(end))
}

fn missing_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let code = if crate::controller::validate_topic_name(name).is_ok() { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION } else { ErrorCode::INVALID_TOPIC_EXCEPTION };
    DescribeTopicPartitionsResponseTopic::default().with_name(Some(topic_name(name))).with_error_code(code.code()).with_is_internal(is_internal_topic(name))
}
