//! Runs an operation on the shard that owns a partition: a direct call when that is this
//! shard, else one message over the cross-shard mesh and one reply. Every caller (the
//! Kafka API handlers, the group coordinator) routes through here; record bytes travel
//! as `Bytes` (no copy).
//!
//! The router knows partition operations (produce, fetch, offsets, delete records, long
//! poll). A layer above may add its own operations addressed to a partition (the group
//! coordinator's, addressed to a `__consumer_offsets` partition): they travel as
//! `PartitionOp::Extension(X)` and run on the owning shard through the handler that layer
//! installs with `set_extension`, so this module never names that layer.
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use futures::FutureExt;

use super::image::TopicMeta;
use super::shard_partitions::ShardPartitions;
use crate::partition::{AppendOutcome, FetchData, Partition, PartitionError, ReadLimit};
use crate::runtime::mesh::Mesh;
use crate::runtime::ShardId;

/// How long an operation waits for its shard to catch up with the metadata the caller
/// routed it by (a partition created a moment ago may still be opening).
const METADATA_BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

pub enum PartitionOp<X> {
    Produce { records: Bytes, acks: i16 },
    Fetch { offset: i64, limit: ReadLimit },
    /// -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, else a timestamp.
    ListOffsets { timestamp: i64 },
    DeleteRecords { offset: i64 },
    /// Resolves when the high watermark passes `seen_high_watermark` (long poll).
    Watch { seen_high_watermark: i64 },
    /// An operation of the layer above, run by its installed handler.
    Extension(X),
}

pub enum OpOutput<Y> {
    Produce(AppendOutcome),
    Fetch(FetchData),
    /// (offset, timestamp); (-1, -1) when no record matches.
    Offset(i64, i64),
    LowWatermark(i64),
    Watched,
    Extension(Y),
}

pub type OpResult<Y> = Result<OpOutput<Y>, PartitionError>;

/// Runs an extension operation on the owning shard, given the partition it addresses.
pub type ExtensionHandler<X, Y> = Box<dyn Fn(Rc<Partition>, X) -> LocalBoxFuture<'static, Y>>;

/// A partition operation sent to another shard.
pub struct ShardRequest<X, Y> {
    pub topic: String,
    pub partition: i32,
    /// Metadata version the caller routed by; the owner waits until it has applied it.
    pub min_metadata_index: u64,
    pub op: PartitionOp<X>,
    pub reply: oneshot::Sender<OpResult<Y>>,
}

/// One per shard (shard-owned).
pub struct Router<X, Y> {
    partitions: Rc<ShardPartitions>,
    mesh: Mesh<ShardRequest<X, Y>>,
    extension: RefCell<Option<Rc<ExtensionHandler<X, Y>>>>,
}

impl<X: Send + 'static, Y: Send + 'static> Router<X, Y> {
    pub fn new(partitions: Rc<ShardPartitions>, mesh: Mesh<ShardRequest<X, Y>>) -> Router<X, Y> {
        Router { partitions, mesh, extension: RefCell::new(None) }
    }

    /// Installs the handler for `PartitionOp::Extension` on this shard (once, at start).
    pub fn set_extension(&self, handler: ExtensionHandler<X, Y>) {
        let previous = self.extension.borrow_mut().replace(Rc::new(handler));
        assert!(previous.is_none(), "one extension handler per shard");
    }

    pub fn partitions(&self) -> &Rc<ShardPartitions> {
        &self.partitions
    }

    /// Runs `op` on partition `partition` of `topic`, on the shard the metadata says
    /// owns it; UnknownTopicOrPartition if the topic has no such partition.
    pub async fn route(&self, topic: &TopicMeta, partition: i32, op: PartitionOp<X>) -> OpResult<Y> {
        let Some(meta) = topic.partition(partition) else { return Err(PartitionError::UnknownTopicOrPartition) };
        self.call(meta.shard, &topic.name, partition, op).await
    }

    /// Runs `op` on partition `topic`/`partition`, owned by `shard`.
    pub async fn call(&self, shard: ShardId, topic: &str, partition: i32, op: PartitionOp<X>) -> OpResult<Y> {
        let min_index = self.partitions.metadata_index();
        if shard == self.partitions.shard() {
            return self.execute(topic, partition, min_index, op).await;
        }
        let (tx, rx) = oneshot::channel();
        let req = ShardRequest { topic: topic.to_string(), partition, min_metadata_index: min_index, op, reply: tx };
        if self.mesh.send(shard, req).is_err() {
            return Err(PartitionError::NotLeader);
        }
        rx.await.unwrap_or(Err(PartitionError::NotLeader))
    }

    /// Serves requests other shards send to this one.
    ///
    /// A long poll (`Watch`) ends as soon as its caller stops waiting (the caller's fetch
    /// timed out or another partition woke it, and it dropped the reply receiver): without
    /// that, an idle partition polled from another shard would keep one task and one
    /// watcher per poll until its next append. Other operations run to completion (an
    /// append is not cut short because its client went away).
    pub async fn serve_inbox(self: Rc<Self>, inbox: async_channel::Receiver<ShardRequest<X, Y>>) {
        while let Ok(req) = inbox.recv().await {
            let me = self.clone();
            glommio::spawn_local(async move {
                let ShardRequest { topic, partition, min_metadata_index, op, mut reply } = req;
                let cancellable = matches!(op, PartitionOp::Watch { .. });
                let run = me.execute(&topic, partition, min_metadata_index, op);
                let out = if cancellable {
                    let mut run = std::pin::pin!(run.fuse());
                    let mut canceled = std::pin::pin!(reply.cancellation().fuse());
                    futures::select! {
                        out = run.as_mut() => Some(out),
                        _ = canceled.as_mut() => None,
                    }
                } else {
                    Some(run.await)
                };
                if let Some(out) = out {
                    let _ = reply.send(out);
                }
            })
            .detach();
        }
    }

    async fn execute(&self, topic: &str, partition: i32, min_index: u64, op: PartitionOp<X>) -> OpResult<Y> {
        if self.partitions.metadata_index() < min_index {
            self.partitions.wait_for_metadata(min_index, METADATA_BARRIER_TIMEOUT).await;
        }
        let Some(p) = self.partitions.get(topic, partition) else {
            return Err(PartitionError::UnknownTopicOrPartition);
        };
        match op {
            PartitionOp::Extension(x) => {
                // Cloned out so no RefCell borrow is held across the await.
                let handler = self.extension.borrow().clone();
                let Some(handler) = handler else { return Err(PartitionError::UnknownTopicOrPartition) };
                Ok(OpOutput::Extension(handler(p, x).await))
            }
            PartitionOp::Produce { records, acks } => p.append(records, acks).await.map(OpOutput::Produce),
            PartitionOp::Fetch { offset, limit } => p.read_with(offset, limit).await.map(OpOutput::Fetch),
            PartitionOp::ListOffsets { timestamp } => {
                // An offline log (failed fdatasync) answers KAFKA_STORAGE_ERROR here too.
                p.check_online()?;
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
}
