//! Runs operations on the shards that own their partitions. A request's operations go
//! as one `OpBatch`: those on this shard run directly, and each other shard gets ONE
//! message carrying all of its partitions' operations and sends one reply, so a request
//! over N partitions on S shards costs at most S messages, not N. On the owning shard the
//! operations of one message run concurrently, and the results come back in the
//! batch's order. A long poll registers once per shard the same way (`watch_any`).
//! Every caller (the Kafka API handlers, the group coordinator) routes through here;
//! record bytes travel as `Bytes` (no copy).
//!
//! The router knows partition operations (produce, fetch, offsets, delete records). A
//! layer above may add its own operations addressed to a partition (the group
//! coordinator's, addressed to a `__consumer_offsets` partition): they travel as
//! `PartitionOp::Extension(X)` and run on the owning shard through the handler that layer
//! installs with `set_extension`, so this module never names that layer.
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::{join_all, select_all, Either, LocalBoxFuture};
use futures::FutureExt;

use super::image::{BrokerId, TopicMeta};
use super::shard_partitions::ShardPartitions;
use crate::partition::{AppendOutcome, FetchData, Partition, PartitionError, ProducerView, ReadLimit, ReplicaRead, WatchSignal};
use crate::record::Marker;
use crate::runtime::mesh::{Mesh, Sent};
use crate::runtime::ShardId;

/// How long an operation waits for its shard to catch up with the metadata the caller
/// routed it by (a partition created a moment ago may still be opening).
const METADATA_BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

pub enum PartitionOp<X> {
    /// `timeout_ms`: how long acks=all waits for the in-sync replicas (Produce's).
    /// `txn_guard`: KIP-890's verification guard (`Partition::append_client`).
    Produce {
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
        txn_guard: Option<u64>,
    },
    /// A consumer's fetch on the leader; read_committed stops at the last stable offset.
    Fetch {
        offset: i64,
        limit: ReadLimit,
        read_committed: bool,
    },
    /// -1 latest (the last stable offset for read_committed), -2 earliest, -3 max
    /// timestamp, -4 earliest local, else a timestamp.
    ListOffsets {
        timestamp: i64,
        read_committed: bool,
    },
    /// A transaction marker from the transaction coordinator (WriteTxnMarkers): appended
    /// with acks=all, waiting for the in-sync replicas at most `timeout_ms`.
    WriteTxnMarker {
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        transaction_version: i8,
        timeout_ms: i32,
    },
    DeleteRecords {
        offset: i64,
    },
    /// OffsetForLeaderEpoch: where the log's `epoch` (or the largest below it) ended.
    EpochEndOffset {
        epoch: i32,
    },
    /// A follower's fetch, on the leader: the diverging-epoch check, a read up to the
    /// leader's written offset (not the high watermark), then the follower's position
    /// recorded (`Partition::record_follower_fetch`).
    /// `replica_epoch`: the follower process's broker epoch (KIP-903); its position counts
    /// only when that is the registration the metadata names.
    ReplicaFetch {
        replica: BrokerId,
        replica_epoch: i64,
        offset: i64,
        last_fetched_epoch: i32,
        limit: ReadLimit,
    },
    /// A consumer's fetch from this broker's follower replica (KIP-392): below the
    /// follower's high watermark. Answered as `OpOutput::Fetch`.
    FollowerFetch {
        offset: i64,
        limit: ReadLimit,
        read_committed: bool,
    },
    /// DescribeProducers: the producers with state on the leader.
    DescribeProducers,
    /// An operation of the layer above, run by its installed handler.
    Extension(X),
}

pub enum OpOutput<Y> {
    Produce(AppendOutcome),
    Fetch(FetchData),
    /// (offset, timestamp); (-1, -1) when no record matches.
    Offset(i64, i64),
    LowWatermark(i64),
    /// (leader epoch, end offset), Kafka's -1s when unknown.
    EpochEnd(i32, i64),
    ReplicaFetch(ReplicaRead),
    Producers(Vec<ProducerView>),
    Extension(Y),
}

/// Where a long poll waits from, per partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchPoint {
    /// A consumer: until the high watermark passes this.
    HighWatermark(i64),
    /// A share consumer (KIP-932): until the high watermark passes this and the share
    /// fetches that waited longer on the partition have each been woken (one per move).
    HighWatermarkInTurn(i64),
    /// A follower: until the leader's written data passes this (its fetch offset).
    WrittenOffset(i64),
}

pub type OpResult<Y> = Result<OpOutput<Y>, PartitionError>;

/// Runs an extension operation on the owning shard, given the partition it addresses.
pub type ExtensionHandler<X, Y> = Box<dyn Fn(Rc<Partition>, X) -> LocalBoxFuture<'static, Y>>;

/// Something addressed to one partition; `topic` indexes the topic names it travels with.
pub struct Addressed<P> {
    pub topic: u32,
    pub partition: i32,
    pub payload: P,
}

/// The operations of one request on partitions of one shard, sent to that shard.
pub struct ShardRequest<X, Y> {
    /// The topic names the operations address, each once.
    pub topics: Vec<String>,
    /// Metadata version the caller routed by; the owner waits until it has applied it.
    pub min_metadata_index: u64,
    pub work: ShardWork<X, Y>,
}

pub enum ShardWork<X, Y> {
    /// Run every operation (concurrently); reply with the results in the same order.
    Run { ops: Vec<Addressed<PartitionOp<X>>>, reply: oneshot::Sender<Vec<OpResult<Y>>> },
    /// Long poll: reply once the high watermark of any of these partitions moves past the
    /// one given (what the caller saw), or one of them errors or leaves the shard.
    /// Dropped unanswered once the caller stops waiting (see `serve_inbox`).
    Watch { partitions: Vec<Addressed<WatchPoint>>, reply: oneshot::Sender<()> },
}

/// One request's partition operations in request order, each with its owning shard.
/// Topic names are borrowed (from the request or the metadata image): only those sent to
/// another shard are copied, once per topic and shard.
pub struct OpBatch<'a, P> {
    topics: Vec<&'a str>,
    items: Vec<(ShardId, Addressed<P>)>,
}

impl<'a, P> OpBatch<'a, P> {
    pub fn with_capacity(partitions: usize) -> OpBatch<'a, P> {
        OpBatch { topics: Vec::new(), items: Vec::with_capacity(partitions) }
    }

    /// Adds `payload` for `topic`/`partition`, owned by `shard`. The partitions of one
    /// topic are usually pushed one after another: they share one topic entry.
    pub fn push(&mut self, shard: ShardId, topic: &'a str, partition: i32, payload: P) {
        if self.topics.last() != Some(&topic) {
            self.topics.push(topic);
        }
        // topics.len() <= items.len() + 1, itself bounded by the request's size.
        let topic = u32::try_from(self.topics.len() - 1).unwrap_or(u32::MAX);
        self.items.push((shard, Addressed { topic, partition, payload }));
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Splits the batch by owning shard, keeping each shard's items in batch order.
    fn split(self, shard_count: usize) -> SplitBatch<'a, P> {
        let OpBatch { topics, items } = self;
        let mut share_of_shard = vec![u16::MAX; shard_count];
        let mut shares: Vec<Share<P>> = Vec::new();
        let mut slots = Vec::with_capacity(items.len());
        for (shard, item) in items {
            let known = match share_of_shard.get(usize::from(shard)).copied() {
                Some(s) if s != u16::MAX => Some(s),
                // A shard id past the mesh (never placed so): found by a scan.
                Some(_) => None,
                None => shares.iter().position(|x| x.shard == shard).and_then(|i| u16::try_from(i).ok()),
            };
            let slot = match known {
                Some(s) => s,
                None => {
                    // Fewer shares than shards (<= u16::MAX): the index fits.
                    let s = u16::try_from(shares.len()).unwrap_or(u16::MAX);
                    if let Some(x) = share_of_shard.get_mut(usize::from(shard)) {
                        *x = s;
                    }
                    shares.push(Share { shard, topics: Vec::new(), topic_index: Vec::new(), items: Vec::new() });
                    s
                }
            };
            slots.push(slot);
            shares[usize::from(slot)].items.push(item);
        }
        SplitBatch { topics, shares, slots }
    }
}

/// A batch split by shard: `slots[i]` is the share that holds the batch's item `i`.
struct SplitBatch<'a, P> {
    topics: Vec<&'a str>,
    shares: Vec<Share<P>>,
    slots: Vec<u16>,
}

/// The items of one shard, in batch order.
struct Share<P> {
    shard: ShardId,
    /// Filled by `for_remote`: the names this share addresses, and for each batch topic
    /// its index here (u32::MAX when unused).
    topics: Vec<String>,
    topic_index: Vec<u32>,
    items: Vec<Addressed<P>>,
}

impl<P> Share<P> {
    /// Re-addresses the items to a topic list of their own (the message to another shard
    /// carries only the names it uses).
    fn for_remote(&mut self, batch_topics: &[&str]) {
        self.topic_index = vec![u32::MAX; batch_topics.len()];
        for item in &mut self.items {
            let t = item.topic as usize;
            if self.topic_index[t] == u32::MAX {
                self.topic_index[t] = u32::try_from(self.topics.len()).unwrap_or(u32::MAX);
                self.topics.push(batch_topics[t].to_string());
            }
            item.topic = self.topic_index[t];
        }
    }
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

    /// Cross-shard messages this shard has sent (tests count them).
    pub fn messages_sent(&self) -> u64 {
        self.mesh.sent()
    }

    /// Runs `op` on partition `partition` of `topic`, on the shard the metadata says
    /// owns it; UnknownTopicOrPartition if the topic has no such partition.
    pub async fn route(&self, topic: &TopicMeta, partition: i32, op: PartitionOp<X>) -> OpResult<Y> {
        let Some(meta) = topic.partition(partition) else { return Err(PartitionError::UnknownTopicOrPartition) };
        self.call(meta.shard, &topic.name, partition, op).await
    }

    /// Runs `op` on partition `topic`/`partition`, owned by `shard`.
    pub async fn call(&self, shard: ShardId, topic: &str, partition: i32, op: PartitionOp<X>) -> OpResult<Y> {
        let mut batch = OpBatch::with_capacity(1);
        batch.push(shard, topic, partition, op);
        self.run(batch).await.pop().unwrap_or(Err(PartitionError::NotLeader))
    }

    /// Runs every operation of `batch` on its owning shard, all at once: directly for
    /// this shard's partitions, one message per other shard. The results are in batch
    /// order. A shard that cannot be reached answers NotLeader for its operations.
    pub async fn run(&self, batch: OpBatch<'_, PartitionOp<X>>) -> Vec<OpResult<Y>> {
        let n = batch.len();
        let min_index = self.partitions.metadata_index();
        let SplitBatch { topics, shares, slots } = batch.split(self.mesh.shard_count());
        let topics = &topics;
        let runs = shares.into_iter().map(|mut share| {
            let count = share.items.len();
            if share.shard == self.partitions.shard() {
                return Either::Left(self.execute_all(topics, share.items));
            }
            share.for_remote(topics);
            let (reply, rx) = oneshot::channel();
            let work = ShardWork::Run { ops: share.items, reply };
            let sending = self.send(share.shard, share.topics, min_index, work, count);
            Either::Right(async move {
                let sent = sending.await;
                let replies = if sent { rx.await.ok() } else { None };
                debug_assert!(replies.as_ref().is_none_or(|r| r.len() == count), "one result per operation");
                replies.unwrap_or_else(|| (0..count).map(|_| Err(PartitionError::NotLeader)).collect())
            })
        });
        let mut per_share: Vec<_> = join_all(runs).await.into_iter().map(Vec::into_iter).collect();
        let out: Vec<OpResult<Y>> = slots.iter().map(|&s| per_share[usize::from(s)].next().unwrap_or(Err(PartitionError::NotLeader))).collect();
        debug_assert_eq!(out.len(), n);
        out
    }

    /// Long poll: resolves when any partition of `batch` moves past its watch point (or
    /// one errors or leaves its shard). One watch per shard; dropping the returned future
    /// withdraws them all (the owning shards see their reply channel closed and drop
    /// their registrations).
    pub async fn watch_any(&self, batch: OpBatch<'_, WatchPoint>) {
        if batch.is_empty() {
            return futures::future::pending().await;
        }
        let min_index = self.partitions.metadata_index();
        let SplitBatch { topics, shares, .. } = batch.split(self.mesh.shard_count());
        let topics = &topics;
        let watches = shares.into_iter().map(|mut share| {
            if share.shard == self.partitions.shard() {
                return Either::Left(async move { self.watch_local(topics, &share.items).await });
            }
            share.for_remote(topics);
            let count = share.items.len();
            let (reply, rx) = oneshot::channel();
            let work = ShardWork::Watch { partitions: share.items, reply };
            // An unreachable shard (or one that dropped the watch) ends the poll: the
            // fetch re-reads and reports the partition's error.
            let sending = self.send(share.shard, share.topics, min_index, work, count);
            Either::Right(async move {
                if sending.await {
                    let _ = rx.await;
                }
            })
        });
        let watches: Vec<_> = watches.map(FutureExt::boxed_local).collect();
        select_all(watches).await;
    }

    /// Sends one message (tried at the call: see `Mesh::send`), waiting while the receiving
    /// inbox is full (backpressure, see `runtime::mesh`); false if that shard has stopped.
    fn send(&self, shard: ShardId, topics: Vec<String>, min_index: u64, work: ShardWork<X, Y>, count: usize) -> impl std::future::Future<Output = bool> + '_ {
        let sending = self.mesh.send(shard, ShardRequest { topics, min_metadata_index: min_index, work });
        async move {
            let sent = sending.await;
            if let Ok(how) = &sent {
                crate::metrics::with(|m| {
                    m.cross_shard_messages += 1;
                    m.cross_shard_sends_waited += u64::from(*how == Sent::Waited);
                });
            }
            let sent = sent.is_ok();
            tracing::debug!(shard = self.partitions.shard(), to = shard, partitions = count, sent, "cross-shard message");
            sent
        }
    }

    /// Serves requests other shards send to this one, each in its own task.
    ///
    /// A long poll (`Watch`) ends as soon as its caller stops waiting (the caller's fetch
    /// timed out or another shard woke it, and it dropped the reply receiver): without
    /// that, an idle partition polled from another shard would keep one task and one
    /// registration per poll until its next append. Other operations run to completion
    /// (an append is not cut short because its client went away).
    pub async fn serve_inbox(self: Rc<Self>, inbox: async_channel::Receiver<ShardRequest<X, Y>>) {
        while let Ok(req) = inbox.recv().await {
            let me = self.clone();
            glommio::spawn_local(async move {
                let ShardRequest { topics, min_metadata_index, work } = req;
                if me.partitions.metadata_index() < min_metadata_index {
                    me.partitions.wait_for_metadata(min_metadata_index, METADATA_BARRIER_TIMEOUT).await;
                }
                match work {
                    ShardWork::Run { ops, reply } => {
                        let out = me.execute_all(&topics, ops).await;
                        let _ = reply.send(out);
                    }
                    ShardWork::Watch { partitions, mut reply } => {
                        let watch = std::pin::pin!(me.watch_local(&topics, &partitions).fuse());
                        let canceled = std::pin::pin!(reply.cancellation().fuse());
                        if let Either::Left(_) = futures::future::select(watch, canceled).await {
                            let _ = reply.send(());
                        }
                    }
                }
            })
            .detach();
        }
    }

    /// Waits until the high watermark of one of `partitions` (of this shard) moves past
    /// the one given, or one is gone or offline. One signal for them all; dropping this
    /// future drops it, and the partitions prune the dead registration (`Watchers`).
    async fn watch_local<T: AsRef<str>>(&self, topics: &[T], partitions: &[Addressed<WatchPoint>]) {
        let signal = WatchSignal::new();
        for w in partitions {
            let topic = topics.get(w.topic as usize).map_or("", AsRef::as_ref);
            // A consumer reading from a follower (KIP-392) watches the follower replica.
            let Some(p) = self.partitions.get(topic, w.partition).or_else(|| self.partitions.follower(topic, w.partition)) else { return };
            let moved = match w.payload {
                WatchPoint::HighWatermark(hw) | WatchPoint::HighWatermarkInTurn(hw) => p.high_watermark() > hw,
                WatchPoint::WrittenOffset(offset) => p.written_offset() > offset,
            };
            if moved || p.check_online().is_err() {
                return;
            }
            match w.payload {
                WatchPoint::HighWatermarkInTurn(_) => p.watch_in_turn(&signal),
                _ => p.watch(&signal),
            }
        }
        signal.woken().await;
    }

    /// Runs operations on this shard's partitions, concurrently; results in their order.
    async fn execute_all<T: AsRef<str>>(&self, topics: &[T], ops: Vec<Addressed<PartitionOp<X>>>) -> Vec<OpResult<Y>> {
        let runs = ops.into_iter().map(|a| {
            let topic = topics.get(a.topic as usize).map_or("", AsRef::as_ref);
            self.execute(topic, a.partition, a.payload)
        });
        join_all(runs).await
    }

    async fn execute(&self, topic: &str, partition: i32, op: PartitionOp<X>) -> OpResult<Y> {
        if let PartitionOp::FollowerFetch { offset, limit, read_committed } = op {
            let Some(p) = self.partitions.follower(topic, partition) else { return Err(PartitionError::NotLeader) };
            return p.read_from_follower(offset, limit, read_committed).await.map(OpOutput::Fetch);
        }
        let Some(p) = self.partitions.get(topic, partition) else {
            return Err(self.partitions.missing(topic, partition));
        };
        match op {
            PartitionOp::Extension(x) => {
                // Cloned out so no RefCell borrow is held across the await.
                let handler = self.extension.borrow().clone();
                let Some(handler) = handler else { return Err(PartitionError::UnknownTopicOrPartition) };
                Ok(OpOutput::Extension(handler(p, x).await))
            }
            PartitionOp::Produce { records, acks, timeout_ms, txn_guard } => {
                let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
                p.append_client(records, acks, Some(timeout), txn_guard).await.map(OpOutput::Produce)
            }
            PartitionOp::Fetch { offset, limit, read_committed } => p.read_isolated(offset, limit, read_committed).await.map(OpOutput::Fetch),
            PartitionOp::WriteTxnMarker { producer_id, producer_epoch, marker, transaction_version, timeout_ms } => {
                let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
                p.append_marker_of_version(producer_id, producer_epoch, marker, transaction_version, timeout).await.map(OpOutput::Produce)
            }
            PartitionOp::ListOffsets { timestamp, read_committed } => {
                // An offline log (failed fdatasync) answers KAFKA_STORAGE_ERROR here too.
                p.check_online()?;
                let image = self.partitions.image();
                // A tiered partition's log starts in remote storage.
                let remote_start = image.remote_log.partition(&p.topic_id, p.index).and_then(|r| r.start_offset());
                let log_start = remote_start.map_or(p.log_start_offset(), |r| r.min(p.log_start_offset()));
                let highest_remote = image.remote_log.highest_offset(&p.topic_id, p.index);
                let found = match timestamp {
                    -1 if read_committed => Some((p.last_stable_offset(), -1)),
                    -1 => Some((p.high_watermark(), -1)),
                    -2 => Some((log_start, -1)),
                    // Earliest-local (KIP-405): where the local log starts.
                    -4 => Some((p.log_start_offset(), -1)),
                    -3 => p.max_timestamp_offset().await?,
                    // KIP-1005 latest-tiered: the last offset in remote storage, -1 when
                    // nothing is (always, for a topic that is not tiered), as Kafka's.
                    -5 => Some((highest_remote, -1)),
                    // KIP-1023 earliest pending upload, as Kafka 4.4's UnifiedLog: the first
                    // offset past the remote log; the log start when nothing was uploaded
                    // and nothing was deleted locally; else (not tiered, or uploads this
                    // broker's metadata does not show yet) none.
                    -6 if !p.is_tiered() => None,
                    -6 if highest_remote >= 0 => Some(((highest_remote + 1).max(log_start), -1)),
                    -6 => (p.log_start_offset() == log_start).then_some((log_start, -1)),
                    ts => p.offset_for_timestamp(ts).await?,
                };
                let (offset, ts) = found.unwrap_or((-1, -1));
                Ok(OpOutput::Offset(offset, ts))
            }
            PartitionOp::DeleteRecords { offset } => p.delete_records(offset).await.map(OpOutput::LowWatermark),
            PartitionOp::DescribeProducers => {
                p.check_leader()?;
                Ok(OpOutput::Producers(p.producers_view()))
            }
            PartitionOp::EpochEndOffset { epoch } => {
                p.check_online()?;
                let (epoch, end) = p.epoch_end_offset(epoch);
                Ok(OpOutput::EpochEnd(epoch, end))
            }
            // Served from the follower map before this lookup (above).
            PartitionOp::FollowerFetch { .. } => Err(PartitionError::NotFollower),
            PartitionOp::ReplicaFetch { replica, replica_epoch, offset, last_fetched_epoch, limit } => {
                // KIP-903: a fetch from a process the metadata no longer names as that
                // broker (it restarted since, or this leader has not learnt of the
                // restart yet) is served but not counted: an ISR expansion or the high
                // watermark must never rest on a previous process's position.
                // A fenced one (stopping, or silent) is not eligible for the ISR either.
                let current = self.partitions.image().brokers.get(&replica).filter(|b| !b.fenced).map(|b| super::image::broker_epoch(&b.incarnation));
                let counted = current == Some(replica_epoch);
                let read = p.serve_replica_fetch(replica, counted, offset, last_fetched_epoch, limit, crate::runtime::now_ms()).await?;
                Ok(OpOutput::ReplicaFetch(read))
            }
        }
    }
}
