//! The metadata channel from the controller's state machine to one shard, bounded: at
//! most one update waits for the shard. A newer update merges into the waiting one (the
//! newer image, the deltas of both), so a shard that falls behind (stalled, or slower than
//! a burst of commits) holds one image and a bounded list of deltas, never a queue of
//! images, and the state machine never waits for a shard.
//!
//! Why merge rather than block the sender: metadata is a state, not a stream; the newest
//! image supersedes every older one, and the deltas only tell the shard which parts of it
//! to re-read (each is applied against the image it arrives with). Blocking the state
//! machine on its slowest shard would stall every other shard's updates, and a shard that
//! waits for the controller while applying would deadlock with it.
//!
//! Bound: past `MAX_MERGED_DELTAS` deltas (or twice what a difference of the two images
//! can hold, when larger), the waiting update's deltas are recomputed as the difference
//! between the image the shard last took and the newest one (`apply::diff_images`, as a
//! snapshot install does): a few deltas per topic.
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cluster::image::{MetadataDelta, MetadataImage, MetadataUpdate};

/// Deltas a waiting update may gather before they are recomputed from the images.
pub const MAX_MERGED_DELTAS: usize = 4096;

/// A new channel: the controller's end and the shard's end.
pub fn shard_updates() -> (ShardUpdatesSender, ShardUpdates) {
    let slot = Arc::new(Mutex::new(Slot::default()));
    // The doorbell carries no data: one ring is enough to wake the shard, however many
    // updates merged meanwhile.
    let (doorbell, rung) = async_channel::bounded(1);
    (ShardUpdatesSender { slot: slot.clone(), doorbell }, ShardUpdates { slot, rung })
}

#[derive(Default)]
struct Slot {
    waiting: Option<MetadataUpdate>,
    /// The image of the last update the shard took: what the waiting update's deltas
    /// lead from (None before the first one).
    taken: Option<Arc<MetadataImage>>,
    /// Updates merged into the waiting one (reported with it).
    merged: u64,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // A panic while holding the lock leaves a consistent slot (every write is one assignment).
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The controller's end (one per shard).
pub struct ShardUpdatesSender {
    slot: Arc<Mutex<Slot>>,
    doorbell: async_channel::Sender<()>,
}

/// The shard stopped (its end was dropped).
#[derive(Debug)]
pub struct ShardGone;

/// Where the publisher posts a shard's updates: this bounded channel in a broker; the
/// quorum simulation keeps every image instead, to check each one.
pub trait UpdateSink: Send {
    /// Hands `update` over without waiting.
    fn post(&self, update: MetadataUpdate) -> Result<(), ShardGone>;
}

impl UpdateSink for ShardUpdatesSender {
    /// The update waits in the slot, merged with the one already waiting there.
    fn post(&self, update: MetadataUpdate) -> Result<(), ShardGone> {
        if self.doorbell.is_closed() {
            return Err(ShardGone);
        }
        {
            let mut slot = lock(&self.slot);
            let merged = match slot.waiting.take() {
                None => update,
                Some(waiting) => {
                    slot.merged += 1;
                    merge(waiting, update, slot.taken.as_deref())
                }
            };
            slot.waiting = Some(merged);
        }
        // Full means a ring is already pending: the shard will see the slot.
        match self.doorbell.try_send(()) {
            Err(async_channel::TrySendError::Closed(())) => Err(ShardGone),
            _ => Ok(()),
        }
    }
}

/// Merges a newer update into the waiting one. An update without deltas (the first image,
/// which the shard reads whole) stays one; deltas past the bound are recomputed from the
/// image the shard last took.
fn merge(waiting: MetadataUpdate, newer: MetadataUpdate, taken: Option<&MetadataImage>) -> MetadataUpdate {
    if waiting.deltas.is_empty() || newer.deltas.is_empty() {
        return MetadataUpdate { image: newer.image, deltas: Vec::new() };
    }
    let mut deltas = waiting.deltas;
    for d in newer.deltas {
        if !redundant(&deltas, &d) {
            deltas.push(d);
        }
    }
    match taken {
        Some(from) if deltas.len() > delta_bound(from, &newer.image) => deltas = super::apply::diff_images(from, &newer.image),
        // Only the first update precedes any taken one, and it has no deltas.
        None if deltas.len() > MAX_MERGED_DELTAS => deltas.clear(),
        _ => {}
    }
    MetadataUpdate { image: newer.image, deltas }
}

/// How many deltas a waiting update may gather from `from` to `to`: MAX_MERGED_DELTAS, or
/// more than their difference can hold (`diff_images` gives at most 4 per topic of `to`, 1
/// per topic of `from` and 1 per resource with configs, plus brokers and features), so a
/// recomputed list is always well under it and the next recomputation is far away.
fn delta_bound(from: &MetadataImage, to: &MetadataImage) -> usize {
    let most_of_a_diff = 4 * to.topics.len() + from.topics.len() + from.resource_configs.len() + to.resource_configs.len() + 2;
    MAX_MERGED_DELTAS.max(2 * most_of_a_diff)
}

/// A delta that tells the shard to re-read something it is already told to re-read, with
/// no creation or deletion of its topic in between: applying it again against the same
/// (newest) image changes nothing.
fn redundant(deltas: &[MetadataDelta], d: &MetadataDelta) -> bool {
    let idempotent = !matches!(d, MetadataDelta::TopicCreated { .. } | MetadataDelta::TopicDeleted { .. } | MetadataDelta::PartitionsCreated { .. });
    if !idempotent {
        return false;
    }
    let topic = topic_of(d);
    for earlier in deltas.iter().rev() {
        if earlier == d {
            return true;
        }
        if topic.is_some() && topic == topic_of(earlier) && matches!(earlier, MetadataDelta::TopicCreated { .. } | MetadataDelta::TopicDeleted { .. }) {
            return false;
        }
    }
    false
}

fn topic_of(d: &MetadataDelta) -> Option<&str> {
    match d {
        MetadataDelta::TopicCreated { name }
        | MetadataDelta::PartitionsCreated { name, .. }
        | MetadataDelta::TopicDeleted { name, .. }
        | MetadataDelta::TopicConfigChanged { name }
        | MetadataDelta::LeadersChanged { name }
        | MetadataDelta::RemoteLogChanged { name } => Some(name),
        MetadataDelta::BrokerConfigChanged
        | MetadataDelta::GroupConfigChanged { .. }
        | MetadataDelta::BrokersChanged
        | MetadataDelta::SecurityChanged
        | MetadataDelta::FeaturesChanged => None,
    }
}

/// The shard's end.
pub struct ShardUpdates {
    slot: Arc<Mutex<Slot>>,
    rung: async_channel::Receiver<()>,
}

impl ShardUpdates {
    /// The next update and how many posted updates merged into it (0: none), once one
    /// waits; None once the controller's end is gone and nothing waits.
    pub async fn recv(&self) -> Option<(MetadataUpdate, u64)> {
        loop {
            if let Some(taken) = self.try_take() {
                return Some(taken);
            }
            if self.rung.recv().await.is_err() {
                // Closed: a last update may have been posted before the sender went.
                return self.try_take();
            }
        }
    }

    /// The waiting update, if any, without waiting (controller tests).
    #[cfg(test)]
    pub fn try_recv(&self) -> Result<MetadataUpdate, &'static str> {
        self.try_take().map(|(u, _)| u).ok_or("no update waits")
    }

    fn try_take(&self) -> Option<(MetadataUpdate, u64)> {
        let mut slot = lock(&self.slot);
        let update = slot.waiting.take()?;
        slot.taken = Some(update.image.clone());
        Some((update, std::mem::take(&mut slot.merged)))
    }
}

#[cfg(test)]
#[path = "shard_updates_tests.rs"]
mod tests;
