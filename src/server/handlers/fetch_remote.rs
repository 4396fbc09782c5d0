//! A consumer's fetch below the local log start of a tiered partition (Kafka's
//! ReplicaManager.handleOffsetOutOfRangeError → RemoteLogReader): when the metadata has a
//! readable remote segment holding the offset, its batches come from the object store
//! (`remote::remote_read`, on the remote I/O runtime: the shard only waits), within
//! remote.fetch.max.wait.ms; past that the partition answers empty with no error, as
//! Kafka's DelayedRemoteFetch does, and the consumer asks again.
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};

use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::partition::ReadLimit;
use crate::protocol::ErrorCode;
use crate::remote::object_keys::partition_prefix;
use crate::remote::remote_read::RemoteRead;
use crate::server::shard::ShardContext;

/// What a remote read gave one partition of a fetch.
pub struct RemoteFetch {
    pub error: ErrorCode,
    pub batches: crate::record::BatchList,
    pub bytes: usize,
    pub first_batch_exceeds_limit: bool,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// The partition's log start offset: its remote log's start.
    pub log_start_offset: i64,
    /// The aborted transactions overlapping the batches (for read_committed).
    pub aborted_transactions: Vec<crate::remote::remote_indexes::RemoteAbortedTxn>,
}

/// The partition a remote read is for, and the replica on this broker it is served by.
pub struct Target<'a> {
    pub shard: u16,
    pub topic: &'a str,
    pub topic_id: &'a [u8; 16],
    pub partition: i32,
    /// A consumer reading from this broker's follower replica (KIP-392).
    pub from_follower: bool,
}

/// The remote read of `offset` (below the local log start, which answered
/// OFFSET_OUT_OF_RANGE), or None when remote storage does not hold it either (the
/// consumer then gets OFFSET_OUT_OF_RANGE, as from Kafka).
pub async fn read(ctx: &Rc<ShardContext>, target: Target<'_>, offset: i64, local_start: i64, limit: ReadLimit, read_committed: bool) -> Option<RemoteFetch> {
    let Target { shard, topic, topic_id, partition, from_follower } = target;
    let store = ctx.remote_store.as_ref()?;
    if offset >= local_start {
        return None;
    }
    let image = ctx.image();
    let remote = image.remote_log.partition(topic_id, partition)?;
    let segment = remote.segment_for(offset)?.clone();
    let remote_start = remote.start_offset()?;
    // The partition's offsets as of now (its high watermark, last stable offset): a read
    // of no bytes at its local start.
    let mut batch = OpBatch::with_capacity(1);
    let probe = ReadLimit { max_bytes: 0, min_one_batch: false, file_slice: false };
    let op = if from_follower {
        PartitionOp::FollowerFetch { offset: local_start, limit: probe, read_committed }
    } else {
        PartitionOp::Fetch { offset: local_start, limit: probe, read_committed }
    };
    batch.push(shard, topic, partition, op);
    let Some(Ok(OpOutput::Fetch(data))) = ctx.router.run(batch).await.into_iter().next() else { return None };
    let (high_watermark, last_stable_offset) = (data.high_watermark, data.last_stable_offset);
    let request = RemoteRead {
        partition_prefix: partition_prefix(&store.settings.key_prefix, topic, topic_id, partition),
        segment_id: segment.segment_id,
        start_offset: segment.start_offset,
        end_offset: segment.end_offset,
        size_bytes: segment.size_bytes,
        offset,
        max_bytes: usize::try_from(limit.max_bytes).unwrap_or(0),
        min_one_batch: limit.min_one_batch,
        timestamp: None,
    };
    let mut out = RemoteFetch {
        error: ErrorCode::NONE,
        batches: Default::default(),
        bytes: 0,
        first_batch_exceeds_limit: false,
        high_watermark,
        last_stable_offset,
        log_start_offset: remote_start,
        aborted_transactions: Vec::new(),
    };
    let wait = Duration::from_millis(ctx.config.remote_fetch_max_wait_ms.max(1));
    // remote.log.manager.fetch.max.bytes.per.second: over this shard's share, no read;
    // the partition answers empty with no error once the share is back (at most
    // remote.fetch.max.wait.ms: the consumer does not spin), and the consumer asks again.
    let throttled = ctx.remote_fetch_rate.borrow_mut().delay(std::time::Instant::now());
    if !throttled.is_zero() {
        crate::metrics::with(|m| m.remote.fetch_throttled += 1);
        glommio::timer::sleep(throttled.min(wait)).await;
        return Some(out);
    }
    let started = std::time::Instant::now();
    let reading = std::pin::pin!(async {
        let read = store.read(request).await;
        crate::metrics::with(|m| m.remote.fetch_time.record(started.elapsed()));
        read
    });
    let timer = std::pin::pin!(glommio::timer::sleep(wait));
    match select(reading, timer).await {
        Either::Left((Ok(read), _)) => {
            if read_committed && read.transactional && read.aborted_transactions.is_none() {
                // A segment uploaded before remote transaction indexes existed: which of
                // its transactions aborted is unknown, so refuse rather than show a
                // read_committed consumer what may have been aborted.
                tracing::warn!(topic, partition, offset, "read_committed fetch of transactional batches in a remote segment without a transaction index");
                out.error = ErrorCode::UNKNOWN_SERVER_ERROR;
                return Some(out);
            }
            out.aborted_transactions = read.aborted_transactions.unwrap_or_default();
            crate::metrics::with(|m| {
                let r = &mut m.remote;
                (r.fetch_requests, r.fetch_bytes) = (r.fetch_requests + 1, r.fetch_bytes + read.bytes as u64);
                (r.fetch_cache_hit_bytes, r.fetch_cache_miss_bytes) =
                    (r.fetch_cache_hit_bytes + read.source.cached_bytes, r.fetch_cache_miss_bytes + read.source.fetched_bytes);
            });
            ctx.remote_fetch_rate.borrow_mut().record(read.bytes as u64, std::time::Instant::now());
            out.bytes = read.bytes;
            out.first_batch_exceeds_limit = read.first_batch_exceeds_limit;
            out.batches = read.batches.into_iter().collect();
        }
        Either::Left((Err(e), _)) => {
            crate::metrics::with(|m| m.remote.fetch_errors += 1);
            tracing::warn!(topic, partition, offset, error = %e, "remote fetch failed");
            out.error = ErrorCode::UNKNOWN_SERVER_ERROR;
        }
        // Kafka's DelayedRemoteFetch expiry: empty, no error; the read goes on and warms
        // the index cache for the consumer's next fetch.
        Either::Right(_) => crate::metrics::with(|m| m.remote.fetch_expired += 1),
    }
    Some(out)
}

/// ListOffsets by timestamp over a tiered partition's remote part (Kafka searches the
/// remote log first): the first record at or after `timestamp` in the first readable
/// remote segment whose largest timestamp reaches it, scanning from where its time index
/// points. None: no remote segment reaches it (the local answer stands); Err: the store
/// failed (UNKNOWN_SERVER_ERROR, as Kafka's).
pub async fn offset_for_timestamp(
    ctx: &Rc<ShardContext>,
    topic: &str,
    topic_id: &[u8; 16],
    partition: i32,
    timestamp: i64,
) -> Option<Result<(i64, i64), ErrorCode>> {
    let store = ctx.remote_store.as_ref()?;
    let image = ctx.image();
    let remote = image.remote_log.partition(topic_id, partition)?;
    let start = remote.start_offset()?;
    let segment = remote.finished().find(|s| s.end_offset >= start && s.max_timestamp_ms >= timestamp)?.clone();
    let prefix = partition_prefix(&store.settings.key_prefix, topic, topic_id, partition);
    let mut next = segment.start_offset.max(start);
    let mut timed = Some(timestamp);
    while next <= segment.end_offset {
        let request = RemoteRead {
            partition_prefix: prefix.clone(),
            segment_id: segment.segment_id,
            start_offset: segment.start_offset,
            end_offset: segment.end_offset,
            size_bytes: segment.size_bytes,
            offset: next,
            max_bytes: 1 << 20,
            min_one_batch: true,
            timestamp: timed.take(),
        };
        let read = match store.read(request).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(topic, partition, timestamp, error = %e, "remote ListOffsets failed");
                return Some(Err(ErrorCode::UNKNOWN_SERVER_ERROR));
            }
        };
        let Some(last) = read.batches.last() else { break };
        for batch in &read.batches {
            let Ok(h) = crate::record::parse_header(batch) else { return Some(Err(ErrorCode::UNKNOWN_SERVER_ERROR)) };
            if h.max_timestamp >= timestamp && h.last_offset() >= start {
                return crate::record::first_record_at_or_after(batch.clone(), &h, timestamp, start).map(Ok);
            }
        }
        next = match crate::record::parse_header(last) {
            Ok(h) => h.last_offset() + 1,
            Err(_) => return Some(Err(ErrorCode::UNKNOWN_SERVER_ERROR)),
        };
    }
    None
}
