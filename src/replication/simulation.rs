//! A seeded, deterministic simulation of replication (issue 12, section 9): one partition
//! on RF brokers, producers sending acks=all appends, followers pulling, the leader
//! tracking them and proposing ISR changes, a controller electing leaders on fencing and
//! restarts, over a lossy, delaying, reordering network, with crashes (kill -9: the
//! written tail survives in the page cache; power loss: the unsynced tail is gone),
//! restarts, pauses and fencing, lagging metadata, slow or lost controller answers and
//! late copies of requests. Simulated time (10 ms ticks), one thread, no clock, one
//! seeded RNG: a seed replays exactly.
//!
//! The decisions are the real code's, called on in-memory state:
//! - `ReplicaTracker` (follower positions, the high watermark over the maximal ISR,
//!   shrink / expand candidates, the pending ISR change);
//! - `divergence::diverging_epoch` (the leader) and `divergence::truncation_offset` (the
//!   follower);
//! - `LeaderEpochCache` (assign / end_offset_for / truncate_from_end), its "file" a copy
//!   of the entries that survives crashes;
//! - the controller's `apply` (RegisterBroker, FenceBroker, UnfenceBroker,
//!   AlterPartition, CreateTopic), with its elections, on a `MetadataImage`;
//! - `isr::check_interval` for the ISR loop's period, `isr::not_applied` for which
//!   refusals drop a pending ISR change.
//!
//! `real_parts_simulation.rs` runs the same scenario on the real parts (partitions on
//! files, fetchers, the replica-fetch serving and the lifecycle's re-roling), fewer seeds
//! at a higher cost each; this model stays for the cheap seeds in their thousands and for
//! what it measures beyond the real code (the findings' oracles below).
//!
//! The glue is modelled step by step on the real brokers (each function below names the
//! code it follows): `Partition::append` (NOT_ENOUGH_REPLICAS before appending, the
//! acknowledgement once the high watermark passes the batch and the leader's own write is
//! as durable as the flush mode promises, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a deposed
//! leader acknowledges nothing), the replica fetch handler and the router's
//! `PartitionOp::ReplicaFetch` arm, the fetcher's round and `apply_partition`,
//! `append_as_follower`, `truncate_to`, `become_leader` / `become_follower` /
//! `update_isr` as the partition lifecycle calls them, `isr_change_wanted` and the ISR
//! loop's proposal (`propose`: resend on an unknown outcome), `open_epochs` and the
//! high-watermark checkpoint at restart. Simplifications: one record per batch; a write
//! completes at once (written = log end); no long poll (a fetch is answered at once); no
//! log start moves (retention); at open the epoch cache is rebuilt from every batch (the
//! real one reads the active segment's only, trusting the checkpoint for older ones); no
//! idempotent producers; no unclean elections.
//!
//! Invariants, checked after every tick (`check`):
//! 1. Durability (runs within the failure budget): every acknowledged record, and every
//!    record below a high watermark a leader ever reached ("committed"), is at its offset
//!    in the log of the current leader and of every live ISR member. The budget: a fault
//!    (kill, power loss, pause) is injected only while fewer than minISR − 1 replicas are
//!    impaired (down, paused, not open yet, or outside the committed ISR), so at most
//!    minISR − 1 replicas are failed at once.
//! 2. High watermark: on a leader it never decreases within one leadership (same broker,
//!    incarnation and leader epoch); on every replica it never passes the log end; and
//!    (within the budget) on no replica, leader or follower, while its process lives: a
//!    follower's truncation never cuts below its high watermark (followers serve
//!    consumers below it, KIP-392), and a follower that becomes leader keeps it. Kafka
//!    does not promise more: a new leader starts from the high watermark it had as a
//!    follower (or its checkpoint after a restart), which may be below the old leader's;
//!    it catches up as the ISR fetches. What consumers read below any high watermark
//!    never changes (1, committed records). Those regressions are counted, not failed.
//! 3. Logs of any two live, open replicas agree on every offset below the smaller of
//!    their high watermarks (runs within the budget).
//! 4. Offsets dense; epochs non-decreasing along a log; the epoch cache strictly
//!    increasing and agreeing with the batches (the entry covering each offset names that
//!    batch's epoch).
//!
//! A "chaos" mode injects faults with no budget: 2 and 4 must still hold; losses of
//! committed records are counted (Kafka loses them too when too many replicas fail). A
//! "kills only" mode (kill -9 and pauses, no power loss) has no budget either and checks
//! everything: nothing written is lost, so nothing acknowledged may be.
//!
//! Findings (the seeds are in the report of the branch that added this file):
//! 1. (fixed: KIP-903 in fetches, `router.rs`, and in AlterPartition, `alter_partition.rs`
//!    and `isr.rs`; modelled here by the fetch's `incarnation`, the brokers' view and the
//!    request's `epochs`) No broker epoch in follower fetches nor in AlterPartition: a
//!    leader could put a replica back into the ISR on the position of its previous
//!    process — the fetch offset its tracker kept from before a power loss that cut that
//!    log shorter, or an expansion the controller applied after the replica
//!    re-registered. The ISR then held a replica without acknowledged records. Still
//!    counted (`stale_isr_expansions`, the oracle: a member added whose process changed
//!    since the proposal); chaos runs (no fault budget) still see it when a process dies
//!    before the controller notices.
//! 4. (fixed in `replica_tracker.rs`) The periodic ISR check re-added a follower it had
//!    just shrunk out for lag on its last position (Kafka expands only on a fetch): a
//!    follower that had lost power since came back without what its crash lost. Counted
//!    as finding 1 (seed 13 of the main runs).
//! 2. (fixed in isr.rs) A pending ISR change was dropped on any error, also on an unknown
//!    outcome (NotController after the commit deadline, the entry may still commit) and
//!    on stale refusals: the high watermark then moved without the member an expansion
//!    added, and when the expansion committed the ISR held a replica without
//!    acknowledged records.
//! 3. (fixed: KIP-966 eligible leader replicas, `controller/eligible_leaders.rs`, and the
//!    high watermark held below min.insync.replicas, modelled in `maybe_increment_hw`)
//!    The last ISR member stayed in the ISR whatever its shutdown: after a power loss it
//!    led again without the acknowledged records its crash lost, although the replica
//!    shrunk out earlier (for lag) had them. Still counted (`last_isr_member_lost_acked`),
//!    now a failure of the seed.
use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cluster::image::{broker_epoch, BrokerId, PartitionMeta, NO_LEADER};
use crate::controller::sim_api::{Applied, Command, Rejection};
use crate::partition::divergence::{diverging_epoch, truncation_offset};
use crate::partition::{ReplicaTracker, Role};
use crate::replication::isr::{check_interval, not_applied};
use crate::replication::sim_controller::{
    broker_meta, incarnation_bytes, Published, SimController, SimNetwork, ALTER_RETRY_MS, CONTROLLER, FETCH_BACKOFF_MS, LAG_MS, REQUEST_TIMEOUT_MS, TICK_MS,
};
use crate::storage::leader_epoch_cache::{EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH};

/// A trace line, formatted only when tracing (a failed seed runs again with it on).
macro_rules! trace {
    ($sim:expr, $($arg:tt)*) => {
        if $sim.tracing {
            let line = format!($($arg)*);
            $sim.log(line);
        }
    };
}

/// At most this many batches per fetch answer.
const FETCH_MAX_BATCHES: usize = 8;

#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    pub rf: usize,
    pub min_isr: usize,
    /// flush=always (acks wait for the leader's fdatasync, followers report synced data)
    /// or flush=never (written data counts).
    pub flush_always: bool,
    /// Faults with no budget (durability and agreement are then not checked).
    pub chaos: bool,
    pub ticks: u64,
    /// Finding 1 (a restarted replica let back into the ISR on its pre-crash position) ends
    /// the run, counted, instead of failing it on the durability violation it leads to.
    /// False reproduces the violations.
    pub tolerate_known_findings: bool,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a request also arrives a second time, later.
    pub duplicate: f64,
    /// Faults are kill -9 and pauses only (nothing written is ever lost), with no
    /// budget: every invariant must hold however many replicas fail.
    pub kills_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Batch {
    offset: i64,
    epoch: i32,
    payload: u64,
}

#[derive(Clone, Copy, Debug)]
struct FetchReq {
    current_leader_epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: i32,
}

#[derive(Clone, Debug)]
enum FetchResp {
    /// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ...
    Error(&'static str),
    OutOfRange {
        log_start: i64,
        log_end: i64,
    },
    Diverging {
        epoch: i32,
        end_offset: i64,
    },
    Data {
        batches: Vec<Batch>,
        hw: i64,
    },
}

#[derive(Clone, Debug)]
enum Msg {
    /// `incarnation`: the fetching process's (its broker epoch, KIP-903's replica_epoch).
    Fetch {
        from: BrokerId,
        incarnation: u64,
        req: FetchReq,
        request: u64,
    },
    FetchResp {
        from: BrokerId,
        req: FetchReq,
        resp: FetchResp,
        request: u64,
    },
    Produce {
        payload: u64,
    },
    /// To the controller.
    /// `stale_adds` is the simulation's knowledge, not the request's: the members it adds
    /// whose log is shorter than the leader's tracker says (see `SimStats::stale_isr_expansions`).
    /// `incarnations` too: every broker's process incarnation when it was proposed.
    /// `epochs`: the request's NewIsrWithEpochs, from the leader's metadata (isr.rs).
    Alter {
        from: BrokerId,
        incarnation: u64,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<BrokerId>,
        epochs: Vec<i64>,
        id: u64,
        stale_adds: Vec<BrokerId>,
        incarnations: Vec<u64>,
    },
    AlterResp {
        id: u64,
        result: Result<PartitionMeta, Rejection>,
    },
    /// The partition and every broker's (incarnation, fenced), as the image has them.
    Metadata {
        meta: PartitionMeta,
        brokers: Vec<(u64, bool)>,
    },
    /// To the controller.
    Heartbeat {
        from: BrokerId,
        incarnation: u64,
    },
}

struct Waiter {
    end: i64,
    batch: Batch,
    leadership: u64,
}

/// An AlterPartition `propose` is waiting on.
struct AlterCall {
    id: u64,
    deadline: u64,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: Vec<BrokerId>,
    epochs: Vec<i64>,
    stale_adds: Vec<BrokerId>,
    incarnations: Vec<u64>,
}

/// One broker's replica of the partition and its process state.
struct Replica {
    id: BrokerId,
    up: bool,
    paused_until: Option<u64>,
    down_until: u64,
    incarnation: u64,
    // Durable state.
    log: Vec<Batch>,
    synced: usize,
    epochs_saved: Vec<EpochEntry>,
    hw_saved: i64,
    // Process state.
    epochs: LeaderEpochCache,
    hw: i64,
    /// None: not open (down, or restarted and waiting for its metadata).
    role: Option<Role>,
    leader_epoch: i32,
    view: Option<PartitionMeta>,
    /// Every broker's (incarnation, fenced) as this process's metadata says (the image's
    /// `brokers`); empty until its first metadata.
    brokers_view: Vec<(u64, bool)>,
    tracker: ReplicaTracker,
    leadership: u64,
    waiters: Vec<Waiter>,
    /// (id, deadline) of the fetch in flight: one at a time per leader connection; an
    /// answer to an earlier one (its connection dropped at the timeout) is never read.
    fetch_in_flight: Option<(u64, u64)>,
    backoff_until: u64,
    next_isr_check: u64,
    /// The AlterPartition in flight (isr.rs `propose`).
    alter: Option<AlterCall>,
    /// The topic's min.insync.replicas (the high watermark hold).
    min_isr: usize,
}

impl Replica {
    fn new(id: BrokerId, min_isr: usize) -> Replica {
        Replica {
            min_isr,
            id,
            up: true,
            paused_until: None,
            down_until: 0,
            incarnation: 1,
            log: Vec::new(),
            synced: 0,
            epochs_saved: Vec::new(),
            hw_saved: 0,
            epochs: LeaderEpochCache::in_memory(&[]),
            hw: 0,
            role: None,
            leader_epoch: -1,
            view: None,
            brokers_view: Vec::new(),
            tracker: ReplicaTracker::alone(id),
            leadership: 0,
            waiters: Vec::new(),
            fetch_in_flight: None,
            backoff_until: 0,
            next_isr_check: 0,
            alter: None,
        }
    }

    fn log_end(&self) -> i64 {
        self.log.len() as i64
    }

    fn active(&self, now: u64) -> bool {
        self.up && self.paused_until.is_none_or(|t| t <= now)
    }

    fn is_leader(&self) -> bool {
        self.role == Some(Role::Leader)
    }

    fn end_offset_for(&self, epoch: i32) -> (i32, i64) {
        // Partition::epoch_end_offset: against the log end (next offset).
        self.epochs.end_offset_for(epoch, self.log_end())
    }

    fn last_fetched_epoch(&self) -> i32 {
        self.epochs.latest_epoch().unwrap_or(UNDEFINED_EPOCH)
    }

    /// Partition::raise_high_watermark.
    fn raise_hw(&mut self, candidate: i64) -> bool {
        let new = candidate.min(self.log_end());
        if new <= self.hw {
            return false;
        }
        self.hw = new;
        true
    }

    /// Partition::maybe_increment_high_watermark (written offset = log end here), with
    /// KIP-966's hold while the committed ISR is below min.insync.replicas (at most the
    /// replica count), as a new cluster runs it.
    fn maybe_increment_hw(&mut self) -> bool {
        if !self.is_leader() {
            return false;
        }
        if self.tracker.isr().len() < self.min_isr.min(self.tracker.followers().len() + 1) {
            return false;
        }
        let candidate = self.tracker.high_watermark(self.log_end());
        self.raise_hw(candidate)
    }

    /// Partition::set_leader_epoch: a leader's new epoch starts at the log end, saved by
    /// the first append in it.
    fn set_leader_epoch(&mut self, epoch: i32) {
        self.leader_epoch = epoch;
        if !self.is_leader() {
            return;
        }
        let end = self.log_end();
        self.epochs.assign_unsaved(epoch, end);
    }

    /// LeaderEpochCache::save: the entries reach the "disk".
    fn save_epochs(&mut self) {
        self.epochs_saved = self.epochs.entries().to_vec();
        self.epochs.saved_in_memory();
    }

    /// Partition::become_leader.
    fn become_leader(&mut self, meta: &PartitionMeta, now: u64) {
        if meta.leader_epoch < self.leader_epoch {
            return;
        }
        let was_leader = self.is_leader();
        self.role = Some(Role::Leader);
        self.set_leader_epoch(meta.leader_epoch);
        let replicas: Vec<BrokerId> = meta.replicas.iter().map(|r| r.broker).collect();
        if was_leader {
            self.tracker.set_replicas(&replicas, &meta.isr, now as i64);
            self.tracker.set_isr(&meta.isr, meta.partition_epoch);
        } else {
            self.tracker = ReplicaTracker::new(self.id, &replicas, &meta.isr, meta.partition_epoch, now as i64);
        }
        self.maybe_increment_hw();
    }

    /// Partition::become_follower.
    fn become_follower(&mut self, leader_epoch: i32, leader: BrokerId) {
        if leader_epoch < self.leader_epoch {
            return;
        }
        let was_leader = self.is_leader();
        self.role = Some(Role::Follower { leader });
        self.leader_epoch = leader_epoch;
        if was_leader {
            self.leadership += 1;
            self.tracker.clear_pending();
            // fail_hw_waiters(NotLeader)
            self.waiters.clear();
        }
    }

    /// Partition::truncate_to (one record per batch: the cut is at `offset`).
    fn truncate_to(&mut self, offset: i64) -> i64 {
        if offset >= self.log_end() {
            return self.log_end();
        }
        let end = offset.max(0);
        self.log.truncate(end as usize);
        self.synced = self.synced.min(self.log.len());
        if self.hw > end {
            self.hw = end;
        }
        if self.epochs.truncate_from_end(end) {
            self.save_epochs();
        }
        end
    }

    /// Partition::append_as_follower; Err(()) is OffsetMismatch.
    fn append_as_follower(&mut self, batches: &[Batch], flush_always: bool) -> Result<(), ()> {
        let start = self.log_end();
        if batches.iter().zip(start..).any(|(b, next)| b.offset != next) {
            return Err(());
        }
        let mut changed = false;
        for b in batches {
            changed |= self.epochs.assign(b.epoch, b.offset);
        }
        if changed {
            self.save_epochs();
        }
        self.log.extend_from_slice(batches);
        if flush_always {
            // The fetcher's next round waits for the fdatasync (`durable` in
            // append_as_follower), so the next fetch offset is synced data.
            self.synced = self.log.len();
        }
        Ok(())
    }

    /// Partition::isr_change_wanted.
    fn isr_change_wanted(&self, now: u64) -> Option<Vec<BrokerId>> {
        if !self.is_leader() || self.tracker.pending.is_some() {
            return None;
        }
        let shrink = self.tracker.shrink_candidates(now as i64, LAG_MS as i64, self.log_end());
        if !shrink.is_empty() {
            return Some(self.tracker.isr().iter().copied().filter(|b| !shrink.contains(b)).collect());
        }
        let epoch_start = self.epochs.entries().last().filter(|e| e.epoch == self.leader_epoch).map(|e| e.start_offset)?;
        let expand = self.tracker.expand_candidates(self.hw, epoch_start);
        if expand.is_empty() {
            return None;
        }
        let mut isr = self.tracker.isr().to_vec();
        isr.extend(expand);
        Some(isr)
    }

    /// isr.rs `still_pending`.
    fn still_pending(&self, a: &AlterCall) -> bool {
        self.is_leader()
            && self.leader_epoch == a.leader_epoch
            && self.tracker.partition_epoch() == a.partition_epoch
            && self.tracker.pending.as_ref().is_some_and(|c| c.isr == a.isr)
    }

    /// Partition::update_isr.
    fn update_isr(&mut self, partition_epoch: i32, isr: &[BrokerId]) {
        if self.tracker.set_isr(isr, partition_epoch) {
            self.maybe_increment_hw();
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SimStats {
    pub produced: u64,
    pub acked: u64,
    pub refused_not_enough: u64,
    pub refused_after_append: u64,
    pub committed: u64,
    pub faults: u64,
    pub elections: u64,
    pub isr_changes: u64,
    pub truncations: u64,
    /// A new leader's high watermark started below the highest one served before
    /// (allowed: Kafka's new leader catches up).
    pub hw_regressions_across_leaders: u64,
    /// Chaos only: committed records no longer on the leader.
    pub lost_committed: u64,
    /// Finding 1: AlterPartitions that added a replica whose log is shorter than the
    /// position the leader's tracker had for it (its pre-restart fetch offset).
    pub stale_isr_expansions: u64,
    /// Finding 3: the last ISR member restarted without acknowledged records (lost
    /// unsynced writes) and leads again.
    pub last_isr_member_lost_acked: u64,
}

pub struct Sim {
    cfg: SimConfig,
    rng: StdRng,
    now: u64,
    net: SimNetwork<Msg>,
    replicas: Vec<Replica>,
    controller: SimController,
    next_payload: u64,
    next_alter: u64,
    next_request: u64,
    /// (broker, incarnation, leader epoch) → the leader's high watermark last seen.
    leader_hw: BTreeMap<(BrokerId, u64, i32), i64>,
    /// (broker, incarnation) → its high watermark last seen.
    replica_hw: BTreeMap<(BrokerId, u64), i64>,
    max_served_hw: i64,
    last_leader: (BrokerId, u64, i32),
    /// Records below some leader's high watermark, by offset.
    committed: Vec<Batch>,
    /// Acknowledged records by offset (a zombie leader's too, if it ever acknowledged).
    acked: BTreeMap<i64, Batch>,
    pub stats: SimStats,
    pub trace: Vec<String>,
    tracing: bool,
    /// Stop the run here (a tolerated finding).
    stop: bool,
    full_check_due: bool,
}

impl Sim {
    pub fn new(seed: u64, cfg: SimConfig) -> Sim {
        let mut sim = Sim {
            cfg,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            net: SimNetwork::new(),
            replicas: (0..cfg.rf as BrokerId).map(|id| Replica::new(id, cfg.min_isr)).collect(),
            controller: SimController::new(cfg.rf, cfg.min_isr),
            next_payload: 1,
            next_alter: 1,
            next_request: 0,
            leader_hw: BTreeMap::new(),
            replica_hw: BTreeMap::new(),
            max_served_hw: 0,
            last_leader: (NO_LEADER, 0, -1),
            committed: Vec::new(),
            acked: BTreeMap::new(),
            stats: SimStats::default(),
            trace: Vec::new(),
            tracing: false,
            stop: false,
            full_check_due: false,
        };
        // Every broker hears of the partition as created.
        if let Some(m) = sim.controller.meta().cloned() {
            for b in 0..cfg.rf as BrokerId {
                sim.send_metadata(b, m.clone());
            }
        }
        sim
    }

    fn log(&mut self, line: String) {
        let now = self.now;
        self.trace.push(format!("{now:>6} {line}"));
    }

    fn meta(&self) -> Option<&PartitionMeta> {
        self.controller.meta()
    }

    fn send(&mut self, to: BrokerId, msg: Msg, max_delay_ms: u64) {
        self.send_at(to, msg, 0, max_delay_ms);
    }

    /// `send`, leaving `after_ms` from now.
    fn send_at(&mut self, to: BrokerId, msg: Msg, after_ms: u64, max_delay_ms: u64) {
        if self.rng.random_bool(self.cfg.loss) {
            return;
        }
        let at = self.now + after_ms + self.rng.random_range(1..=max_delay_ms.max(1));
        let incarnation = if to == CONTROLLER { 0 } else { self.replicas[to as usize].incarnation };
        let request = matches!(msg, Msg::Fetch { .. } | Msg::Produce { .. } | Msg::Alter { .. } | Msg::Heartbeat { .. });
        if request && self.rng.random_bool(self.cfg.duplicate) {
            // A late copy of a request: one a dead connection had delivered (the leader
            // still serves it), a client's retry. Answers are never duplicated: each
            // connection has one request in flight, read once.
            let late = self.now + self.rng.random_range(1..=4 * max_delay_ms.max(1));
            self.net.push(late, to, incarnation, msg.clone());
        }
        self.net.push(at, to, incarnation, msg);
    }

    /// The controller applies `cmd` (the real `apply`); a change of the partition goes
    /// to every broker, delayed, in order.
    fn command(&mut self, cmd: Command) -> Result<Applied, Rejection> {
        let (resp, published) = self.controller.command(cmd);
        if let Some(Published { text, meta: m, leader_changed }) = published {
            trace!(self, "controller: {text} -> leader {} epochs {}/{} isr {:?}", m.leader, m.leader_epoch, m.partition_epoch, m.isr);
            if leader_changed {
                self.stats.elections += 1;
            }
            for b in 0..self.cfg.rf as BrokerId {
                self.send_metadata(b, m.clone());
            }
        }
        resp
    }

    fn send_metadata(&mut self, to: BrokerId, meta: PartitionMeta) {
        let incarnation = self.replicas[to as usize].incarnation;
        let brokers = self.controller.brokers();
        self.net.push_metadata(&mut self.rng, self.now, to, incarnation, Msg::Metadata { meta, brokers });
    }

    pub fn run(&mut self) -> Result<(), String> {
        let ticks = self.cfg.ticks;
        for _ in 0..ticks {
            self.now += TICK_MS;
            self.tick();
            if self.stop {
                break;
            }
            self.check()?;
        }
        Ok(())
    }

    fn tick(&mut self) {
        self.deliver();
        self.restarts();
        self.faults();
        self.controller_tick();
        for i in 0..self.replicas.len() {
            self.broker_tick(i);
        }
        if self.rng.random_bool(0.3) {
            self.produce();
        }
    }

    fn deliver(&mut self) {
        while let Some(m) = self.net.next_due(self.now) {
            if m.to == CONTROLLER {
                self.controller_receive(m.msg);
                continue;
            }
            let r = &self.replicas[m.to as usize];
            if !r.up || r.incarnation != m.incarnation {
                continue;
            }
            if let Some(until) = r.paused_until.filter(|t| *t > self.now) {
                // Paused: it waits in the socket until the process runs again.
                self.net.delay(m, until);
                continue;
            }
            self.broker_receive(m.to as usize, m.msg);
        }
    }

    // ---- controller ----

    fn controller_receive(&mut self, msg: Msg) {
        match msg {
            Msg::Heartbeat { from, incarnation } => {
                if let Some(unfence) = self.controller.heartbeat(from, incarnation, self.now) {
                    let _ = self.command(unfence);
                }
            }
            Msg::Alter { from, incarnation, leader_epoch, partition_epoch, isr, epochs, id, mut stale_adds, incarnations } => {
                // Also stale: a member added whose broker restarted since the proposal (the
                // leader judged its previous process's log).
                for (b, inc) in incarnations.iter().enumerate() {
                    if self.replicas[b].incarnation != *inc {
                        stale_adds.push(b as BrokerId);
                    }
                }
                let before = self.meta().map(|m| m.isr.clone()).unwrap_or_default();
                let cmd = SimController::alter_partition(from, leader_epoch, partition_epoch, isr, epochs);
                let result = SimController::altered(self.command(cmd));
                if let Ok(meta) = &result {
                    self.stats.isr_changes += 1;
                    let stale: Vec<BrokerId> = stale_adds.into_iter().filter(|b| meta.isr.contains(b) && !before.contains(b)).collect();
                    if !stale.is_empty() {
                        // Finding 1 (see the module comment): the controller let a replica
                        // into the ISR on a position its log no longer has.
                        self.stats.stale_isr_expansions += 1;
                        trace!(self, "FINDING: ISR expanded with {stale:?} on the position of a process that restarted since (finding 1)");
                        if self.cfg.tolerate_known_findings && !self.cfg.chaos {
                            self.stop = true;
                        }
                    }
                }
                if self.replicas[from as usize].incarnation == incarnation {
                    // Sometimes slow (a forwarded request, a quorum leader change).
                    let delay = if self.rng.random_bool(0.1) { 300 } else { 30 };
                    self.send(from, Msg::AlterResp { id, result }, delay);
                }
            }
            _ => unreachable!("only heartbeats and AlterPartition go to the controller"),
        }
    }

    fn controller_tick(&mut self) {
        for fence in self.controller.expired(self.now) {
            let _ = self.command(fence);
        }
    }

    // ---- faults ----

    /// Replicas that count as failed now: down, paused, not open, or outside the ISR.
    fn impaired(&self) -> usize {
        let isr = self.meta().map(|m| m.isr.clone()).unwrap_or_default();
        self.replicas.iter().filter(|r| !r.active(self.now) || r.role.is_none() || !isr.contains(&r.id)).count()
    }

    fn faults(&mut self) {
        if !self.rng.random_bool(if self.cfg.chaos { 0.02 } else { 0.01 }) {
            return;
        }
        if !self.cfg.chaos && !self.cfg.kills_only && self.impaired() + 1 > self.cfg.min_isr.saturating_sub(1) {
            return;
        }
        let i = self.rng.random_range(0..self.replicas.len());
        if !self.replicas[i].active(self.now) {
            return;
        }
        self.stats.faults += 1;
        let kind = if self.cfg.kills_only { [0, 2][self.rng.random_range(0..2usize)] } else { self.rng.random_range(0..3u32) };
        let now = self.now;
        if kind == 2 {
            let until = now + self.rng.random_range(100..1200u64);
            trace!(self, "fault: pause broker {i} until {until}");
            self.replicas[i].paused_until = Some(until);
            return;
        }
        let power_loss = kind == 1;
        let down_for = self.rng.random_range(50..900u64);
        let r = &mut self.replicas[i];
        let lost = if power_loss { r.log.len() - r.synced } else { 0 };
        if power_loss {
            r.log.truncate(r.synced);
        }
        r.up = false;
        r.down_until = now + down_for;
        r.role = None;
        r.view = None;
        r.brokers_view.clear();
        r.waiters.clear();
        r.fetch_in_flight = None;
        r.alter = None;
        let what = if power_loss { "power loss of" } else { "kill -9 of" };
        trace!(self, "fault: {what} broker {i} (lost {lost} unsynced batches), down until {}", now + down_for);
        self.full_check_due = true;
    }

    /// Restarts brokers whose down time is over: the log as it survived, the epoch cache
    /// as `open_epochs` rebuilds it, the high watermark from its checkpoint; registers
    /// with a new incarnation (leaving its ISRs, apply.rs) and opens once metadata comes.
    fn restarts(&mut self) {
        for i in 0..self.replicas.len() {
            let r = &mut self.replicas[i];
            if r.up || r.down_until > self.now {
                continue;
            }
            r.up = true;
            r.incarnation += 1;
            let log_end = r.log_end();
            let mut epochs = LeaderEpochCache::in_memory(&r.epochs_saved);
            let mut changed = epochs.truncate_from_end(log_end);
            for b in &r.log {
                changed |= epochs.assign(b.epoch, b.offset);
            }
            if changed {
                r.epochs_saved = epochs.entries().to_vec();
            }
            r.epochs = epochs;
            r.hw = r.hw_saved.clamp(0, log_end);
            r.leader_epoch = -1;
            r.tracker = ReplicaTracker::alone(r.id);
            r.backoff_until = 0;
            let (id, inc) = (r.id, r.incarnation);
            trace!(self, "restart broker {id} (incarnation {inc}), log end {log_end}");
            let _ = self.command(Command::RegisterBroker { broker: broker_meta(id, inc), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
            // Finding 3 (fixed by KIP-966): the last ISR member stayed in the ISR however
            // it shut down, and led again without what its crash lost. Now it leaves the
            // ISR when fenced and an unclean restart takes it out of the ELR, so the
            // symptom is what is checked: it leads again at once without them.
            let sole = self.meta().is_some_and(|m| m.isr == [id] || m.leader == id);
            let acked_end = self.acked.keys().next_back().map_or(0, |o| o + 1);
            if sole && log_end < acked_end {
                self.stats.last_isr_member_lost_acked += 1;
                trace!(self, "FINDING: broker {id}, the last ISR member, restarted without acknowledged records ({log_end} < {acked_end}): no eligible leader replica (KIP-966)");
                // Fixed by KIP-966 (a failure of the seed, `run_all`); chaos runs, beyond the
                // fault budget, only count it.
            }
            self.controller.registered(id, self.now);
            if let Some(m) = self.meta().cloned() {
                self.send_metadata(id, m);
            }
        }
    }

    // ---- brokers ----

    fn broker_tick(&mut self, i: usize) {
        let now = self.now;
        if !self.replicas[i].active(now) {
            return;
        }
        if self.replicas[i].paused_until.is_some() {
            self.replicas[i].paused_until = None;
            trace!(self, "broker {i} resumes");
        }
        let flush_always = self.cfg.flush_always;
        let (id, inc) = (self.replicas[i].id, self.replicas[i].incarnation);
        self.send(CONTROLLER, Msg::Heartbeat { from: id, incarnation: inc }, 30);
        // The writer's background work: fdatasync (soon with flush=always, rarely with
        // flush=never: rolls and the periodic flush), the checkpoints.
        let sync_p = if flush_always { 0.7 } else { 0.05 };
        let sync = self.rng.random_bool(sync_p);
        let save_hw = self.rng.random_bool(0.1);
        let r = &mut self.replicas[i];
        if sync {
            r.synced = r.log.len();
        }
        if save_hw {
            r.hw_saved = r.hw;
        }
        if r.role.is_none() {
            return;
        }
        self.complete_waiters(i);
        // The follower's fetcher round.
        let r = &mut self.replicas[i];
        if r.fetch_in_flight.is_some_and(|(_, d)| d <= now) {
            r.fetch_in_flight = None;
            r.backoff_until = now + FETCH_BACKOFF_MS;
        }
        if let Some(Role::Follower { leader }) = r.role {
            if leader != NO_LEADER && r.fetch_in_flight.is_none() && r.backoff_until <= now {
                let req = FetchReq { current_leader_epoch: r.leader_epoch, fetch_offset: r.log_end(), last_fetched_epoch: r.last_fetched_epoch() };
                self.next_request += 1;
                let request = self.next_request;
                let r = &mut self.replicas[i];
                r.fetch_in_flight = Some((request, now + REQUEST_TIMEOUT_MS));
                self.send(leader, Msg::Fetch { from: id, incarnation: inc, req, request }, 25);
            }
        }
        // The leader's ISR loop (isr.rs).
        let r = &mut self.replicas[i];
        if r.alter.as_ref().is_some_and(|a| a.deadline <= now) {
            // No answer (the controller's NotController after its deadline: the outcome
            // is unknown): propose sends the same request again while it is still pending.
            let a = r.alter.take().expect("checked");
            if r.still_pending(&a) {
                let id_ = self.next_alter;
                self.next_alter += 1;
                trace!(self, "broker {id} resends isr {:?} (epochs {}/{})", a.isr, a.leader_epoch, a.partition_epoch);
                let msg = Msg::Alter {
                    from: id,
                    incarnation: inc,
                    leader_epoch: a.leader_epoch,
                    partition_epoch: a.partition_epoch,
                    isr: a.isr.clone(),
                    epochs: a.epochs.clone(),
                    id: id_,
                    stale_adds: a.stale_adds.clone(),
                    incarnations: a.incarnations.clone(),
                };
                self.replicas[i].alter = Some(AlterCall { id: id_, deadline: now + ALTER_RETRY_MS + 2 * REQUEST_TIMEOUT_MS, ..a });
                self.send_at(CONTROLLER, msg, ALTER_RETRY_MS, 30);
            }
        }
        let r = &mut self.replicas[i];
        if now >= r.next_isr_check {
            r.next_isr_check = now + check_interval(LAG_MS).as_millis() as u64;
            if let Some(isr) = r.isr_change_wanted(now) {
                r.tracker.set_pending(&isr);
                let id_ = self.next_alter;
                self.next_alter += 1;
                let r = &mut self.replicas[i];
                let (leader_epoch, partition_epoch) = (r.leader_epoch, r.tracker.partition_epoch());
                let seen: Vec<(BrokerId, i64)> = self.replicas[i].tracker.followers().iter().map(|f| (f.broker, f.log_end_offset)).collect();
                let actual: Vec<(BrokerId, i64)> = self.replicas.iter().map(|r| (r.id, r.log_end())).collect();
                trace!(self, "broker {id} proposes isr {isr:?} (followers' log ends as tracked {seen:?}, actual {actual:?})");
                let tracker_isr = self.replicas[i].tracker.isr().to_vec();
                let stale_adds: Vec<BrokerId> = seen
                    .iter()
                    .filter(|(b, tracked)| isr.contains(b) && !tracker_isr.contains(b) && *tracked > self.replicas[*b as usize].log_end())
                    .map(|(b, _)| *b)
                    .collect();
                let incarnations: Vec<u64> = self.replicas.iter().map(|r| r.incarnation).collect();
                // isr.rs `broker_epochs`: from this leader's metadata.
                let view = &self.replicas[i].brokers_view;
                let epochs: Vec<i64> = isr.iter().map(|b| view.get(*b as usize).map_or(-1, |(inc, _)| broker_epoch(&incarnation_bytes(*b, *inc)))).collect();
                let msg = Msg::Alter {
                    from: id,
                    incarnation: inc,
                    leader_epoch,
                    partition_epoch,
                    isr: isr.clone(),
                    epochs: epochs.clone(),
                    id: id_,
                    stale_adds: stale_adds.clone(),
                    incarnations: incarnations.clone(),
                };
                self.replicas[i].alter =
                    Some(AlterCall { id: id_, deadline: now + 2 * REQUEST_TIMEOUT_MS, leader_epoch, partition_epoch, isr, epochs, stale_adds, incarnations });
                self.send(CONTROLLER, msg, 30);
            }
        }
    }

    /// The acks=all waiters of `Partition::append` / `wait_acks`.
    fn complete_waiters(&mut self, i: usize) {
        let flush_always = self.cfg.flush_always;
        let min_isr = self.cfg.min_isr;
        let r = &mut self.replicas[i];
        let waiters = std::mem::take(&mut r.waiters);
        let mut keep = Vec::new();
        let mut done = Vec::new();
        for w in waiters {
            if w.leadership != r.leadership || !r.is_leader() {
                continue;
            }
            let durable = !flush_always || r.synced as i64 >= w.end;
            if !(durable && r.hw >= w.end) {
                keep.push(w);
                continue;
            }
            done.push((w.batch, r.tracker.isr().len() < min_isr));
        }
        r.waiters = keep;
        for (b, short) in done {
            if short {
                self.stats.refused_after_append += 1;
            } else {
                self.stats.acked += 1;
                self.acked.insert(b.offset, b);
                trace!(self, "ack offset {} payload {} epoch {} by broker {i}", b.offset, b.payload, b.epoch);
            }
        }
    }

    fn produce(&mut self) {
        let payload = self.next_payload;
        self.next_payload += 1;
        self.stats.produced += 1;
        // The producer's metadata: the controller's leader, sometimes a stale one.
        let leader = self.meta().map_or(NO_LEADER, |m| m.leader);
        let to = if leader == NO_LEADER || self.rng.random_bool(0.15) { self.rng.random_range(0..self.replicas.len()) as BrokerId } else { leader };
        self.send(to, Msg::Produce { payload }, 20);
    }

    fn broker_receive(&mut self, i: usize, msg: Msg) {
        let now = self.now;
        let flush_always = self.cfg.flush_always;
        match msg {
            Msg::Metadata { meta, brokers } => self.apply_metadata(i, meta, brokers),
            Msg::Produce { payload } => {
                // Partition::append with acks=-1.
                let min_isr = self.cfg.min_isr;
                let r = &mut self.replicas[i];
                if !r.is_leader() {
                    return;
                }
                if r.tracker.isr().len() < min_isr {
                    self.stats.refused_not_enough += 1;
                    return;
                }
                let start = r.log_end();
                if r.epochs.assign(r.leader_epoch, start) || r.epochs.is_unsaved() {
                    // Saved before anything is staged.
                    r.save_epochs();
                }
                let batch = Batch { offset: start, epoch: r.leader_epoch, payload };
                r.log.push(batch);
                r.waiters.push(Waiter { end: start + 1, batch, leadership: r.leadership });
                // on_written
                r.maybe_increment_hw();
                self.complete_waiters(i);
            }
            Msg::Fetch { from, incarnation, req, request } => {
                let resp = self.serve_fetch(i, from, incarnation, req, now);
                self.complete_waiters(i);
                let id = self.replicas[i].id;
                self.send(from, Msg::FetchResp { from: id, req, resp, request }, 25);
            }
            Msg::FetchResp { from, req, resp, request } => {
                let r = &mut self.replicas[i];
                if r.fetch_in_flight.map(|(id, _)| id) != Some(request) {
                    return;
                }
                r.fetch_in_flight = None;
                // Fetcher::still_following
                if r.role != Some(Role::Follower { leader: from }) || r.leader_epoch != req.current_leader_epoch {
                    return;
                }
                match resp {
                    FetchResp::Error(e) => {
                        r.backoff_until = now + FETCH_BACKOFF_MS;
                        trace!(self, "broker {i} fetch from {from}: {e}");
                    }
                    FetchResp::OutOfRange { log_start, log_end } => {
                        if req.fetch_offset < log_start {
                            unreachable!("no log start moves here");
                        } else if log_end >= 0 && log_end < req.fetch_offset {
                            let to = r.truncate_to(log_end.max(0));
                            self.stats.truncations += 1;
                            self.full_check_due = true;
                            trace!(self, "broker {i} ahead of leader {from}: truncated to {to}");
                        } else {
                            r.backoff_until = now + FETCH_BACKOFF_MS;
                        }
                    }
                    FetchResp::Diverging { epoch, end_offset } => {
                        let to = truncation_offset((epoch, end_offset), |e| r.end_offset_for(e), 0, r.log_end());
                        let before = r.log_end();
                        let end = r.truncate_to(to);
                        if end < before {
                            self.stats.truncations += 1;
                            self.full_check_due = true;
                        }
                        trace!(self, "broker {i} diverging ({epoch}, {end_offset}) from leader {from}: log end {before} -> {end}");
                    }
                    FetchResp::Data { batches, hw } => {
                        if !batches.is_empty() {
                            if r.append_as_follower(&batches, flush_always).is_err() {
                                return;
                            }
                        } else if req.fetch_offset != r.log_end() {
                            return;
                        }
                        // set_follower_high_watermark
                        let capped = hw.min(r.log_end());
                        r.raise_hw(capped);
                    }
                }
            }
            Msg::AlterResp { id, result } => {
                let r = &mut self.replicas[i];
                if r.alter.as_ref().map(|a| a.id) != Some(id) {
                    return;
                }
                let a = r.alter.take().expect("checked");
                match result {
                    Ok(meta) => r.update_isr(meta.partition_epoch, &meta.isr),
                    Err(Rejection::AlterPartition(e)) if not_applied(&e) => {
                        if r.still_pending(&a) {
                            r.tracker.clear_pending();
                            r.maybe_increment_hw();
                        }
                    }
                    // Stale epochs: the metadata update settles it.
                    Err(_) => {}
                }
                self.complete_waiters(i);
            }
            Msg::Heartbeat { .. } | Msg::Alter { .. } => unreachable!("controller messages"),
        }
    }

    /// The replica fetch handler's checks, then the router's `PartitionOp::ReplicaFetch`.
    fn serve_fetch(&mut self, i: usize, from: BrokerId, incarnation: u64, req: FetchReq, now: u64) -> FetchResp {
        let r = &mut self.replicas[i];
        let Some(view) = &r.view else { return FetchResp::Error("NOT_LEADER_OR_FOLLOWER") };
        if view.leader != r.id || view.replica_on(from).is_none() {
            return FetchResp::Error("NOT_LEADER_OR_FOLLOWER");
        }
        if req.current_leader_epoch >= 0 && req.current_leader_epoch < view.leader_epoch {
            return FetchResp::Error("FENCED_LEADER_EPOCH");
        }
        if req.current_leader_epoch > view.leader_epoch {
            return FetchResp::Error("UNKNOWN_LEADER_EPOCH");
        }
        if let Some((epoch, end_offset)) = diverging_epoch(req.last_fetched_epoch, req.fetch_offset, |e| r.end_offset_for(e)) {
            return FetchResp::Diverging { epoch, end_offset };
        }
        // record_follower_fetch, only from the process this leader's metadata names (KIP-903),
        // unfenced.
        let named = r.brokers_view.get(from as usize).is_some_and(|(inc, fenced)| *inc == incarnation && !fenced);
        if r.is_leader() && named && req.fetch_offset <= r.log_end() {
            let written = r.log_end();
            if r.tracker.on_follower_fetch(from, req.fetch_offset, written, now as i64) {
                r.maybe_increment_hw();
            }
        }
        // read_for_follower
        if !r.is_leader() {
            return FetchResp::Error("NOT_LEADER_OR_FOLLOWER");
        }
        if req.fetch_offset < 0 || req.fetch_offset > r.log_end() {
            return FetchResp::OutOfRange { log_start: 0, log_end: r.log_end() };
        }
        let from_ix = req.fetch_offset as usize;
        let to_ix = (from_ix + FETCH_MAX_BATCHES).min(r.log.len());
        FetchResp::Data { batches: r.log[from_ix..to_ix].to_vec(), hw: r.hw }
    }

    /// The partition lifecycle's `sync_partition` (or `open_partition` for a replica not
    /// open yet).
    fn apply_metadata(&mut self, i: usize, meta: PartitionMeta, brokers: Vec<(u64, bool)>) {
        let now = self.now;
        let r = &mut self.replicas[i];
        // forget_restarted_followers: a broker that re-registered or was fenced since.
        for (b, (inc, fenced)) in brokers.iter().enumerate() {
            if r.brokers_view.get(b).is_some_and(|(old, was_fenced)| old != inc || (*fenced && !was_fenced)) {
                r.tracker.reset_follower(b as BrokerId);
            }
        }
        r.brokers_view = brokers;
        if r.view.as_ref().is_some_and(|v| v.partition_epoch > meta.partition_epoch) {
            return;
        }
        r.view = Some(meta.clone());
        let wanted = if meta.leader == r.id { Role::Leader } else { Role::Follower { leader: meta.leader } };
        let line = match (r.role, wanted) {
            (None, Role::Leader) => {
                // open_replica as leader: open_epochs assigns the epoch at the log end.
                r.become_leader(&meta, now);
                Some(format!("broker {i} opens as leader, epoch {}, log end {}, hw {}", meta.leader_epoch, r.log_end(), r.hw))
            }
            (None, Role::Follower { leader }) => {
                r.role = Some(Role::Follower { leader });
                r.leader_epoch = meta.leader_epoch;
                Some(format!("broker {i} opens as follower of {leader}, epoch {}, log end {}", meta.leader_epoch, r.log_end()))
            }
            (Some(Role::Leader), Role::Leader) => {
                if meta.leader_epoch != r.leader_epoch {
                    r.become_leader(&meta, now);
                } else if meta.partition_epoch > r.tracker.partition_epoch() {
                    r.update_isr(meta.partition_epoch, &meta.isr);
                }
                None
            }
            (Some(Role::Leader), Role::Follower { leader }) => {
                r.become_follower(meta.leader_epoch, leader);
                Some(format!("broker {i} becomes follower of {leader}, epoch {}", meta.leader_epoch))
            }
            (Some(Role::Follower { .. }), Role::Leader) => {
                r.become_leader(&meta, now);
                Some(format!("broker {i} becomes leader, epoch {}, log end {}, hw {}", meta.leader_epoch, r.log_end(), r.hw))
            }
            (Some(Role::Follower { leader: before }), Role::Follower { leader }) => {
                if before != leader || meta.leader_epoch != r.leader_epoch {
                    r.become_follower(meta.leader_epoch, leader);
                }
                None
            }
        };
        if let Some(line) = line.filter(|_| self.tracing) {
            self.log(line);
        }
        self.complete_waiters(i);
    }

    // ---- invariants ----

    fn check(&mut self) -> Result<(), String> {
        let now = self.now;
        // The full scans run every 50 ms and after every truncation, crash or leader
        // change (what they look for, once there, stays until such an event).
        let mut full = std::mem::take(&mut self.full_check_due) || now.is_multiple_of(50);
        // 4: dense offsets, epochs, the cache against the batches; 2: hw <= log end.
        for r in &self.replicas {
            if !r.up {
                continue;
            }
            if r.hw > r.log_end() {
                return Err(format!("broker {}: high watermark {} past log end {}", r.id, r.hw, r.log_end()));
            }
            if !full {
                continue;
            }
            let entries = r.epochs.entries();
            if !entries.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset) {
                return Err(format!("broker {}: epoch cache not increasing: {entries:?}", r.id));
            }
            let mut e = 0usize;
            for (o, b) in r.log.iter().enumerate() {
                if b.offset != o as i64 {
                    return Err(format!("broker {}: offset {} at position {o}", r.id, b.offset));
                }
                if o > 0 && r.log[o - 1].epoch > b.epoch {
                    return Err(format!("broker {}: epoch goes back at offset {o}", r.id));
                }
                while e + 1 < entries.len() && entries[e + 1].start_offset <= o as i64 {
                    e += 1;
                }
                match entries.get(e) {
                    Some(entry) if entry.start_offset <= o as i64 && entry.epoch == b.epoch => {}
                    other => return Err(format!("broker {}: offset {o} epoch {} but the cache says {other:?} ({entries:?})", r.id, b.epoch)),
                }
            }
        }
        // 2: a leader's high watermark never goes back within its leadership.
        let leader = self.meta().map_or(NO_LEADER, |m| m.leader);
        for r in &self.replicas {
            if !r.up || !r.is_leader() {
                continue;
            }
            let key = (r.id, r.incarnation, r.leader_epoch);
            if let Some(&before) = self.leader_hw.get(&key) {
                if r.hw < before {
                    return Err(format!("broker {} (leader, epoch {}): high watermark went back {before} -> {}", r.id, r.leader_epoch, r.hw));
                }
            }
            self.leader_hw.insert(key, r.hw);
        }
        // 2': no replica's high watermark goes back while its process lives (followers
        // serve consumers below it too, KIP-392): a truncation never cuts below it
        // (within the budget: beyond it a replica may have to give up records).
        if !self.cfg.chaos {
            for r in &self.replicas {
                if !r.up {
                    continue;
                }
                if let Some(&before) = self.replica_hw.get(&(r.id, r.incarnation)) {
                    if r.hw < before {
                        return Err(format!("broker {} ({:?}): high watermark went back {before} -> {}", r.id, r.role, r.hw));
                    }
                }
                self.replica_hw.insert((r.id, r.incarnation), r.hw);
            }
        }
        // Committed records: what the controller's leader, leading, exposes below its
        // high watermark (a zombie's exposure is checked by agreement, 3).
        if leader != NO_LEADER {
            let r = &self.replicas[leader as usize];
            if r.active(now) && r.is_leader() && r.leader_epoch == self.meta().map_or(-1, |m| m.leader_epoch) {
                let key = (r.id, r.incarnation, r.leader_epoch);
                if key != self.last_leader {
                    if r.hw < self.max_served_hw {
                        self.stats.hw_regressions_across_leaders += 1;
                    }
                    self.last_leader = key;
                    full = true;
                }
                self.max_served_hw = self.max_served_hw.max(r.hw);
                let hw = r.hw as usize;
                while self.committed.len() < hw {
                    let b = r.log[self.committed.len()];
                    self.committed.push(b);
                    self.stats.committed += 1;
                }
            }
        }
        if self.cfg.chaos {
            if leader != NO_LEADER {
                let r = &self.replicas[leader as usize];
                if r.active(now) && r.is_leader() {
                    let lost = self.committed.iter().filter(|b| r.log.get(b.offset as usize) != Some(b)).count() as u64;
                    if lost > 0 {
                        self.stats.lost_committed = self.stats.lost_committed.max(lost);
                    }
                }
            }
            return Ok(());
        }
        if !full {
            return Ok(());
        }
        // 1: durability on the leader and every live ISR member.
        let isr = self.meta().map(|m| m.isr.clone()).unwrap_or_default();
        for r in &self.replicas {
            let is_leader = r.id == leader;
            if !r.up || r.role.is_none() || !(is_leader || isr.contains(&r.id)) {
                continue;
            }
            for b in self.committed.iter().chain(self.acked.values()) {
                if r.log.get(b.offset as usize) != Some(b) {
                    let what = if self.acked.contains_key(&b.offset) { "acknowledged" } else { "committed" };
                    return Err(format!(
                        "broker {} ({}, isr {isr:?}) lost the {what} record {b:?}: has {:?}",
                        r.id,
                        if is_leader { "leader" } else { "ISR member" },
                        r.log.get(b.offset as usize)
                    ));
                }
            }
        }
        // 3: agreement below the smaller high watermark.
        for a in &self.replicas {
            for b in &self.replicas {
                if a.id >= b.id || !a.up || !b.up || a.role.is_none() || b.role.is_none() {
                    continue;
                }
                let below = a.hw.min(b.hw) as usize;
                if let Some(o) = (0..below).find(|&o| a.log[o] != b.log[o]) {
                    return Err(format!(
                        "brokers {} and {} disagree at offset {o} below their high watermarks ({}, {}): {:?} vs {:?}",
                        a.id, b.id, a.hw, b.hw, a.log[o], b.log[o]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Runs `seed`; on failure the error names the seed and ends with the trace's tail.
pub fn run_seed(seed: u64, cfg: SimConfig) -> Result<SimStats, String> {
    let mut sim = Sim::new(seed, cfg);
    match sim.run() {
        Ok(()) => Ok(sim.stats),
        Err(e) => {
            // Deterministic: the same run again, traced.
            let trace = trace_seed(seed, cfg);
            let tail = trace.len().saturating_sub(TRACE_TAIL);
            Err(format!("seed {seed} ({cfg:?}) at {} ms: {e}\n{}", sim.now, trace[tail..].join("\n")))
        }
    }
}

/// How many trace lines a failure shows.
const TRACE_TAIL: usize = 80;

/// The trace of `seed` (up to its first failure).
pub fn trace_seed(seed: u64, cfg: SimConfig) -> Vec<String> {
    let mut sim = Sim::new(seed, cfg);
    sim.tracing = true;
    if let Err(e) = sim.run() {
        let now = sim.now;
        sim.trace.push(format!("{now:>6} FAILED: {e}"));
    }
    sim.trace
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeds 1..=`default`, or 1..=`SHARDLOG_REPL_SIM_SEEDS` (every configuration).
    fn seeds(default: u64) -> std::ops::RangeInclusive<u64> {
        let n = std::env::var("SHARDLOG_REPL_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
        1..=n
    }

    /// The main configuration runs 300 seeds, the variants fewer: CI time (debug build,
    /// about 13 ms a seed).
    const MAIN_SEEDS: u64 = 300;
    const VARIANT_SEEDS: u64 = 40;

    fn run_all(cfg: SimConfig, default_seeds: u64) -> SimStats {
        let mut total = SimStats::default();
        let mut failures = Vec::new();
        for seed in seeds(default_seeds) {
            match run_seed(seed, cfg) {
                // Findings 1 and 4 are fixed: within the fault budget no expansion may rest
                // on a previous process's position (chaos runs exceed the budget).
                Ok(s) if s.stale_isr_expansions > 0 && !cfg.chaos => {
                    failures.push(format!("seed {seed}: ISR expanded on a previous process's position (finding 1 is back)"))
                }
                // Finding 3 is fixed (KIP-966): a failure, not a stop.
                Ok(s) if s.last_isr_member_lost_acked > 0 && !cfg.chaos => {
                    failures.push(format!("seed {seed}: the last ISR member led again without acknowledged records (finding 3 is back)"))
                }
                Ok(s) => {
                    if s.stale_isr_expansions + s.last_isr_member_lost_acked > 0 {
                        eprintln!("seed {seed}: findings 1: {}, 3: {}", s.stale_isr_expansions, s.last_isr_member_lost_acked);
                    }
                    total.produced += s.produced;
                    total.acked += s.acked;
                    total.refused_not_enough += s.refused_not_enough;
                    total.refused_after_append += s.refused_after_append;
                    total.committed += s.committed;
                    total.faults += s.faults;
                    total.elections += s.elections;
                    total.isr_changes += s.isr_changes;
                    total.truncations += s.truncations;
                    total.hw_regressions_across_leaders += s.hw_regressions_across_leaders;
                    total.lost_committed += s.lost_committed;
                    total.stale_isr_expansions += s.stale_isr_expansions;
                    total.last_isr_member_lost_acked += s.last_isr_member_lost_acked;
                }
                Err(e) => failures.push(e),
            }
        }
        eprintln!("{cfg:?}: {total:?}");
        for f in &failures {
            eprintln!("FAILED {}", f.lines().next().unwrap_or(""));
        }
        if let Some(first) = failures.first() {
            panic!("{} of {} seeds failed; first:\n{first}", failures.len(), seeds(default_seeds).count());
        }
        total
    }

    const BASE: SimConfig = SimConfig {
        rf: 3,
        min_isr: 2,
        flush_always: false,
        chaos: false,
        kills_only: false,
        ticks: 1000,
        loss: 0.03,
        duplicate: 0.01,
        tolerate_known_findings: true,
    };

    fn named(name: &str) -> SimConfig {
        match name {
            "always" => SimConfig { flush_always: true, ..BASE },
            "minisr1" => SimConfig { min_isr: 1, loss: 0.08, ..BASE },
            "rf2" => SimConfig { rf: 2, ..BASE },
            "chaos" => SimConfig { chaos: true, ..BASE },
            "kills" => SimConfig { kills_only: true, ..BASE },
            "kills1" => SimConfig { kills_only: true, min_isr: 1, ..BASE },
            _ => BASE,
        }
    }

    /// `SHARDLOG_REPL_SIM_TRACE=<seed> [SHARDLOG_REPL_SIM_CFG=always|minisr1|rf2|chaos]
    /// cargo test --lib replication::simulation::tests::print_trace -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn print_trace() {
        let seed = std::env::var("SHARDLOG_REPL_SIM_TRACE").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
        let cfg = named(&std::env::var("SHARDLOG_REPL_SIM_CFG").unwrap_or_default());
        for line in trace_seed(seed, cfg) {
            println!("{line}");
        }
    }

    #[test]
    fn rf3_min_isr2_flush_never() {
        let s = run_all(BASE, MAIN_SEEDS);
        assert!(s.acked > 0 && s.faults > 0 && s.elections > 0 && s.isr_changes > 0 && s.truncations > 0, "{s:?}");
    }

    #[test]
    fn rf3_min_isr2_flush_always() {
        let s = run_all(named("always"), VARIANT_SEEDS);
        assert!(s.acked > 0 && s.faults > 0 && s.elections > 0, "{s:?}");
    }

    #[test]
    fn rf3_min_isr1_network_faults_only() {
        let s = run_all(named("minisr1"), VARIANT_SEEDS);
        assert!(s.acked > 0 && s.isr_changes > 0, "{s:?}");
    }

    #[test]
    fn rf2_min_isr2() {
        let s = run_all(named("rf2"), VARIANT_SEEDS);
        assert!(s.acked > 0, "{s:?}");
    }

    #[test]
    fn kills_and_pauses_without_budget_lose_nothing() {
        let s = run_all(named("kills"), VARIANT_SEEDS);
        assert!(s.acked > 0 && s.faults > 0 && s.elections > 0, "{s:?}");
        let s = run_all(named("kills1"), VARIANT_SEEDS);
        assert!(s.acked > 0 && s.faults > 0 && s.elections > 0, "{s:?}");
    }

    #[test]
    fn chaos_keeps_the_structural_invariants() {
        let s = run_all(named("chaos"), VARIANT_SEEDS);
        assert!(s.faults > 0, "{s:?}");
    }

    /// The open findings reproduce: with them not tolerated, these seeds break the
    /// durability invariant. When a finding is fixed its seed passes: its case is an
    /// `is_ok` check.
    #[test]
    fn open_findings_reproduce() {
        let strict = |name: &str| SimConfig { tolerate_known_findings: false, ..named(name) };
        // Finding 1 (fixed): the expansion of broker 1, proposed on its previous process's
        // position, was applied after it re-registered (kill -9, pause, a late copy of the
        // AlterPartition); it lacked records acknowledged meanwhile. Now refused as
        // INELIGIBLE_REPLICA (the broker epoch the leader sent is not the registered one).
        let clean = |r: Result<SimStats, String>| r.is_ok_and(|s| s.stale_isr_expansions == 0);
        assert!(clean(run_seed(281, strict("kills"))), "finding 1 (KIP-903) is back");
        // Finding 4 (fixed): a follower shrunk out for lag re-added on its old position.
        assert!(clean(run_seed(13, strict("base"))), "finding 4 is back");
        // Finding 3 (fixed: KIP-966, `controller/eligible_leaders.rs`): broker 0 leads,
        // broker 1 lags and is shrunk out (the shrink, resent, commits after broker 0 lost
        // power); broker 0, the last ISR member, restarted without its unsynced tail and
        // led again. Now broker 1 is an eligible leader replica and broker 0 is not.
        let fixed = |r: Result<SimStats, String>| r.is_ok_and(|s| s.last_isr_member_lost_acked == 0);
        assert!(fixed(run_seed(77, strict("rf2"))), "finding 3 (KIP-966) is back");
    }
}
