//! ListOffsets: earliest (-2), latest (-1: the high watermark, or the last stable offset
//! with isolation_level 1 = read_committed, v2+), max timestamp (-3), earliest local (-4),
//! latest tiered (-5: the last offset in remote storage), or the first offset whose record
//! timestamp is >= the given timestamp. Every partition of the request goes in one router
//! batch (one message per other shard). v11's earliest pending upload (-6, KIP-1023): the
//! first offset past the remote log, or no offset (-1) for a topic without remote storage,
//! as Kafka 4.4 answers; before v11 it is UNSUPPORTED_VERSION.
use std::rc::Rc;

use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse};

use super::code;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// KIP-1023's "earliest offset not yet uploaded to remote storage" (ListOffsets v11).
const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListOffsetsRequest) -> Response {
    let image = ctx
        .image_for_request(|image| {
            req.topics.iter().map(|t| super::unknown_partitions(image.topic(t.name.0.as_str()), t.partitions.iter().map(|p| p.partition_index))).sum()
        })
        .await;
    let read_committed = meta.version >= 2 && req.isolation_level == 1;
    let partition_count = req.topics.iter().map(|t| t.partitions.len()).sum();
    let mut batch = OpBatch::with_capacity(partition_count);
    let mut topics = Vec::with_capacity(req.topics.len());
    // Whether each partition of the response (in order) went into the batch.
    let mut routed = Vec::with_capacity(partition_count);
    // ACLs: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED (before existence).
    let access = ctx.access(&meta);
    for topic in &req.topics {
        let t = image.topic(topic.name.0.as_str());
        let denied = !access.allows_topic(Operation::Describe, topic.name.0.as_str());
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let resp = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index).with_timestamp(-1).with_offset(-1);
            routed.push(false);
            if denied {
                partitions.push(resp.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()));
                continue;
            }
            let owner = t.and_then(|t| Some((t.name.as_str(), t.partition(p.partition_index)?)));
            let Some((name, owner)) = owner else {
                partitions.push(resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()));
                continue;
            };
            if let Some(e) = super::leader_epoch_error(p.current_leader_epoch, owner.leader_epoch) {
                partitions.push(resp.with_error_code(e.code()));
                continue;
            }
            // Kafka's minimum version of each special timestamp (-3 v7, -4 earliest-local
            // v8, -5 latest-tiered v9: KIP-734, KIP-1005); any other negative one is refused.
            let min_version = match p.timestamp {
                -2..=-1 => 0,
                -3 => 7,
                -4 => 8,
                -5 => 9,
                EARLIEST_PENDING_UPLOAD_TIMESTAMP => 11,
                t if t >= 0 => 0,
                _ => i16::MAX,
            };
            if meta.version < min_version {
                partitions.push(resp.with_leader_epoch(-1).with_error_code(ErrorCode::UNSUPPORTED_VERSION.code()));
                continue;
            }
            // Sent to its shard: error code 0 until the result is in. leader_epoch exists
            // from v4 on.
            batch.push(owner.shard, name, p.partition_index, PartitionOp::ListOffsets { timestamp: p.timestamp, read_committed });
            *routed.last_mut().expect("pushed above") = true;
            partitions.push(if meta.version >= 4 { resp.with_leader_epoch(owner.leader_epoch) } else { resp });
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name.clone()).with_partitions(partitions));
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    // Tiered storage: a timestamp search looks at the remote part first, as Kafka's.
    let by_timestamp: Vec<Option<(String, [u8; 16], i64)>> = req
        .topics
        .iter()
        .flat_map(|t| {
            let meta = image.topic(t.name.0.as_str());
            t.partitions.iter().map(move |p| meta.filter(|_| p.timestamp >= 0).map(|m| (m.name.clone(), m.topic_id, p.timestamp)))
        })
        .collect();
    let answers = topics.iter_mut().flat_map(|t| t.partitions.iter_mut()).zip(routed).zip(by_timestamp).filter(|((_, routed), _)| *routed);
    for ((resp, _), search) in answers {
        match results.next() {
            Some(Ok(OpOutput::Offset(offset, ts))) => {
                resp.offset = offset;
                resp.timestamp = ts;
            }
            Some(Ok(_)) | None => resp.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => resp.error_code = code(&e),
        }
        if let (Some((name, topic_id, ts)), true) = (search, resp.error_code == 0 && ctx.remote_store.is_some()) {
            match super::fetch_remote::offset_for_timestamp(ctx, &name, &topic_id, resp.partition_index, ts).await {
                Some(Ok((offset, found))) => (resp.offset, resp.timestamp) = (offset, found),
                Some(Err(e)) => resp.error_code = e.code(),
                None => {}
            }
        }
        // No offset found (a timestamp past every record, nothing tiered): no epoch either.
        if resp.error_code != 0 || resp.offset == -1 {
            resp.leader_epoch = -1;
        }
    }
    meta.respond(&ListOffsetsResponse::default().with_topics(topics))
}
