//! The share-partitions of one shard: every `(group, topic-partition)` whose partition
//! this shard leads has its `SharePartition` here, so ShareFetch and ShareAcknowledge
//! touch shard-local state only (they reach it through the router, as partition reads
//! do).
//!
//! Durable as Kafka 4.4 keeps it: the first operation on a share-partition under a leader
//! epoch reads its state from the share coordinator (`__share_group_state`; a start
//! offset of -1 becomes where `share.auto.offset.reset` says: latest, the high watermark;
//! earliest, the log start), and every acknowledgement or release is written there
//! before it is answered; a write the coordinator refuses rolls the acknowledgements
//! back and answers the coordinator's error. Acquisitions are not written (a lock does
//! not outlive its leader): a new leader delivers again what was acquired and not
//! acknowledged. Each write carries the whole window (bounded by
//! `group.share.partition.max.record.locks`), which the coordinator combines as Kafka's
//! does (the higher delivery count, then state, wins): every change in the window only
//! raises an offset's (count, state), so the whole window says no less than a delta.
//!
//! Invariant: one operation at a time per share-partition (its `turn`), so a write in
//! flight and its rollback never interleave with another member's acquisition.
//!
//! A group with a dead-letter queue (`dead_letter.rs`): offsets that go ARCHIVING are
//! written like any change (a lock that expired into ARCHIVING forces a write), then one
//! task per share-partition writes them to the queue and archives them, off the member's
//! request; a new leader resumes the ARCHIVING offsets it reads.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use bytes::Bytes;

use super::aborted_batches::{aborted_batches, FetchedBatch};
use super::dead_letter::{
    dead_letter_batches, originals, DeadLetterCause, DeadLetterQueue, DeadLetterSource, Originals, SharedDeadLetterWriter, MAX_WRITE_BYTES,
};
use super::share_partition::{AcknowledgeError, AcknowledgementBatch, AcquiredRecords, ArchivingRange, MemberId, ShareLimits, SharePartition, StateBatch};
use super::state_coordinator::{ShareStateAnswer, ShareStateOpKind};
use super::state_persister::{fences, from_persisted, partition_error, to_persisted, StatePersister};
use super::state_records::SharePartitionKey;
use super::state_store::WriteState;
use crate::cluster::config_defs::ShareAutoOffsetReset;
use crate::partition::{Partition, PartitionError, ReadLimit};
use crate::protocol::ErrorCode;
use crate::record::parse_header;

/// Share-partitions one shard keeps at most (a bound on what members can make it hold).
pub const MAX_SHARE_PARTITIONS_PER_SHARD: usize = 100_000;

/// An acquisition's first read, and the smallest later one (bytes).
const FIRST_READ_BYTES: i64 = 256 * 1024;
const MIN_READ_BYTES: i64 = 64 * 1024;
/// Reads one acquisition makes at most (each reads at least one batch, or ends it).
const MAX_READ_STEPS: usize = 16;

/// One partition's part of a ShareFetch or ShareAcknowledge.
pub struct SharePartitionOp {
    pub group_id: String,
    pub member_id: String,
    pub acknowledgements: Vec<AcknowledgementBatch>,
    pub renew_allowed: bool,
    /// Records to acquire (None: acknowledge only).
    pub fetch: Option<FetchLimits>,
    /// The member's session closed or it left: release what it holds (after the acks).
    pub release: bool,
    /// The group's share.auto.offset.reset: where a share-partition with no start offset starts.
    pub reset: ShareAutoOffsetReset,
    /// The group's limits (its share.* configs over the broker's group.share.*).
    pub limits: ShareLimits,
    /// The group's dead-letter queue (share.version 2 and its config); `limits` says
    /// whether there is one.
    pub dead_letter: Option<DeadLetterQueue>,
}

#[derive(Clone, Copy, Debug)]
pub struct FetchLimits {
    pub max_records: i64,
    pub max_bytes: i64,
    /// The group's share.isolation.level is read_committed: read below the last stable
    /// offset and archive aborted transactions' batches (`aborted_batches.rs`).
    pub read_committed: bool,
}

/// What a partition answers.
#[derive(Debug, Default)]
pub struct SharePartitionReply {
    /// The acknowledgements' refusal (none of them applied).
    pub acknowledge_error: Option<AcknowledgeError>,
    /// Whole batches holding the acquired records.
    pub records: Vec<Bytes>,
    pub acquired: Vec<AcquiredRecords>,
    /// The partition's high watermark when the fetch looked for records (None: it did
    /// not look): a ShareFetch that acquired nothing waits, in turn, for it to move.
    pub high_watermark: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SharePartitionError {
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// `MAX_SHARE_PARTITIONS_PER_SHARD` reached.
    #[error("too many share-partitions on this shard")]
    Full,
    /// The share coordinator did not answer the read of the state (the partition's error).
    #[error("share-partition state not available: {0}")]
    State(ErrorCode),
}

type Key = (String, [u8; 16], i32);

/// One share-partition of this shard: loaded under the leader epoch it was read with.
struct Entry {
    /// One operation at a time (see the module's invariant).
    turn: glommio::sync::Semaphore,
    loaded: RefCell<Option<Loaded>>,
}

struct Loaded {
    sp: SharePartition,
    leader_epoch: i32,
    state_epoch: i32,
    /// The window as the share coordinator last took it (read or written): what changed
    /// since (acquisitions' delivery counts, expired locks) rides on the next write.
    persisted: (i64, Vec<StateBatch>),
    /// A task is writing this window's ARCHIVING offsets to the dead-letter queue.
    dead_lettering: Cell<bool>,
}

pub struct SharePartitions {
    /// Itself, for the dead-letter tasks it starts.
    me: Weak<SharePartitions>,
    states: RefCell<HashMap<Key, Rc<Entry>>>,
    persister: StatePersister,
    dead_letters: SharedDeadLetterWriter,
    /// The broker's group.share.* limits (each op carries its group's, `broker_limits`
    /// being the base its share.* configs override).
    limits: ShareLimits,
}

impl SharePartitions {
    pub fn new(persister: StatePersister, dead_letters: SharedDeadLetterWriter, limits: ShareLimits) -> Rc<SharePartitions> {
        Rc::new_cyclic(|me| SharePartitions { me: me.clone(), states: RefCell::new(HashMap::new()), persister, dead_letters, limits })
    }

    pub fn broker_limits(&self) -> ShareLimits {
        self.limits
    }

    /// Runs `op` on partition `p` (this shard leads it).
    pub async fn run(&self, p: &Rc<Partition>, op: SharePartitionOp, now_ms: i64) -> Result<SharePartitionReply, SharePartitionError> {
        let key: Key = (op.group_id.clone(), p.topic_id, p.index);
        let entry = {
            let mut states = self.states.borrow_mut();
            match states.get(&key) {
                Some(e) => e.clone(),
                None => {
                    if states.len() >= MAX_SHARE_PARTITIONS_PER_SHARD {
                        tracing::warn!(limit = MAX_SHARE_PARTITIONS_PER_SHARD, "share-partition limit of this shard reached");
                        return Err(SharePartitionError::Full);
                    }
                    let e = Rc::new(Entry { turn: glommio::sync::Semaphore::new(1), loaded: RefCell::new(None) });
                    states.insert(key.clone(), e.clone());
                    e
                }
            }
        };
        let _turn = entry.turn.acquire_permit(1).await.map_err(|_| SharePartitionError::State(ErrorCode::UNKNOWN_SERVER_ERROR))?;
        let state_key = SharePartitionKey { group_id: op.group_id.clone(), topic_id: uuid::Uuid::from_bytes(p.topic_id), partition: p.index };
        let leader_epoch = p.leader_epoch();
        if entry.loaded.borrow().as_ref().is_some_and(|l| l.leader_epoch != leader_epoch) {
            entry.loaded.replace(None);
        }
        if entry.loaded.borrow().is_none() {
            let loaded = self.load(p, &state_key, leader_epoch, op.reset, op.limits, now_ms).await;
            crate::metrics::shard_metrics::with(|m| {
                m.share_state.loads += 1;
                m.share_state.load_failures += u64::from(loaded.is_err());
            });
            entry.loaded.replace(Some(loaded.map_err(SharePartitionError::State)?));
            // A new leader resumes the dead letters its predecessor had not written.
            self.maybe_dead_letter(&entry, p, &op, leader_epoch);
        }
        let member: MemberId = Rc::from(op.member_id.as_str());
        let mut reply = SharePartitionReply::default();
        let write = {
            let mut loaded = entry.loaded.borrow_mut();
            let l = loaded.as_mut().expect("loaded above");
            if l.sp.limits() != op.limits {
                l.sp.set_limits(op.limits);
            }
            let expired = l.sp.expire_locks(now_ms);
            l.sp.move_start_to(p.log_start_offset());
            // Only acknowledgements and releases are written (and can be undone); a plain
            // fetch copies nothing. Lock expiry and the start's move ride on the next write,
            // unless a lock expired into ARCHIVING (phase 1 of the dead-letter queue).
            let archived_by_expiry = expired > 0 && op.limits.dead_letter_queue && l.sp.has_archiving();
            if op.acknowledgements.is_empty() && !op.release && !archived_by_expiry {
                None
            } else {
                let undo = l.sp.clone();
                if !op.acknowledgements.is_empty() {
                    reply.acknowledge_error = l.sp.acknowledge(&op.member_id, &op.acknowledgements, op.renew_allowed, now_ms).err();
                }
                if op.release {
                    l.sp.release_member(&op.member_id);
                }
                let after = l.sp.state_batches();
                (after != l.persisted).then_some((after, undo, l.state_epoch))
            }
        };
        if let Some(((start_offset, batches), undo, state_epoch)) = write {
            let written = self.write(&state_key, state_epoch, leader_epoch, start_offset, &batches).await;
            if written.is_ok() {
                if let Some(l) = entry.loaded.borrow_mut().as_mut() {
                    l.persisted = (start_offset, batches);
                }
                // Only a group with a queue makes offsets ARCHIVING (a load resumes the rest).
                if op.limits.dead_letter_queue {
                    self.maybe_dead_letter(&entry, p, &op, leader_epoch);
                }
            }
            if let Err(code) = written {
                // Not durable, so not done: the acknowledgements are undone and refused.
                let mut loaded = entry.loaded.borrow_mut();
                if fences(code) {
                    *loaded = None;
                } else if let Some(l) = loaded.as_mut() {
                    l.sp = undo;
                }
                if !op.acknowledgements.is_empty() && reply.acknowledge_error.is_none() {
                    reply.acknowledge_error =
                        Some(AcknowledgeError::NotPersisted(code, format!("the share coordinator did not take the acknowledgements: {code}")));
                }
                return Ok(reply);
            }
        }
        if op.release {
            // A member's session ended. With nothing acquired and everything written, the
            // window is forgotten, as Kafka's leader forgets a share group's partitions
            // when the group empties (its onGroupEmpty): the next use reads it back, so an
            // offset reset or delete made meanwhile (the group is empty then) is what it serves.
            let idle = entry
                .loaded
                .borrow()
                .as_ref()
                .is_some_and(|l| l.sp.next_lock_deadline_ms().is_none() && !l.dead_lettering.get() && l.sp.state_batches() == l.persisted);
            if idle {
                entry.loaded.replace(None);
            }
        }
        if op.fetch.is_some() {
            reply.high_watermark = Some(p.high_watermark());
        }
        let offset = {
            let loaded = entry.loaded.borrow();
            // None: forgotten just above (a release, which fetches nothing).
            let Some(l) = loaded.as_ref() else { return Ok(reply) };
            let next = l.sp.next_fetch_offset();
            match op.fetch {
                Some(limits) if l.sp.can_acquire() && next < if limits.read_committed { p.last_stable_offset() } else { p.high_watermark() } => {
                    Some((next, limits))
                }
                _ => None,
            }
        };
        let Some((offset, limits)) = offset else { return Ok(reply) };
        // Read in steps sized for the records still wanted, not the request's max_bytes
        // at once (a Java share consumer asks for 50 MiB to take max.poll.records = 500):
        // a read from disk copies what it reads, so reading 100x what is acquired made
        // draining a long backlog read-bound. The state is not borrowed across a read
        // (the turn keeps other operations out).
        let end = if limits.read_committed { p.last_stable_offset() } else { p.high_watermark() };
        let mut next = offset;
        let mut budget = limits.max_bytes.max(1);
        let mut step_bytes = FIRST_READ_BYTES.min(budget);
        let mut taken = 0i64;
        // Contiguous runs of acquired batches: (chunk, start, end) within that chunk.
        let mut runs: Vec<(Bytes, usize, usize)> = Vec::new();
        for step in 0..MAX_READ_STEPS {
            let limit = ReadLimit { max_bytes: step_bytes, min_one_batch: step == 0, file_slice: false };
            let data = p.read_isolated(next, limit, limits.read_committed).await?;
            let mut bounds: Vec<(i64, i64)> = Vec::new();
            let mut spans: Vec<(usize, usize, usize)> = Vec::new(); // (chunk index, start, end)
            let mut fetched: Vec<FetchedBatch> = Vec::new();
            let mut read_bytes = 0usize;
            for (ci, chunk) in data.records.iter().enumerate() {
                let mut at = 0usize;
                while at < chunk.len() {
                    let Ok(h) = parse_header(&chunk[at..]) else { break };
                    let len = h.total_len();
                    if len == 0 || at + len > chunk.len() {
                        break;
                    }
                    if limits.read_committed {
                        fetched.push(FetchedBatch::of(&chunk[at..at + len], &h));
                    }
                    bounds.push((h.base_offset, h.last_offset()));
                    spans.push((ci, at, at + len));
                    read_bytes += len;
                    at += len;
                }
            }
            let Some(&(_, last)) = bounds.last() else { break };
            let mut loaded = entry.loaded.borrow_mut();
            let Some(l) = loaded.as_mut() else { return Ok(reply) };
            let mut acquired = l.sp.acquire(&member, &bounds, limits.max_records - taken, now_ms);
            taken += acquired.iter().map(|a| a.last_offset - a.first_offset + 1).sum::<i64>();
            // read_committed: aborted transactions' batches are archived, not delivered.
            // Their new states ride on the next write (a new leader would archive them again).
            for (first, last) in aborted_batches(&fetched, data.aborted_transactions.as_deref().unwrap_or_default()) {
                l.sp.archive_acquired(&member, first, last, &mut acquired);
            }
            // Only the batches that hold acquired records go back, adjacent ones as one slice.
            for (&(b, l_off), &(ci, from, to)) in bounds.iter().zip(&spans) {
                if !acquired.iter().any(|a| a.first_offset <= l_off && a.last_offset >= b) {
                    continue;
                }
                let chunk = &data.records[ci];
                match runs.last_mut() {
                    Some((c, _, run_end)) if *run_end == from && c.as_ptr() == chunk.as_ptr() => *run_end = to,
                    _ => runs.push((chunk.clone(), from, to)),
                }
            }
            reply.acquired.extend(acquired);
            next = last + 1;
            budget -= read_bytes as i64;
            let wanted = limits.max_records - taken;
            if wanted <= 0 || budget <= 0 || next >= end || !l.sp.can_acquire() {
                break;
            }
            // The next step: the records still wanted at the size seen so far, a margin on top.
            let per_record = read_bytes as i64 / (last - bounds[0].0 + 1).max(1);
            step_bytes = (wanted.saturating_mul(per_record.max(1)) / 8 * 9).clamp(MIN_READ_BYTES, budget);
        }
        reply.records = runs.into_iter().map(|(chunk, from, to)| chunk.slice(from..to)).collect();
        Ok(reply)
    }

    /// Starts phase 2 of the dead-letter queue for `entry` when it has ARCHIVING offsets
    /// the share coordinator holds (just read or written) and no task is at it yet.
    fn maybe_dead_letter(&self, entry: &Rc<Entry>, p: &Rc<Partition>, op: &SharePartitionOp, leader_epoch: i32) {
        let start = entry.loaded.borrow().as_ref().is_some_and(|l| l.sp.has_archiving() && !l.dead_lettering.get());
        let Some(me) = self.me.upgrade() else { return };
        if !start {
            return;
        }
        if let Some(l) = entry.loaded.borrow().as_ref() {
            l.dead_lettering.set(true);
        }
        let source = DeadLetterSource { group_id: op.group_id.clone(), topic: p.topic.clone(), partition: p.index };
        let (entry, p, queue, limit) = (entry.clone(), p.clone(), op.dead_letter.clone(), op.limits.delivery_count_limit);
        glommio::spawn_local(async move { me.dead_letter(entry, p, source, queue, limit, leader_epoch).await }).detach();
    }

    /// Phase 2: writes the ARCHIVING offsets to the queue, archives them, writes the
    /// state; again while more went ARCHIVING meanwhile. Stops when the share-partition
    /// was reloaded or forgotten (the next leader epoch's load resumes what is left).
    /// Offsets the queue did not take are archived all the same, the reason logged.
    async fn dead_letter(&self, entry: Rc<Entry>, p: Rc<Partition>, source: DeadLetterSource, queue: Option<DeadLetterQueue>, limit: u16, leader_epoch: i32) {
        loop {
            // Taken in turn: an operation whose write is in flight may have made offsets
            // ARCHIVING that its failure would undo (a refused REJECT); between operations
            // every ARCHIVING offset is written, or went there by an expired lock, which
            // nothing undoes.
            let ranges = {
                let Ok(_turn) = entry.turn.acquire_permit(1).await else { return };
                match entry.loaded.borrow().as_ref() {
                    Some(l) if l.leader_epoch == leader_epoch => l.sp.archiving(),
                    _ => return,
                }
            };
            if ranges.is_empty() {
                break;
            }
            let ready = match &queue {
                Some(q) => self.dead_letters.prepare(&source.group_id, q).await.map(|()| q),
                None => Err("the group has no dead-letter queue now (errors.deadletterqueue.topic.name blank or share.version below 2)".to_string()),
            };
            for range in &ranges {
                let (sent, outcome) = match ready {
                    Ok(q) => self.write_dead_letters(&p, &source, q, range, limit).await,
                    Err(ref why) => (0, Err(why.clone())),
                };
                let offsets = (range.last_offset - range.first_offset + 1) as u64;
                crate::metrics::shard_metrics::with(|m| m.share_dead_letter.add(&source.group_id, sent, offsets.saturating_sub(sent)));
                if let Err(why) = outcome {
                    tracing::error!(group = %source.group_id, topic = %source.topic, partition = source.partition, first = range.first_offset, last = range.last_offset, reason = %why, "dead-letter queue write failed; archiving the records regardless");
                }
            }
            // Archived, then written under the turn (no other operation in between).
            let Ok(_turn) = entry.turn.acquire_permit(1).await else { return };
            let (start, batches, state_epoch) = {
                let mut loaded = entry.loaded.borrow_mut();
                let Some(l) = loaded.as_mut().filter(|l| l.leader_epoch == leader_epoch) else { return };
                for r in &ranges {
                    l.sp.finish_archiving(r.first_offset, r.last_offset);
                }
                let (start, batches) = l.sp.state_batches();
                (start, batches, l.state_epoch)
            };
            let state_key = SharePartitionKey { group_id: source.group_id.clone(), topic_id: uuid::Uuid::from_bytes(p.topic_id), partition: p.index };
            match self.write(&state_key, state_epoch, leader_epoch, start, &batches).await {
                Ok(()) => {
                    if let Some(l) = entry.loaded.borrow_mut().as_mut().filter(|l| l.leader_epoch == leader_epoch) {
                        l.persisted = (start, batches);
                    }
                }
                // ARCHIVED stays in memory and rides on the next write (Kafka's rule too).
                Err(code) => tracing::debug!(group = %source.group_id, partition = source.partition, %code, "archived dead letters not written yet"),
            }
        }
        if let Some(l) = entry.loaded.borrow().as_ref().filter(|l| l.leader_epoch == leader_epoch) {
            l.dead_lettering.set(false);
        }
    }

    /// The dead letters of one ARCHIVING range written to `queue` (originals read first
    /// when copied): how many records it took, and why it stopped if it did.
    async fn write_dead_letters(
        &self,
        p: &Partition,
        source: &DeadLetterSource,
        queue: &DeadLetterQueue,
        range: &ArchivingRange,
        limit: u16,
    ) -> (u64, Result<(), String>) {
        let copied = if queue.copy_record { read_originals(p, range.first_offset, range.last_offset).await } else { Originals::new() };
        let cause = DeadLetterCause::of(range, limit);
        let batches = match dead_letter_batches(source, range, cause, &copied, crate::runtime::clock::now_ms()) {
            Ok(b) => b,
            Err(e) => return (0, Err(e.to_string())),
        };
        let mut sent = 0u64;
        for batch in batches {
            let records = parse_header(&batch).map_or(0, |h| u64::try_from(h.records_count).unwrap_or(0));
            if let Err(e) = self.dead_letters.write(queue, source.partition, batch).await {
                return (sent, Err(e));
            }
            sent += records;
        }
        (sent, Ok(()))
    }

    /// Reads the share-partition's state from its coordinator (ReadShareGroupState, which
    /// also records `leader_epoch` there, fencing older leaders' writes). The group
    /// coordinator initialized it before assigning it (`coordinator.rs`); a partition
    /// never initialized is refused there (INVALID_REQUEST), which the member gets as
    /// UNKNOWN_SERVER_ERROR, as from Kafka.
    async fn load(
        &self,
        p: &Partition,
        key: &SharePartitionKey,
        leader_epoch: i32,
        reset: ShareAutoOffsetReset,
        limits: ShareLimits,
        now_ms: i64,
    ) -> Result<Loaded, ErrorCode> {
        let read = (self.persister)(key.clone(), ShareStateOpKind::Read { leader_epoch }).await;
        let state = match read {
            Ok(ShareStateAnswer::Read(s)) => s,
            Ok(_) => return Err(ErrorCode::UNKNOWN_SERVER_ERROR),
            Err(f) => return Err(partition_error(f.code)),
        };
        let batches: Option<Vec<StateBatch>> = state.batches.iter().map(from_persisted).collect();
        let Some(batches) = batches else {
            tracing::warn!(group = %key.group_id, partition = key.partition, "share-partition state holds a delivery state this broker does not serve");
            return Err(ErrorCode::UNKNOWN_SERVER_ERROR);
        };
        let start = match (state.start_offset, reset) {
            (s, _) if s >= 0 => s.max(p.log_start_offset()),
            (_, ShareAutoOffsetReset::Earliest) => p.log_start_offset(),
            (_, ShareAutoOffsetReset::Latest) => p.high_watermark(),
            (_, ShareAutoOffsetReset::ByDuration(ms)) => match p.offset_for_timestamp(now_ms.saturating_sub(ms).max(0)).await {
                Ok(Some((offset, _))) => offset,
                Ok(None) => p.high_watermark(),
                Err(e) => return Err(ErrorCode::from(&e)),
            },
        };
        let sp = SharePartition::from_state(start, &batches, limits);
        let persisted = sp.state_batches();
        Ok(Loaded { sp, leader_epoch, state_epoch: state.state_epoch, persisted, dead_lettering: Cell::new(false) })
    }

    /// WriteShareGroupState of the whole window; the partition's error if not taken.
    async fn write(&self, key: &SharePartitionKey, state_epoch: i32, leader_epoch: i32, start_offset: i64, batches: &[StateBatch]) -> Result<(), ErrorCode> {
        let w = WriteState {
            state_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count: delivery_complete_count(start_offset, batches),
            batches: batches.iter().map(to_persisted).collect(),
        };
        let sent = std::time::Instant::now();
        let answer = (self.persister)(key.clone(), ShareStateOpKind::Write(w)).await;
        crate::metrics::shard_metrics::with(|m| {
            m.share_state.writes += 1;
            m.share_state.write_failures += u64::from(answer.is_err());
            m.share_state.write_time.record(sent.elapsed());
        });
        match answer {
            Ok(_) => Ok(()),
            Err(f) => {
                tracing::debug!(group = %key.group_id, partition = key.partition, code = %f.code, "share-partition state not written");
                Err(partition_error(f.code))
            }
        }
    }
}

/// The original records of `first..=last` for a dead-letter copy, read from the log in
/// steps of `MAX_WRITE_BYTES`; offsets the log no longer has (retention) are left out.
async fn read_originals(p: &Partition, first: i64, last: i64) -> Originals {
    let mut out = Originals::new();
    let mut next = first;
    while next <= last {
        let limit = ReadLimit { max_bytes: MAX_WRITE_BYTES as i64, min_one_batch: true, file_slice: false };
        let Ok(data) = p.read_with(next, limit).await else { break };
        let Some(end) = data.records.iter().filter_map(last_offset_in).max() else { break };
        out.extend(originals(&data.records, next, last));
        next = end + 1;
    }
    out
}

/// The last offset of the last whole batch in `chunk`.
fn last_offset_in(chunk: &Bytes) -> Option<i64> {
    crate::record::iter_batches(chunk).map_while(Result::ok).last().map(|(h, _)| h.last_offset())
}

/// Kafka's deliveryCompleteCount: the records at or after the start offset that are done
/// with (acknowledged or archived); DescribeShareGroupOffsets' lag is the log end minus
/// the start offset minus this.
fn delivery_complete_count(start_offset: i64, batches: &[StateBatch]) -> i32 {
    let done: i64 = batches
        .iter()
        .filter(|b| matches!(b.state, super::share_partition::RecordState::Acknowledged | super::share_partition::RecordState::Archived))
        .map(|b| (b.last_offset - b.first_offset.max(start_offset) + 1).max(0))
        .sum();
    i32::try_from(done).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FlushMode;
    use crate::group::share::share_partition::AcknowledgeType;
    use crate::group::share::state_coordinator::{ShareStateCoordinator, ShareStateFailure, ShareStateOp};
    use crate::partition::tests::{batch, open_flushed, run};
    use crate::storage::LogConfig;
    use kafka_protocol::records::Compression;

    /// The share coordinator of the tests: a real one on its own partition, whose writes
    /// can be refused (COORDINATOR_NOT_AVAILABLE) while `refuse` is set.
    fn persister(coordinator: Rc<ShareStateCoordinator>, state: Rc<Partition>, refuse: Rc<Cell<bool>>) -> StatePersister {
        Box::new(move |key, kind| {
            let (c, state, refuse) = (coordinator.clone(), state.clone(), refuse.clone());
            Box::pin(async move {
                if refuse.get() && matches!(kind, ShareStateOpKind::Write(_)) {
                    return Err(ShareStateFailure { code: ErrorCode::COORDINATOR_NOT_AVAILABLE, message: None });
                }
                c.execute(&state, ShareStateOp { key, exists: true, kind }, 0).await
            })
        })
    }

    fn op(member: &str, acks: Vec<AcknowledgementBatch>, fetch: bool) -> SharePartitionOp {
        SharePartitionOp {
            group_id: "g".into(),
            member_id: member.into(),
            acknowledgements: acks,
            renew_allowed: false,
            fetch: fetch.then_some(FetchLimits { max_records: 100, max_bytes: 1 << 20, read_committed: false }),
            release: false,
            reset: ShareAutoOffsetReset::Earliest,
            limits: ShareLimits::default(),
            dead_letter: None,
        }
    }

    /// The dead-letter queue of the tests: keeps what it is given; `refuse` fails prepare.
    #[derive(Default)]
    struct KeptDeadLetters {
        refuse: Cell<bool>,
        batches: RefCell<Vec<(String, i32, Bytes)>>,
    }

    impl crate::group::share::dead_letter::DeadLetterWriter for KeptDeadLetters {
        fn prepare<'a>(&'a self, _group_id: &'a str, _queue: &'a DeadLetterQueue) -> futures::future::LocalBoxFuture<'a, Result<(), String>> {
            Box::pin(async move {
                if self.refuse.get() {
                    Err("not enabled".to_string())
                } else {
                    Ok(())
                }
            })
        }
        fn write<'a>(&'a self, queue: &'a DeadLetterQueue, source_partition: i32, batch: Bytes) -> futures::future::LocalBoxFuture<'a, Result<(), String>> {
            Box::pin(async move {
                self.batches.borrow_mut().push((queue.topic.clone(), source_partition, batch));
                Ok(())
            })
        }
    }

    fn no_dead_letters() -> SharedDeadLetterWriter {
        Rc::new(KeptDeadLetters::default())
    }

    fn accept(first: i64, last: i64) -> Vec<AcknowledgementBatch> {
        vec![AcknowledgementBatch { first_offset: first, last_offset: last, types: vec![AcknowledgeType::Accept] }]
    }

    fn offsets(r: &SharePartitionReply) -> Vec<i64> {
        r.acquired.iter().flat_map(|a| a.first_offset..=a.last_offset).collect()
    }

    /// An acknowledgement is answered only once the coordinator took it: refused, it is
    /// undone (the member still holds the records and can acknowledge them again) and
    /// answered with the coordinator's error; taken, a new leader (a new SharePartitions
    /// over the same coordinator) never delivers it again and delivers all the rest.
    #[test]
    fn an_acknowledgement_is_durable_before_it_is_answered_and_undone_if_refused() {
        run(|dir| async move {
            let data = open_flushed(&dir.join("data"), LogConfig::default(), FlushMode::Always).await;
            for i in 0..2 {
                data.append(batch(5, 1000 + i, None, Compression::None), -1).await.expect("append");
            }
            let state = open_flushed(&dir.join("state"), LogConfig::default(), FlushMode::Always).await;
            let coordinator = Rc::new(ShareStateCoordinator::new(500));
            let refuse = Rc::new(Cell::new(false));
            let shares = SharePartitions::new(persister(coordinator.clone(), state.clone(), refuse.clone()), no_dead_letters(), ShareLimits::default());

            let key = SharePartitionKey { group_id: "g".into(), topic_id: uuid::Uuid::from_bytes(data.topic_id), partition: data.index };
            let uninitialized = shares.run(&data, op("a", vec![], true), 0).await;
            assert!(matches!(uninitialized, Err(SharePartitionError::State(ErrorCode::UNKNOWN_SERVER_ERROR))), "never initialized: refused, as Kafka");
            // The group coordinator's part: initialize before assigning.
            (shares.persister)(key, ShareStateOpKind::Initialize { state_epoch: 1, start_offset: -1 }).await.expect("initialized");
            let got = shares.run(&data, op("a", vec![], true), 0).await.unwrap();
            assert_eq!(offsets(&got), (0..10).collect::<Vec<_>>(), "read, delivered from the log start");

            refuse.set(true);
            let refused = shares.run(&data, op("a", accept(0, 4), false), 1).await.unwrap();
            match refused.acknowledge_error {
                Some(AcknowledgeError::NotPersisted(code, _)) => assert_eq!(code, ErrorCode::COORDINATOR_NOT_AVAILABLE),
                other => panic!("a refused write must refuse the acknowledgement: {other:?}"),
            }
            refuse.set(false);
            let taken = shares.run(&data, op("a", accept(0, 4), false), 2).await.unwrap();
            assert_eq!(taken.acknowledge_error, None, "rolled back to ACQUIRED by a, so a can acknowledge them again");

            // A new leader: reads the state; 0..4 are done, 5..9 were delivered and not
            // acknowledged, so they come again (acquisitions are not persisted).
            let after = SharePartitions::new(persister(coordinator, state, refuse), no_dead_letters(), ShareLimits::default());
            let again = after.run(&data, op("b", vec![], true), 3).await.unwrap();
            assert_eq!(offsets(&again), (5..10).collect::<Vec<_>>());
        });
    }

    /// A fetch asking for far more bytes than its records need (a Java share consumer asks
    /// for 50 MiB and 500 records) reads in steps sized for the records still wanted, takes
    /// whole batches up to the first reaching max_records, and answers exactly those
    /// batches.
    #[test]
    fn an_acquisition_reads_in_steps_what_it_takes() {
        run(|dir| async move {
            let data = open_flushed(&dir.join("data"), LogConfig::default(), FlushMode::Always).await;
            // 20 batches of 10 records of 5 KB: the first read (256 KiB) holds 5 of them.
            let value = "v".repeat(5000);
            let recs: Vec<(Option<&str>, Option<&str>)> = (0..10).map(|_| (None, Some(value.as_str()))).collect();
            let one = crate::record::tests::kv_batch(0, &recs, Compression::None, None, 1000);
            for _ in 0..20 {
                data.append(one.clone(), -1).await.expect("append");
            }
            let state = open_flushed(&dir.join("state"), LogConfig::default(), FlushMode::Always).await;
            let coordinator = Rc::new(ShareStateCoordinator::new(500));
            let shares = SharePartitions::new(persister(coordinator, state, Rc::new(Cell::new(false))), no_dead_letters(), ShareLimits::default());
            let key = SharePartitionKey { group_id: "g".into(), topic_id: uuid::Uuid::from_bytes(data.topic_id), partition: data.index };
            (shares.persister)(key, ShareStateOpKind::Initialize { state_epoch: 1, start_offset: -1 }).await.expect("initialized");

            let mut fetch = op("a", vec![], true);
            fetch.fetch = Some(FetchLimits { max_records: 155, max_bytes: 1 << 30, read_committed: false });
            let got = shares.run(&data, fetch, 0).await.unwrap();
            let taken = offsets(&got);
            assert_eq!((taken.first(), taken.last(), taken.len()), (Some(&0), Some(&159), 160), "whole batches up to the first past max_records");
            // The slices hold exactly the batches holding acquired records, in order.
            let mut seen = Vec::new();
            for slice in &got.records {
                let mut at = 0;
                while at < slice.len() {
                    let h = parse_header(&slice[at..]).expect("a whole batch");
                    seen.push((h.base_offset, h.last_offset()));
                    at += h.total_len();
                }
                assert_eq!(at, slice.len());
            }
            assert_eq!(seen, (0..16).map(|b| (b * 10, b * 10 + 9)).collect::<Vec<_>>());
            assert_eq!(got.records.iter().map(|b| b.len()).sum::<usize>(), 16 * one.len());
            // The next member starts where a stopped.
            let next = offsets(&shares.run(&data, op("b", vec![], true), 1).await.unwrap());
            assert_eq!((next.first(), next.last()), (Some(&160), Some(&199)));
        });
    }

    /// A writer whose prepare never finishes: phase 2 never ends (a leader that died
    /// between the two phases).
    struct StuckDeadLetters;

    impl crate::group::share::dead_letter::DeadLetterWriter for StuckDeadLetters {
        fn prepare<'a>(&'a self, _group_id: &'a str, _queue: &'a DeadLetterQueue) -> futures::future::LocalBoxFuture<'a, Result<(), String>> {
            Box::pin(futures::future::pending())
        }
        fn write<'a>(&'a self, _queue: &'a DeadLetterQueue, _source_partition: i32, _batch: Bytes) -> futures::future::LocalBoxFuture<'a, Result<(), String>> {
            Box::pin(futures::future::pending())
        }
    }

    /// KIP-1191's two phases: a rejected record goes ARCHIVING (written before the
    /// acknowledgement is answered), its dead letter (with the original key and value)
    /// is written, then it is archived and written again. A leader that stopped between
    /// the phases leaves ARCHIVING in the state, and the next one writes the dead letter;
    /// a queue that cannot take them still lets the records be archived.
    #[test]
    fn rejected_records_reach_the_dead_letter_queue_then_are_archived_even_across_leaders() {
        run(|dir| async move {
            let data = open_flushed(&dir.join("data"), LogConfig::default(), FlushMode::Always).await;
            let recs: Vec<(Option<&str>, Option<&str>)> = (0..5).map(|_| (Some("k"), Some("v"))).collect();
            for i in 0..2 {
                data.append(crate::record::tests::kv_batch(0, &recs, Compression::Lz4, None, 1000 + i), -1).await.expect("append");
            }
            let state = open_flushed(&dir.join("state"), LogConfig::default(), FlushMode::Always).await;
            let coordinator = Rc::new(ShareStateCoordinator::new(500));
            let no_refusal = Rc::new(Cell::new(false));
            let key = SharePartitionKey { group_id: "g".into(), topic_id: uuid::Uuid::from_bytes(data.topic_id), partition: data.index };
            let with_queue = |mut o: SharePartitionOp| {
                o.limits.dead_letter_queue = true;
                o.dead_letter = Some(DeadLetterQueue { topic: "dlq.g".into(), copy_record: true });
                o
            };
            let reject = |first, last| vec![AcknowledgementBatch { first_offset: first, last_offset: last, types: vec![AcknowledgeType::Reject] }];

            // Leader 1 dies between the phases (its queue never answers).
            let first =
                SharePartitions::new(persister(coordinator.clone(), state.clone(), no_refusal.clone()), Rc::new(StuckDeadLetters), ShareLimits::default());
            (first.persister)(key.clone(), ShareStateOpKind::Initialize { state_epoch: 1, start_offset: -1 }).await.expect("initialized");
            assert_eq!(offsets(&first.run(&data, with_queue(op("a", vec![], true)), 0).await.unwrap()), (0..10).collect::<Vec<_>>());
            let answered = first.run(&data, with_queue(op("a", reject(0, 2), false)), 1).await.unwrap();
            assert_eq!(answered.acknowledge_error, None, "answered once ARCHIVING was written, not after the dead letters");

            // Leader 2 reads ARCHIVING 0-2 and writes their dead letters.
            let kept = Rc::new(KeptDeadLetters::default());
            let second = SharePartitions::new(persister(coordinator.clone(), state.clone(), no_refusal.clone()), kept.clone(), ShareLimits::default());
            let again = second.run(&data, with_queue(op("b", vec![], true)), 2).await.unwrap();
            assert_eq!(offsets(&again), (3..10).collect::<Vec<_>>(), "ARCHIVING records are not delivered again");
            for _ in 0..100 {
                if !kept.batches.borrow().is_empty() {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
            let written = kept.batches.borrow().clone();
            assert_eq!(written.len(), 1, "one write for the range");
            let (topic, source_partition, mut batch) = written[0].clone();
            assert_eq!((topic.as_str(), source_partition), ("dlq.g", data.index));
            let decoded = kafka_protocol::records::RecordBatchDecoder::decode(&mut batch).unwrap();
            let offsets_told: Vec<String> = decoded
                .records
                .iter()
                .map(|r| {
                    String::from_utf8(r.headers.iter().find(|(k, _)| k.as_str() == "__dlq.errors.offset").and_then(|(_, v)| v.clone()).unwrap().to_vec())
                        .unwrap()
                })
                .collect();
            assert_eq!(offsets_told, ["0", "1", "2"]);
            assert!(decoded.records.iter().all(|r| r.key.as_deref() == Some(&b"k"[..]) && r.value.as_deref() == Some(&b"v"[..])), "the originals are copied");

            // b accepts the rest; a queue that refuses (not enabled) still lets 3-4 be archived.
            kept.refuse.set(true);
            let mut acks = reject(3, 4);
            acks.push(AcknowledgementBatch { first_offset: 5, last_offset: 9, types: vec![AcknowledgeType::Accept] });
            assert_eq!(second.run(&data, with_queue(op("b", acks, false)), 3).await.unwrap().acknowledge_error, None);
            for _ in 0..100 {
                if second.run(&data, with_queue(op("b", vec![], false)), 4).await.is_ok()
                    && state_of(&coordinator, &state, &key, data.leader_epoch()).await.0 == 10
                {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert_eq!(state_of(&coordinator, &state, &key, data.leader_epoch()).await, (10, vec![]), "everything archived or accepted, and written");
            assert_eq!(kept.batches.borrow().len(), 1, "nothing written to a refusing queue");
        });
    }

    /// The share coordinator's (start offset, batches) of `key`.
    async fn state_of(coordinator: &ShareStateCoordinator, state: &Rc<Partition>, key: &SharePartitionKey, leader_epoch: i32) -> (i64, Vec<StateBatch>) {
        let op = ShareStateOp { key: key.clone(), exists: true, kind: ShareStateOpKind::Read { leader_epoch } };
        match coordinator.execute(state, op, 0).await.expect("read") {
            ShareStateAnswer::Read(r) => (r.start_offset, r.batches.iter().filter_map(from_persisted).filter(|b| b.last_offset >= r.start_offset).collect()),
            other => panic!("unexpected answer {other:?}"),
        }
    }
}
