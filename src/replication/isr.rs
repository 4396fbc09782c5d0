//! The leader's side of ISR changes on one shard (Kafka's isr-expiration task and
//! maybeExpandIsr, with AlterPartitionManager's one-change-in-flight rule): every tick it
//! asks each partition it leads whether its ISR should change — a follower not caught up
//! for `replica_lag_time_max_ms` leaves, a follower caught up to the high watermark (and
//! into the leader's epoch) joins — and proposes the new ISR to the controller as
//! AlterPartition with the leader and partition epochs it knows. The controller refuses a
//! stale one; the committed ISR comes back in the next metadata update (and at once in
//! the answer, so the high watermark uses it without waiting for the update).
use std::rc::Rc;
use std::time::Duration;

use crate::cluster::image::broker_epoch;
use crate::cluster::shard_partitions::ShardPartitions;
use crate::controller::{AlterPartitionError, ControllerError, ControllerHandle};
use crate::partition::Partition;

/// How often the leader checks its partitions' ISRs: often enough that a caught-up
/// follower rejoins quickly (Kafka expands on the fetch itself), and at least twice per
/// lag time so a shrink is never late by more than half of it.
pub fn check_interval(replica_lag_time_max_ms: u64) -> Duration {
    Duration::from_millis((replica_lag_time_max_ms / 2).clamp(10, 250))
}

pub async fn isr_loop(partitions: Rc<ShardPartitions>, controller: ControllerHandle, node_id: i32, replica_lag_time_max_ms: u64) {
    let every = check_interval(replica_lag_time_max_ms);
    let lag_ms = i64::try_from(replica_lag_time_max_ms).unwrap_or(i64::MAX);
    loop {
        glommio::timer::sleep(every).await;
        let now = crate::runtime::now_ms();
        for p in partitions.all() {
            if let Some(isr) = p.isr_change_wanted(now, lag_ms) {
                p.set_pending_isr(isr.clone());
                let epochs = broker_epochs(&partitions, &isr);
                glommio::spawn_local(propose(p, controller.clone(), node_id, isr, epochs)).detach();
            }
        }
    }
}

/// The broker epoch of each member as this shard's image names it (KIP-903). The
/// positions the tracker judged come from fetches of exactly these processes: a fetch is
/// counted only when its epoch is the image's (`router.rs`, `ReplicaFetch`), and a change
/// of epoch in the image forgets the follower's position (`forget_restarted_followers`),
/// both on this thread. So the controller can refuse a member that re-registered since.
fn broker_epochs(partitions: &ShardPartitions, isr: &[i32]) -> Vec<i64> {
    let image = partitions.image();
    isr.iter().map(|b| image.brokers.get(b).map_or(-1, |m| broker_epoch(&m.incarnation))).collect()
}

/// How long a proposal may stay unanswered before the leader sends it again (the
/// controller's own deadlines are shorter; this bounds a reply lost between threads or
/// nodes). The outcome is unknown then, so the change stays pending (see `propose`).
const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends the proposal until its outcome is known (Kafka's AlterPartitionManager and
/// Partition.handleAlterPartitionError). The pending change is dropped only when the
/// controller says it was not applied: until then the high watermark keeps counting the
/// members it adds, since the controller may have put them in the ISR (an expansion
/// committed after its answer timed out, with the high watermark computed without the
/// new member, leaves an ISR member without records acknowledged meanwhile: found by the
/// replication simulation, `simulation.rs`, finding 2). An unanswered or unknown outcome
/// (no answer in PROPOSAL_TIMEOUT, NotController: the entry may still commit) sends the
/// same request again: if it had committed, the retry is refused as stale and the
/// metadata update settles it.
async fn propose(p: Rc<Partition>, controller: ControllerHandle, node_id: i32, isr: Vec<i32>, epochs: Vec<i64>) {
    let (leader_epoch, partition_epoch) = (p.leader_epoch(), p.partition_epoch());
    tracing::info!(topic = %p.topic, partition = p.index, from = ?p.isr(), to = ?isr, leader_epoch, partition_epoch, "proposing an ISR change");
    loop {
        let call = controller.alter_partition(p.topic_id, p.index, node_id, leader_epoch, partition_epoch, isr.clone(), epochs.clone());
        let answer = futures::select! {
            r = futures::FutureExt::fuse(call) => Some(r),
            _ = futures::FutureExt::fuse(glommio::timer::sleep(PROPOSAL_TIMEOUT)) => None,
        };
        match answer {
            Some(Ok(meta)) => {
                tracing::info!(topic = %p.topic, partition = p.index, isr = ?meta.isr, partition_epoch = meta.partition_epoch, "ISR change committed");
                // The committed state (the metadata update brings the same: `update_isr`
                // keeps the newer partition epoch, whichever comes first, and clears the
                // pending change; a later proposal pending by now is left alone).
                p.update_isr(meta.partition_epoch, meta.isr.clone());
                return;
            }
            Some(Err(ControllerError::AlterPartition(e))) if not_applied(&e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "ISR change refused; retrying from the current metadata");
                if still_pending(&p, leader_epoch, partition_epoch, &isr) {
                    p.clear_pending_isr();
                }
                return;
            }
            Some(Err(ControllerError::AlterPartition(e))) => {
                // Our epochs are stale (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION): the
                // partition changed, maybe by this very change retried; the metadata
                // update that brings the new state clears the pending change.
                tracing::info!(topic = %p.topic, partition = p.index, error = %e, "ISR change answered as stale; waiting for the metadata update");
                return;
            }
            Some(Err(e)) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "ISR change not answered; retrying it");
            }
            None => {
                tracing::warn!(topic = %p.topic, partition = p.index, timeout_s = PROPOSAL_TIMEOUT.as_secs(), "ISR change unanswered; retrying it");
            }
        }
        if !still_pending(&p, leader_epoch, partition_epoch, &isr) {
            return;
        }
        glommio::timer::sleep(RETRY_BACKOFF).await;
        if !still_pending(&p, leader_epoch, partition_epoch, &isr) {
            return;
        }
    }
}

/// Between resends of a proposal whose outcome is unknown.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Refusals that mean the request, with the epochs it carried current, was not applied
/// (they are checked after the epochs, so a retry of an applied request never gets them).
pub(crate) fn not_applied(e: &AlterPartitionError) -> bool {
    matches!(e, AlterPartitionError::IneligibleReplica | AlterPartitionError::InvalidRequest(_) | AlterPartitionError::UnknownTopicOrPartition)
}

/// `p` still leads in the epochs the proposal of `isr` was made in, with it pending.
pub(crate) fn still_pending(p: &Partition, leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> bool {
    p.is_leader() && p.leader_epoch() == leader_epoch && p.partition_epoch() == partition_epoch && p.tracker_snapshot().pending.is_some_and(|c| c.isr == isr)
}
