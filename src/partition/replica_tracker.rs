//! What a partition's leader knows about its followers (Kafka's `Replica` states and the
//! ISR part of `PartitionState` in Partition.scala): each follower's log end offset and
//! when it was last caught up, the in-sync replica set with its partition epoch, and the
//! ISR change proposed to the controller and not committed yet.
//!
//! Pure: no I/O, no clock (times are passed in as `now_ms`), so the partition and a
//! deterministic simulation drive it the same way.
//!
//! Rules (Kafka 4.1):
//! - A follower's log end offset is the fetch offset it last sent: it has every offset
//!   below it.
//! - Caught up (`Replica.updateFetchState`): a fetch at or past the leader's log end at
//!   this fetch makes the follower caught up now; a fetch at or past the leader's log end
//!   as of the follower's *previous* fetch makes it caught up as of that previous fetch.
//!   A follower that always fetches what the leader had one fetch ago keeps up under
//!   steady load even though the leader keeps moving.
//! - High watermark = min(leader's offset, log end offset of every member of the maximal
//!   ISR): the committed ISR plus the members a pending change adds (Kafka's
//!   PendingExpandIsr uses `isr + new`, PendingShrinkIsr keeps the old, larger ISR), so
//!   the high watermark never counts on a set the controller has not accepted yet.
//! - Shrink (`Partition.getOutOfSyncReplicas`): an ISR follower not caught up within
//!   `lag_ms`, unless its log end equals the leader's.
//! - Expand (`Partition.isFollowerInSync`): a replica outside the ISR whose log end offset
//!   is at or past the high watermark and the start offset of the leader's current epoch.
//!   Kafka judges that on the fetch itself; the leader here proposes from a periodic
//!   check, so only a follower that fetched since it left the ISR qualifies: a dead one
//!   shrunk out for lag would otherwise come straight back on its last position (found by
//!   the replication simulation, seed 13: a follower that then lost power was put back
//!   in the ISR without the records its crash lost).
//!
//! "The leader's log end" here is the offset its own writes completed to
//! (`Log::written_offset`): a follower can never fetch past it, so being caught up means
//! having everything the leader could have served.

/// A Kafka broker (node) id (the same type as `cluster::image::BrokerId`).
pub type BrokerId = i32;

/// Kafka's unknown offset: a follower's log end before its first fetch to this leader.
pub const UNKNOWN_OFFSET: i64 = -1;

/// Never caught up (a replica outside the ISR when this leader took over).
const NEVER_MS: i64 = i64::MIN;

/// One follower, as the leader tracks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    pub broker: BrokerId,
    /// The fetch offset it last sent (`UNKNOWN_OFFSET` before its first fetch).
    pub log_end_offset: i64,
    /// The last time it was caught up (see the module comment).
    pub last_caught_up_ms: i64,
    /// When its last fetch arrived.
    pub last_fetch_ms: i64,
    /// The leader's log end when that last fetch arrived (Kafka's
    /// lastFetchLeaderLogEndOffset).
    pub last_fetch_leader_log_end: i64,
    /// It fetched since the committed ISR last dropped it (or since this leader took
    /// over): its position is from a fetch made while outside the ISR.
    pub fetched_outside_isr: bool,
}

/// An ISR change sent to the controller (AlterPartition) and not committed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingIsrChange {
    /// The ISR proposed.
    pub isr: Vec<BrokerId>,
}

#[derive(Clone, Debug)]
pub struct ReplicaTracker {
    leader: BrokerId,
    /// Every replica but the leader, in assignment order.
    followers: Vec<FollowerState>,
    /// The committed ISR (as the controller last published it).
    isr: Vec<BrokerId>,
    partition_epoch: i32,
    /// At most one change in flight (one AlterPartition per partition).
    pub pending: Option<PendingIsrChange>,
}

impl ReplicaTracker {
    /// The tracker of a leader that just took over: followers' log ends are unknown until
    /// they fetch; ISR members count as caught up now (Kafka's `resetReplicaState` for a
    /// new leader), so they are not shrunk before they had a chance to fetch.
    pub fn new(leader: BrokerId, replicas: &[BrokerId], isr: &[BrokerId], partition_epoch: i32, now_ms: i64) -> ReplicaTracker {
        let mut t = ReplicaTracker { leader, followers: Vec::new(), isr: Vec::new(), partition_epoch, pending: None };
        t.set_replicas(replicas, isr, now_ms);
        t.isr = dedup(isr);
        t
    }

    /// A tracker for a partition with no other replica (ISR = the leader alone): its high
    /// watermark is the leader's offset.
    pub fn alone(leader: BrokerId) -> ReplicaTracker {
        ReplicaTracker::new(leader, &[leader], &[leader], 0, 0)
    }

    pub fn leader(&self) -> BrokerId {
        self.leader
    }

    /// A new replica assignment for the same leader: followers kept keep their state, new
    /// ones start unknown (caught up now if `isr` names them).
    pub fn set_replicas(&mut self, replicas: &[BrokerId], isr: &[BrokerId], now_ms: i64) {
        let old = std::mem::take(&mut self.followers);
        for &b in replicas {
            if b == self.leader || self.followers.iter().any(|f| f.broker == b) {
                continue;
            }
            let state = old.iter().find(|f| f.broker == b).copied().unwrap_or(FollowerState {
                broker: b,
                log_end_offset: UNKNOWN_OFFSET,
                last_caught_up_ms: if isr.contains(&b) { now_ms } else { NEVER_MS },
                last_fetch_ms: NEVER_MS,
                last_fetch_leader_log_end: UNKNOWN_OFFSET,
                fetched_outside_isr: false,
            });
            self.followers.push(state);
        }
    }

    /// The ISR the controller committed at `partition_epoch`. Clears the pending change:
    /// the controller answered it (accepted, or moved on past it). A stale update (an
    /// older partition epoch) changes nothing and returns false.
    pub fn set_isr(&mut self, isr: &[BrokerId], partition_epoch: i32) -> bool {
        if partition_epoch < self.partition_epoch {
            return false;
        }
        let isr = dedup(isr);
        for f in self.followers.iter_mut().filter(|f| self.isr.contains(&f.broker) && !isr.contains(&f.broker)) {
            f.fetched_outside_isr = false;
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending = None;
        true
    }

    pub fn isr(&self) -> &[BrokerId] {
        &self.isr
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    pub fn followers(&self) -> &[FollowerState] {
        &self.followers
    }

    pub fn follower(&self, broker: BrokerId) -> Option<&FollowerState> {
        self.followers.iter().find(|f| f.broker == broker)
    }

    pub fn is_replica(&self, broker: BrokerId) -> bool {
        broker == self.leader || self.followers.iter().any(|f| f.broker == broker)
    }

    /// In the committed ISR or added by the pending change (see the module comment).
    pub fn in_maximal_isr(&self, broker: BrokerId) -> bool {
        self.isr.contains(&broker) || self.pending.as_ref().is_some_and(|p| p.isr.contains(&broker))
    }

    /// The committed ISR plus what the pending change adds.
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        let mut out = self.isr.clone();
        if let Some(p) = &self.pending {
            for &b in &p.isr {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
        }
        out
    }

    pub fn set_pending(&mut self, isr: &[BrokerId]) {
        self.pending = Some(PendingIsrChange { isr: dedup(isr) });
    }

    pub fn clear_pending(&mut self) {
        self.pending = None;
    }

    /// Forgets what `broker` told this leader (it restarted, maybe without some of that
    /// data, or was fenced): its log end is unknown until it fetches again, and it is not
    /// caught up. An expansion never counts a previous process's position (KIP-903's
    /// concern; found by the fault tests and the replication simulation).
    pub fn reset_follower(&mut self, broker: BrokerId) {
        if let Some(f) = self.followers.iter_mut().find(|f| f.broker == broker) {
            f.log_end_offset = UNKNOWN_OFFSET;
            f.last_caught_up_ms = 0;
            f.last_fetch_ms = 0;
            f.last_fetch_leader_log_end = UNKNOWN_OFFSET;
            f.fetched_outside_isr = false;
        }
    }

    /// A follower fetched at `fetch_offset` while the leader's log ended at
    /// `leader_log_end`. False (nothing recorded) when `broker` is not a follower here.
    pub fn on_follower_fetch(&mut self, broker: BrokerId, fetch_offset: i64, leader_log_end: i64, now_ms: i64) -> bool {
        let Some(f) = self.followers.iter_mut().find(|f| f.broker == broker) else { return false };
        let caught_up = if fetch_offset >= leader_log_end {
            f.last_caught_up_ms.max(now_ms)
        } else if f.last_fetch_leader_log_end >= 0 && fetch_offset >= f.last_fetch_leader_log_end {
            f.last_caught_up_ms.max(f.last_fetch_ms)
        } else {
            f.last_caught_up_ms
        };
        f.log_end_offset = fetch_offset;
        f.fetched_outside_isr = true;
        f.last_caught_up_ms = caught_up;
        f.last_fetch_ms = now_ms;
        // Kafka keeps the larger of the two, so a leader whose log end went back (a
        // truncation) does not make an old fetch count as caught up.
        f.last_fetch_leader_log_end = leader_log_end.max(f.last_fetch_leader_log_end);
        true
    }

    /// min(`leader_offset`, log end of every follower in the maximal ISR). A member whose
    /// log end is unknown (no fetch yet, or no replica of that id) holds it at
    /// `UNKNOWN_OFFSET`. The caller keeps its high watermark monotonic (this value can be
    /// below it right after a leader change).
    pub fn high_watermark(&self, leader_offset: i64) -> i64 {
        // Runs on every completed write of the leader: no allocation (a member named twice
        // counts once either way, for a minimum).
        let pending = self.pending.as_ref().map_or(&[][..], |p| &p.isr[..]);
        let mut hw = leader_offset;
        for &b in self.isr.iter().chain(pending) {
            if b == self.leader {
                continue;
            }
            let leo = self.follower(b).map_or(UNKNOWN_OFFSET, |f| f.log_end_offset);
            hw = hw.min(leo);
        }
        debug_assert!(hw <= leader_offset);
        hw
    }

    /// The committed ISR's followers that are out of sync: not caught up for more than
    /// `lag_ms`, and not at the leader's log end.
    pub fn shrink_candidates(&self, now_ms: i64, lag_ms: i64, leader_log_end: i64) -> Vec<BrokerId> {
        self.isr
            .iter()
            .copied()
            .filter(|&b| b != self.leader)
            .filter(|&b| match self.follower(b) {
                // In the ISR but not a replica: the controller's business, not a lag.
                None => false,
                Some(f) => f.log_end_offset != leader_log_end && now_ms.saturating_sub(f.last_caught_up_ms) > lag_ms,
            })
            .collect()
    }

    /// Followers outside the committed ISR that caught up: log end at or past `hw` and
    /// at or past `epoch_start_offset` (where the leader's current epoch began), from a
    /// fetch made since they left the ISR.
    pub fn expand_candidates(&self, hw: i64, epoch_start_offset: i64) -> Vec<BrokerId> {
        self.followers
            .iter()
            .filter(|f| !self.isr.contains(&f.broker) && f.fetched_outside_isr)
            .filter(|f| f.log_end_offset >= 0 && f.log_end_offset >= hw && f.log_end_offset >= epoch_start_offset)
            .map(|f| f.broker)
            .collect()
    }
}

/// `ids` without repeats, first occurrence kept.
fn dedup(ids: &[BrokerId]) -> Vec<BrokerId> {
    let mut out = Vec::with_capacity(ids.len());
    for &b in ids {
        if !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tracker() -> ReplicaTracker {
        ReplicaTracker::new(1, &[1, 2, 3], &[1, 2, 3], 5, 1_000)
    }

    #[test]
    fn high_watermark_is_the_minimum_over_the_isr() {
        let mut t = tracker();
        assert_eq!(t.high_watermark(100), UNKNOWN_OFFSET, "followers not heard from hold it");
        t.on_follower_fetch(2, 80, 100, 1_001);
        assert_eq!(t.high_watermark(100), UNKNOWN_OFFSET);
        t.on_follower_fetch(3, 90, 100, 1_001);
        assert_eq!(t.high_watermark(100), 80);
        assert_eq!(t.high_watermark(50), 50, "never above the leader's own offset");
        // Out of the ISR: no longer counted.
        assert!(t.set_isr(&[1, 3], 6));
        assert_eq!(t.high_watermark(100), 90);
        // A pending expand counts its new member at once (maximal ISR).
        t.set_pending(&[1, 2, 3]);
        assert_eq!(t.high_watermark(100), 80);
        t.clear_pending();
        assert_eq!(t.high_watermark(100), 90);
        // Alone: the leader's offset.
        assert_eq!(ReplicaTracker::alone(7).high_watermark(42), 42);
    }

    #[test]
    fn stale_isr_updates_are_ignored_and_commits_clear_the_pending_change() {
        let mut t = tracker();
        t.set_pending(&[1, 2]);
        assert!(!t.set_isr(&[1], 4), "older partition epoch");
        assert_eq!(t.isr(), &[1, 2, 3]);
        assert!(t.pending.is_some());
        assert!(t.set_isr(&[1, 2], 6));
        assert_eq!((t.isr(), t.partition_epoch()), (&[1, 2][..], 6));
        assert!(t.pending.is_none());
    }

    #[test]
    fn caught_up_follows_kafkas_rule() {
        let mut t = tracker();
        // Behind the leader's current end, and no previous fetch: not caught up (the
        // reset at takeover counts: 1000).
        t.on_follower_fetch(2, 50, 100, 2_000);
        assert_eq!(t.follower(2).unwrap().last_caught_up_ms, 1_000);
        // At the leader's end as of the previous fetch (100): caught up as of that fetch.
        t.on_follower_fetch(2, 100, 150, 3_000);
        assert_eq!(t.follower(2).unwrap().last_caught_up_ms, 2_000);
        // At the leader's current end: caught up now.
        t.on_follower_fetch(2, 150, 150, 4_000);
        assert_eq!(t.follower(2).unwrap().last_caught_up_ms, 4_000);
        // Going back in time never lowers it.
        t.on_follower_fetch(2, 10, 200, 5_000);
        assert_eq!(t.follower(2).unwrap().last_caught_up_ms, 4_000);
        assert!(!t.on_follower_fetch(9, 0, 0, 0), "not a replica");
        assert!(!t.on_follower_fetch(1, 0, 0, 0), "the leader is no follower");
    }

    #[test]
    fn shrink_after_lag_and_not_before() {
        let mut t = tracker();
        t.on_follower_fetch(2, 100, 100, 1_000);
        t.on_follower_fetch(3, 100, 100, 1_000);
        // 3 stops fetching; the leader moves on.
        t.on_follower_fetch(2, 200, 200, 1_500);
        assert!(t.shrink_candidates(1_000 + 500, 500, 200).is_empty(), "exactly lag_ms: still in sync");
        assert_eq!(t.shrink_candidates(1_000 + 501, 500, 200), vec![3]);
        assert!(t.shrink_candidates(1_000 + 501, 500, 100).is_empty(), "at the leader's end: in sync however old");
        // New leader: ISR members get a grace period from the takeover.
        let t = ReplicaTracker::new(1, &[1, 2], &[1, 2], 0, 10_000);
        assert!(t.shrink_candidates(10_500, 500, 7).is_empty());
        assert_eq!(t.shrink_candidates(10_501, 500, 7), vec![2]);
    }

    #[test]
    fn expand_needs_the_high_watermark_and_the_epoch_start() {
        let mut t = ReplicaTracker::new(1, &[1, 2, 3], &[1], 0, 0);
        assert!(t.expand_candidates(0, 0).is_empty(), "unknown log ends never expand");
        t.on_follower_fetch(2, 40, 100, 1);
        t.on_follower_fetch(3, 60, 100, 1);
        assert_eq!(t.expand_candidates(50, 30), vec![3]);
        assert_eq!(t.expand_candidates(50, 70), Vec::<BrokerId>::new(), "behind the leader's epoch start");
        assert_eq!(t.expand_candidates(40, 0), vec![2, 3]);
        t.set_isr(&[1, 3], 1);
        assert_eq!(t.expand_candidates(40, 0), vec![2], "ISR members are not candidates");
    }

    #[test]
    fn a_follower_shrunk_out_comes_back_only_on_a_new_fetch() {
        let mut t = ReplicaTracker::new(1, &[1, 2, 3], &[1, 2, 3], 0, 0);
        t.on_follower_fetch(2, 100, 100, 1);
        t.on_follower_fetch(3, 100, 100, 1);
        // Broker 2 stops fetching (dead) and is shrunk out; its last position is still at
        // the high watermark, which the leader alone holds now.
        assert!(t.set_isr(&[1, 3], 1));
        assert!(t.expand_candidates(100, 0).is_empty(), "no fetch since it left: its position is the old one");
        t.on_follower_fetch(2, 100, 100, 900);
        assert_eq!(t.expand_candidates(100, 0), vec![2]);
    }

    #[test]
    fn reassignment_keeps_known_followers() {
        let mut t = tracker();
        t.on_follower_fetch(2, 70, 100, 1_500);
        t.set_replicas(&[1, 2, 4], &[1, 2, 3], 2_000);
        assert_eq!(t.follower(2).unwrap().log_end_offset, 70);
        assert!(t.follower(3).is_none());
        assert_eq!(t.follower(4).unwrap().last_caught_up_ms, NEVER_MS);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Fetch { broker: BrokerId, offset: i64, leader_end: i64, dt: i64 },
        SetIsr(Vec<BrokerId>),
        Pending(Vec<BrokerId>),
        ClearPending,
    }

    fn op() -> impl Strategy<Value = Op> {
        let broker = 1..=4i32;
        let isr = proptest::collection::vec(1..=4i32, 0..4).prop_map(|mut v| {
            v.push(1);
            v
        });
        prop_oneof![
            4 => (broker, 0..200i64, 0..200i64, 0..100i64).prop_map(|(broker, offset, leader_end, dt)| Op::Fetch { broker, offset, leader_end, dt }),
            1 => isr.clone().prop_map(Op::SetIsr),
            1 => isr.prop_map(Op::Pending),
            1 => Just(Op::ClearPending),
        ]
    }

    proptest! {
        /// The high watermark is never above the leader's offset nor any maximal-ISR
        /// member's log end, and equals the smallest of them; shrink names exactly the ISR
        /// followers not caught up within the lag (and not at the leader's end); expand
        /// names exactly the non-ISR followers past both bounds.
        #[test]
        fn invariants(ops in proptest::collection::vec(op(), 1..60), leader_offset in 0..250i64, lag in 0..300i64, hw in 0..200i64, start in 0..200i64) {
            let mut t = ReplicaTracker::new(1, &[1, 2, 3, 4], &[1, 2, 3], 0, 0);
            let mut now = 0;
            let mut epoch = 0;
            for op in ops {
                match op {
                    Op::Fetch { broker, offset, leader_end, dt } => {
                        now += dt;
                        let before = t.follower(broker).map(|f| f.last_caught_up_ms);
                        t.on_follower_fetch(broker, offset, leader_end, now);
                        if let (Some(b), Some(f)) = (before, t.follower(broker)) {
                            prop_assert!(f.last_caught_up_ms >= b, "caught-up time never goes back");
                            prop_assert!(f.last_caught_up_ms <= now.max(b));
                        }
                    }
                    Op::SetIsr(isr) => {
                        epoch += 1;
                        prop_assert!(t.set_isr(&isr, epoch));
                    }
                    Op::Pending(isr) => t.set_pending(&isr),
                    Op::ClearPending => t.clear_pending(),
                }
                let computed = t.high_watermark(leader_offset);
                prop_assert!(computed <= leader_offset);
                let mut expected = leader_offset;
                for b in t.maximal_isr() {
                    if b != 1 {
                        let leo = t.follower(b).map_or(UNKNOWN_OFFSET, |f| f.log_end_offset);
                        prop_assert!(computed <= leo, "above member {b}'s log end");
                        expected = expected.min(leo);
                    }
                }
                prop_assert_eq!(computed, expected);
                let leader_end = leader_offset;
                let shrink = t.shrink_candidates(now, lag, leader_end);
                for f in t.followers() {
                    let lagging = t.isr().contains(&f.broker)
                        && f.log_end_offset != leader_end
                        && now.saturating_sub(f.last_caught_up_ms) > lag;
                    prop_assert_eq!(shrink.contains(&f.broker), lagging, "shrink of {}", f.broker);
                    let caught_up = !t.isr().contains(&f.broker) && f.fetched_outside_isr && f.log_end_offset >= 0 && f.log_end_offset >= hw && f.log_end_offset >= start;
                    prop_assert_eq!(t.expand_candidates(hw, start).contains(&f.broker), caught_up, "expand of {}", f.broker);
                }
                prop_assert!(!shrink.contains(&1), "the leader is never shrunk");
            }
        }
    }
}
