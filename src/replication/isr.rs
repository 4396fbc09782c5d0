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

use crate::cluster::shard_partitions::ShardPartitions;
use crate::controller::ControllerHandle;
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
                glommio::spawn_local(propose(p, controller.clone(), node_id, isr)).detach();
            }
        }
    }
}

/// How long a proposal may stay unanswered before the leader gives up on it and asks again
/// from its current state (the controller's own deadlines are shorter; this bounds a reply
/// lost between threads or nodes, so a pending change never blocks the ISR for good).
const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(30);

async fn propose(p: Rc<Partition>, controller: ControllerHandle, node_id: i32, isr: Vec<i32>) {
    let (leader_epoch, partition_epoch) = (p.leader_epoch(), p.partition_epoch());
    tracing::info!(topic = %p.topic, partition = p.index, from = ?p.isr(), to = ?isr, leader_epoch, partition_epoch, "proposing an ISR change");
    let call = controller.alter_partition(p.topic_id, p.index, node_id, leader_epoch, partition_epoch, isr);
    let answer = futures::select! {
        r = futures::FutureExt::fuse(call) => Some(r),
        _ = futures::FutureExt::fuse(glommio::timer::sleep(PROPOSAL_TIMEOUT)) => None,
    };
    match answer {
        Some(Ok(meta)) => {
            tracing::info!(topic = %p.topic, partition = p.index, isr = ?meta.isr, partition_epoch = meta.partition_epoch, "ISR change committed");
            // The committed state (the metadata update brings the same: `update_isr` keeps
            // the newer partition epoch, whichever comes first). Answered: nothing pending.
            p.update_isr(meta.partition_epoch, meta.isr.clone());
            p.clear_pending_isr();
        }
        Some(Err(e)) => {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "ISR change refused; retrying from the current metadata");
            p.clear_pending_isr();
        }
        None => {
            tracing::warn!(topic = %p.topic, partition = p.index, timeout_s = PROPOSAL_TIMEOUT.as_secs(), "ISR change unanswered; retrying");
            p.clear_pending_isr();
        }
    }
}
