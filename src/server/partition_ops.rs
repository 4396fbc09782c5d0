//! Operations on one partition, always executed on the shard that owns it. A handler
//! calls `call`; for a local partition that is a direct call, for another shard's it is
//! one message over the mesh and one reply. Record bytes travel as `Bytes` (no copy).
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;

use super::shard::ShardContext;
use crate::runtime::ShardId;
use crate::partition::{AppendOutcome, FetchData, PartitionError};

/// How long an operation waits for its shard to catch up with the metadata the caller
/// routed it by (a partition created a moment ago may still be opening).
const METADATA_BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

pub enum PartitionOp {
    Produce { records: Bytes, acks: i16 },
    Fetch { offset: i64, max_bytes: usize },
    /// -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, else a timestamp.
    ListOffsets { timestamp: i64 },
    DeleteRecords { offset: i64 },
    /// Resolves when the high watermark passes `seen_high_watermark` (long poll).
    Watch { seen_high_watermark: i64 },
    /// A group coordinator operation; the partition is the group's `__consumer_offsets`
    /// partition, so it runs on the shard that coordinates the group.
    Group(Box<crate::group::GroupOp>),
}

pub enum OpOutput {
    Produce(AppendOutcome),
    Fetch(FetchData),
    /// (offset, timestamp); (-1, -1) when no record matches.
    Offset(i64, i64),
    LowWatermark(i64),
    Watched,
    Group(Box<crate::group::ops::GroupResult>),
}

pub type OpResult = Result<OpOutput, PartitionError>;

/// A partition operation sent to another shard.
pub struct ShardRequest {
    pub topic: String,
    pub partition: i32,
    /// Metadata version the caller routed by; the owner waits until it has applied it.
    pub min_metadata_index: u64,
    pub op: PartitionOp,
    pub reply: oneshot::Sender<OpResult>,
}

/// Runs `op` on partition `topic`/`partition`, owned by `shard`.
pub async fn call(ctx: &Rc<ShardContext>, shard: ShardId, topic: &str, partition: i32, op: PartitionOp) -> OpResult {
    let min_index = ctx.metadata_index();
    if shard == ctx.shard {
        return execute(ctx, topic, partition, min_index, op).await;
    }
    let (tx, rx) = oneshot::channel();
    let req = ShardRequest { topic: topic.to_string(), partition, min_metadata_index: min_index, op, reply: tx };
    if ctx.mesh.send(shard, req).is_err() {
        return Err(PartitionError::NotLeader);
    }
    rx.await.unwrap_or(Err(PartitionError::NotLeader))
}

/// Serves requests other shards send to this one.
pub async fn serve_inbox(ctx: Rc<ShardContext>, inbox: async_channel::Receiver<ShardRequest>) {
    while let Ok(req) = inbox.recv().await {
        let ctx = ctx.clone();
        glommio::spawn_local(async move {
            let out = execute(&ctx, &req.topic, req.partition, req.min_metadata_index, req.op).await;
            let _ = req.reply.send(out);
        })
        .detach();
    }
}

async fn execute(ctx: &Rc<ShardContext>, topic: &str, partition: i32, min_index: u64, op: PartitionOp) -> OpResult {
    if ctx.metadata_index() < min_index {
        ctx.wait_for_metadata(min_index, METADATA_BARRIER_TIMEOUT).await;
    }
    let Some(p) = ctx.partition(topic, partition) else {
        return Err(PartitionError::UnknownTopicOrPartition);
    };
    match op {
        PartitionOp::Group(op) => Ok(OpOutput::Group(Box::new(ctx.groups.execute(ctx, &p, *op).await))),
        PartitionOp::Produce { records, acks } => p.append(records, acks).await.map(OpOutput::Produce),
        PartitionOp::Fetch { offset, max_bytes } => p.read(offset, max_bytes).await.map(OpOutput::Fetch),
        PartitionOp::ListOffsets { timestamp } => {
            let found = match timestamp {
                -1 => Some((p.high_watermark(), -1)),
                -2 | -4 => Some((p.log_start_offset(), -1)),
                -3 => p.max_timestamp_offset().await?,
                -5 => Some((p.log_start_offset(), -1)),
                ts => p.offset_for_timestamp(ts).await?,
            };
            let (offset, ts) = found.unwrap_or((-1, -1));
            Ok(OpOutput::Offset(offset, ts))
        }
        PartitionOp::DeleteRecords { offset } => p.delete_records(offset).await.map(OpOutput::LowWatermark),
        PartitionOp::Watch { seen_high_watermark } => {
            if p.high_watermark() <= seen_high_watermark {
                let _ = p.watch().await;
            }
            Ok(OpOutput::Watched)
        }
    }
}
