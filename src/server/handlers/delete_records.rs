//! DeleteRecords: moves each partition's log start offset (offset -1 = high watermark).
//! Every partition of the request goes in one router batch (one message per other shard).
//! A tiered partition's start moves in remote storage too (`tiered_log_start`).
use std::rc::Rc;

use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult};

use super::code;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteRecordsRequest) -> Response {
    let image = ctx
        .image_for_request(|image| {
            req.topics.iter().map(|t| super::unknown_partitions(image.topic(t.name.0.as_str()), t.partitions.iter().map(|p| p.partition_index))).sum()
        })
        .await;
    let partition_count = req.topics.iter().map(|t| t.partitions.len()).sum();
    let mut batch = OpBatch::with_capacity(partition_count);
    let mut topics = Vec::with_capacity(req.topics.len());
    // ACLs: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access(&meta);
    for topic in &req.topics {
        let t = image.topic(topic.name.0.as_str());
        let denied = !access.allows_topic(Operation::Delete, topic.name.as_str());
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let resp = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index).with_low_watermark(-1);
            if denied {
                partitions.push(resp.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()));
                continue;
            }
            match t.and_then(|t| Some((t.name.as_str(), t.partition(p.partition_index)?))) {
                // Sent to its shard: error code 0 until the result is in.
                Some((name, owner)) => batch.push(owner.shard, name, p.partition_index, PartitionOp::DeleteRecords { offset: p.offset }),
                None => {
                    partitions.push(resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()));
                    continue;
                }
            }
            partitions.push(resp);
        }
        topics.push(DeleteRecordsTopicResult::default().with_name(topic.name.clone()).with_partitions(partitions));
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    for (topic, resp) in topics.iter_mut().flat_map(|t| t.partitions.iter_mut().map(|p| (t.name.clone(), p))) {
        if resp.error_code != 0 {
            continue;
        }
        match results.next() {
            Some(Ok(OpOutput::LowWatermark(lw))) => {
                let requested =
                    req.topics.iter().find(|t| t.name == topic).and_then(|t| t.partitions.iter().find(|p| p.partition_index == resp.partition_index));
                let target = requested.map_or(lw, |p| if p.offset == -1 { lw } else { p.offset });
                match tiered_log_start(ctx, &image, topic.as_str(), resp.partition_index, target).await {
                    Ok(start) => resp.low_watermark = start.unwrap_or(lw),
                    Err(e) => resp.error_code = e.code(),
                }
            }
            Some(Ok(_)) | None => resp.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => resp.error_code = code(&e),
        }
    }
    meta.respond(&DeleteRecordsResponse::default().with_topics(topics))
}

/// Tiered storage: a partition whose history is (partly) remote starts at `target` in
/// remote storage too (Kafka's logStartOffset below the local log start): recorded in
/// the metadata log, so remote reads below it stop at once and the expiration task
/// deletes the segments wholly below it. Returns the partition's new log start offset,
/// or None for a partition with nothing remote (the local answer stands).
async fn tiered_log_start(
    ctx: &ShardContext,
    image: &crate::cluster::image::MetadataImage,
    topic: &str,
    partition: i32,
    target: i64,
) -> Result<Option<i64>, ErrorCode> {
    let Some(meta) = image.topic(topic) else { return Ok(None) };
    let Some(remote) = image.remote_log.partition(&meta.topic_id, partition).filter(|r| r.start_offset().is_some()) else { return Ok(None) };
    let start = remote.start_offset().unwrap_or(target);
    if target <= start {
        return Ok(Some(start));
    }
    let Some(p) = meta.partition(partition) else { return Ok(None) };
    match ctx.controller.remote_log_start_offset(meta.topic_id, partition, ctx.config.node_id, p.leader_epoch, target).await {
        Ok(()) => Ok(Some(target)),
        Err(e) => {
            tracing::warn!(topic, partition, target, error = %e, "DeleteRecords: the remote log start offset was not recorded");
            Err(ErrorCode::NOT_LEADER_OR_FOLLOWER)
        }
    }
}
