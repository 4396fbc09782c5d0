//! Fetch from a follower (replica id >= 0), on the leader: Kafka's ReplicaManager for a
//! follower fetch. Differences from a consumer's fetch (`fetch.rs`):
//! - it reads up to the leader's written offset, not the high watermark (the follower
//!   must have data before the high watermark can pass it);
//! - it records the follower's position (the fetch offset), which moves the high
//!   watermark and completes acks=all produces;
//! - a follower whose last fetched epoch ends elsewhere here gets a diverging epoch
//!   (KIP-320) instead of data;
//! - only replicas of the partition may fetch as a replica (else NOT_LEADER_OR_FOLLOWER,
//!   as Kafka's "replica is not recognized" case);
//! - the long poll waits for new data (the written offset), not the high watermark.
//!
//! Bounded as a consumer fetch is (Kafka's readFromLog): partitions in request order, each
//! reads at most min(its `partition_max_bytes`, what is left of min(request max_bytes,
//! replica_fetch_response_max_bytes)); only the first batch of the first partition that
//! returns data may exceed it (the fetcher rotates which partition goes first).
use smallvec::SmallVec;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use kafka_protocol::messages::fetch_request::FetchRequest;

use super::{code, str_bytes};
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp, WatchPoint};
use crate::partition::ReadLimit;
use crate::protocol::{write_fetch_response, DivergingEpoch, ErrorCode, FetchPartitionParts, FetchResponseParts, FetchTopicParts};
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// One partition a follower asks for, resolved against this broker's image.
struct Asked {
    topic: String,
    topic_id: [u8; 16],
    partition: i32,
    /// The owning shard here, or the error answered at once.
    owner: Result<u16, ErrorCode>,
    offset: i64,
    last_fetched_epoch: i32,
    partition_max_bytes: i32,
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: FetchRequest, replica: i32) -> Response {
    let image = ctx.image();
    // KIP-903 (Fetch v15+): the follower process's broker epoch; -1 before v15.
    let replica_epoch = if meta.version >= 15 { req.replica_state.replica_epoch } else { -1 };
    let mut asked: Vec<Asked> = Vec::new();
    // A follower needs CLUSTER_ACTION; without it every partition is
    // TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
    let denied = !ctx.access(&meta).allows_cluster(Operation::ClusterAction);
    for t in &req.topics {
        let topic = if meta.version >= 13 { image.topic_by_id(t.topic_id.as_bytes()) } else { image.topic(t.topic.0.as_str()) };
        let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
        for p in &t.partitions {
            let owner = match topic.map(|tm| tm.partition(p.partition)) {
                _ if denied => Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED),
                None => Err(unknown),
                Some(None) => Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                Some(Some(pm)) => {
                    if pm.leader != ctx.config.node_id || pm.replica_on(replica).is_none() {
                        Err(ErrorCode::NOT_LEADER_OR_FOLLOWER)
                    } else if p.current_leader_epoch >= 0 && p.current_leader_epoch < pm.leader_epoch {
                        Err(ErrorCode::FENCED_LEADER_EPOCH)
                    } else if p.current_leader_epoch > pm.leader_epoch {
                        Err(ErrorCode::UNKNOWN_LEADER_EPOCH)
                    } else {
                        Ok(pm.shard)
                    }
                }
            };
            asked.push(Asked {
                topic: topic.map(|x| x.name.clone()).unwrap_or_else(|| t.topic.0.to_string()),
                topic_id: *t.topic_id.as_bytes(),
                partition: p.partition,
                owner,
                offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                partition_max_bytes: p.partition_max_bytes,
            });
        }
    }
    let max_bytes = i64::from(req.max_bytes.max(0)).min(i64::from(ctx.config.replica_fetch_response_max_bytes.max(0)));
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let parts = loop {
        let parts = read_all(ctx, &asked, replica, replica_epoch, max_bytes).await;
        let has_data = parts.iter().any(|(p, _)| !p.records.is_empty() || p.diverging_epoch.is_some() || p.error_code != 0);
        let now = Instant::now();
        if has_data || now >= deadline || asked.iter().all(|a| a.owner.is_err()) {
            break parts;
        }
        // Nothing new: wait for any partition's written data to pass the follower's offset.
        let mut watches = OpBatch::with_capacity(asked.len());
        for a in &asked {
            if let Ok(shard) = a.owner {
                watches.push(shard, &a.topic, a.partition, WatchPoint::WrittenOffset(a.offset));
            }
        }
        drop(parts);
        futures::select! {
            _ = ctx.router.watch_any(watches).fuse() => {}
            _ = glommio::timer::sleep(deadline - now).fuse() => {}
        }
    };
    // Kafka's ReplicationBytesOutPerSec, on topics that exist.
    crate::metrics::with(|m| {
        for (a, (_, bytes)) in asked.iter().zip(&parts) {
            if a.owner.is_ok() && *bytes > 0 {
                m.topic(&a.topic).replication_bytes_out += *bytes as u64;
            }
        }
    });
    let mut topics: SmallVec<[FetchTopicParts; 1]> = SmallVec::new();
    for (a, (part, _)) in asked.iter().zip(parts) {
        let same = topics.last().is_some_and(|t| t.topic_id == a.topic_id && t.name.as_str() == a.topic);
        if !same {
            topics.push(FetchTopicParts { name: str_bytes(&a.topic), topic_id: a.topic_id, partitions: SmallVec::new() });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(part);
        }
    }
    let resp = FetchResponseParts { throttle_time_ms: 0, error_code: 0, session_id: 0, topics, node_endpoints: Vec::new() };
    match write_fetch_response(meta.correlation_id, meta.version, &resp) {
        Ok(frames) => Response::Frames(frames),
        Err(e) => {
            tracing::error!(shard = ctx.shard, replica, error = %e, "replica fetch response refused");
            Response::Close
        }
    }
}

/// Reads the partitions in request order against what is left of `max_bytes` (Kafka's
/// ReplicaManager.readFromLog): each reads at most min(its `partition_max_bytes`, what is
/// left), and until one has returned data the first batch may exceed that (so a batch
/// larger than the limits still replicates). Partitions are read at once in waves whose
/// worst case fits in what is left, so the response stays within its limit plus one
/// batch. Returns each partition's answer and its record bytes.
async fn read_all(ctx: &Rc<ShardContext>, asked: &[Asked], replica: i32, replica_epoch: i64, max_bytes: i64) -> Vec<(FetchPartitionParts, usize)> {
    let mut out: Vec<(FetchPartitionParts, usize)> = Vec::with_capacity(asked.len());
    let mut remaining = max_bytes;
    let mut returned_data = false;
    while out.len() < asked.len() {
        let rest = &asked[out.len()..];
        let mut worst = 0i64;
        let mut n = 0;
        for a in rest {
            let cost = if a.owner.is_ok() { i64::from(a.partition_max_bytes.max(0)).min(remaining.max(0)) } else { 0 };
            if n > 0 && worst + cost > remaining.max(0) {
                break;
            }
            worst += cost;
            n += 1;
        }
        let wave = &rest[..n.max(1)];
        let mut batch = OpBatch::with_capacity(wave.len());
        for (i, a) in wave.iter().enumerate() {
            if let Ok(shard) = a.owner {
                let limit = ReadLimit {
                    max_bytes: i64::from(a.partition_max_bytes.max(0)).min(remaining.max(0)),
                    min_one_batch: !returned_data && i == 0,
                    // Followers' reads are near the tail (the batch cache) and kept
                    // copying: the leader's replica answers are left as they were.
                    file_slice: false,
                };
                let op = PartitionOp::ReplicaFetch { replica, replica_epoch, offset: a.offset, last_fetched_epoch: a.last_fetched_epoch, limit };
                batch.push(shard, &a.topic, a.partition, op);
            }
        }
        let mut results = ctx.router.run(batch).await.into_iter();
        let image = ctx.image();
        for a in wave {
            // Where the partition's remote log starts (tiered storage on here and in use),
            // looked up only for a fetch below the local log.
            let remote_start = || ctx.remote_store.as_ref().and_then(|_| image.remote_log.partition(&a.topic_id, a.partition)?.start_offset());
            let (part, bytes) = answer(a, remote_start, &mut results);
            remaining -= bytes as i64;
            returned_data |= bytes > 0;
            out.push((part, bytes));
        }
    }
    out
}

/// One partition's answer from its read result (or its error when it was not read).
///
/// Below the local log start of a tiered partition (`remote_start`: where its remote log
/// starts), the follower is told OFFSET_MOVED_TO_TIERED_STORAGE and restarts at the
/// remote log's end (Kafka's ReplicaManager); below the remote log too, OFFSET_OUT_OF_RANGE
/// with the remote start as the log start, where it restarts first.
fn answer(
    a: &Asked,
    remote_start: impl FnOnce() -> Option<i64>,
    results: &mut impl Iterator<Item = crate::cluster::router::OpResult<crate::server::shard::ShardResult>>,
) -> (FetchPartitionParts, usize) {
    let mut part = FetchPartitionParts::new(a.partition);
    let mut bytes = 0;
    match a.owner {
        Err(e) => part.error_code = e.code(),
        Ok(_) => match results.next() {
            Some(Ok(OpOutput::ReplicaFetch(read))) => {
                part.high_watermark = read.data.high_watermark;
                part.last_stable_offset = read.data.last_stable_offset;
                part.log_start_offset = read.data.log_start_offset;
                if let Some((epoch, end_offset)) = read.diverging {
                    part.diverging_epoch = Some(DivergingEpoch { epoch, end_offset });
                }
                bytes = read.data.bytes;
                part.records = read.data.records;
            }
            Some(Ok(_)) | None => part.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => {
                part.error_code = code(&e);
                if let crate::partition::PartitionError::OffsetOutOfRange { log_start_offset, log_end_offset, .. } = &e {
                    part.log_start_offset = *log_start_offset;
                    part.high_watermark = *log_end_offset;
                    if let Some(remote_start) = (a.offset < *log_start_offset).then(remote_start).flatten().filter(|&r| r < *log_start_offset) {
                        part.log_start_offset = remote_start;
                        if a.offset >= remote_start {
                            part.error_code = ErrorCode::OFFSET_MOVED_TO_TIERED_STORAGE.code();
                        }
                    }
                }
            }
        },
    }
    (part, bytes)
}
