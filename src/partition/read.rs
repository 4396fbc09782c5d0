//! Reads: fetch (cache first, then disk through storage's `BatchReader`), the ListOffsets
//! scans by timestamp, and the long-poll watchers woken when the high watermark moves.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};

use bytes::Bytes;

use super::error::PartitionError;
use super::state::Partition;
use crate::record::{first_record_at_or_after, BatchHeader, BatchList};
use crate::runtime::file_slice::FileSlice;
use crate::storage::batch_reader::BatchReader;
use crate::storage::log::DiskRead;

/// Most bytes one disk read of a fetch asks for: a fetch reads its range in chunks of at
/// most this, and at most what it may still return, never the whole request at once.
const MAX_FETCH_READ_CHUNK_BYTES: usize = 1 << 20;
/// Fewest bytes a disk read of a fetch asks for (one block: a smaller O_DIRECT read
/// costs the same).
const MIN_FETCH_READ_CHUNK_BYTES: usize = 4096;
/// Bytes read at a time by the ListOffsets scans.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// What `find_batch` does with a batch.
enum Pick {
    Skip,
    Take,
    Stop,
}

/// How much one partition read may return: Kafka's `LogSegment.read` maxSize and
/// minOneMessage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimit {
    /// Whole batches up to this many bytes. Negative is refused when there is data to
    /// read (Kafka's "Invalid max size"), never taken as "unlimited".
    pub max_bytes: i64,
    /// The first batch is returned whole even when larger than `max_bytes`.
    pub min_one_batch: bool,
    /// Bytes read from disk may come back as a `FileSlice` (`FetchData::file_records`,
    /// sent by `sendfile`) instead of in memory: for reads whose bytes go straight to a
    /// socket (consumer fetches), never for readers that look at the batches.
    pub file_slice: bool,
}

impl ReadLimit {
    /// At most `max_bytes`, but at least one batch when there is one.
    pub fn at_least_one(max_bytes: usize) -> ReadLimit {
        ReadLimit { max_bytes: i64::try_from(max_bytes).unwrap_or(i64::MAX), min_one_batch: true, file_slice: false }
    }
}

#[derive(Clone, Debug, Default)]
pub struct FetchData {
    /// Stored batch bytes, whole batches, in offset order.
    pub records: BatchList,
    /// Whole batches in a segment file, to send with `sendfile` (only when the limit
    /// allowed it, and then `records` is empty).
    pub file_records: Option<FileSlice>,
    /// Bytes of `records` and `file_records`.
    pub bytes: usize,
    pub high_watermark: i64,
    /// The last stable offset (Kafka's LSO): below it every transaction is complete.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed reads: the aborted transactions overlapping what was read (Kafka's
    /// abortedTransactions, an empty list when none); None for read_uncommitted.
    pub aborted_transactions: Option<Vec<super::producer_state::AbortedTxn>>,
    /// Kafka's firstEntryIncomplete: there is data to read but its first batch is larger
    /// than the limit and `min_one_batch` was off, so `records` is empty.
    pub first_batch_exceeds_limit: bool,
}

/// One waiting long poll's wake-up, shared by every partition of this shard it watches:
/// a Fetch registers one signal per shard, not one channel per partition. Shard-local
/// (no atomics): set by the partition's writer, awaited by the watch on the same shard.
#[derive(Default)]
pub struct WatchSignal {
    woken: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl WatchSignal {
    pub fn new() -> Rc<WatchSignal> {
        Rc::new(WatchSignal::default())
    }

    pub(super) fn wake(&self) {
        self.woken.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    pub fn is_woken(&self) -> bool {
        self.woken.get()
    }

    /// Resolves once a watched partition's high watermark moved (or it closed).
    pub async fn woken(&self) {
        std::future::poll_fn(|cx| {
            if self.woken.get() {
                return Poll::Ready(());
            }
            self.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

/// Long-poll fetches waiting for the high watermark to move. The log's writer wakes
/// them (through its `on_written` hook) every time it has completed writes, and
/// `Partition::close` wakes them; a woken fetch re-reads and waits again if need be.
///
/// Share fetches wait in turn instead (`in_turn`): each move of the high watermark wakes
/// the one that has waited longest, as Kafka's purgatory lets its oldest delayed share
/// fetch acquire first, so the consumers of a share group take turns at a trickle of
/// records rather than racing for each one.
///
/// Bounded: the lists hold weak references, so a long poll that ends without being woken
/// (its deadline passed, another partition woke it, its connection closed) frees its
/// signal by dropping it, and `add` prunes the dead entries: the lists hold the fetches
/// waiting now plus those that gave up since the last `add`, not every poll an idle
/// partition ever saw.
#[derive(Default)]
pub(super) struct Watchers {
    all: RefCell<Vec<Weak<WatchSignal>>>,
    in_turn: RefCell<VecDeque<Weak<WatchSignal>>>,
}

impl Watchers {
    fn add(&self, signal: &Rc<WatchSignal>) {
        let mut list = self.all.borrow_mut();
        list.retain(|w| w.strong_count() > 0);
        list.push(Rc::downgrade(signal));
    }

    fn add_in_turn(&self, signal: &Rc<WatchSignal>) {
        let mut queue = self.in_turn.borrow_mut();
        queue.retain(|w| w.strong_count() > 0);
        queue.push_back(Rc::downgrade(signal));
    }

    /// Wakes the long polls that all re-read on every write (not those waiting in turn).
    pub(super) fn wake_long_polls(&self) {
        wake_every(self.all.borrow_mut().drain(..));
    }

    /// The high watermark moved: every long poll re-reads, and the longest waiting in
    /// turn is woken. A signal another partition already woke is passed over (it would
    /// use up the turn without anyone looking).
    pub(super) fn wake_on_high_watermark(&self) {
        self.wake_long_polls();
        let mut queue = self.in_turn.borrow_mut();
        while let Some(w) = queue.pop_front() {
            if let Some(signal) = w.upgrade() {
                if !signal.is_woken() {
                    signal.wake();
                    break;
                }
            }
        }
    }

    /// Every waiter, in turn or not (the partition closed or stopped leading).
    pub(super) fn wake_all(&self) {
        self.wake_long_polls();
        wake_every(self.in_turn.borrow_mut().drain(..));
    }

    fn len(&self) -> usize {
        self.all.borrow().len() + self.in_turn.borrow().len()
    }

    fn live(&self) -> usize {
        self.all.borrow().iter().chain(self.in_turn.borrow().iter()).filter(|w| w.strong_count() > 0).count()
    }
}

/// Wakes each signal still held by a waiting fetch.
fn wake_every(signals: impl Iterator<Item = Weak<WatchSignal>>) {
    for signal in signals.filter_map(|w| w.upgrade()) {
        signal.wake();
    }
}

impl Partition {
    /// Wakes `signal` when the high watermark moves (or the partition closes). The
    /// registration lasts until then or until every owner of `signal` dropped it.
    pub fn watch(&self, signal: &Rc<WatchSignal>) {
        self.watchers.add(signal);
    }

    /// Wakes `signal` when the high watermark moves and every share fetch that waited
    /// longer here has had its turn (or the partition closes). The registration lasts
    /// until then or until every owner of `signal` dropped it.
    pub fn watch_in_turn(&self, signal: &Rc<WatchSignal>) {
        self.watchers.add_in_turn(signal);
    }

    /// Long-poll fetches registered on this partition (waiting, or given up since the
    /// last registration).
    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// Long-poll fetches waiting on this partition now.
    pub fn live_watcher_count(&self) -> usize {
        self.watchers.live()
    }

    /// Reads whole batches from `offset`, below the high watermark, up to `max_bytes`
    /// (at least one batch if any is available).
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<FetchData, PartitionError> {
        self.read_with(offset, ReadLimit::at_least_one(max_bytes)).await
    }

    /// Reads whole batches from `offset`, below the high watermark, within `limit`. The
    /// memory it allocates is the batches it returns plus at most one read chunk (the
    /// disk is read in chunks no larger than what may still be returned). A consumer's
    /// read: only the leader serves it (NotLeader on a follower).
    pub async fn read_with(&self, offset: i64, limit: ReadLimit) -> Result<FetchData, PartitionError> {
        self.check_leader()?;
        let hw = self.high_watermark();
        self.read_below(offset, limit, hw).await
    }

    /// `read_with` (a consumer's read on the leader) at an isolation level: read_committed
    /// reads below the last stable offset only and lists the aborted transactions in what
    /// it read (invariant 10). Both answer the last stable offset.
    pub async fn read_isolated(&self, offset: i64, limit: ReadLimit, read_committed: bool) -> Result<FetchData, PartitionError> {
        self.check_leader()?;
        self.read_at_isolation(offset, limit, read_committed).await
    }

    /// Reads below the high watermark, or below the last stable offset for read_committed.
    async fn read_at_isolation(&self, offset: i64, limit: ReadLimit, read_committed: bool) -> Result<FetchData, PartitionError> {
        let hw = self.high_watermark();
        let lso = self.last_stable_offset();
        let mut data = self.read_below(offset, limit, if read_committed { lso } else { hw }).await?;
        data.last_stable_offset = lso;
        if read_committed {
            data.aborted_transactions = Some(self.aborted_transactions_in(offset, &data));
        }
        Ok(data)
    }

    /// A follower's fetch from this leader: whole batches from `offset` below the
    /// leader's written offset (not the high watermark: followers replicate what the
    /// leader has, then the high watermark moves), within `limit`. The answer carries the
    /// high watermark for the follower.
    pub async fn read_for_follower(&self, offset: i64, limit: ReadLimit) -> Result<FetchData, PartitionError> {
        self.check_leader()?;
        let written = self.log.borrow().written_offset();
        self.read_below(offset, limit, written).await
    }

    /// Tests only: whole batches from `offset` below the written offset whatever the role
    /// (the replication simulation compares replicas' logs).
    #[cfg(test)]
    pub(crate) async fn read_written(&self, offset: i64, limit: ReadLimit) -> Result<FetchData, PartitionError> {
        let written = self.log.borrow().written_offset();
        self.read_below(offset, limit, written).await
    }

    /// A consumer's read from this replica as a follower (KIP-392): whole batches from
    /// `offset` below this replica's high watermark (what its leader told it the whole
    /// ISR has), so a consumer never sees more than on the leader.
    pub async fn read_from_follower(&self, offset: i64, limit: ReadLimit, read_committed: bool) -> Result<FetchData, PartitionError> {
        if self.is_leader() {
            return Err(PartitionError::NotFollower);
        }
        self.read_at_isolation(offset, limit, read_committed).await
    }

    /// NotLeader unless this replica leads: consumers' reads, ListOffsets and
    /// DeleteRecords are the leader's (KIP-392's follower reads would relax the reads).
    pub fn check_leader(&self) -> Result<(), PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        Ok(())
    }

    /// Reads whole batches from `offset` with base offsets below `max_offset` (the high
    /// watermark for consumers, the written offset for followers), within `limit`.
    pub(super) async fn read_below(&self, offset: i64, limit: ReadLimit, max_offset: i64) -> Result<FetchData, PartitionError> {
        self.assert_on_shard();
        self.check_online()?;
        let (hw, start, leo) = (self.high_watermark(), self.log_start_offset(), self.log_end_offset());
        debug_assert!(max_offset <= leo, "reads stop at or below the log end");
        if offset < start || offset > leo {
            return Err(PartitionError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: leo });
        }
        let mut data = FetchData { high_watermark: hw, last_stable_offset: hw, log_start_offset: start, ..Default::default() };
        if offset >= max_offset {
            return Ok(data);
        }
        let max_bytes = usize::try_from(limit.max_bytes).map_err(|_| PartitionError::InvalidFetchSize(limit.max_bytes))?;
        if max_bytes == 0 && !limit.min_one_batch {
            // Kafka reads nothing for a zero limit; there is data below the high watermark.
            data.first_batch_exceeds_limit = true;
            return Ok(data);
        }
        let cached = self.log.borrow().read_cached(offset, max_offset, max_bytes, limit.min_one_batch, &mut data.records);
        crate::metrics::with(|m| if cached.is_some() { m.batch_cache_hits += 1 } else { m.batch_cache_misses += 1 });
        match cached {
            Some(n) => {
                data.bytes = n;
                // The cache holds the log's tail: an empty read below the high watermark
                // means the first batch did not fit.
                data.first_batch_exceeds_limit = n == 0 && !limit.min_one_batch;
            }
            None => match limit.file_slice.then(|| self.log.borrow().file_slice(offset, max_offset, max_bytes)).flatten() {
                Some(slice) => {
                    data.bytes = slice.len();
                    data.file_records = Some(slice);
                }
                None => self.read_disk(offset, max_offset, max_bytes, limit.min_one_batch, &mut data).await?,
            },
        }
        // Invariant 2: a consumer never sees an offset at or above the high watermark (a
        // follower nothing at or above the leader's written offset).
        debug_assert!(
            data.records.iter().all(|b| crate::record::parse_header(b).is_ok_and(|h| h.base_offset < max_offset)),
            "fetch read a batch at or above its bound {max_offset}"
        );
        // The limit is hard except for a first batch taken under min_one_batch.
        debug_assert!(
            data.bytes <= max_bytes || (limit.min_one_batch && data.records.len() == 1),
            "fetch returned {} bytes over its limit {max_bytes}",
            data.bytes
        );
        debug_assert_eq!(data.bytes, data.records.iter().map(Bytes::len).sum::<usize>() + data.file_records.as_ref().map_or(0, FileSlice::len));
        debug_assert!(data.records.is_empty() || data.file_records.is_none(), "a read returns one form");
        Ok(data)
    }

    async fn read_disk(&self, offset: i64, hw: i64, max_bytes: usize, min_one_batch: bool, data: &mut FetchData) -> Result<(), PartitionError> {
        let mut next = self.log.borrow().locate(offset);
        while let Some(plan) = next.take() {
            if self.read_segment(&plan, offset, hw, max_bytes, min_one_batch, data).await? || data.bytes > 0 {
                return Ok(());
            }
            // Nothing at or after `offset` in this segment: compaction removed its tail
            // (Kafka answers with the next batch of the log, as here).
            next = self.log.borrow().locate_after(plan.base_offset);
        }
        Ok(())
    }

    /// Reads batches of one segment into `data`; true when the read is complete (high
    /// watermark or `max_bytes` reached), false at the end of the segment's data.
    async fn read_segment(
        &self,
        plan: &DiskRead,
        offset: i64,
        hw: i64,
        max_bytes: usize,
        min_one_batch: bool,
        data: &mut FetchData,
    ) -> Result<bool, PartitionError> {
        // A batch of `len` bytes may be added to what `data` holds.
        let fits = |data: &FetchData, len: usize| data.bytes + len <= max_bytes || (data.bytes == 0 && min_one_batch);
        let chunk_for = |data: &FetchData| max_bytes.saturating_sub(data.bytes).clamp(MIN_FETCH_READ_CHUNK_BYTES, MAX_FETCH_READ_CHUNK_BYTES);
        let mut reader = BatchReader::new(plan.file.clone(), plan.position, plan.end, chunk_for(data));
        loop {
            // A batch the last chunk cut is read whole only if it may still be sent.
            if let Some(n) = reader.cut_batch_len() {
                if !fits(data, n) {
                    data.first_batch_exceeds_limit = data.bytes == 0;
                    return Ok(true);
                }
            }
            let want = chunk_for(data);
            let pos = reader.position();
            let end = self.log.borrow().chunk_end(plan.base_offset, pos, want);
            // Whole batches only when the index knows a boundary in range; never below
            // a header's worth (`BatchReader` keeps every read making progress).
            reader.set_chunk_bytes(usize::try_from(end - pos).unwrap_or(want));
            let batches = reader.next_chunk().await?;
            if batches.is_empty() {
                return match reader.damage("segment being read") {
                    None => Ok(false),
                    // Serve what came before the damage; the next fetch reports it.
                    Some(_) if data.bytes > 0 => Ok(true),
                    Some(e) => Err(e.into()),
                };
            }
            for (h, batch) in batches {
                if h.last_offset() < offset {
                    continue;
                }
                if h.base_offset >= hw {
                    return Ok(true);
                }
                if !fits(data, batch.len()) {
                    data.first_batch_exceeds_limit = data.bytes == 0;
                    return Ok(true);
                }
                data.bytes += batch.len();
                data.records.push(batch);
            }
            if data.bytes >= max_bytes {
                return Ok(true);
            }
        }
    }

    /// The first batch of `plan`'s range that `pick` takes, or None when `pick` says stop
    /// or the segment's data ends (a damaged batch ends it too: ListOffsets answers from
    /// what is readable).
    async fn find_batch(plan: &DiskRead, mut pick: impl FnMut(&BatchHeader) -> Pick) -> Result<Option<(BatchHeader, Bytes)>, PartitionError> {
        let mut reader = BatchReader::new(plan.file.clone(), plan.position, plan.end, SCAN_CHUNK_BYTES);
        loop {
            let batches = reader.next_chunk().await?;
            if batches.is_empty() {
                return Ok(None);
            }
            for (h, batch) in batches {
                match pick(&h) {
                    Pick::Skip => {}
                    Pick::Take => return Ok(Some((h, batch))),
                    Pick::Stop => return Ok(None),
                }
            }
        }
    }

    /// ListOffsets for a timestamp: (offset, timestamp) of the first record with a
    /// timestamp >= `timestamp`, below the high watermark; None if there is none.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        self.check_leader()?;
        self.check_online()?;
        if timestamp < 0 {
            return Err(PartitionError::InvalidTimestamp(timestamp));
        }
        let plans = self.log.borrow().timestamp_scan_plan(timestamp);
        let (hw, start) = (self.high_watermark(), self.log_start_offset());
        for plan in plans {
            let mut past_hw = false;
            let found = Self::find_batch(&plan, |h| {
                if h.base_offset >= hw {
                    past_hw = true;
                    Pick::Stop
                } else if h.max_timestamp >= timestamp && h.last_offset() >= start {
                    Pick::Take
                } else {
                    Pick::Skip
                }
            })
            .await?;
            if let Some((h, batch)) = found {
                return Ok(first_record_at_or_after(batch, &h, timestamp, start));
            }
            if past_hw {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the record with the largest
    /// timestamp (the first such record).
    pub async fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>, PartitionError> {
        self.check_leader()?;
        self.check_online()?;
        let Some((ts, batch_base)) = self.log.borrow().max_timestamp() else { return Ok(None) };
        if batch_base < self.log_start_offset() || batch_base >= self.high_watermark() {
            return Ok(None);
        }
        let Some(plan) = self.log.borrow().locate(batch_base) else { return Ok(None) };
        let found = Self::find_batch(&plan, |h| if h.base_offset == batch_base { Pick::Take } else { Pick::Skip }).await?;
        if let Some((h, batch)) = found {
            return Ok(first_record_at_or_after(batch, &h, ts, batch_base));
        }
        Ok(Some((batch_base, ts)))
    }
}
