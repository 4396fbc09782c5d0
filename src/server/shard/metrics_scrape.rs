//! A shard's side of a metrics scrape: the admin thread sends a `ScrapeRequest` to every
//! shard's scrape inbox; each answers, between its other tasks, with a copy of its
//! counters and its gauges read from its own partitions. Nothing is shared while the
//! shard works: the copy is made here, on the shard.
use std::collections::BTreeMap;
use std::rc::Rc;

use super::ShardContext;
use crate::metrics::gauges::{PartitionOffsets, ShardGauges};
use crate::metrics::shard_metrics::{self, ShardMetrics};

/// One scrape's question to a shard; the answer goes back on `reply` (a full or closed
/// channel means the scrape gave up on this shard: the answer is dropped).
pub struct ScrapeRequest {
    pub reply: std::sync::mpsc::SyncSender<(ShardMetrics, ShardGauges)>,
}

/// Answers scrapes until the admin side hangs up.
pub async fn serve_scrapes(ctx: Rc<ShardContext>, inbox: async_channel::Receiver<ScrapeRequest>) {
    while let Ok(request) = inbox.recv().await {
        let _ = request.reply.try_send((shard_metrics::snapshot(), gauges(&ctx)));
    }
}

fn gauges(ctx: &ShardContext) -> ShardGauges {
    let mut g = ShardGauges {
        shard: ctx.shard,
        connections: ctx.connections.get() as u64,
        request_memory_used_bytes: ctx.request_memory.reserved_bytes() as u64,
        request_memory_capacity_bytes: ctx.request_memory.limit_bytes() as u64,
        metadata_applied_index: ctx.partitions.metadata_index(),
        ..ShardGauges::default()
    };
    let mut by_dir: BTreeMap<String, u64> = BTreeMap::new();
    for p in ctx.partitions.all().into_iter().chain(ctx.partitions.followers()) {
        let pg = p.gauges();
        if pg.leader {
            g.partition_offsets.push(PartitionOffsets { topic: p.topic.clone(), partition: p.index, log_end_offset: p.log_end_offset(), high_watermark: p.high_watermark() });
        }
        g.partitions += 1;
        g.leaders += u64::from(pg.leader);
        g.segments += pg.segments;
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
