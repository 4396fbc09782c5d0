//! Fetch: reads each partition on its owning shard (stored batch bytes, no decode),
//! long-polls until `min_bytes` are available or `max_wait_ms` passes (woken by
//! appends; one watch per shard), and writes the response with the hand-written fetch writer so record
//! bytes go to the socket as they are. Fetch sessions (KIP-227) are answered with full
//! responses and session id 0, which clients accept as "no session".
//!
//! Memory is bounded as in Kafka's ReplicaManager.readFromLog: the response carries at
//! most min(request `max_bytes`, `fetch_max_bytes`) record bytes, partitions are served in
//! request order against what is left of that, each reads at most min(its
//! `partition_max_bytes`, what is left), and only the first batch of the first partition
//! that returns data may exceed the limits. Reads still run in parallel where that cannot
//! change the answer (see `FetchBudget::wave_len`), so one Fetch holds at most its limit
//! plus one batch (plus a block of read slack per partition read at once).
use smallvec::SmallVec;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use kafka_protocol::messages::fetch_request::FetchRequest;

use super::{code, fetch_remote, str_bytes};
use crate::cluster::image::MetadataImage;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp, WatchPoint};
use crate::partition::ReadLimit;
use crate::protocol::{write_fetch_response, AbortedTxn, CurrentLeader, ErrorCode, FetchPartitionParts, FetchResponseParts, FetchTopicParts, NodeEndpoint};
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// One partition a Fetch asks for, resolved against this shard's metadata image.
struct RequestedPartition {
    topic: String,
    topic_id: [u8; 16],
    partition: i32,
    /// (shard, leader epoch), or the error for an unknown topic/partition.
    owner: Result<(u16, i32), ErrorCode>,
    /// Where it is read: the leader's log, this broker's follower replica (KIP-392), or
    /// nowhere: the leader sends the consumer to a same-rack follower.
    source: ReadSource,
    offset: i64,
    partition_max_bytes: i32,
    current_leader_epoch: i32,
}

impl RequestedPartition {
    /// Whether the partition is read at all (else it is answered with an error at once).
    fn is_readable(&self) -> bool {
        match self.owner {
            Ok((_, epoch)) => self.current_leader_epoch < 0 || self.current_leader_epoch == epoch,
            Err(_) => false,
        }
    }
}

/// Which replica on this broker serves a consumer's partition (KIP-392).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadSource {
    Leader,
    Follower,
    /// This broker leads, and the rack-aware selector sends the consumer to this replica:
    /// answered with `preferred_read_replica` and no records, as Kafka does.
    Redirect(i32),
}

/// Kafka's response budget for one Fetch (ReplicaManager.readFromLog): partitions are
/// served in request order against what is left of the response limit; each reads at
/// most min(`partition_max_bytes`, what is left); until a partition has returned data the
/// first batch may exceed the limits (minOneMessage), after that they are hard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FetchBudget {
    /// Never negative once a partition was served (Kafka: max(0, limit - read)); negative
    /// before only when the request's `max_bytes` is.
    remaining_bytes: i64,
    min_one_batch: bool,
}

impl FetchBudget {
    fn new(request_max_bytes: i32, fetch_max_bytes: usize) -> FetchBudget {
        let fetch_max_bytes = i64::try_from(fetch_max_bytes).unwrap_or(i64::MAX);
        FetchBudget { remaining_bytes: i64::from(request_max_bytes).min(fetch_max_bytes), min_one_batch: true }
    }

    /// The limit the next partition reads with, served sequentially.
    fn limit_for(&self, partition_max_bytes: i32) -> ReadLimit {
        // Consumer reads: what comes from disk may be sent with `sendfile`.
        ReadLimit { max_bytes: i64::from(partition_max_bytes).min(self.remaining_bytes), min_one_batch: self.min_one_batch, file_slice: true }
    }

    /// Records what the partition just served returned.
    fn consume(&mut self, bytes: usize) {
        if bytes > 0 {
            self.min_one_batch = false;
        }
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.remaining_bytes = self.remaining_bytes.saturating_sub(bytes).max(0);
    }

    /// How many of the next partitions (`Some(partition_max_bytes)` for one that is read,
    /// `None` for one answered with an error) may be read at once: the first with
    /// `limit_for`, each later one with its own `partition_max_bytes` and no
    /// min_one_batch. While their maxima fit in what is left, that is the limit a
    /// sequential read would give each, so the answer is Kafka's (`settle` corrects the
    /// two cases where it is not: an oversized first batch read above its maximum, and a
    /// later partition that sequentially would have had min_one_batch). The sum of what
    /// they read is bounded by what is left, plus one batch.
    fn wave_len(&self, next: impl IntoIterator<Item = Option<i32>>) -> usize {
        let mut sum = 0i64;
        let mut n = 0;
        for partition_max_bytes in next {
            let cost = partition_max_bytes.map_or(0, |m| i64::from(m.max(0)));
            if n == 0 {
                sum = cost.min(self.remaining_bytes.max(0));
            } else if sum + cost > self.remaining_bytes {
                break;
            } else {
                sum += cost;
            }
            n += 1;
        }
        n
    }
}

/// What one partition read returned.
struct PartitionRead {
    part: FetchPartitionParts,
    bytes: usize,
    first_batch_exceeds_limit: bool,
}

impl PartitionRead {
    /// A file slice (zero-copy read) larger than `limit`: its batch boundaries are not
    /// known here, so it cannot be trimmed; the partition is read again with `limit`.
    fn must_reread_within(&self, limit: ReadLimit) -> bool {
        self.part.file_records.as_ref().is_some_and(|f| i64::try_from(f.len()).unwrap_or(i64::MAX) > limit.max_bytes)
    }

    /// Keeps the longest prefix of whole batches within `limit`: what a read with that
    /// (smaller) limit returns. A file slice is within it (see `must_reread_within`).
    fn trim_to(&mut self, limit: ReadLimit) {
        debug_assert!(!self.must_reread_within(limit), "a file slice is trimmed by reading again");
        if self.part.file_records.is_some() {
            // A read returns one form: a slice within the limit is all there is.
            return;
        }
        let max_bytes = usize::try_from(limit.max_bytes).unwrap_or(0);
        let (mut kept, mut bytes) = (0, 0usize);
        for b in &self.part.records {
            if bytes + b.len() > max_bytes && !(kept == 0 && limit.min_one_batch) {
                self.first_batch_exceeds_limit = kept == 0;
                break;
            }
            bytes += b.len();
            kept += 1;
        }
        self.part.records.truncate(kept);
        self.bytes = bytes;
    }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: FetchRequest, client_id: &str) -> Response {
    // A follower (replica id >= 0; consumers send -1) is served by `replica_fetch`.
    let replica = if meta.version >= 15 { req.replica_state.replica_id.0 } else { req.replica_id.0 };
    if replica >= 0 {
        return super::replica_fetch::handle(ctx, meta, req, replica).await;
    }
    let image = ctx
        .image_for_request(|image| {
            let topic = |t: &kafka_protocol::messages::fetch_request::FetchTopic| {
                if meta.version >= 13 {
                    image.topic_by_id(t.topic_id.as_bytes())
                } else {
                    image.topic(t.topic.0.as_str())
                }
            };
            req.topics.iter().map(|t| super::unknown_partitions(topic(t), t.partitions.iter().map(|p| p.partition))).sum()
        })
        .await;
    // The consumer's rack (client.rack, Fetch v11+), if rack-aware reads are on.
    let rack = Some(req.rack_id.as_str()).filter(|r| !r.is_empty() && meta.version >= 11 && ctx.config.rack_aware_reads());
    let mut requested = Vec::new();
    // ACLs: READ on each topic, else TOPIC_AUTHORIZATION_FAILED (before existence).
    let access = ctx.access(&meta);
    for t in &req.topics {
        let topic = if meta.version >= 13 { image.topic_by_id(t.topic_id.as_bytes()) } else { image.topic(t.topic.0.as_str()) };
        let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
        let name = topic.map_or(t.topic.0.as_str(), |x| x.name.as_str());
        let denied = access.is_checked() && (topic.is_some() || meta.version < 13) && !access.allows_topic(Operation::Read, name);
        for p in &t.partitions {
            // A partition another broker leads (or none) is not read here: Kafka answers
            // NOT_LEADER_OR_FOLLOWER (with the leader, v16+: see `leader_hints`), unless
            // this broker holds a follower replica and the consumer may read from it
            // (KIP-392, Fetch v11+: it was sent here by the leader's preferred replica).
            let mut source = ReadSource::Leader;
            let owner = topic
                .filter(|_| !denied)
                .and_then(|tm| tm.partition(p.partition))
                .ok_or(if denied {
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED
                } else if topic.is_some() {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    unknown
                })
                .and_then(|x| {
                    if x.leader == ctx.config.node_id {
                        if let Some(replica) = preferred_read_replica(ctx, &image, x, rack) {
                            source = ReadSource::Redirect(replica);
                        }
                        Ok((x.shard, x.leader_epoch))
                    } else if let Some(r) = x.replica_on(ctx.config.node_id).filter(|_| meta.version >= 11 && x.leader >= 0) {
                        source = ReadSource::Follower;
                        Ok((r.shard, x.leader_epoch))
                    } else {
                        Err(ErrorCode::NOT_LEADER_OR_FOLLOWER)
                    }
                });
            requested.push(RequestedPartition {
                topic: topic.map(|x| x.name.clone()).unwrap_or_else(|| t.topic.0.to_string()),
                // Before v13 the request names topics, not ids: the id is the image's
                // (tiered storage finds a partition's remote log by it).
                topic_id: topic.map_or(*t.topic_id.as_bytes(), |x| x.topic_id),
                partition: p.partition,
                owner,
                offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                source,
            });
        }
    }
    let budget = FetchBudget::new(req.max_bytes, ctx.config.fetch_max_bytes);
    // isolation_level (v4+): 1 = read_committed, read below the last stable offset.
    let read_committed = meta.version >= 4 && req.isolation_level == 1;
    // Kafka: fetchMinBytes = min(request min_bytes, the response limit).
    let min_bytes = i64::from(req.min_bytes).min(budget.remaining_bytes).max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let parts = loop {
        let parts = read_all(ctx, &requested, budget, read_committed).await;
        let total: usize = parts.iter().map(|p| p.bytes).sum();
        let errored = parts.iter().any(|p| p.part.error_code != 0);
        let now = Instant::now();
        // A partition sent to a preferred replica answers at once (Kafka does not hold a
        // fetch that redirects the consumer).
        let redirected = requested.iter().any(|w| matches!(w.source, ReadSource::Redirect(_)));
        if total >= min_bytes.max(1) || errored || redirected || now >= deadline || requested.is_empty() {
            break parts;
        }
        // Long poll: wait for any partition's high watermark to move, or the deadline.
        // The read is dropped first: a waiting fetch holds no record bytes. One watch per
        // shard; when the deadline wins, dropping it withdraws them all.
        let mut watches = OpBatch::with_capacity(requested.len());
        for (w, p) in requested.iter().zip(&parts) {
            if let Ok((shard, _)) = w.owner {
                watches.push(shard, &w.topic, w.partition, WatchPoint::HighWatermark(p.part.high_watermark));
            }
        }
        drop(parts);
        if watches.is_empty() {
            glommio::timer::sleep(deadline - now).await;
            continue;
        }
        futures::select! {
            _ = ctx.router.watch_any(watches).fuse() => {}
            _ = glommio::timer::sleep(deadline - now).fuse() => {}
        }
    };
    record_fetch_metrics(&requested, &parts);
    let mut topics: SmallVec<[FetchTopicParts; 1]> = SmallVec::new();
    for (w, p) in requested.iter().zip(parts) {
        let same_topic = topics.last().is_some_and(|t| t.name.as_str() == w.topic && t.topic_id == w.topic_id);
        if !same_topic {
            topics.push(FetchTopicParts { name: str_bytes(&w.topic), topic_id: w.topic_id, partitions: SmallVec::new() });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(p.part);
        }
    }
    let node_endpoints = if meta.version >= 16 { leader_hints(&image, &mut topics) } else { Vec::new() };
    let mut resp = FetchResponseParts { throttle_time_ms: meta.throttle_time_ms, error_code: 0, session_id: 0, topics, node_endpoints };
    match write_fetch_response(meta.correlation_id, meta.version, &resp) {
        Ok(frames) => {
            // The consumer quota, as Kafka checks it: on the response about to be sent.
            // Over it, the client gets an empty response and the time to wait, and its
            // connections are read no more until then.
            let bytes = frames.iter().map(|f| f.len()).sum();
            let quotas = &ctx.image().security.client_quotas;
            let throttle = ctx.client_quotas.check_fetch_response(meta.principal, client_id, bytes, quotas);
            if throttle == 0 {
                return Response::Frames(frames);
            }
            let throttle_time_ms = meta.throttle_time_ms.max(i32::try_from(throttle).unwrap_or(i32::MAX));
            let empty = FetchResponseParts { throttle_time_ms, error_code: 0, session_id: 0, topics: SmallVec::new(), node_endpoints: Vec::new() };
            match write_fetch_response(meta.correlation_id, meta.version, &empty) {
                Ok(frames) => Response::Frames(frames),
                Err(_) => Response::Close,
            }
        }
        Err(e) => {
            // Unreachable while the budget holds (see FetchBudget); answer every partition
            // with an error rather than send a length that lies.
            tracing::error!(shard = ctx.shard, error = %e, "fetch response refused");
            for p in resp.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                p.records.clear();
                p.file_records = None;
                p.error_code = code(&e);
            }
            match write_fetch_response(meta.correlation_id, meta.version, &resp) {
                Ok(frames) => Response::Frames(frames),
                Err(_) => Response::Close,
            }
        }
    }
}

/// Kafka's BrokerTopicMetrics and ErrorsPerSec of a consumer fetch: per partition read,
/// on the topic if it exists (a misspelt name makes no series).
fn record_fetch_metrics(requested: &[RequestedPartition], parts: &[PartitionRead]) {
    crate::metrics::with(|m| {
        for (w, p) in requested.iter().zip(parts) {
            m.record_error(kafka_protocol::messages::ApiKey::Fetch as i16, p.part.error_code, 1);
            if w.owner.is_ok() {
                let t = m.topic(&w.topic);
                t.fetch_requests += 1;
                t.bytes_out += p.bytes as u64;
                t.failed_fetch_requests += u64::from(p.part.error_code != 0);
            }
        }
    });
}

/// KIP-392's rack-aware replica selector (Kafka's RackAwareReplicaSelector), on the
/// leader: a consumer in `rack` is sent to an in-sync replica on a live broker in its rack
/// (the first in replica order), unless the leader is in that rack itself or no such
/// replica exists (then it reads here, as without a rack).
fn preferred_read_replica(ctx: &ShardContext, image: &MetadataImage, p: &crate::cluster::image::PartitionMeta, rack: Option<&str>) -> Option<i32> {
    let rack = rack?;
    let rack_of = |b: i32| image.brokers.get(&b).filter(|m| !m.fenced).and_then(|m| m.rack.as_deref());
    if rack_of(ctx.config.node_id) == Some(rack) {
        return None;
    }
    p.replicas.iter().map(|r| r.broker).find(|b| *b != ctx.config.node_id && p.isr.contains(b) && rack_of(*b) == Some(rack))
}

/// KIP-951 (Fetch v16+, as Kafka's KafkaApis): each partition answered
/// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its current leader when a live
/// broker leads it, and the response carries those brokers' endpoints (each once), so the
/// consumer moves without a metadata round trip. Error path only.
fn leader_hints(image: &MetadataImage, topics: &mut [FetchTopicParts]) -> Vec<NodeEndpoint> {
    let hinted = [ErrorCode::NOT_LEADER_OR_FOLLOWER.code(), ErrorCode::FENCED_LEADER_EPOCH.code()];
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for t in topics {
        let Some(meta_topic) = image.topic(t.name.as_str()) else { continue };
        for p in t.partitions.iter_mut().filter(|p| hinted.contains(&p.error_code)) {
            let Some(pm) = meta_topic.partition(p.partition_index) else { continue };
            let Some(b) = image.brokers.get(&pm.leader).filter(|b| !b.fenced) else { continue };
            p.current_leader = Some(CurrentLeader { leader_id: pm.leader, leader_epoch: pm.leader_epoch });
            if !endpoints.iter().any(|e| e.node_id == pm.leader) {
                endpoints.push(NodeEndpoint { node_id: b.id, host: str_bytes(&b.host), port: b.port, rack: b.rack.as_deref().map(str_bytes) });
            }
        }
    }
    endpoints
}

/// Reads every requested partition within `budget` (see the module header): in waves of
/// partitions read at once (one router batch each: one message per other shard),
/// settled in request order.
async fn read_all(ctx: &Rc<ShardContext>, requested: &[RequestedPartition], mut budget: FetchBudget, read_committed: bool) -> Vec<PartitionRead> {
    let mut out: Vec<PartitionRead> = Vec::with_capacity(requested.len());
    while out.len() < requested.len() {
        let rest = &requested[out.len()..];
        let n = budget.wave_len(rest.iter().map(|w| w.is_readable().then_some(w.partition_max_bytes)));
        debug_assert!(n >= 1, "every wave reads at least one partition");
        let wave = &rest[..n.max(1)];
        let reads = read_wave(ctx, wave, read_committed, |i, w| {
            if i == 0 {
                budget.limit_for(w.partition_max_bytes)
            } else {
                ReadLimit { max_bytes: i64::from(w.partition_max_bytes), min_one_batch: false, file_slice: true }
            }
        });
        let reads = reads.await;
        // Settle in request order: each partition ends with what a sequential read gives.
        for (w, mut read) in wave.iter().zip(reads) {
            let limit = budget.limit_for(w.partition_max_bytes);
            if (read.first_batch_exceeds_limit && limit.min_one_batch) || read.must_reread_within(limit) {
                // Nothing was returned before it: Kafka gives this partition its first
                // batch whatever its size (rare: an empty partition, then a large batch).
                // Or a zero-copy slice read beside others is over what is left for it.
                let again = read_wave(ctx, std::slice::from_ref(w), read_committed, |_, _| limit).await;
                read = again.into_iter().next().unwrap_or(read);
            } else {
                read.trim_to(limit);
            }
            budget.consume(read.bytes);
            out.push(read);
        }
    }
    out
}

/// Reads the partitions of `wave` at once, each within `limit_of(its index, it)`; the
/// readable ones go to their shards as one router batch.
async fn read_wave(
    ctx: &Rc<ShardContext>,
    wave: &[RequestedPartition],
    read_committed: bool,
    limit_of: impl Fn(usize, &RequestedPartition) -> ReadLimit,
) -> Vec<PartitionRead> {
    let mut reads: Vec<PartitionRead> = wave.iter().map(unread).collect();
    let mut batch = OpBatch::with_capacity(wave.len());
    for (i, w) in wave.iter().enumerate() {
        if let (true, Ok((shard, _))) = (w.is_readable(), w.owner) {
            let op = match w.source {
                ReadSource::Leader => PartitionOp::Fetch { offset: w.offset, limit: limit_of(i, w), read_committed },
                ReadSource::Follower => PartitionOp::FollowerFetch { offset: w.offset, limit: limit_of(i, w), read_committed },
                // No records: the offsets only (Kafka's answer with a preferred replica).
                ReadSource::Redirect(_) => {
                    PartitionOp::Fetch { offset: w.offset, limit: ReadLimit { max_bytes: 0, min_one_batch: false, file_slice: false }, read_committed }
                }
            };
            batch.push(shard, &w.topic, w.partition, op);
        }
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    let image = ctx.image();
    // Partitions read below their local log start: (index in `wave`, local log start).
    let mut below_local = Vec::new();
    for (i, (read, w)) in reads.iter_mut().zip(wave).enumerate().filter(|(_, (_, w))| w.is_readable()) {
        let part = &mut read.part;
        match results.next() {
            Some(Ok(OpOutput::Fetch(data))) => {
                if let ReadSource::Redirect(replica) = w.source {
                    part.preferred_read_replica = replica;
                }
                part.high_watermark = data.high_watermark;
                part.last_stable_offset = data.last_stable_offset;
                // A tiered partition's log starts in remote storage (looked up only on a
                // broker with tiered storage: nothing added to the fetch path otherwise).
                let remote_start =
                    if ctx.remote_store.is_some() { image.remote_log.partition(&w.topic_id, w.partition).and_then(|r| r.start_offset()) } else { None };
                part.log_start_offset = remote_start.map_or(data.log_start_offset, |r| r.min(data.log_start_offset));
                part.aborted_transactions = data
                    .aborted_transactions
                    .map(|list| list.into_iter().map(|a| AbortedTxn { producer_id: a.producer_id, first_offset: a.first_offset }).collect());
                part.records = data.records;
                part.file_records = data.file_records;
                read.bytes = data.bytes;
                read.first_batch_exceeds_limit = data.first_batch_exceeds_limit;
            }
            Some(Ok(_)) | None => part.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => {
                // Kafka reports the partition's range with OFFSET_OUT_OF_RANGE so the
                // client can apply auto.offset.reset without another round trip.
                if let crate::partition::PartitionError::OffsetOutOfRange { log_start_offset, log_end_offset, .. } = &e {
                    part.log_start_offset = *log_start_offset;
                    part.high_watermark = *log_end_offset;
                    // Tiered storage: history below the local log start may be remote.
                    if !matches!(w.source, ReadSource::Redirect(_)) && ctx.remote_store.is_some() {
                        below_local.push((i, *log_start_offset));
                    }
                }
                part.error_code = code(&e);
            }
        }
    }
    // The remote reads of the partitions below their local log run at once (each waits
    // on the object store, not on this shard): a fetch of many partitions' history takes
    // about one read's time, not their sum.
    let remote_reads = below_local.into_iter().filter_map(|(i, local_start)| {
        let w = &wave[i];
        let Ok((shard, _)) = w.owner else { return None };
        let target =
            fetch_remote::Target { shard, topic: &w.topic, topic_id: &w.topic_id, partition: w.partition, from_follower: w.source == ReadSource::Follower };
        let limit = limit_of(i, w);
        Some(async move { (i, fetch_remote::read(ctx, target, w.offset, local_start, limit, read_committed).await) })
    });
    for (i, remote) in futures::future::join_all(remote_reads).await {
        if let Some(r) = remote {
            let read = &mut reads[i];
            read.part.error_code = r.error.code();
            read.part.high_watermark = r.high_watermark;
            read.part.last_stable_offset = r.last_stable_offset;
            read.part.log_start_offset = r.log_start_offset;
            // Remote data holds no open transaction (uploads stop at the last stable
            // offset); the aborted ones come from the segment's remote transaction index.
            read.part.aborted_transactions = read_committed
                .then(|| r.aborted_transactions.iter().map(|a| AbortedTxn { producer_id: a.producer_id, first_offset: a.first_offset }).collect());
            read.part.records = r.batches;
            read.bytes = r.bytes;
            read.first_batch_exceeds_limit = r.first_batch_exceeds_limit;
        }
    }
    reads
}

/// A partition before its read: empty, or answered with its error when it is not read
/// (unknown topic or partition, stale or future leader epoch).
fn unread(w: &RequestedPartition) -> PartitionRead {
    let mut read = PartitionRead { part: FetchPartitionParts::new(w.partition), bytes: 0, first_batch_exceeds_limit: false };
    match w.owner {
        Err(e) => read.part.error_code = e.code(),
        Ok((_, epoch)) if w.current_leader_epoch >= 0 && w.current_leader_epoch != epoch => {
            read.part.error_code = if w.current_leader_epoch > epoch { ErrorCode::UNKNOWN_LEADER_EPOCH.code() } else { ErrorCode::FENCED_LEADER_EPOCH.code() };
        }
        Ok(_) => {}
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    const MIB: usize = 1 << 20;

    /// Serves `sizes[i]` (the batch sizes partition i holds) sequentially, as Kafka does.
    fn sequential(mut budget: FetchBudget, partitions: &[(i32, Vec<usize>)]) -> Vec<Vec<usize>> {
        partitions
            .iter()
            .map(|(partition_max_bytes, batches)| {
                let limit = budget.limit_for(*partition_max_bytes);
                let mut read = PartitionRead { part: FetchPartitionParts::new(0), bytes: 0, first_batch_exceeds_limit: false };
                read.part.records = batches.iter().map(|&n| Bytes::from(vec![0u8; n])).collect();
                read.trim_to(limit);
                budget.consume(read.bytes);
                read.part.records.iter().map(Bytes::len).collect()
            })
            .collect()
    }

    #[test]
    fn response_limit_is_the_smaller_of_request_and_broker() {
        assert_eq!(FetchBudget::new(i32::MAX, 57_671_680).remaining_bytes, 57_671_680);
        assert_eq!(FetchBudget::new(1000, 57_671_680).remaining_bytes, 1000);
        // max_bytes <= 0 is not "unlimited".
        assert_eq!(FetchBudget::new(0, 57_671_680).remaining_bytes, 0);
        assert_eq!(FetchBudget::new(-1, 57_671_680).remaining_bytes, -1);
    }

    #[test]
    fn partitions_share_a_shrinking_budget_and_only_the_first_batch_may_exceed_it() {
        // 10 MiB response limit, partitions allow 4 MiB each, 1 MiB batches.
        let p = |n: usize| (4 * MIB as i32, vec![MIB; n]);
        let got = sequential(FetchBudget::new(i32::MAX, 10 * MIB), &[p(6), p(6), p(6), p(6)]);
        assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 4, 2, 0]);
        // max_bytes = 0: the first partition with data gets one batch, nothing else.
        let got = sequential(FetchBudget::new(0, 10 * MIB), &[(4 * MIB as i32, vec![]), p(3), p(3)]);
        assert_eq!(got, vec![vec![], vec![MIB], vec![]]);
        // A first batch above both limits is served whole (minOneMessage), later ones not.
        let big = (1000, vec![5 * MIB]);
        let got = sequential(FetchBudget::new(2000, 10 * MIB), &[big.clone(), big]);
        assert_eq!(got, vec![vec![5 * MIB], vec![]]);
        // partition_max_bytes = 0 still gives the first partition one batch; a negative
        // one is a negative limit (the read refuses it), not "unlimited".
        assert_eq!(FetchBudget::new(100, 1000).limit_for(0), ReadLimit { max_bytes: 0, min_one_batch: true, file_slice: true });
        assert_eq!(FetchBudget::new(100, 1000).limit_for(-5).max_bytes, -5);
    }

    #[test]
    fn consume_never_goes_negative_and_ends_min_one_batch() {
        let mut b = FetchBudget::new(-1, 1000);
        b.consume(0);
        assert_eq!(b, FetchBudget { remaining_bytes: 0, min_one_batch: true }, "Kafka: max(0, limit - read)");
        b.consume(500);
        assert_eq!(b, FetchBudget { remaining_bytes: 0, min_one_batch: false });
    }

    #[test]
    fn waves_fit_in_what_is_left() {
        let b = FetchBudget::new(i32::MAX, 10 * MIB);
        let m = MIB as i32;
        // 1 MiB per partition: ten fit after the first (which takes its own 1 MiB).
        assert_eq!(b.wave_len(vec![Some(m); 30]), 10);
        // A partition asking for more than the whole budget is read alone.
        assert_eq!(b.wave_len(vec![Some(i32::MAX), Some(m)]), 1);
        assert_eq!(b.wave_len(vec![Some(m), Some(i32::MAX), Some(m)]), 1);
        // Partitions answered with errors cost nothing; negative maxima cost nothing.
        assert_eq!(b.wave_len(vec![None, None, Some(-1), Some(10 * m), None]), 5);
        assert_eq!(b.wave_len(Vec::<Option<i32>>::new()), 0);
        // Nothing left: one at a time (each may still be the first to return data).
        assert_eq!(FetchBudget::new(0, 10 * MIB).wave_len(vec![Some(m); 3]), 1);
        // The wave's maxima never exceed what is left (the memory bound).
        for parts in [vec![Some(3 * m); 8], vec![Some(m / 3); 100], vec![Some(7 * m), Some(2 * m), Some(m)]] {
            let n = b.wave_len(parts.clone());
            let sum: i64 = parts[..n].iter().map(|p| i64::from(p.unwrap_or(0).max(0))).sum();
            assert!(n == 1 || sum <= b.remaining_bytes, "{n} partitions ask {sum} > {}", b.remaining_bytes);
        }
    }

    #[test]
    fn a_file_slice_over_the_limit_is_read_again_not_trimmed() {
        let file = tempfile::tempfile().unwrap();
        let slice = crate::runtime::file_slice::FileSlice::new(std::sync::Arc::new(file.into()), 0, 600);
        let mut read = PartitionRead { part: FetchPartitionParts::new(0), bytes: 600, first_batch_exceeds_limit: false };
        read.part.file_records = Some(slice);
        let limit = |max_bytes| ReadLimit { max_bytes, min_one_batch: false, file_slice: true };
        assert!(read.must_reread_within(limit(599)));
        assert!(!read.must_reread_within(limit(600)));
        read.trim_to(limit(600));
        assert_eq!((read.bytes, read.part.file_records.as_ref().map(|f| f.len())), (600, Some(600)), "within the limit: kept whole");
    }

    #[test]
    fn trim_keeps_whole_batches_within_the_limit() {
        let mut read = PartitionRead { part: FetchPartitionParts::new(0), bytes: 0, first_batch_exceeds_limit: false };
        read.part.records = [100, 200, 300].iter().map(|&n| Bytes::from(vec![0u8; n])).collect();
        read.trim_to(ReadLimit { max_bytes: 350, min_one_batch: false, file_slice: true });
        assert_eq!((read.part.records.len(), read.bytes, read.first_batch_exceeds_limit), (2, 300, false));
        read.trim_to(ReadLimit { max_bytes: 50, min_one_batch: false, file_slice: true });
        assert_eq!((read.part.records.len(), read.bytes, read.first_batch_exceeds_limit), (0, 0, true));
    }
}
