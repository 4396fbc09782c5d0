//! A shard's side of a metrics scrape: the admin thread sends a `ScrapeRequest` to every
//! shard's scrape inbox; each answers, between its other tasks, with a copy of its
//! counters and its gauges read from its own partitions. Nothing is shared while the
//! shard works: the copy is made here, on the shard.
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::ShardContext;
use crate::metrics::gauges::{IoUringDepth, PartitionOffsets, ShardGauges};
use crate::metrics::shard_metrics::{self, ShardMetrics};

/// One scrape's question to a shard; the answer goes back on `reply` (a full or closed
/// channel means the scrape gave up on this shard: the answer is dropped).
pub struct ScrapeRequest {
    pub reply: std::sync::mpsc::SyncSender<(ShardMetrics, ShardGauges)>,
}

/// How long a scrape waits for other brokers' high watermarks (the admin side gives the
/// shards 2 s in all).
const REMOTE_HIGH_WATERMARK_TIMEOUT: Duration = Duration::from_millis(1000);

/// Answers scrapes until the admin side hangs up.
pub async fn serve_scrapes(ctx: Rc<ShardContext>, inbox: async_channel::Receiver<ScrapeRequest>) {
    while let Ok(request) = inbox.recv().await {
        let started = std::time::Instant::now();
        let mut g = gauges(&ctx);
        let remote = remote_high_watermarks(&ctx, &g).await;
        g.partition_offsets.extend(remote);
        let snapshot = shard_metrics::snapshot();
        tracing::debug!(shard = ctx.shard, took_us = started.elapsed().as_micros() as u64, "metrics scrape answered");
        let _ = request.reply.try_send((snapshot, g));
    }
}

/// The high watermarks of partitions other brokers lead that this shard's groups
/// committed offsets of: one ListOffsets (latest, read_uncommitted: the high watermark,
/// what kafka-consumer-groups.sh reads) per leader, on the inter-broker listener.
/// A leader that does not answer in time leaves its partitions without a lag series.
async fn remote_high_watermarks(ctx: &ShardContext, g: &ShardGauges) -> Vec<PartitionOffsets> {
    let local: HashSet<(&str, i32)> = g.partition_offsets.iter().map(|p| (p.topic.as_str(), p.partition)).collect();
    let image = ctx.image();
    let mut by_leader: BTreeMap<i32, BTreeMap<&str, BTreeSet<i32>>> = BTreeMap::new();
    for c in g.committed_offsets.iter().filter(|c| !local.contains(&(c.topic.as_str(), c.partition))) {
        let leader = image.topic(&c.topic).and_then(|t| t.partition(c.partition)).map(|p| p.leader);
        if let Some(leader) = leader.filter(|l| *l >= 0 && *l != ctx.config.node_id) {
            by_leader.entry(leader).or_default().entry(c.topic.as_str()).or_default().insert(c.partition);
        }
    }
    let calls = by_leader.into_iter().filter_map(|(leader, topics)| {
        let broker = image.brokers.get(&leader)?.clone();
        let topics: Vec<ListOffsetsTopic> = topics
            .into_iter()
            .map(|(t, ps)| {
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_partitions(ps.into_iter().map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1)).collect())
            })
            .collect();
        let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(topics);
        let security = ctx.inter_broker.clone();
        let client_id = format!("shardlog-{}-metrics", ctx.config.node_id);
        Some(async move {
            let answer: Result<ListOffsetsResponse, String> = crate::server::broker_call::call(
                &broker,
                &security,
                &client_id,
                ApiKey::ListOffsets,
                LIST_OFFSETS_VERSION,
                &req,
                REMOTE_HIGH_WATERMARK_TIMEOUT,
            )
            .await;
            match answer {
                Ok(resp) => resp
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().filter(|p| p.error_code == 0).map(move |p| PartitionOffsets {
                            topic: t.name.0.to_string(),
                            partition: p.partition_index,
                            log_end_offset: None,
                            high_watermark: p.offset,
                        })
                    })
                    .collect(),
                Err(e) => {
                    tracing::debug!(broker = broker.id, error = %e, "consumer group lag: no high watermarks from the leader");
                    Vec::new()
                }
            }
        })
    });
    futures::future::join_all(calls).await.into_iter().flatten().collect()
}

/// ListOffsets v7 (Kafka 2.8+): every broker of a cluster answers it.
const LIST_OFFSETS_VERSION: i16 = 7;

fn gauges(ctx: &ShardContext) -> ShardGauges {
    let mut g = ShardGauges {
        shard: ctx.shard,
        connections: ctx.connections.get() as u64,
        request_memory_used_bytes: ctx.request_memory.reserved_bytes() as u64,
        request_memory_capacity_bytes: ctx.request_memory.limit_bytes() as u64,
        metadata_applied_index: ctx.partitions.metadata_index(),
        ..ShardGauges::default()
    };
    let (open, closed) = crate::storage::open_files::shard_open_segment_files();
    (g.segment_files_open, g.segment_files_closed) = (open as u64, closed);
    let executor = glommio::executor();
    let stats = executor.executor_stats();
    (g.busy_seconds, g.tasks_executed) = (stats.executor_runtime().as_secs_f64(), stats.tasks_executed());
    // glommio hands over its I/O counters since the last call and resets them.
    let io = executor.io_stats().all_rings();
    let add = |a: (u64, u64), b: (u64, u64)| (a.0 + b.0, a.1 + b.1);
    let depths = executor.ring_depths();
    g.io_uring = [("main", depths.main_ring), ("latency", depths.latency_ring), ("poll", depths.poll_ring)]
        .into_iter()
        .map(|(ring, d)| IoUringDepth { ring, queued: d.queued as u64, in_kernel: d.in_kernel as u64 })
        .collect();
    shard_metrics::with(|m| m.add_io(add(io.file_reads(), io.file_buffered_reads()), add(io.file_writes(), io.file_buffered_writes())));
    let mut by_dir: BTreeMap<String, u64> = BTreeMap::new();
    let image = ctx.image();
    for p in ctx.partitions.all().into_iter().chain(ctx.partitions.followers()) {
        let pg = p.gauges();
        if pg.leader {
            if let Some(remote) = image.remote_log.partition(&p.topic_id, p.index) {
                g.remote_log_size_bytes += remote.size_bytes();
            }
            if p.is_tiered() {
                let uploaded = image.remote_log.highest_offset(&p.topic_id, p.index);
                g.remote_copy_lag_bytes += p.sealed_segments_for_upload().iter().filter(|s| s.end_offset > uploaded).map(|s| s.file_bytes).sum::<u64>();
            }
            g.partition_offsets.push(PartitionOffsets {
                topic: p.topic.clone(),
                partition: p.index,
                log_end_offset: Some(p.log_end_offset()),
                high_watermark: p.high_watermark(),
            });
        }
        g.partitions += 1;
        g.leaders += u64::from(pg.leader);
        g.segments += pg.segments;
        g.cleaner_max_dirty_ratio = g.cleaner_max_dirty_ratio.max(pg.dirty_ratio.unwrap_or(0.0));
        g.cleaner_cleanable_partitions += u64::from(pg.cleanable);
        g.cleaner_uncleanable_partitions += u64::from(pg.uncleanable);
        g.producer_state_entries += pg.producer_state_entries;
        g.produce_purgatory += pg.produce_waiters;
        g.fetch_purgatory += pg.fetch_waiters;
        // A partition's dir is <log dir>/<topic>-<partition>.
        if let Some(dir) = p.dir().parent() {
            *by_dir.entry(crate::server::log_dir::log_dir_path(dir)).or_default() += pg.size_bytes;
        }
    }
    g.log_bytes_by_dir = by_dir.into_iter().collect();
    g.committed_offsets = ctx.coordinator.committed_offsets();
    g
}
