//! The partition's replication role and its high watermark (Kafka's Partition.scala:
//! makeLeader / makeFollower, updateFollowerFetchState, maybeIncrementLeaderHW,
//! maybeShrinkIsr / maybeExpandIsr as proposals).
//!
//! A replica is Leader or Follower. The leader tracks its followers (`ReplicaTracker`) and
//! keeps the high watermark at min(own written offset, log end of every maximal-ISR
//! member), recomputed when its own write completes (the writer's `on_written` hook) and
//! on every follower fetch; acks=all appends and long polls are woken when it moves. A
//! follower takes the leader's high watermark, capped at its own log end.
//!
//! Invariants:
//! - the high watermark never moves back except by truncation (`follower.rs`), and never
//!   passes the log end offset;
//! - a replica that stopped leading acknowledges nothing more: `become_follower` fails
//!   the acks=all waiters with NotLeader and bumps `leadership`, which every append
//!   checks after each of its waits.
use futures::channel::oneshot;

use super::error::PartitionError;
use super::read::{FetchData, ReadLimit};
use super::replica_tracker::{BrokerId, ReplicaTracker};
use super::state::Partition;
use crate::storage::leader_epoch_cache::UNDEFINED_EPOCH;

/// What this replica is for its partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower { leader: BrokerId },
}

/// The role a replica opens in (`Partition::open_replica`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleState {
    Leader { leader_epoch: i32, partition_epoch: i32, replicas: Vec<BrokerId>, isr: Vec<BrokerId> },
    Follower { leader_epoch: i32, leader: BrokerId },
}

/// What a follower's fetch reads on the leader.
pub struct ReplicaRead {
    pub data: FetchData,
    /// KIP-320: (epoch, end offset) where the leader's log parts from the follower's, if
    /// it does; then `data` is empty and the follower truncates first.
    pub diverging: Option<(i32, i64)>,
}

/// An acks=all append waiting for the high watermark to reach `end_offset`.
pub(super) struct HwWaiter {
    end_offset: i64,
    tx: oneshot::Sender<Result<(), PartitionError>>,
}

impl Partition {
    pub fn role(&self) -> Role {
        self.role.get()
    }

    pub fn is_leader(&self) -> bool {
        self.role.get() == Role::Leader
    }

    /// The committed ISR, as the controller last published it to this replica.
    pub fn isr(&self) -> Vec<BrokerId> {
        self.tracker.borrow().isr().to_vec()
    }

    pub fn partition_epoch(&self) -> i32 {
        self.tracker.borrow().partition_epoch()
    }

    /// This replica leads from now on, in `leader_epoch` (Kafka's makeLeader): the epoch
    /// starts at the log end (as `set_leader_epoch`), followers are tracked afresh when
    /// it was not leading (their log ends unknown until they fetch, ISR members caught up
    /// as of now). The high watermark stays where it was (the checkpoint, or what the
    /// leader told it as follower) until the ISR has fetched past it.
    pub fn become_leader(&self, leader_epoch: i32, partition_epoch: i32, replicas: Vec<BrokerId>, isr: Vec<BrokerId>) {
        self.assert_on_shard();
        if leader_epoch < self.leader_epoch.get() {
            tracing::warn!(topic = %self.topic, partition = self.index, leader_epoch, current = self.leader_epoch.get(),
                "ignoring a stale become-leader");
            return;
        }
        debug_assert!(replicas.contains(&self.broker), "a leader is one of the replicas");
        let was_leader = self.is_leader();
        self.role.set(Role::Leader);
        self.set_leader_epoch(leader_epoch);
        let now = crate::runtime::now_ms();
        {
            let mut tracker = self.tracker.borrow_mut();
            if was_leader {
                tracker.set_replicas(&replicas, &isr, now);
                tracker.set_isr(&isr, partition_epoch);
            } else {
                *tracker = ReplicaTracker::new(self.broker, &replicas, &isr, partition_epoch, now);
            }
        }
        tracing::info!(topic = %self.topic, partition = self.index, leader_epoch, partition_epoch, ?isr,
            log_end_offset = self.log_end_offset(), high_watermark = self.high_watermark(), "became leader");
        self.maybe_increment_high_watermark();
    }

    /// This replica follows `leader` from now on (Kafka's makeFollower). No epoch is
    /// assigned and nothing is truncated (truncation comes from the diverging epoch the
    /// leader answers). acks=all appends still waiting fail with NotLeader, and every
    /// append in flight fails at its next check: a deposed leader acknowledges nothing.
    pub fn become_follower(&self, leader_epoch: i32, leader: BrokerId) {
        self.assert_on_shard();
        if leader_epoch < self.leader_epoch.get() {
            tracing::warn!(topic = %self.topic, partition = self.index, leader_epoch, current = self.leader_epoch.get(),
                "ignoring a stale become-follower");
            return;
        }
        let was_leader = self.is_leader();
        self.role.set(Role::Follower { leader });
        self.leader_epoch.set(leader_epoch);
        if was_leader {
            self.leadership.set(self.leadership.get() + 1);
            self.tracker.borrow_mut().clear_pending();
            self.fail_hw_waiters(|| PartitionError::NotLeader);
        }
        // Long polls on this replica meet NotLeader when they re-read.
        self.watchers.wake_all();
        tracing::info!(topic = %self.topic, partition = self.index, leader_epoch, leader,
            log_end_offset = self.log_end_offset(), high_watermark = self.high_watermark(), "became follower");
    }

    /// The controller committed a new ISR (`partition_epoch`) and nothing else changed.
    /// Clears the pending ISR change; a shrink may let the high watermark move.
    pub fn update_isr(&self, partition_epoch: i32, isr: Vec<BrokerId>) {
        self.assert_on_shard();
        let before = self.tracker.borrow().isr().len();
        if self.tracker.borrow_mut().set_isr(&isr, partition_epoch) {
            // Kafka's IsrShrinksPerSec / IsrExpandsPerSec, counted by the leader.
            if self.is_leader() {
                crate::metrics::with(|m| {
                    m.isr_shrinks += u64::from(isr.len() < before);
                    m.isr_expands += u64::from(isr.len() > before);
                });
            }
            self.maybe_increment_high_watermark();
        }
    }

    /// The controller committed a new replica set and ISR (`partition_epoch`) with the
    /// same leader epoch: a reassignment started (the added replicas are tracked from now
    /// on, unknown until they fetch, so they can join the ISR once caught up). A replica
    /// removed comes with a new leader epoch instead (`become_leader`).
    pub fn update_replicas_and_isr(&self, partition_epoch: i32, replicas: Vec<BrokerId>, isr: Vec<BrokerId>) {
        self.assert_on_shard();
        if partition_epoch < self.partition_epoch() {
            return;
        }
        self.tracker.borrow_mut().set_replicas(&replicas, &isr, crate::runtime::now_ms());
        self.update_isr(partition_epoch, isr);
    }

    /// The leader's ISR loop proposed `isr` (AlterPartition in flight): until the
    /// controller answers, the high watermark counts the members it adds.
    pub fn set_pending_isr(&self, isr: Vec<BrokerId>) {
        self.tracker.borrow_mut().set_pending(&isr);
    }

    /// The proposal failed (or was answered by a metadata update already applied).
    pub fn clear_pending_isr(&self) {
        self.tracker.borrow_mut().clear_pending();
        self.maybe_increment_high_watermark();
    }

    /// The ISR the leader should propose now: without the followers not caught up within
    /// `lag_ms` if any, else with the followers that caught up; None when nothing should
    /// change, a change is pending already, or this replica does not lead.
    pub fn isr_change_wanted(&self, now_ms: i64, lag_ms: i64) -> Option<Vec<BrokerId>> {
        if !self.is_leader() || self.closed.get() {
            return None;
        }
        let tracker = self.tracker.borrow();
        if tracker.pending.is_some() {
            return None;
        }
        let written = self.log.borrow().written_offset();
        let shrink = tracker.shrink_candidates(now_ms, lag_ms, written);
        if !shrink.is_empty() {
            return Some(tracker.isr().iter().copied().filter(|b| !shrink.contains(b)).collect());
        }
        let epoch_start = self.current_epoch_start()?;
        let expand = tracker.expand_candidates(self.high_watermark(), epoch_start);
        if expand.is_empty() {
            return None;
        }
        let mut isr = tracker.isr().to_vec();
        isr.extend(expand);
        Some(isr)
    }

    /// Where this leader's current epoch began (Kafka's leaderEpochStartOffsetOpt).
    fn current_epoch_start(&self) -> Option<i64> {
        let epoch = self.leader_epoch.get();
        self.epochs.borrow().entries().last().filter(|e| e.epoch == epoch).map(|e| e.start_offset)
    }

    /// A follower fetched at `fetch_offset` (it has everything below): the leader records
    /// it and recomputes the high watermark. True if the high watermark moved. Call it
    /// only for a fetch that passed the diverging-epoch check (as Kafka's fetchRecords: a
    /// diverging follower's offset says nothing about what it shares with this log); an
    /// offset past this log's end is ignored (OFFSET_OUT_OF_RANGE for the fetch).
    pub fn record_follower_fetch(&self, replica: BrokerId, fetch_offset: i64, now_ms: i64) -> bool {
        self.assert_on_shard();
        if !self.is_leader() || fetch_offset > self.log_end_offset() {
            return false;
        }
        let written = self.log.borrow().written_offset();
        if !self.tracker.borrow_mut().on_follower_fetch(replica, fetch_offset, written, now_ms) {
            tracing::debug!(topic = %self.topic, partition = self.index, replica, "fetch from a broker that is no replica");
            return false;
        }
        self.maybe_increment_high_watermark()
    }

    /// Leader: `replica`'s broker re-registered or was fenced: its earlier fetches no
    /// longer count (see `ReplicaTracker::reset_follower`).
    pub fn forget_follower(&self, replica: BrokerId) {
        self.assert_on_shard();
        self.tracker.borrow_mut().reset_follower(replica);
    }

    /// The leader's half of a follower's fetch at `offset` (Kafka's Partition.fetchRecords
    /// for a follower). A follower whose last epoch ends elsewhere here (or is unknown
    /// here) learns where to truncate, and its position is not recorded (its fetch offset
    /// is not valid yet). Otherwise its position is recorded when `counted` (KIP-903: the
    /// caller found the fetch from the process the metadata names as that broker, not
    /// fenced), which may move the high watermark, and the answer is read up to the
    /// written offset.
    pub async fn serve_replica_fetch(
        &self,
        replica: BrokerId,
        counted: bool,
        offset: i64,
        last_fetched_epoch: i32,
        limit: ReadLimit,
        now_ms: i64,
    ) -> Result<ReplicaRead, PartitionError> {
        self.check_online()?;
        if let Some(diverging) = super::divergence::diverging_epoch(last_fetched_epoch, offset, |e| self.epoch_end_offset(e)) {
            let data = FetchData { high_watermark: self.high_watermark(), log_start_offset: self.log_start_offset(), ..Default::default() };
            return Ok(ReplicaRead { data, diverging: Some(diverging) });
        }
        if counted {
            self.record_follower_fetch(replica, offset, now_ms);
        }
        let data = self.read_for_follower(offset, limit).await?;
        Ok(ReplicaRead { data, diverging: None })
    }

    /// A follower's high watermark from the leader's fetch response: min(`hw`, log end),
    /// never moving back.
    pub fn set_follower_high_watermark(&self, hw: i64) {
        let capped = hw.min(self.log_end_offset());
        self.raise_high_watermark(capped);
    }

    /// Kafka's leader-epoch check of a request naming `current_leader_epoch` (-1: none):
    /// older → FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        let current = self.leader_epoch.get();
        match current_leader_epoch {
            UNDEFINED_EPOCH => Ok(()),
            e if e < current => Err(PartitionError::FencedLeaderEpoch { request: e, current }),
            e if e > current => Err(PartitionError::UnknownLeaderEpoch { request: e, current }),
            _ => Ok(()),
        }
    }

    /// The epoch of the last batch in the log (a follower's last_fetched_epoch), -1 when
    /// the log has none. On a leader that has not appended in its current epoch yet, that
    /// epoch (its start is recorded at the log end).
    pub fn last_fetched_epoch(&self) -> i32 {
        self.epochs.borrow().latest_epoch().unwrap_or(UNDEFINED_EPOCH)
    }

    /// `last_fetched_epoch` under the design's name.
    pub fn last_epoch(&self) -> i32 {
        self.last_fetched_epoch()
    }

    /// The writer completed writes (or went offline).
    pub(super) fn on_written(&self) {
        if self.is_leader() {
            self.maybe_increment_high_watermark();
        }
        self.watchers.wake_long_polls();
    }

    /// Leader: moves the high watermark up to what the ISR has. True if it moved.
    pub(super) fn maybe_increment_high_watermark(&self) -> bool {
        if !self.is_leader() {
            return false;
        }
        let written = self.log.borrow().written_offset();
        let tracker = self.tracker.borrow();
        if self.below_min_isr_held(&tracker) {
            return false;
        }
        let candidate = tracker.high_watermark(written);
        drop(tracker);
        self.raise_high_watermark(candidate)
    }

    /// Whether KIP-966 holds the high watermark: the committed ISR is smaller than
    /// min.insync.replicas, capped at the replica count (Kafka's `isUnderMinIsr` with its
    /// effective min ISR). Per completed write: no allocation.
    fn below_min_isr_held(&self, tracker: &ReplicaTracker) -> bool {
        let settings = self.settings.borrow();
        if !settings.hold_high_watermark_below_min_isr {
            return false;
        }
        let replicas = tracker.followers().len() + 1;
        let min_isr = usize::try_from(settings.min_insync_replicas.max(1)).unwrap_or(1).min(replicas);
        tracker.isr().len() < min_isr
    }

    /// Sets the high watermark to `candidate` if that is higher (capped at the log end);
    /// wakes the acks=all waiters it satisfies and the long polls. True if it moved.
    fn raise_high_watermark(&self, candidate: i64) -> bool {
        let end = self.log.borrow().next_offset();
        let new = candidate.min(end);
        if new <= self.high_watermark.get() {
            return false;
        }
        self.high_watermark.set(new);
        debug_assert!(new <= end, "high watermark {new} past the log end {end}");
        let mut waiters = self.hw_waiters.borrow_mut();
        for w in waiters.extract_if(.., |w| w.end_offset <= new) {
            let _ = w.tx.send(Ok(()));
        }
        drop(waiters);
        self.watchers.wake_on_high_watermark();
        true
    }

    /// Lowers the high watermark to at most `end` (truncation only).
    pub(super) fn cut_high_watermark(&self, end: i64) {
        if self.high_watermark.get() > end {
            self.high_watermark.set(end);
        }
    }

    /// Sets the high watermark to `offset` whichever way it moves (a log restarted there).
    pub(super) fn reset_high_watermark(&self, offset: i64) {
        self.high_watermark.set(offset);
    }

    /// Waits until the high watermark reaches `end_offset` (an acks=all append), failing
    /// when this replica stops leading or closes. No allocation when it is there already.
    pub(super) async fn wait_high_watermark(&self, end_offset: i64) -> Result<(), PartitionError> {
        if self.high_watermark.get() >= end_offset {
            return Ok(());
        }
        let (tx, rx) = oneshot::channel();
        self.hw_waiters.borrow_mut().push(HwWaiter { end_offset, tx });
        match rx.await {
            Ok(res) => res,
            // Dropped unanswered: only with the partition itself.
            Err(oneshot::Canceled) => Err(PartitionError::NotLeader),
        }
    }

    /// Fails every acks=all waiter with `error()`.
    pub(super) fn fail_hw_waiters(&self, error: impl Fn() -> PartitionError) {
        let waiters = std::mem::take(&mut *self.hw_waiters.borrow_mut());
        for w in waiters {
            let _ = w.tx.send(Err(error()));
        }
    }

    /// An append that began while `leadership` was `since` may still acknowledge: the
    /// partition is open and has not stopped leading since.
    pub(super) fn check_still_leading(&self, since: u64) -> Result<(), PartitionError> {
        if self.closed.get() {
            return Err(PartitionError::Storage(crate::storage::StorageError::Closed));
        }
        if self.leadership.get() != since || !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        Ok(())
    }

    /// The followers as this leader tracks them (tests and the simulation look).
    pub fn tracker_snapshot(&self) -> ReplicaTracker {
        self.tracker.borrow().clone()
    }
}
