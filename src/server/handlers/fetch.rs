//! Fetch: reads each partition on its owning shard (stored batch bytes, no decode),
//! long-polls until `min_bytes` are available or `max_wait_ms` passes (woken by
//! appends), and writes the response with the hand-written fetch writer so record
//! bytes go to the socket as they are. Fetch sessions (KIP-227) are answered with full
//! responses and session id 0, which clients accept as "no session".
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::future::{join_all, select_all};
use futures::FutureExt;
use kafka_protocol::messages::fetch_request::FetchRequest;

use super::{code, str_bytes};
use crate::protocol::{write_fetch_response, ErrorCode, FetchPartitionParts, FetchResponseParts, FetchTopicParts};
use crate::server::dispatch::{RequestMeta, Response};
use crate::cluster::router::{OpOutput, PartitionOp};
use crate::server::shard::ShardContext;

/// One partition a Fetch asks for, resolved against this shard's metadata image.
struct RequestedPartition {
    topic: String,
    topic_id: [u8; 16],
    partition: i32,
    /// (shard, leader epoch), or the error for an unknown topic/partition.
    owner: Result<(u16, i32), ErrorCode>,
    offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: FetchRequest) -> Response {
    let image = ctx.image();
    let mut requested = Vec::new();
    for t in &req.topics {
        let topic = if meta.version >= 13 { image.topic_by_id(t.topic_id.as_bytes()) } else { image.topic(t.topic.0.as_str()) };
        let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
        for p in &t.partitions {
            let owner = topic
                .and_then(|tm| tm.partition(p.partition))
                .map(|x| (x.shard, x.leader_epoch))
                .ok_or(if topic.is_some() { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION } else { unknown });
            requested.push(RequestedPartition {
                topic: topic.map(|x| x.name.clone()).unwrap_or_else(|| t.topic.0.to_string()),
                topic_id: *t.topic_id.as_bytes(),
                partition: p.partition,
                owner,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                current_leader_epoch: p.current_leader_epoch,
            });
        }
    }
    let max_bytes = if req.max_bytes <= 0 { usize::MAX } else { req.max_bytes as usize };
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut parts;
    loop {
        parts = read_all(ctx, &requested).await;
        let total: usize = parts.iter().map(|p| p.records.iter().map(|r| r.len()).sum::<usize>()).sum();
        let errored = parts.iter().any(|p| p.error_code != 0);
        let now = Instant::now();
        if total >= min_bytes.max(1) || errored || now >= deadline || requested.is_empty() {
            break;
        }
        // Long poll: wait for any partition's high watermark to move, or the deadline.
        let watches = requested.iter().zip(&parts).filter_map(|(w, p)| {
            let (shard, _) = w.owner.ok()?;
            let op = PartitionOp::Watch { seen_high_watermark: p.high_watermark };
            Some(ctx.router.call(shard, &w.topic, w.partition, op).boxed_local())
        });
        let watches: Vec<_> = watches.collect();
        if watches.is_empty() {
            glommio::timer::sleep(deadline - now).await;
            continue;
        }
        futures::select! {
            _ = select_all(watches).fuse() => {}
            _ = glommio::timer::sleep(deadline - now).fuse() => {}
        }
    }
    // Trim to the request's max_bytes: later partitions give their data back (at least
    // the first non-empty partition keeps its data, as Kafka does).
    let mut budget = max_bytes;
    let mut any = false;
    for p in parts.iter_mut() {
        let size: usize = p.records.iter().map(|r| r.len()).sum();
        if size == 0 {
            continue;
        }
        if any && size > budget {
            p.records.clear();
        } else {
            budget = budget.saturating_sub(size);
            any = true;
        }
    }
    let mut topics: Vec<FetchTopicParts> = Vec::new();
    for (w, p) in requested.iter().zip(parts) {
        let same_topic = topics.last().is_some_and(|t| t.name.as_str() == w.topic && t.topic_id == w.topic_id);
        if !same_topic {
            topics.push(FetchTopicParts { name: str_bytes(&w.topic), topic_id: w.topic_id, partitions: Vec::new() });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(p);
        }
    }
    let resp = FetchResponseParts { throttle_time_ms: 0, error_code: 0, session_id: 0, topics };
    Response::Frames(write_fetch_response(meta.correlation_id, meta.version, &resp))
}

async fn read_all(ctx: &Rc<ShardContext>, requested: &[RequestedPartition]) -> Vec<FetchPartitionParts> {
    join_all(requested.iter().map(|w| async move {
        let mut part = FetchPartitionParts::new(w.partition);
        let (shard, epoch) = match w.owner {
            Ok(o) => o,
            Err(e) => {
                part.error_code = e.code();
                return part;
            }
        };
        if w.current_leader_epoch >= 0 && w.current_leader_epoch != epoch {
            part.error_code = if w.current_leader_epoch > epoch {
                ErrorCode::UNKNOWN_LEADER_EPOCH.code()
            } else {
                ErrorCode::FENCED_LEADER_EPOCH.code()
            };
            return part;
        }
        match ctx.router.call(shard, &w.topic, w.partition, PartitionOp::Fetch { offset: w.offset, max_bytes: w.max_bytes }).await {
            Ok(OpOutput::Fetch(data)) => {
                part.high_watermark = data.high_watermark;
                part.last_stable_offset = data.high_watermark;
                part.log_start_offset = data.log_start_offset;
                part.records = data.records;
            }
            Ok(_) => part.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Err(e) => {
                // Kafka reports the partition's range with OFFSET_OUT_OF_RANGE so the
                // client can apply auto.offset.reset without another round trip.
                if let crate::partition::PartitionError::OffsetOutOfRange { log_start_offset, log_end_offset, .. } = &e {
                    part.log_start_offset = *log_start_offset;
                    part.high_watermark = *log_end_offset;
                }
                part.error_code = code(&e);
            }
        }
        part
    }))
    .await
}
