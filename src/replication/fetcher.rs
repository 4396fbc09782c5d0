//! One replica fetcher: on one shard, it pulls every partition this shard follows from one
//! leader broker over one connection (Kafka's ReplicaFetcherThread, per source broker and
//! shard instead of per thread). Each round: one Fetch naming every partition that is not
//! backing off, then each partition's answer applied on its log —
//!
//! - records: appended as the leader wrote them (`Partition::append_as_follower`, which
//!   returns once they are as durable as this broker's flush mode promises, so the next
//!   fetch offset it reports is data this replica really has), then the high watermark the
//!   leader sent is taken (never above this log's end);
//! - a diverging epoch (KIP-320): the log is cut to where the leader's epoch ended, or
//!   where this log's own copy of that epoch ends if sooner, and the next fetch resumes
//!   there (a deposed leader's unreplicated tail goes this way);
//! - OFFSET_OUT_OF_RANGE: below the leader's log start the log restarts empty there; past
//!   the leader's end it is cut to the leader's end;
//! - OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405): below the leader's local log start, inside
//!   the remote log: the log restarts at the remote log's end with its epochs and producer
//!   state (`tiered_start.rs`), history staying remote;
//! - leadership errors: the partition backs off until metadata moves it (the lifecycle
//!   reassigns it to another fetcher when its leader changes). Right after a leader change
//!   the new leader often has not applied the change yet when its followers' first fetch
//!   arrives (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH): a full
//!   `replica_fetch_backoff_ms` (1 s) there held every acks=all write to the new leader
//!   for a second after each failover. So these back off briefly first, doubling up to
//!   the full back-off while they repeat (`leadership_retry_delay`).
//!
//! The partitions it serves are replaced by the manager (`set_partitions`) between rounds:
//! an answer for a partition that has left this fetcher, or whose leader epoch moved while
//! the request was out, is dropped.
//!
//! A round is `next_round` (what to ask), the leader connection's fetch, then `apply`. The
//! replication simulation (`real_parts_simulation.rs`) drives the same two halves over its
//! simulated network, on its simulated clock (`Fetcher::with_clock`).
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchResponse, PartitionData};
use kafka_protocol::ResponseError;

use super::leader_connection::{FetchShape, LeaderConnection, PartitionFetch};
use super::settings::FetcherSettings;
use super::tiered_start::tiered_start;
use crate::cluster::image::BrokerId;
use crate::cluster::shard_partitions::ShardPartitions;
use crate::partition::divergence::truncation_offset;
use crate::partition::{Partition, PartitionError, Role};
use crate::remote::segment_metadata::PartitionRemoteLog;

/// A partition this fetcher pulls, with its back-off state.
struct Followed {
    partition: Rc<Partition>,
    topic_id: [u8; 16],
    /// Not fetched before this instant (after an error).
    backoff_until: Option<Instant>,
    /// Leadership errors in a row (reset by any other answer): how long the next one
    /// backs off.
    leadership_errors: u32,
}

/// The first retry after a leadership error; doubled per further error in a row, capped by
/// `replica_fetch_backoff_ms`. A leader catching up with metadata needs milliseconds.
const LEADERSHIP_RETRY_FIRST: Duration = Duration::from_millis(20);

/// How long a partition backs off after its `errors`-th leadership error in a row.
fn leadership_retry_delay(errors: u32, backoff: Duration) -> Duration {
    LEADERSHIP_RETRY_FIRST.saturating_mul(1u32 << errors.saturating_sub(1).min(16)).min(backoff)
}

/// The clock back-offs run on: `Instant::now`, or the simulation's time.
pub type Clock = Rc<dyn Fn() -> Instant>;

/// One round's partitions, each with what is asked for it.
pub type Round = Vec<(Rc<Partition>, PartitionFetch)>;

pub struct Fetcher {
    leader: BrokerId,
    clock: Clock,
    settings: FetcherSettings,
    partitions: Rc<ShardPartitions>,
    followed: RefCell<HashMap<(String, i32), Followed>>,
    /// Rotates which partition goes first, so each in turn may receive an oversized first
    /// batch (only the first partition of a fetch may exceed its limit).
    rotation: Cell<usize>,
    stopped: Cell<bool>,
}

impl Fetcher {
    pub fn new(leader: BrokerId, settings: FetcherSettings, partitions: Rc<ShardPartitions>) -> Rc<Fetcher> {
        Fetcher::with_clock(leader, settings, partitions, Rc::new(Instant::now))
    }

    pub fn with_clock(leader: BrokerId, settings: FetcherSettings, partitions: Rc<ShardPartitions>, clock: Clock) -> Rc<Fetcher> {
        Rc::new(Fetcher { leader, clock, settings, partitions, followed: RefCell::new(HashMap::new()), rotation: Cell::new(0), stopped: Cell::new(false) })
    }

    pub fn leader(&self) -> BrokerId {
        self.leader
    }

    /// Replaces the partitions fetched from now on (each with its topic id); those kept
    /// keep their back-off.
    pub fn set_partitions(&self, wanted: Vec<(Rc<Partition>, [u8; 16])>) {
        let mut followed = self.followed.borrow_mut();
        let mut next = HashMap::with_capacity(wanted.len());
        for (p, topic_id) in wanted {
            let key = (p.topic.clone(), p.index);
            let kept = followed.remove(&key).filter(|f| Rc::ptr_eq(&f.partition, &p));
            let (backoff_until, leadership_errors) = kept.map_or((None, 0), |f| (f.backoff_until, f.leadership_errors));
            next.insert(key, Followed { partition: p, topic_id, backoff_until, leadership_errors });
        }
        *followed = next;
    }

    pub fn partition_count(&self) -> usize {
        self.followed.borrow().len()
    }

    /// Ends the loop after its current round.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// The fetch loop; returns when stopped.
    pub async fn run(self: Rc<Self>) {
        let mut conn: Option<LeaderConnection> = None;
        let mut last_error_log: Option<Instant> = None;
        while !self.stopped.get() {
            let round = self.next_round();
            if round.is_empty() {
                // Every partition backs off: until the first is due (a leadership retry is
                // short), at most the full back-off (partitions added meanwhile wait so long).
                glommio::timer::sleep(self.idle_for()).await;
                continue;
            }
            if conn.is_none() {
                match self.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        self.log_error(&mut last_error_log, &e);
                        glommio::timer::sleep(self.settings.backoff).await;
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            let asked: Vec<PartitionFetch> = round.iter().map(|(_, f)| f.clone()).collect();
            match c.fetch(self.shape(), &asked).await {
                Ok(resp) => self.apply(round, resp).await,
                Err(e) => {
                    conn = None;
                    self.log_error(&mut last_error_log, &e);
                    glommio::timer::sleep(self.settings.backoff).await;
                }
            }
        }
    }

    fn log_error(&self, last: &mut Option<Instant>, e: &dyn std::fmt::Display) {
        // Once per 10 s per fetcher: a dead leader must not flood the log until fencing.
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            tracing::warn!(shard = self.partitions.shard(), leader = self.leader, error = %e, "replica fetch failed; retrying");
            *last = Some(Instant::now());
        }
    }

    async fn connect(&self) -> Result<LeaderConnection, Box<dyn std::error::Error>> {
        let image = self.partitions.image();
        let broker =
            image.brokers.get(&self.leader).filter(|b| !b.fenced).ok_or_else(|| format!("leader broker {} is not registered or is fenced", self.leader))?;
        let s = &self.settings;
        let c = LeaderConnection::connect(broker, &s.security, s.node_id, s.response_max_bytes, s.request_timeout).await?;
        tracing::info!(shard = self.partitions.shard(), leader = self.leader, addr = c.addr(), listener = s.security.listener, "replica fetcher connected");
        Ok(c)
    }

    /// The request's own fields (this replica, its broker epoch, the limits).
    pub fn shape(&self) -> FetchShape {
        FetchShape {
            replica_id: self.settings.node_id,
            replica_epoch: self.settings.broker_epoch,
            max_wait_ms: self.settings.max_wait_ms,
            min_bytes: 1,
            max_bytes: self.settings.response_max_bytes,
        }
    }

    /// The partitions to fetch this round (not backing off), rotated, with what to ask.
    pub fn next_round(&self) -> Round {
        let now = (self.clock)();
        let mut followed = self.followed.borrow_mut();
        let mut round: Vec<(Rc<Partition>, PartitionFetch)> = Vec::with_capacity(followed.len());
        for f in followed.values_mut() {
            if f.backoff_until.is_some_and(|t| t > now) {
                continue;
            }
            f.backoff_until = None;
            let p = &f.partition;
            round.push((
                p.clone(),
                PartitionFetch {
                    topic_id: f.topic_id,
                    partition: p.index,
                    current_leader_epoch: p.leader_epoch(),
                    fetch_offset: p.log_end_offset(),
                    last_fetched_epoch: p.last_fetched_epoch(),
                    log_start_offset: p.log_start_offset(),
                    partition_max_bytes: self.settings.partition_max_bytes,
                },
            ));
        }
        // A stable order (the map's is not), then rotated by one each round.
        round.sort_by(|a, b| (a.0.topic.as_str(), a.0.index).cmp(&(b.0.topic.as_str(), b.0.index)));
        if !round.is_empty() {
            let r = self.rotation.get().wrapping_add(1);
            self.rotation.set(r);
            let at = r % round.len();
            round.rotate_left(at);
        }
        round
    }

    fn back_off(&self, p: &Partition) {
        if let Some(f) = self.followed.borrow_mut().get_mut(&(p.topic.clone(), p.index)) {
            f.backoff_until = Some((self.clock)() + self.settings.backoff);
        }
    }

    /// The leader refused `p` for leadership: briefly at first (see the module comment).
    fn back_off_leadership(&self, p: &Partition) {
        if let Some(f) = self.followed.borrow_mut().get_mut(&(p.topic.clone(), p.index)) {
            f.leadership_errors = f.leadership_errors.saturating_add(1);
            f.backoff_until = Some((self.clock)() + leadership_retry_delay(f.leadership_errors, self.settings.backoff));
        }
    }

    fn answered(&self, p: &Partition) {
        if let Some(f) = self.followed.borrow_mut().get_mut(&(p.topic.clone(), p.index)) {
            f.leadership_errors = 0;
        }
    }

    /// How long to wait when every partition backs off: until the first is due, at most the
    /// full back-off.
    fn idle_for(&self) -> Duration {
        let now = (self.clock)();
        let first = self.followed.borrow().values().filter_map(|f| f.backoff_until).min();
        first.map_or(self.settings.backoff, |t| t.saturating_duration_since(now)).min(self.settings.backoff)
    }

    /// Whether `p` is still fetched by this fetcher, in the epoch it was asked in.
    fn still_following(&self, p: &Rc<Partition>, asked_epoch: i32) -> bool {
        let ours = self.followed.borrow().get(&(p.topic.clone(), p.index)).is_some_and(|f| Rc::ptr_eq(&f.partition, p));
        ours && p.leader_epoch() == asked_epoch && matches!(p.role(), Role::Follower { leader } if leader == self.leader)
    }

    /// Applies each partition's answer (concurrently: their logs write independently).
    pub async fn apply(&self, round: Round, resp: FetchResponse) {
        if resp.error_code != 0 {
            tracing::warn!(shard = self.partitions.shard(), leader = self.leader, error_code = resp.error_code, "replica fetch refused as a whole");
            for (p, _) in &round {
                self.back_off(p);
            }
            return;
        }
        let mut answers: HashMap<([u8; 16], i32), PartitionData> = HashMap::with_capacity(round.len());
        for t in resp.responses {
            let id = *t.topic_id.as_bytes();
            for p in t.partitions {
                answers.insert((id, p.partition_index), p);
            }
        }
        let applied = round.into_iter().filter_map(|(p, asked)| {
            let answer = answers.remove(&(asked.topic_id, asked.partition))?;
            Some(self.apply_partition(p, asked, answer))
        });
        futures::future::join_all(applied).await;
    }

    async fn apply_partition(&self, p: Rc<Partition>, asked: PartitionFetch, answer: PartitionData) {
        if !self.still_following(&p, asked.current_leader_epoch) {
            return;
        }
        let error = ResponseError::try_from_code(answer.error_code);
        if matches!(error, Some(ResponseError::NotLeaderOrFollower | ResponseError::UnknownLeaderEpoch)) {
            // This replica's metadata names that broker the leader in this epoch, and the
            // broker does not know it yet: it will in a moment.
            tracing::debug!(topic = %p.topic, partition = p.index, leader = self.leader, error = ?error, "replica fetch: the leader is behind on metadata; retrying soon");
            self.back_off_leadership(&p);
            return;
        }
        self.answered(&p);
        let outcome = match error {
            None => self.apply_data(&p, &asked, answer).await,
            Some(ResponseError::OffsetOutOfRange) => self.out_of_range(&p, &asked, &answer).await,
            Some(ResponseError::OffsetMovedToTieredStorage) => self.start_from_tiered(&p, &asked).await,
            Some(e) => {
                // Leadership moved or is moving (metadata will reassign the partition),
                // the leader's log is offline, or the topic is gone: try again later.
                tracing::debug!(topic = %p.topic, partition = p.index, leader = self.leader, error = ?e, "replica fetch partition error");
                self.back_off(&p);
                return;
            }
        };
        if let Err(e) = outcome {
            match e {
                // The log moved while the answer travelled (truncated, or fed by another
                // fetcher): the next round asks again from its end.
                PartitionError::OffsetMismatch { .. } => {}
                PartitionError::NotLeader => {}
                e => {
                    tracing::warn!(topic = %p.topic, partition = p.index, leader = self.leader, error = %e, "cannot apply replicated data");
                    self.back_off(&p);
                }
            }
        }
    }

    async fn apply_data(&self, p: &Rc<Partition>, asked: &PartitionFetch, answer: PartitionData) -> Result<(), PartitionError> {
        let diverging = &answer.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            // KIP-320: the leader's log disagrees from `diverging.end_offset` on. Cut to
            // where both logs still agree: the leader's end of that epoch, or ours if sooner.
            let to = truncation_offset((diverging.epoch, diverging.end_offset), |e| p.epoch_end_offset(e), p.log_start_offset(), p.log_end_offset());
            tracing::info!(topic = %p.topic, partition = p.index, leader = self.leader, epoch = diverging.epoch,
                leader_end_offset = diverging.end_offset, truncate_to = to, log_end_offset = p.log_end_offset(),
                "diverging epoch: truncating the follower's log");
            p.truncate_to(to).await?;
            return Ok(());
        }
        let records: Bytes = answer.records.unwrap_or_default();
        if !records.is_empty() {
            p.append_as_follower(records).await?;
        } else if asked.fetch_offset != p.log_end_offset() {
            return Ok(());
        }
        p.set_follower_high_watermark(answer.high_watermark);
        Ok(())
    }

    /// The leader's local log starts past `asked.fetch_offset`, which is in remote storage.
    async fn start_from_tiered(&self, p: &Rc<Partition>, asked: &PartitionFetch) -> Result<(), PartitionError> {
        let Some(store) = &self.settings.remote_store else {
            tracing::warn!(topic = %p.topic, partition = p.index, leader = self.leader,
                "the leader's log continues in remote storage, but tiered storage is off on this broker (remote.log.storage.system.enable): waiting");
            self.back_off(p);
            return Ok(());
        };
        let image = self.partitions.image();
        let none = PartitionRemoteLog::default();
        let remote = image.remote_log.partition(&asked.topic_id, p.index).unwrap_or(&none);
        match tiered_start(store, remote, &p.topic, &asked.topic_id, p.index, asked.fetch_offset).await {
            Ok(Some(start)) => {
                // The read took a while: the partition may have moved on meanwhile.
                if !self.still_following(p, asked.current_leader_epoch) || p.log_end_offset() != asked.fetch_offset {
                    return Ok(());
                }
                tracing::info!(topic = %p.topic, partition = p.index, leader = self.leader, fetch_offset = asked.fetch_offset,
                    tiered_offset = start.offset, "below the leader's local log: restarting the replica at the remote log's end");
                p.start_from_tiered(start.offset, start.epochs, &start.producer_snapshot).await
            }
            Ok(None) => {
                tracing::debug!(topic = %p.topic, partition = p.index, fetch_offset = asked.fetch_offset, "tiered offset: this broker's metadata is behind; waiting");
                self.back_off(p);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, leader = self.leader, error = %e, "cannot read the remote log's state to start from the tiered offset");
                self.back_off(p);
                Ok(())
            }
        }
    }

    async fn out_of_range(&self, p: &Rc<Partition>, asked: &PartitionFetch, answer: &PartitionData) -> Result<(), PartitionError> {
        // With OFFSET_OUT_OF_RANGE the leader reports its log start and (in the high
        // watermark field) its log end.
        if asked.fetch_offset < answer.log_start_offset {
            tracing::info!(topic = %p.topic, partition = p.index, leader = self.leader, leader_log_start = answer.log_start_offset,
                fetch_offset = asked.fetch_offset, "behind the leader's log start: restarting the replica there");
            p.truncate_fully_and_start_at(answer.log_start_offset).await
        } else if answer.high_watermark >= 0 && answer.high_watermark < asked.fetch_offset {
            tracing::info!(topic = %p.topic, partition = p.index, leader = self.leader, leader_log_end = answer.high_watermark,
                "ahead of the leader's log end: truncating");
            p.truncate_to(answer.high_watermark.max(p.log_start_offset())).await.map(|_| ())
        } else {
            self.back_off(p);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leadership_retries_start_short_and_double_up_to_the_back_off() {
        let b = Duration::from_millis(1000);
        let ms = |n| Duration::from_millis(n);
        let got: Vec<Duration> = (1..=8).map(|e| leadership_retry_delay(e, b)).collect();
        assert_eq!(got, vec![ms(20), ms(40), ms(80), ms(160), ms(320), ms(640), b, b]);
        assert_eq!(leadership_retry_delay(u32::MAX, b), b, "no overflow");
        assert_eq!(leadership_retry_delay(1, ms(5)), ms(5), "never above replica_fetch_backoff_ms");
    }
}
