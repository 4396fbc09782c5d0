//! The partitions one shard owns and the metadata image it has applied.
//!
//! Shard-owned (invariant 1): created on the shard's executor, never sent elsewhere.
//! The partition lifecycle (server/shard/partition_lifecycle.rs) inserts and removes
//! partitions as metadata deltas say and then publishes the image; operations routed by
//! a newer image wait here until the shard has caught up (the metadata barrier).
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::FutureExt;

use super::image::{BrokerId, MetadataImage, NO_LEADER};
use crate::partition::{Partition, PartitionError};
use crate::runtime::ShardId;

/// How long a shard waits to catch up with metadata committed by the controller.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// The metadata image as a shard holds it: the controller hands each update over as an
/// `Arc` (it crosses threads); the shard wraps it once per update in a shard-local `Rc`,
/// so the handlers' per-request clone is a plain increment, not an atomic one.
pub type ShardImage = Rc<Arc<MetadataImage>>;

pub struct ShardPartitions {
    shard: ShardId,
    /// This node's broker id: the shard holds (and serves) only partitions it leads.
    broker: BrokerId,
    image: RefCell<ShardImage>,
    /// The partitions this shard leads, by topic, then partition index: what requests
    /// routed here (produce, fetch, ListOffsets, groups) find. Serving needs no role check.
    partitions: RefCell<HashMap<String, HashMap<i32, Rc<Partition>>>>,
    /// The replicas this shard holds as a follower (their logs open, fed by the
    /// replication fetchers, never served to clients), by (topic, partition).
    followers: RefCell<HashMap<(String, i32), Rc<Partition>>>,
    /// Operations waiting for newer metadata. Bounded: a waiter whose barrier timed out
    /// drops its receiver and is pruned at the next wait, so the list holds the
    /// operations waiting now (each a routed request, bounded by connections times
    /// in-flight requests) plus those that gave up since the last wait.
    metadata_waiters: RefCell<Vec<oneshot::Sender<()>>>,
    /// The last metadata index the controller committed (read on catch-up only).
    committed_index: Box<dyn Fn() -> u64>,
}

impl ShardPartitions {
    /// `committed_index` tells the newest metadata the controller committed, so a shard
    /// can wait for it (this layer knows no controller).
    pub fn new(shard: ShardId, broker: BrokerId, committed_index: Box<dyn Fn() -> u64>) -> ShardPartitions {
        ShardPartitions {
            shard,
            broker,
            image: RefCell::new(Rc::new(Arc::new(MetadataImage::default()))),
            partitions: RefCell::new(HashMap::new()),
            followers: RefCell::new(HashMap::new()),
            metadata_waiters: RefCell::new(Vec::new()),
            committed_index,
        }
    }

    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn broker(&self) -> BrokerId {
        self.broker
    }

    /// Why an operation found no open partition here (the slow path only: an open
    /// partition is one this shard leads, so serving needs no leader check): another
    /// broker leads it, nobody does, or it does not exist.
    pub fn missing(&self, topic: &str, partition: i32) -> PartitionError {
        let image = self.image();
        match image.topic(topic).and_then(|t| t.partition(partition)) {
            Some(p) if p.leader == NO_LEADER => PartitionError::LeaderNotAvailable,
            Some(p) if p.leader != self.broker => PartitionError::NotLeader,
            _ => PartitionError::UnknownTopicOrPartition,
        }
    }

    fn assert_on_shard(&self) {
        debug_assert_eq!(crate::runtime::current_shard(), Some(self.shard), "shard partitions used off their shard");
    }

    /// The metadata image this shard has fully applied (partitions opened); a
    /// non-atomic clone.
    pub fn image(&self) -> ShardImage {
        self.image.borrow().clone()
    }

    pub fn metadata_index(&self) -> u64 {
        self.image.borrow().applied_index
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(topic)?.get(&partition).cloned()
    }

    pub fn all(&self) -> Vec<Rc<Partition>> {
        self.partitions.borrow().values().flat_map(|m| m.values().cloned()).collect()
    }

    pub fn of_topic(&self, topic: &str) -> Vec<Rc<Partition>> {
        self.partitions.borrow().get(topic).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Operations registered as waiting for newer metadata (see `metadata_waiters`).
    pub fn metadata_waiter_count(&self) -> usize {
        self.metadata_waiters.borrow().len()
    }

    pub fn count(&self) -> usize {
        self.partitions.borrow().values().map(|m| m.len()).sum()
    }

    pub fn insert(&self, partition: Rc<Partition>) {
        self.assert_on_shard();
        debug_assert!(self.follower(&partition.topic, partition.index).is_none(), "a replica is a leader or a follower, not both");
        self.partitions.borrow_mut().entry(partition.topic.clone()).or_default().insert(partition.index, partition);
    }

    /// Removes one partition (this shard stopped leading it), if open here.
    pub fn remove(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.assert_on_shard();
        self.partitions.borrow_mut().get_mut(topic)?.remove(&partition)
    }

    /// Removes every partition of `topic`, returning them by index.
    pub fn remove_topic(&self, topic: &str) -> Vec<(i32, Rc<Partition>)> {
        self.assert_on_shard();
        self.partitions.borrow_mut().remove(topic).map(|m| m.into_iter().collect()).unwrap_or_default()
    }

    /// A replica this shard follows, if open here.
    pub fn follower(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.followers.borrow().get(&(topic.to_string(), partition)).cloned()
    }

    /// Every replica this shard follows.
    pub fn followers(&self) -> Vec<Rc<Partition>> {
        self.followers.borrow().values().cloned().collect()
    }

    pub fn follower_count(&self) -> usize {
        self.followers.borrow().len()
    }

    /// Leaders and followers: every log this shard holds open.
    pub fn open_count(&self) -> usize {
        self.count() + self.follower_count()
    }

    pub fn insert_follower(&self, partition: Rc<Partition>) {
        self.assert_on_shard();
        debug_assert!(self.get(&partition.topic, partition.index).is_none(), "a replica is a leader or a follower, not both");
        self.followers.borrow_mut().insert((partition.topic.clone(), partition.index), partition);
    }

    pub fn remove_follower(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.assert_on_shard();
        self.followers.borrow_mut().remove(&(topic.to_string(), partition))
    }

    /// Removes every followed replica of `topic`, returning them by index.
    pub fn remove_followers_of_topic(&self, topic: &str) -> Vec<(i32, Rc<Partition>)> {
        self.assert_on_shard();
        let mut followers = self.followers.borrow_mut();
        let keys: Vec<(String, i32)> = followers.keys().filter(|(t, _)| t == topic).cloned().collect();
        keys.into_iter().filter_map(|k| followers.remove(&k).map(|p| (k.1, p))).collect()
    }

    /// Makes `image` the applied one and wakes operations waiting for it.
    pub fn publish(&self, image: Arc<MetadataImage>) {
        self.assert_on_shard();
        debug_assert!(image.applied_index >= self.metadata_index(), "the applied metadata never goes back");
        *self.image.borrow_mut() = Rc::new(image);
        for w in self.metadata_waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Waits until this shard has applied metadata `index` (or the timeout passes).
    pub async fn wait_for_metadata(&self, index: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.metadata_index() < index {
            let now = Instant::now();
            if now >= deadline {
                tracing::warn!(shard = self.shard, index, applied = self.metadata_index(), "metadata barrier timed out");
                return;
            }
            let (tx, rx) = oneshot::channel();
            {
                let mut waiters = self.metadata_waiters.borrow_mut();
                waiters.retain(|w| !w.is_canceled());
                waiters.push(tx);
            }
            futures::select! {
                _ = rx.fuse() => {}
                _ = glommio::timer::sleep(deadline - now).fuse() => {}
            }
        }
    }

    /// Waits until this shard has applied everything the controller committed so far.
    pub async fn catch_up_with_controller(&self) {
        let index = (self.committed_index)();
        self.wait_for_metadata(index, CATCH_UP_TIMEOUT).await;
    }
}
