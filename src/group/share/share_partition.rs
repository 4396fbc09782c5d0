//! One share-partition (KIP-932): a share group's view of one topic-partition, kept by
//! the partition's leader on the partition's shard (no cross-core lock on ShareFetch).
//!
//! Every offset from the share-partition start offset (SPSO, `start_offset`) up to
//! `end_offset` (the first offset never acquired) is *in flight* and in exactly one
//! range of `ranges`, with a state: AVAILABLE (to be delivered, again or for the first
//! time after a release), ACQUIRED (delivered to one member, locked until its deadline),
//! ARCHIVING (rejected or delivered too often while the group has a dead-letter queue:
//! on its way there, KIP-1191), ACKNOWLEDGED or ARCHIVED (done: accepted, or rejected /
//! delivered too often / no record there / dead-lettered). Offsets below the SPSO are done; offsets from `end_offset` on have not
//! been delivered. The SPSO moves past done ranges as soon as they lead the window.
//!
//! Kafka's rules, as its SharePartition applies them: an acquisition takes whole fetched
//! batches (the record limit may be exceeded to keep batches whole) and counts a
//! delivery; a member acknowledges only what it holds (else INVALID_RECORD_STATE, and
//! none of the partition's acknowledgements apply); RELEASE and an expired lock make a
//! record AVAILABLE again unless its delivery count reached the limit, which archives it;
//! REJECT and GAP archive; RENEW extends the lock. The window never holds more than
//! `max_in_flight_records` offsets (`group.share.partition.max.record.locks`), so the
//! state of a partition is bounded whatever its members do.
//!
//! Time is passed in (milliseconds), never read here: the state is deterministic and the
//! tests below drive lock expiry by hand.
use std::collections::BTreeMap;
use std::rc::Rc;

/// A record's state; the numbers are Kafka's (persisted in `__share_group_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    /// KIP-1191: to be written to the group's dead-letter queue, then ARCHIVED. Not done
    /// (the SPSO waits for it), never delivered again.
    Archiving = 3,
    Archived = 4,
}

impl RecordState {
    fn is_done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Acknowledgement types as ShareFetch / ShareAcknowledge carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcknowledgeType {
    /// The offset holds no record (compacted away, a control record): archived.
    Gap = 0,
    Accept = 1,
    Release = 2,
    Reject = 3,
    /// KIP-1222: keep the lock, restarted from now (only in a request marked IsRenewAck).
    Renew = 4,
}

impl AcknowledgeType {
    pub fn from_wire(v: i8) -> Option<AcknowledgeType> {
        Some(match v {
            0 => AcknowledgeType::Gap,
            1 => AcknowledgeType::Accept,
            2 => AcknowledgeType::Release,
            3 => AcknowledgeType::Reject,
            4 => AcknowledgeType::Renew,
            _ => return None,
        })
    }
}

/// The group's limits, from its configs (`share.*` group configs over `group.share.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareLimits {
    /// `group.share.partition.max.record.locks` (Kafka: 2000, at most 4000).
    pub max_in_flight_records: i64,
    /// `group.share.delivery.count.limit` (Kafka: 5).
    pub delivery_count_limit: u16,
    /// `group.share.record.lock.duration.ms` (Kafka: 30000).
    pub lock_duration_ms: i64,
    /// The group has a dead-letter queue (share.version 2 and its
    /// `errors.deadletterqueue.topic.name`): rejected records and records delivered
    /// `delivery_count_limit` times go ARCHIVING instead of ARCHIVED (KIP-1191).
    pub dead_letter_queue: bool,
}

impl ShareLimits {
    /// Where a record that is done without being accepted goes.
    fn archived(&self) -> RecordState {
        if self.dead_letter_queue {
            RecordState::Archiving
        } else {
            RecordState::Archived
        }
    }
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits { max_in_flight_records: 2000, delivery_count_limit: 5, lock_duration_ms: 30_000, dead_letter_queue: false }
    }
}

/// Offsets on their way to the dead-letter queue (ARCHIVING), with their delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchivingRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: u16,
    /// A member rejected them (this leader saw it): Kafka's live path tells "rejected by
    /// client" even on the last allowed delivery; a loaded range only has its count.
    pub rejected: bool,
}

/// A member's id, shared by the ranges it holds.
pub type MemberId = Rc<str>;

#[derive(Clone, Debug, PartialEq, Eq)]
struct InFlight {
    last: i64,
    state: RecordState,
    delivery_count: u16,
    /// The member holding the records (ACQUIRED only).
    owner: Option<MemberId>,
    /// When the lock ends (ACQUIRED only).
    lock_deadline_ms: i64,
    /// ARCHIVING because a member rejected them (not persisted: a new leader infers the
    /// cause from the delivery count, as Kafka's resume path does).
    rejected: bool,
}

/// Offsets handed to a member by one acquisition (ShareFetch's AcquiredRecords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquiredRecords {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: u16,
}

/// One acknowledgement batch: one type for the whole range, or one per offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcknowledgementBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub types: Vec<AcknowledgeType>,
}

/// Why acknowledgements were refused (none of the partition's then apply).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcknowledgeError {
    /// Kafka: INVALID_REQUEST.
    #[error("{0}")]
    InvalidBatch(String),
    /// Kafka: INVALID_RECORD_STATE.
    #[error("{0}")]
    InvalidRecordState(String),
    /// The share coordinator did not take the write, so the acknowledgements were rolled
    /// back: the code to answer (`state_persister::partition_error`).
    #[error("{1}")]
    NotPersisted(crate::protocol::ErrorCode, String),
}

/// A range of the persisted state (`__share_group_state`'s StateBatches): never ACQUIRED
/// (a lock does not outlive its leader: acquired records are AVAILABLE again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: u16,
}

#[derive(Clone, Debug)]
pub struct SharePartition {
    start_offset: i64,
    end_offset: i64,
    /// first offset → range; cover `start_offset..end_offset` exactly, without overlap.
    ranges: BTreeMap<i64, InFlight>,
    limits: ShareLimits,
}

impl SharePartition {
    /// A share-partition whose first record to deliver is `start_offset` (from
    /// `share.auto.offset.reset`, or the persisted state).
    pub fn new(start_offset: i64, limits: ShareLimits) -> SharePartition {
        SharePartition { start_offset, end_offset: start_offset, ranges: BTreeMap::new(), limits }
    }

    /// Rebuilt from its persisted state: `batches` in offset order, at or above
    /// `start_offset`; offsets between them (and past the last) were not delivered yet.
    pub fn from_state(start_offset: i64, batches: &[StateBatch], limits: ShareLimits) -> SharePartition {
        let mut sp = SharePartition::new(start_offset, limits);
        for b in batches {
            if b.last_offset < sp.end_offset || b.first_offset > b.last_offset {
                continue;
            }
            let first = b.first_offset.max(sp.end_offset);
            if first > sp.end_offset {
                // Not delivered yet: AVAILABLE, as offsets past the window would be.
                sp.ranges.insert(
                    sp.end_offset,
                    InFlight { last: first - 1, state: RecordState::Available, delivery_count: 0, owner: None, lock_deadline_ms: 0, rejected: false },
                );
            }
            // A record acquired when the state was written is stored as AVAILABLE with its
            // deliveries so far (`state_batches`): its lock went with the old leader, so it
            // is released as an expired lock is, archived once at the delivery count limit
            // (else a new leader would deliver it once more than share.delivery.count.limit;
            // a released record at the limit was archived already).
            let state = match b.state {
                RecordState::Acquired | RecordState::Available if b.delivery_count >= limits.delivery_count_limit => limits.archived(),
                RecordState::Acquired => RecordState::Available,
                s => s,
            };
            sp.ranges
                .insert(first, InFlight { last: b.last_offset, state, delivery_count: b.delivery_count, owner: None, lock_deadline_ms: 0, rejected: false });
            sp.end_offset = b.last_offset + 1;
        }
        sp.advance_start();
        sp.check();
        sp
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The first offset never delivered.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// The group's limits changed (its share.* configs): later acquisitions and
    /// deliveries follow the new ones; records already acquired keep their locks.
    pub fn set_limits(&mut self, limits: ShareLimits) {
        self.limits = limits;
    }

    /// Offsets in flight (what `max_in_flight_records` bounds).
    pub fn in_flight_records(&self) -> i64 {
        self.end_offset - self.start_offset
    }

    /// Where the next fetch from the log starts: the first AVAILABLE offset in flight,
    /// else the end of the window.
    pub fn next_fetch_offset(&self) -> i64 {
        self.ranges.iter().find(|(_, r)| r.state == RecordState::Available).map(|(&f, _)| f).unwrap_or(self.end_offset)
    }

    /// Whether an acquisition could hand out anything: an AVAILABLE record in flight, or
    /// room in the window for new ones.
    pub fn can_acquire(&self) -> bool {
        self.in_flight_records() < self.limits.max_in_flight_records || self.ranges.values().any(|r| r.state == RecordState::Available)
    }

    /// Acquires for `member` what the log returned from `next_fetch_offset()`: `batches`
    /// are the `(base offset, last offset)` of the fetched record batches in order. Whole
    /// batches are taken until `max_records` is reached (the last one may pass it, as
    /// Kafka's batch-optimized mode does); in flight, only AVAILABLE records are taken;
    /// new records only while the window has room.
    pub fn acquire(&mut self, member: &MemberId, batches: &[(i64, i64)], max_records: i64, now_ms: i64) -> Vec<AcquiredRecords> {
        let mut out: Vec<AcquiredRecords> = Vec::new();
        let mut taken = 0i64;
        let deadline = now_ms.saturating_add(self.limits.lock_duration_ms);
        for &(base, last) in batches {
            if taken >= max_records.max(1) {
                break;
            }
            let first = base.max(self.start_offset);
            if last < first {
                continue;
            }
            // The part already in flight: its AVAILABLE records.
            if first < self.end_offset {
                let upto = last.min(self.end_offset - 1);
                self.split_at(first);
                self.split_at(upto + 1);
                for (&f, r) in self.ranges.range_mut(first..=upto) {
                    if r.state != RecordState::Available {
                        continue;
                    }
                    r.state = RecordState::Acquired;
                    r.delivery_count = r.delivery_count.saturating_add(1);
                    r.owner = Some(member.clone());
                    r.lock_deadline_ms = deadline;
                    taken += r.last - f + 1;
                    push_merged(&mut out, AcquiredRecords { first_offset: f, last_offset: r.last, delivery_count: r.delivery_count });
                }
            }
            // The new part, while the window has room.
            if last >= self.end_offset {
                let room = self.limits.max_in_flight_records - self.in_flight_records();
                if room <= 0 {
                    break;
                }
                if first > self.end_offset {
                    // No records between (compacted, aborted, deleted): nothing to deliver.
                    self.ranges.insert(
                        self.end_offset,
                        InFlight { last: first - 1, state: RecordState::Archived, delivery_count: 0, owner: None, lock_deadline_ms: 0, rejected: false },
                    );
                    self.end_offset = first;
                }
                let new_first = self.end_offset;
                self.ranges.insert(
                    new_first,
                    InFlight {
                        last,
                        state: RecordState::Acquired,
                        delivery_count: 1,
                        owner: Some(member.clone()),
                        lock_deadline_ms: deadline,
                        rejected: false,
                    },
                );
                self.end_offset = last + 1;
                taken += last - new_first + 1;
                push_merged(&mut out, AcquiredRecords { first_offset: new_first, last_offset: last, delivery_count: 1 });
            }
        }
        self.advance_start();
        self.check();
        out
    }

    /// Applies `member`'s acknowledgements, all or none: every offset named must be in
    /// flight (else INVALID_REQUEST, as Kafka) and ACQUIRED by `member` (else
    /// INVALID_RECORD_STATE); batches must run forwards without overlapping.
    /// RENEW is taken only when `renew_allowed` (the request's IsRenewAck).
    pub fn acknowledge(&mut self, member: &str, batches: &[AcknowledgementBatch], renew_allowed: bool, now_ms: i64) -> Result<(), AcknowledgeError> {
        let mut previous_last: Option<i64> = None;
        for b in batches {
            if b.first_offset > b.last_offset {
                return Err(AcknowledgeError::InvalidBatch(format!(
                    "Acknowledgement batch first offset {} is greater than its last offset {}",
                    b.first_offset, b.last_offset
                )));
            }
            let len = b.last_offset - b.first_offset + 1;
            if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i64 != len) {
                return Err(AcknowledgeError::InvalidBatch(format!(
                    "Acknowledgement batch {}-{} has {} acknowledge types; 1 or {len} expected",
                    b.first_offset,
                    b.last_offset,
                    b.types.len()
                )));
            }
            if previous_last.is_some_and(|p| b.first_offset <= p) {
                return Err(AcknowledgeError::InvalidBatch(format!(
                    "Acknowledgement batch {}-{} overlaps or precedes the batch before it",
                    b.first_offset, b.last_offset
                )));
            }
            if !renew_allowed && b.types.contains(&AcknowledgeType::Renew) {
                return Err(AcknowledgeError::InvalidBatch("Renew acknowledgements need IsRenewAck".into()));
            }
            previous_last = Some(b.last_offset);
            if b.first_offset < self.start_offset || b.last_offset >= self.end_offset {
                // Kafka 4.4 answers INVALID_REQUEST for offsets it has no record of in flight
                // (INVALID_RECORD_STATE is for in-flight records in the wrong state).
                return Err(AcknowledgeError::InvalidBatch(format!(
                    "Batch record not found: offsets {}-{} are not all in flight ({}-{})",
                    b.first_offset,
                    b.last_offset,
                    self.start_offset,
                    self.end_offset - 1
                )));
            }
            // Every range the batch touches is held by this member.
            let head = self.ranges.range(..=b.first_offset).next_back().map(|(&f, _)| f).unwrap_or(b.first_offset);
            for (f, r) in self.ranges.range(head..=b.last_offset) {
                if r.last < b.first_offset {
                    continue;
                }
                if r.state != RecordState::Acquired || r.owner.as_deref() != Some(member) {
                    return Err(AcknowledgeError::InvalidRecordState(format!(
                        "Offsets {}-{} are {:?}, not acquired by this member",
                        f.max(&b.first_offset),
                        r.last.min(b.last_offset),
                        r.state
                    )));
                }
            }
        }
        for b in batches {
            if b.types.len() == 1 {
                self.set_range(b.first_offset, b.last_offset, b.types[0], now_ms);
                continue;
            }
            // One type per offset: runs of equal types are applied together.
            let mut run_start = 0usize;
            for i in 1..=b.types.len() {
                if i == b.types.len() || b.types[i] != b.types[run_start] {
                    let first = b.first_offset + run_start as i64;
                    self.set_range(first, b.first_offset + i as i64 - 1, b.types[run_start], now_ms);
                    run_start = i;
                }
            }
        }
        self.advance_start();
        self.check();
        Ok(())
    }

    /// `member`'s just-acquired records in `first..=last` are archived instead of delivered
    /// (a read_committed group's aborted transaction, `aborted_batches.rs`), and `acquired`
    /// (what the acquisition handed out) loses them.
    pub fn archive_acquired(&mut self, member: &str, first: i64, last: i64, acquired: &mut Vec<AcquiredRecords>) {
        let Some((first, last)) = self.isolate(first, last) else { return };
        for (_, r) in self.ranges.range_mut(first..=last) {
            if r.state == RecordState::Acquired && r.owner.as_deref() == Some(member) {
                r.state = RecordState::Archived;
                r.owner = None;
                r.lock_deadline_ms = 0;
            }
        }
        let mut kept = Vec::with_capacity(acquired.len() + 1);
        for a in acquired.drain(..) {
            if a.last_offset < first || a.first_offset > last {
                kept.push(a);
                continue;
            }
            if a.first_offset < first {
                kept.push(AcquiredRecords { last_offset: first - 1, ..a });
            }
            if a.last_offset > last {
                kept.push(AcquiredRecords { first_offset: last + 1, ..a });
            }
        }
        *acquired = kept;
        self.advance_start();
        self.check();
    }

    /// Locks that ended by `now_ms` are released (AVAILABLE, or ARCHIVED at the delivery
    /// limit); the number of offsets released.
    pub fn expire_locks(&mut self, now_ms: i64) -> i64 {
        self.release_where(|r| r.lock_deadline_ms <= now_ms)
    }

    /// Everything `member` holds is released (it left the group or closed its session).
    pub fn release_member(&mut self, member: &str) -> i64 {
        self.release_where(|r| r.owner.as_deref() == Some(member))
    }

    /// Releases the acquired ranges `which` picks; the number of offsets released.
    fn release_where(&mut self, which: impl Fn(&InFlight) -> bool) -> i64 {
        let mut released = 0;
        let limits = self.limits;
        for (&f, r) in self.ranges.iter_mut() {
            if r.state == RecordState::Acquired && which(r) {
                release(r, &limits);
                released += r.last - f + 1;
            }
        }
        if released > 0 {
            self.advance_start();
            self.check();
        }
        released
    }

    /// The earliest lock deadline, if any record is acquired (when `expire_locks` is next due).
    pub fn next_lock_deadline_ms(&self) -> Option<i64> {
        self.ranges.values().filter(|r| r.state == RecordState::Acquired).map(|r| r.lock_deadline_ms).min()
    }

    /// The log no longer has offsets below `offset` (retention, DeleteRecords), or the
    /// group's offsets were reset there: everything below is done, whatever its state.
    pub fn move_start_to(&mut self, offset: i64) {
        if offset <= self.start_offset {
            return;
        }
        if offset >= self.end_offset {
            self.ranges.clear();
            self.start_offset = offset;
            self.end_offset = offset;
        } else {
            self.split_at(offset);
            self.ranges = self.ranges.split_off(&offset);
            self.start_offset = offset;
            self.advance_start();
        }
        self.check();
    }

    /// Whether any offset is on its way to the dead-letter queue.
    pub fn has_archiving(&self) -> bool {
        self.ranges.values().any(|r| r.state == RecordState::Archiving)
    }

    /// The ranges on their way to the dead-letter queue, in offset order.
    pub fn archiving(&self) -> Vec<ArchivingRange> {
        self.ranges
            .iter()
            .filter(|(_, r)| r.state == RecordState::Archiving)
            .map(|(&f, r)| ArchivingRange { first_offset: f, last_offset: r.last, delivery_count: r.delivery_count, rejected: r.rejected })
            .collect()
    }

    /// `first..=last` reached the dead-letter queue (or was given up on): its ARCHIVING
    /// offsets are ARCHIVED. Offsets in another state, or no longer in flight, are left.
    pub fn finish_archiving(&mut self, first: i64, last: i64) {
        let Some((first, last)) = self.isolate(first, last) else { return };
        for (_, r) in self.ranges.range_mut(first..=last) {
            if r.state == RecordState::Archiving {
                r.state = RecordState::Archived;
            }
        }
        self.advance_start();
        self.check();
    }

    /// The state to persist: the SPSO and every in-flight range that is not plain
    /// AVAILABLE-never-delivered (acquired ones as AVAILABLE with their delivery count).
    pub fn state_batches(&self) -> (i64, Vec<StateBatch>) {
        let batches = self
            .ranges
            .iter()
            .map(|(&f, r)| StateBatch {
                first_offset: f,
                last_offset: r.last,
                state: if r.state == RecordState::Acquired { RecordState::Available } else { r.state },
                delivery_count: r.delivery_count,
            })
            .collect();
        (self.start_offset, batches)
    }

    fn set_range(&mut self, first: i64, last: i64, ack: AcknowledgeType, now_ms: i64) {
        self.split_at(first);
        self.split_at(last + 1);
        let limits = self.limits;
        let deadline = now_ms.saturating_add(self.limits.lock_duration_ms);
        for (_, r) in self.ranges.range_mut(first..=last) {
            debug_assert_eq!(r.state, RecordState::Acquired, "checked before any change");
            match ack {
                AcknowledgeType::Accept => {
                    r.state = RecordState::Acknowledged;
                    r.owner = None;
                }
                AcknowledgeType::Release => release(r, &limits),
                AcknowledgeType::Reject => {
                    r.state = limits.archived();
                    r.rejected = r.state == RecordState::Archiving;
                    r.owner = None;
                }
                // No record there: nothing to dead-letter.
                AcknowledgeType::Gap => {
                    r.state = RecordState::Archived;
                    r.owner = None;
                }
                AcknowledgeType::Renew => r.lock_deadline_ms = deadline,
            }
        }
    }

    /// `first..=last` clipped to the window and made whole ranges; None if outside it.
    fn isolate(&mut self, first: i64, last: i64) -> Option<(i64, i64)> {
        let (first, last) = (first.max(self.start_offset), last.min(self.end_offset - 1));
        if first > last {
            return None;
        }
        self.split_at(first);
        self.split_at(last + 1);
        Some((first, last))
    }

    /// Makes `offset` the first offset of a range if it falls inside one.
    fn split_at(&mut self, offset: i64) {
        let Some((&f, r)) = self.ranges.range(..offset).next_back() else { return };
        if r.last < offset {
            return;
        }
        let mut tail = r.clone();
        self.ranges.get_mut(&f).expect("found above").last = offset - 1;
        tail.last = tail.last.max(offset);
        self.ranges.insert(offset, tail);
    }

    /// Drops the done ranges that lead the window; the SPSO follows.
    fn advance_start(&mut self) {
        while let Some(entry) = self.ranges.first_entry() {
            if !entry.get().state.is_done() {
                break;
            }
            let (_, r) = entry.remove_entry();
            self.start_offset = r.last + 1;
        }
        if self.ranges.is_empty() {
            self.start_offset = self.start_offset.max(self.end_offset);
            self.end_offset = self.start_offset;
        }
    }

    /// The window's invariants (debug builds): ranges tile `start_offset..end_offset`,
    /// only ACQUIRED ranges have owners, the window respects its bound unless it was
    /// rebuilt larger from persisted state.
    fn check(&self) {
        if cfg!(debug_assertions) {
            let mut next = self.start_offset;
            for (&f, r) in &self.ranges {
                assert_eq!(f, next, "ranges must tile the window: {self:?}");
                assert!(r.last >= f, "empty range at {f}");
                assert_eq!(r.owner.is_some(), r.state == RecordState::Acquired, "owner iff acquired at {f}");
                next = r.last + 1;
            }
            assert_eq!(next, self.end_offset, "ranges must end at the end offset: {self:?}");
            assert!(self.ranges.first_key_value().is_none_or(|(_, r)| !r.state.is_done()), "a done range leads the window");
        }
    }
}

/// An acquired range gives up its lock: AVAILABLE, or ARCHIVED (ARCHIVING with a
/// dead-letter queue) once delivered `delivery_count_limit` times.
fn release(r: &mut InFlight, limits: &ShareLimits) {
    r.state = if r.delivery_count >= limits.delivery_count_limit { limits.archived() } else { RecordState::Available };
    r.owner = None;
    r.lock_deadline_ms = 0;
}

/// Appends `a`, merged into the previous one when it continues it with the same count.
fn push_merged(out: &mut Vec<AcquiredRecords>, a: AcquiredRecords) {
    match out.last_mut() {
        Some(p) if p.last_offset + 1 == a.first_offset && p.delivery_count == a.delivery_count => p.last_offset = a.last_offset,
        _ => out.push(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AcknowledgeType::*;

    fn m(id: &str) -> MemberId {
        Rc::from(id)
    }

    fn limits(max: i64, deliveries: u16) -> ShareLimits {
        ShareLimits { max_in_flight_records: max, delivery_count_limit: deliveries, lock_duration_ms: 1000, dead_letter_queue: false }
    }

    fn ack(first: i64, last: i64, types: &[AcknowledgeType]) -> AcknowledgementBatch {
        AcknowledgementBatch { first_offset: first, last_offset: last, types: types.to_vec() }
    }

    fn got(first: i64, last: i64, delivery_count: u16) -> AcquiredRecords {
        AcquiredRecords { first_offset: first, last_offset: last, delivery_count }
    }

    #[test]
    fn accepted_records_are_never_delivered_again() {
        let (a, b) = (m("a"), m("b"));
        let mut sp = SharePartition::new(0, limits(100, 5));
        assert_eq!(sp.acquire(&a, &[(0, 9)], 500, 0), vec![got(0, 9, 1)]);
        // Another member fetching the same batches gets nothing: all acquired.
        assert_eq!(sp.next_fetch_offset(), 10);
        assert_eq!(sp.acquire(&b, &[(0, 9)], 500, 0), vec![]);
        sp.acknowledge("a", &[ack(0, 9, &[Accept])], false, 10).unwrap();
        assert_eq!((sp.start_offset(), sp.end_offset(), sp.in_flight_records()), (10, 10, 0));
        assert_eq!(sp.acquire(&b, &[(0, 9), (10, 14)], 500, 20), vec![got(10, 14, 1)], "only new records");
        assert!(sp.acknowledge("a", &[ack(0, 9, &[Accept])], false, 30).is_err(), "done records cannot be acknowledged again");
    }

    #[test]
    fn released_and_expired_records_are_redelivered_then_archived_at_the_limit() {
        let a = m("a");
        let mut sp = SharePartition::new(0, limits(100, 3));
        sp.acquire(&a, &[(0, 4)], 500, 0);
        // Per-offset types: 0 and 1 accepted, 2 released, 3-4 rejected.
        sp.acknowledge("a", &[ack(0, 4, &[Accept, Accept, Release, Reject, Reject])], false, 1).unwrap();
        assert_eq!((sp.start_offset(), sp.next_fetch_offset()), (2, 2));
        assert_eq!(sp.acquire(&a, &[(0, 4)], 500, 2), vec![got(2, 2, 2)]);
        // The lock expires: available again; a third delivery, then its lock expires too.
        assert_eq!(sp.expire_locks(500), 0, "not yet");
        assert_eq!(sp.next_lock_deadline_ms(), Some(1002));
        assert_eq!(sp.expire_locks(1002), 1);
        assert_eq!(sp.acquire(&a, &[(0, 4)], 500, 1003), vec![got(2, 2, 3)]);
        assert_eq!(sp.expire_locks(5000), 1);
        // Delivered 3 times = the limit: archived, never delivered again.
        assert_eq!((sp.start_offset(), sp.in_flight_records()), (5, 0));
        assert_eq!(sp.acquire(&a, &[(0, 4)], 500, 6000), vec![]);
    }

    #[test]
    fn several_members_share_a_partition_and_a_leaving_member_releases_its_records() {
        let (a, b) = (m("a"), m("b"));
        let mut sp = SharePartition::new(0, limits(100, 5));
        assert_eq!(sp.acquire(&a, &[(0, 4)], 1, 0), vec![got(0, 4, 1)], "a whole batch, past the record limit");
        assert_eq!(sp.acquire(&b, &[(5, 9), (10, 14)], 5, 0), vec![got(5, 9, 1)], "stops at the record limit");
        assert!(matches!(sp.acknowledge("b", &[ack(0, 4, &[Accept])], false, 1), Err(AcknowledgeError::InvalidRecordState(_))), "b does not hold 0-4");
        assert!(matches!(sp.acknowledge("a", &[ack(3, 6, &[Accept])], false, 1), Err(AcknowledgeError::InvalidRecordState(_))), "a holds 3-4, not 5-6");
        assert_eq!(sp.release_member("a"), 5);
        assert_eq!(sp.next_fetch_offset(), 0);
        assert_eq!(sp.acquire(&b, &[(0, 4), (5, 9), (10, 14)], 100, 2), vec![got(0, 4, 2), got(10, 14, 1)]);
        sp.acknowledge("b", &[ack(0, 4, &[Accept]), ack(5, 14, &[Accept])], false, 3).unwrap();
        assert_eq!(sp.start_offset(), 15);
    }

    #[test]
    fn acknowledgements_apply_all_or_none() {
        let a = m("a");
        let mut sp = SharePartition::new(0, limits(100, 5));
        sp.acquire(&a, &[(0, 9)], 500, 0);
        let before = sp.state_batches();
        // The second batch names an offset never delivered: nothing applies.
        assert!(matches!(sp.acknowledge("a", &[ack(0, 4, &[Accept]), ack(8, 12, &[Accept])], false, 1), Err(AcknowledgeError::InvalidBatch(_))));
        assert_eq!(sp.state_batches(), before);
        // Malformed batches are refused as bad requests.
        let bad = [
            vec![ack(5, 4, &[Accept])],
            vec![ack(0, 3, &[Accept, Accept])],
            vec![ack(0, 3, &[])],
            vec![ack(4, 6, &[Accept]), ack(2, 3, &[Accept])],
            vec![ack(0, 3, &[Accept]), ack(3, 5, &[Accept])],
            vec![ack(0, 3, &[Renew])],
        ];
        for batches in bad {
            assert!(matches!(sp.acknowledge("a", &batches, false, 1), Err(AcknowledgeError::InvalidBatch(_))), "{batches:?}");
        }
        assert!(AcknowledgeType::from_wire(5).is_none() && AcknowledgeType::from_wire(-1).is_none());
        assert_eq!(sp.state_batches(), before);
    }

    #[test]
    fn archived_acquisitions_are_neither_delivered_nor_delivered_again() {
        let mut sp = SharePartition::new(0, limits(100, 5));
        let mut held = sp.acquire(&m("a"), &[(0, 2), (3, 5), (6, 6)], 100, 0);
        assert_eq!(held, vec![got(0, 6, 1)]);
        // 3-5 was an aborted transaction's batch.
        sp.archive_acquired("a", 3, 5, &mut held);
        assert_eq!(held, vec![got(0, 2, 1), got(6, 6, 1)]);
        // Another member's records are not touched.
        let mut none = Vec::new();
        sp.archive_acquired("b", 0, 2, &mut none);
        sp.acknowledge("a", &[ack(0, 2, &[AcknowledgeType::Accept])], false, 1).unwrap();
        // Done up to 5: the start moves past the archived batch; 6 is still held by a.
        assert_eq!(sp.start_offset(), 6);
        assert!(sp.acknowledge("a", &[ack(3, 3, &[AcknowledgeType::Accept])], false, 1).is_err(), "archived records cannot be acknowledged");
        // Released by a, only 6 comes back.
        sp.release_member("a");
        assert_eq!(sp.acquire(&m("b"), &[(3, 5), (6, 6)], 100, 2), vec![got(6, 6, 2)]);
    }

    #[test]
    fn renew_extends_the_lock() {
        let a = m("a");
        let mut sp = SharePartition::new(0, limits(100, 5));
        sp.acquire(&a, &[(0, 1)], 500, 0);
        sp.acknowledge("a", &[ack(0, 1, &[Renew, Accept])], true, 900).unwrap();
        assert_eq!(sp.expire_locks(1000), 0, "renewed at 900: locked until 1900");
        assert_eq!(sp.expire_locks(1900), 1);
        assert_eq!(sp.acquire(&a, &[(0, 1)], 500, 2000), vec![got(0, 0, 2)]);
    }

    #[test]
    fn the_window_is_bounded() {
        let a = m("a");
        let mut sp = SharePartition::new(0, limits(10, 5));
        assert_eq!(sp.acquire(&a, &[(0, 5), (6, 11), (12, 20)], 1000, 0), vec![got(0, 11, 1)], "the batch that fills the window is taken whole");
        assert!(!sp.can_acquire());
        assert_eq!(sp.acquire(&a, &[(12, 20)], 1000, 0), vec![]);
        sp.acknowledge("a", &[ack(0, 5, &[Accept])], false, 1).unwrap();
        assert!(sp.can_acquire());
        assert_eq!(sp.acquire(&a, &[(12, 20)], 1000, 2), vec![got(12, 20, 1)]);
        assert_eq!(sp.in_flight_records(), 15, "at most one batch past the bound");
    }

    #[test]
    fn offsets_without_records_are_skipped_and_the_start_follows_the_log() {
        let a = m("a");
        let mut sp = SharePartition::new(0, limits(100, 5));
        // The log has 0-2 then 7-9 (3-6 compacted away).
        assert_eq!(sp.acquire(&a, &[(0, 2), (7, 9)], 100, 0), vec![got(0, 2, 1), got(7, 9, 1)]);
        sp.acknowledge("a", &[ack(0, 2, &[Accept])], false, 1).unwrap();
        assert_eq!(sp.start_offset(), 7, "the gap is done: nothing to deliver there");
        // A fetch returning a batch that starts before the window takes only its part in it.
        sp.acknowledge("a", &[ack(7, 9, &[Release])], false, 2).unwrap();
        assert_eq!(sp.acquire(&a, &[(5, 12)], 100, 3), vec![got(7, 9, 2), got(10, 12, 1)]);
        // Retention deletes below 11: everything before is done.
        sp.move_start_to(11);
        assert_eq!((sp.start_offset(), sp.end_offset()), (11, 13));
        assert!(sp.acknowledge("a", &[ack(9, 10, &[Accept])], false, 4).is_err());
        sp.move_start_to(50);
        assert_eq!((sp.start_offset(), sp.end_offset(), sp.next_fetch_offset()), (50, 50, 50));
    }

    #[test]
    fn the_persisted_state_rebuilds_the_window_with_locks_released() {
        let (a, b) = (m("a"), m("b"));
        let mut sp = SharePartition::new(100, limits(100, 5));
        sp.acquire(&a, &[(100, 104), (105, 109), (110, 114)], 100, 0);
        sp.acknowledge("a", &[ack(100, 102, &[Accept]), ack(105, 109, &[Reject])], false, 1).unwrap();
        let (start, batches) = sp.state_batches();
        assert_eq!(start, 103);
        let mut back = SharePartition::from_state(start, &batches, limits(100, 5));
        assert_eq!((back.start_offset(), back.end_offset(), back.next_fetch_offset()), (103, 115, 103));
        // What a held is delivered again (its second delivery); what was rejected is not.
        assert_eq!(back.acquire(&b, &[(100, 104), (105, 109), (110, 114)], 100, 5), vec![got(103, 104, 2), got(110, 114, 2)]);
        assert_eq!(SharePartition::from_state(7, &[], limits(100, 5)).next_fetch_offset(), 7);
    }

    #[test]
    fn a_record_acquired_at_the_delivery_limit_is_archived_by_a_new_leader() {
        let (a, b) = (m("a"), m("b"));
        let mut sp = SharePartition::new(0, limits(100, 2));
        // 0-1 delivered twice (the limit), 2-3 once; all still acquired when written.
        sp.acquire(&a, &[(0, 1)], 100, 0);
        sp.acknowledge("a", &[ack(0, 1, &[Release])], false, 1).unwrap();
        sp.acquire(&a, &[(0, 1), (2, 3)], 100, 2);
        let (start, batches) = sp.state_batches();
        let mut back = SharePartition::from_state(start, &batches, limits(100, 2));
        // A new leader delivers 2-3 a second time and never 0-1 a third.
        assert_eq!(back.acquire(&b, &[(0, 1), (2, 3)], 100, 5), vec![got(2, 3, 2)]);
        assert_eq!(back.start_offset(), 2, "0-1 archived");
    }

    #[test]
    fn with_a_dead_letter_queue_rejected_and_exhausted_records_wait_archiving() {
        let (a, b) = (m("a"), m("b"));
        let lim = ShareLimits { dead_letter_queue: true, ..limits(100, 2) };
        let mut sp = SharePartition::new(0, lim);
        sp.acquire(&a, &[(0, 9)], 100, 0);
        // 0-1 accepted, 2-3 rejected, 4-5 released (their first delivery), 6-9 kept.
        sp.acknowledge("a", &[ack(0, 9, &[Accept, Accept, Reject, Reject, Release, Release, Accept, Accept, Accept, Accept])], false, 1).unwrap();
        assert_eq!(sp.archiving(), vec![ArchivingRange { first_offset: 2, last_offset: 3, delivery_count: 1, rejected: true }]);
        assert_eq!(sp.start_offset(), 2, "ARCHIVING is not done: the start waits for it");
        assert!(matches!(sp.acknowledge("a", &[ack(2, 3, &[Accept])], false, 2), Err(AcknowledgeError::InvalidRecordState(_))));
        // 4-5 delivered again (the limit), then their lock expires: ARCHIVING too.
        assert_eq!(sp.acquire(&b, &[(0, 9)], 100, 3), vec![got(4, 5, 2)], "ARCHIVING records are not delivered");
        sp.expire_locks(5000);
        assert_eq!(
            sp.archiving(),
            vec![
                ArchivingRange { first_offset: 2, last_offset: 3, delivery_count: 1, rejected: true },
                ArchivingRange { first_offset: 4, last_offset: 5, delivery_count: 2, rejected: false }
            ]
        );
        // Persisted as ARCHIVING (3) and rebuilt so by a new leader, which resumes them.
        let (start, batches) = sp.state_batches();
        assert!(batches.iter().any(|x| x.state == RecordState::Archiving && x.first_offset == 2));
        let mut back = SharePartition::from_state(start, &batches, lim);
        // The same ranges; a new leader only has their counts (not who rejected them).
        let forgotten: Vec<ArchivingRange> = sp.archiving().into_iter().map(|r| ArchivingRange { rejected: false, ..r }).collect();
        assert_eq!(back.archiving(), forgotten);
        // Dead-lettered: ARCHIVED, and the start moves past them.
        back.finish_archiving(2, 3);
        assert_eq!(back.start_offset(), 4);
        back.finish_archiving(0, 100);
        assert_eq!((back.start_offset(), back.in_flight_records(), back.archiving()), (10, 0, vec![]));
        // Without a dead-letter queue, rejection archives at once.
        let mut plain = SharePartition::new(0, limits(100, 2));
        plain.acquire(&a, &[(0, 1)], 100, 0);
        plain.acknowledge("a", &[ack(0, 1, &[Reject])], false, 1).unwrap();
        assert_eq!((plain.start_offset(), plain.archiving()), (2, vec![]));
    }

    /// Random members fetch, acknowledge (sometimes wrongly), leave and let locks expire,
    /// over a log of random batches: the window stays tiled and bounded (checked on every
    /// step in debug builds), an accepted offset is never delivered again, no offset is
    /// delivered more often than the limit, and once everything is accepted or rejected
    /// the window is empty past the end of the log.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::{BTreeSet, HashMap};

        #[derive(Clone, Debug)]
        enum Step {
            Fetch {
                member: u8,
                max_records: u8,
            },
            Ack {
                member: u8,
                pick: u8,
                kind: u8,
            },
            Expire {
                advance_ms: u16,
            },
            Leave {
                member: u8,
            },
            /// Phase 2 of the dead-letter queue for everything ARCHIVING.
            DeadLetter,
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => (0u8..3, 1u8..20).prop_map(|(member, max_records)| Step::Fetch { member, max_records }),
                4 => (0u8..3, any::<u8>(), 0u8..5).prop_map(|(member, pick, kind)| Step::Ack { member, pick, kind }),
                1 => (0u16..2000).prop_map(|advance_ms| Step::Expire { advance_ms }),
                1 => (0u8..3).prop_map(|member| Step::Leave { member }),
                1 => Just(Step::DeadLetter),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]
            #[test]
            fn share_partition_model(batch_lens in proptest::collection::vec(1i64..6, 1..30), steps in proptest::collection::vec(step(), 1..200), dead_letter_queue in any::<bool>()) {
                let mut log = Vec::new();
                let mut next = 0i64;
                for len in batch_lens {
                    log.push((next, next + len - 1));
                    next += len;
                }
                let log_end = next;
                let lim = ShareLimits { max_in_flight_records: 12, delivery_count_limit: 3, lock_duration_ms: 1000, dead_letter_queue };
                let mut sp = SharePartition::new(0, lim);
                let members: Vec<MemberId> = (0..3).map(|i| m(&format!("m{i}"))).collect();
                let mut held: HashMap<u8, Vec<AcquiredRecords>> = HashMap::new();
                let mut accepted = BTreeSet::new();
                let mut deliveries: HashMap<i64, u16> = HashMap::new();
                let mut now = 0i64;
                for s in steps {
                    match s {
                        Step::Fetch { member, max_records } => {
                            let from = sp.next_fetch_offset();
                            let batches: Vec<_> = log.iter().copied().filter(|&(_, l)| l >= from).collect();
                            for a in sp.acquire(&members[member as usize], &batches, max_records as i64, now) {
                                for o in a.first_offset..=a.last_offset {
                                    prop_assert!(!accepted.contains(&o), "accepted offset {o} delivered again");
                                    let d = deliveries.entry(o).or_default();
                                    *d += 1;
                                    prop_assert!(*d <= lim.delivery_count_limit, "offset {o} delivered {d} times");
                                    prop_assert_eq!(*d, a.delivery_count);
                                }
                                held.entry(member).or_default().push(a);
                            }
                        }
                        Step::Ack { member, pick, kind } => {
                            let mine = held.entry(member).or_default();
                            if mine.is_empty() {
                                continue;
                            }
                            let a = mine.remove(pick as usize % mine.len());
                            let t = [Accept, Release, Reject, Gap, Accept][kind as usize];
                            let r = sp.acknowledge(members[member as usize].as_ref(), &[ack(a.first_offset, a.last_offset, &[t])], false, now);
                            if r.is_ok() && t == Accept {
                                accepted.extend(a.first_offset..=a.last_offset);
                            }
                        }
                        Step::Expire { advance_ms } => {
                            now += advance_ms as i64;
                            sp.expire_locks(now);
                        }
                        Step::Leave { member } => {
                            sp.release_member(members[member as usize].as_ref());
                            held.remove(&member);
                        }
                        Step::DeadLetter => {
                            for r in sp.archiving() {
                                prop_assert!(r.first_offset >= sp.start_offset() && r.last_offset < sp.end_offset());
                                sp.finish_archiving(r.first_offset, r.last_offset);
                            }
                            prop_assert!(sp.archiving().is_empty());
                        }
                    }
                    prop_assert!(dead_letter_queue || sp.archiving().is_empty(), "ARCHIVING only with a dead-letter queue");
                    prop_assert!(sp.in_flight_records() <= lim.max_in_flight_records + 5, "window {} past its bound", sp.in_flight_records());
                }
                // Drain: one member takes and accepts everything left.
                for _ in 0..(log_end * 4 + 10) {
                    now += 5000;
                    sp.expire_locks(now);
                    for r in sp.archiving() {
                        sp.finish_archiving(r.first_offset, r.last_offset);
                    }
                    let from = sp.next_fetch_offset();
                    let batches: Vec<_> = log.iter().copied().filter(|&(_, l)| l >= from).collect();
                    for a in sp.acquire(&members[0], &batches, 100, now) {
                        for o in a.first_offset..=a.last_offset {
                            prop_assert!(!accepted.contains(&o), "accepted offset {o} delivered again");
                        }
                        sp.acknowledge("m0", &[ack(a.first_offset, a.last_offset, &[Accept])], false, now).unwrap();
                        accepted.extend(a.first_offset..=a.last_offset);
                    }
                }
                prop_assert_eq!((sp.start_offset(), sp.in_flight_records()), (log_end, 0));
            }
        }
    }
}
