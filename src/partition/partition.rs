//! A partition on its owning shard.
//!
//! Produce: validate batches (CRC-32C, size) outside the lock, then under the
//! partition's append lock check producer sequences, roll the segment if needed, patch
//! base offset / leader epoch / LogAppendTime into a copy of each batch and append it.
//! The lock is released before waiting for the disk so concurrent producers share one
//! write and one fdatasync (group commit, driven by `flush_loop`).
//!
//! Invariants: offsets are strictly increasing and appended densely (the cleaner of a
//! compacted topic removes records, leaving gaps, never moving one); the high watermark
//! (end of data whose write completed) never passes the log end; a consumer never sees an
//! offset at or above the high watermark; nothing is acknowledged before its write
//! completed (and, with `flush = always` and acks=all, before fdatasync).
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use glommio::sync::Semaphore;

use super::error::PartitionError;
use super::producer_state::{ProducerStateTable, SequenceCheck};
use crate::runtime::ShardId;
use crate::config::FlushMode;
use crate::record::{
    parse_header, set_base_offset, set_log_append_time, set_partition_leader_epoch,
    validate_produce_records, BatchHeader,
};
use crate::storage::batch_reader::BatchReader;
use crate::storage::dma::{open_rw, read_checked_file, remove_file, write_checked_file};
use crate::storage::log::{DiskRead, Log};
use crate::storage::segment::{index_path, log_file_name, time_index_path};
use crate::runtime::now_ms;
use crate::storage::{LogConfig, StorageError};

const PRODUCER_SNAPSHOT_MAGIC: u32 = 0x534c_5053; // "SLPS"
const PRODUCER_SNAPSHOT_VERSION: u16 = 1;
/// Bytes read per disk fetch when the client allows less (keeps reads efficient).
const MIN_DISK_READ_BYTES: usize = 64 * 1024;
/// Bytes read at a time by the ListOffsets scans.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// What `find_batch` does with a batch.
enum Pick {
    Skip,
    Take,
    Stop,
}

/// A segment write slower than this is logged (the disk, not the broker, set the latency).
const SLOW_WRITE: std::time::Duration = std::time::Duration::from_millis(200);

pub(super) fn producer_snapshot_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.snapshot"))
}

/// Settings applied to appends, from the topic config.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSettings {
    pub max_message_bytes: usize,
    pub log_append_time: bool,
    pub flush: FlushMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

#[derive(Clone, Debug, Default)]
pub struct FetchData {
    /// Stored batch bytes, whole batches, in offset order.
    pub records: Vec<Bytes>,
    pub bytes: usize,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

struct Waiter {
    /// Acknowledge once offsets below this are on disk.
    end_offset: i64,
    sync: bool,
    tx: oneshot::Sender<Result<(), String>>,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: [u8; 16],
    shard: ShardId,
    leader_epoch: Cell<i32>,
    pub(super) log: RefCell<Log>,
    producers: RefCell<ProducerStateTable>,
    settings: RefCell<PartitionSettings>,
    append_lock: Semaphore,
    flushing: Cell<bool>,
    waiters: RefCell<Vec<Waiter>>,
    /// Long-poll fetches waiting for the high watermark to move.
    watchers: RefCell<Vec<oneshot::Sender<()>>>,
    pub(super) closed: Cell<bool>,
}

impl Partition {
    /// Opens (recovering) or creates the partition's log in `dir`.
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        dir: &Path,
        topic: String,
        index: i32,
        topic_id: [u8; 16],
        shard: ShardId,
        leader_epoch: i32,
        log_config: LogConfig,
        settings: PartitionSettings,
    ) -> Result<Rc<Partition>, PartitionError> {
        let opened = Log::open(dir, log_config).await?;
        let log = opened.log;
        let active_base = log.segment_bases().last().copied().unwrap_or(0);
        let snapshot_path = producer_snapshot_path(dir, active_base);
        let mut producers = match read_checked_file(&snapshot_path, PRODUCER_SNAPSHOT_MAGIC, PRODUCER_SNAPSHOT_VERSION).await {
            Ok(Some(p)) => ProducerStateTable::decode(&p).unwrap_or_default(),
            Ok(None) => ProducerStateTable::default(),
            Err(e) => {
                tracing::warn!(topic, partition = index, error = %e, "producer snapshot unreadable; starting from the active segment");
                ProducerStateTable::default()
            }
        };
        for h in &opened.active_batches {
            producers.update(h);
        }
        if opened.truncated_bytes > 0 {
            tracing::info!(topic, partition = index, bytes = opened.truncated_bytes,
                log_end_offset = log.next_offset(), "recovered log; cut the invalid or padded tail");
        }
        Ok(Rc::new(Partition {
            topic,
            index,
            topic_id,
            shard,
            leader_epoch: Cell::new(leader_epoch),
            log: RefCell::new(log),
            producers: RefCell::new(producers),
            settings: RefCell::new(settings),
            append_lock: Semaphore::new(1),
            flushing: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            watchers: RefCell::new(Vec::new()),
            closed: Cell::new(false),
        }))
    }

    /// Invariant 1: partition state is touched only on its owning shard.
    pub(super) fn assert_on_shard(&self) {
        debug_assert_eq!(crate::runtime::current_shard(), Some(self.shard), "partition used off its shard");
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.get()
    }

    pub fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch.set(epoch);
    }

    pub fn high_watermark(&self) -> i64 {
        self.log.borrow().written_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.borrow().next_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.borrow().log_start_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.log.borrow().size_bytes()
    }

    pub fn dir(&self) -> PathBuf {
        self.log.borrow().dir().to_path_buf()
    }

    pub fn set_cache_budget(&self, bytes: usize) {
        self.log.borrow_mut().set_cache_budget(bytes);
    }

    pub fn apply_config(&self, log_config: LogConfig, settings: PartitionSettings) {
        self.log.borrow_mut().set_config(log_config);
        *self.settings.borrow_mut() = settings;
    }

    /// Appends the batches of one Produce partition entry.
    pub async fn append(self: &Rc<Self>, records: Bytes, acks: i16) -> Result<AppendOutcome, PartitionError> {
        self.assert_on_shard();
        if self.closed.get() {
            return Err(PartitionError::NotLeader);
        }
        let settings = self.settings.borrow().clone();
        let headers = validate_produce_records(&records, settings.max_message_bytes)?;
        if self.log.borrow().config().compact {
            // Kafka's LogValidator: every record of a compacted topic needs a key.
            for h in &headers {
                crate::record::check_keys_for_compaction(&records, h)?;
            }
        }
        let total: usize = headers.iter().map(|h| h.total_len()).sum();
        let _permit = self
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|_| PartitionError::NotLeader)?;
        if self.closed.get() {
            return Err(PartitionError::NotLeader);
        }
        // Idempotence: a batch already appended answers with its original offsets.
        {
            let producers = self.producers.borrow();
            let mut dup = None;
            for h in &headers {
                match producers.check(h)? {
                    SequenceCheck::Append => {}
                    SequenceCheck::Duplicate(meta) => dup = Some(meta),
                }
            }
            if let Some(meta) = dup {
                drop(producers);
                drop(_permit);
                tracing::debug!(topic = %self.topic, partition = self.index, base_offset = meta.base_offset, "duplicate batch");
                self.wait_durable(meta.last_offset + 1, acks, settings.flush).await?;
                return Ok(AppendOutcome {
                    base_offset: meta.base_offset,
                    log_append_time_ms: -1,
                    log_start_offset: self.log_start_offset(),
                });
            }
        }
        let now = now_ms();
        if self.log.borrow().should_roll(total, now) {
            self.roll(now).await?;
        }
        let epoch = self.leader_epoch.get();
        let log_append_time = if settings.log_append_time { now } else { -1 };
        let mut first_offset = -1;
        {
            let mut log = self.log.borrow_mut();
            let mut producers = self.producers.borrow_mut();
            let mut at = 0usize;
            for h in &headers {
                let len = h.total_len();
                // The one copy of record bytes on the produce path: the request frame is
                // shared, and the stored batch needs its offset and epoch patched.
                let mut batch = BytesMut::from(&records[at..at + len]);
                at += len;
                let base = log.next_offset();
                set_base_offset(&mut batch, base)?;
                set_partition_leader_epoch(&mut batch, epoch)?;
                if log_append_time >= 0 {
                    set_log_append_time(&mut batch, log_append_time)?;
                }
                let patched = parse_header(&batch)?;
                debug_assert_eq!(patched.base_offset, base);
                log.append(&patched, batch.freeze());
                producers.update(&patched);
                if first_offset < 0 {
                    first_offset = base;
                }
            }
        }
        let end = self.log.borrow().next_offset();
        drop(_permit);
        self.kick_flush();
        if acks != 0 {
            self.wait_durable(end, acks, settings.flush).await?;
        }
        Ok(AppendOutcome {
            base_offset: first_offset,
            log_append_time_ms: log_append_time,
            log_start_offset: self.log_start_offset(),
        })
    }

    async fn wait_durable(self: &Rc<Self>, end_offset: i64, acks: i16, flush: FlushMode) -> Result<(), PartitionError> {
        let sync = acks == -1 && flush == FlushMode::Always;
        {
            let log = self.log.borrow();
            let done = log.written_offset() >= end_offset && (!sync || log.synced_offset() >= end_offset);
            if done {
                return Ok(());
            }
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push(Waiter { end_offset, sync, tx });
        self.kick_flush();
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(PartitionError::Storage(StorageError::NoSpace { context: e })),
            Err(_) => Err(PartitionError::NotLeader),
        }
    }

    /// Seals the active segment and starts a new one at the log end. Called with the
    /// append lock held.
    async fn roll(&self, now: i64) -> Result<(), PartitionError> {
        let (path, dir, base) = {
            let log = self.log.borrow();
            (log.next_segment_path(), log.dir().to_path_buf(), log.next_offset())
        };
        // Producer state as of the new segment's base, so recovery of that segment can
        // start from it instead of scanning older segments.
        let snapshot = self.producers.borrow().encode();
        write_checked_file(&producer_snapshot_path(&dir, base), PRODUCER_SNAPSHOT_MAGIC, PRODUCER_SNAPSHOT_VERSION, &snapshot)
            .await?;
        let file = open_rw(&path).await?;
        self.log.borrow_mut().roll(file, now);
        tracing::debug!(topic = %self.topic, partition = self.index, base, "rolled segment");
        Ok(())
    }

    fn kick_flush(self: &Rc<Self>) {
        if self.flushing.get() {
            return;
        }
        self.flushing.set(true);
        let me = self.clone();
        glommio::spawn_local(async move { me.flush_loop().await }).detach();
    }

    /// Writes pending batches, syncs when someone waits for it, saves indexes of sealed
    /// segments, and wakes waiters. Exits when there is nothing left to do; the check
    /// and the exit happen without an await in between, so no append is missed.
    async fn flush_loop(self: Rc<Self>) {
        loop {
            let jobs = self.log.borrow_mut().take_writes();
            let mut failed: Option<StorageError> = None;
            for (base, mut job) in jobs {
                if failed.is_some() {
                    continue;
                }
                let Some(buf) = job.buf.take() else { continue };
                let want = buf.len();
                let started = std::time::Instant::now();
                let res = job.file.write_at(buf, job.pos).await;
                let took = started.elapsed();
                if took >= SLOW_WRITE {
                    // Every ack of this partition waited for it: say so, it explains tail latency.
                    tracing::warn!(topic = %self.topic, partition = self.index, bytes = want, ms = took.as_millis() as u64, "slow segment write");
                }
                match res {
                    Ok(n) if n >= want => self.log.borrow_mut().complete_write(base, job),
                    Ok(n) => failed = Some(StorageError::NoSpace { context: format!("short write ({n} of {want} bytes)") }),
                    Err(e) => failed = Some(StorageError::glommio("writing a segment", e)),
                }
            }
            if let Some(e) = failed {
                self.on_write_failure(e).await;
                continue;
            }
            let written = self.log.borrow().written_offset();
            // Acks that need no fdatasync (and fetch long polls) are answered now, not after
            // the sync and index saves below: a segment roll would otherwise stall every
            // producer of the partition behind an fdatasync.
            self.wake(written);
            let want_sync = self.waiters.borrow().iter().any(|w| w.sync && w.end_offset <= written)
                || self.log.borrow().segment_bases().len() > 1 && self.has_unsaved_sealed(written);
            if want_sync && self.log.borrow().synced_offset() < written {
                let files = self.log.borrow_mut().take_unsynced_files();
                let mut sync_error = None;
                for f in files {
                    if let Err(e) = f.fdatasync().await {
                        sync_error = Some(StorageError::glommio("fdatasync", e));
                    }
                }
                match sync_error {
                    None => self.log.borrow_mut().mark_synced(written),
                    Some(e) => {
                        tracing::error!(topic = %self.topic, partition = self.index, error = %e, "fdatasync failed");
                        self.fail_waiters(i64::MIN, &e.to_string());
                    }
                }
            }
            self.save_sealed_indexes().await;
            self.wake(written);
            let more = self.log.borrow().has_pending_writes()
                || self.waiters.borrow().iter().any(|w| {
                    w.end_offset <= self.log.borrow().written_offset() && w.sync && w.end_offset > self.log.borrow().synced_offset()
                });
            if !more {
                self.flushing.set(false);
                return;
            }
        }
    }

    fn has_unsaved_sealed(&self, written: i64) -> bool {
        let log = self.log.borrow();
        log.segment_bases().iter().any(|&b| {
            log.segment(b).is_some_and(|s| s.sealed && !s.indexes_saved && s.next_offset() <= written)
        })
    }

    async fn save_sealed_indexes(&self) {
        let bases = self.log.borrow().sealed_needing_indexes();
        for base in bases {
            // Clone what is saved: the log is borrowed mutably by appends meanwhile.
            let (index, time_index, summary, dir) = {
                let log = self.log.borrow();
                let Some(seg) = log.segment(base) else { continue };
                (seg.index.clone(), seg.time_index.clone(), seg.summary(), log.dir().to_path_buf())
            };
            let res = async {
                index.save(&index_path(&dir, base), &summary.encode()).await?;
                time_index.save(&time_index_path(&dir, base)).await
            }
            .await;
            match res {
                Ok(()) => self.log.borrow_mut().mark_indexes_saved(base),
                Err(e) => {
                    // Recovery rebuilds a missing index by scanning; not fatal.
                    tracing::warn!(topic = %self.topic, partition = self.index, base, error = %e, "could not save segment indexes");
                    self.log.borrow_mut().mark_indexes_saved(base);
                }
            }
        }
    }

    async fn on_write_failure(&self, e: StorageError) {
        let removed = self.log.borrow_mut().rollback_unwritten();
        let end = self.log.borrow().next_offset();
        self.producers.borrow_mut().truncate_from(end);
        tracing::error!(topic = %self.topic, partition = self.index, error = %e, log_end_offset = end,
            "write failed; dropped unacknowledged batches");
        self.fail_waiters(end, &e.to_string());
        for seg in removed {
            let dir = seg.dir.clone();
            let _ = remove_file(&dir.join(log_file_name(seg.base_offset))).await;
            let _ = remove_file(&producer_snapshot_path(&dir, seg.base_offset)).await;
        }
    }

    /// Fails waiters for offsets above `end` (all of them when `end` is i64::MIN).
    fn fail_waiters(&self, end: i64, message: &str) {
        let mut waiters = self.waiters.borrow_mut();
        let (fail, keep): (Vec<Waiter>, Vec<Waiter>) = waiters.drain(..).partition(|w| w.end_offset > end || end == i64::MIN);
        *waiters = keep;
        for w in fail {
            let _ = w.tx.send(Err(message.to_string()));
        }
    }

    fn wake(&self, written: i64) {
        let synced = self.log.borrow().synced_offset();
        let mut waiters = self.waiters.borrow_mut();
        let (done, keep): (Vec<Waiter>, Vec<Waiter>) = waiters
            .drain(..)
            .partition(|w| w.end_offset <= written && (!w.sync || w.end_offset <= synced));
        *waiters = keep;
        drop(waiters);
        for w in done {
            let _ = w.tx.send(Ok(()));
        }
        for w in self.watchers.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Resolves when the high watermark moves (or the partition closes).
    pub fn watch(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.watchers.borrow_mut().push(tx);
        rx
    }

    /// Reads whole batches from `offset`, below the high watermark, up to `max_bytes`
    /// (at least one batch if any is available).
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<FetchData, PartitionError> {
        self.assert_on_shard();
        let (hw, start, leo) = {
            let log = self.log.borrow();
            (log.written_offset(), log.log_start_offset(), log.next_offset())
        };
        if offset < start || offset > leo {
            return Err(PartitionError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: leo });
        }
        let mut data = FetchData { high_watermark: hw, log_start_offset: start, ..Default::default() };
        if offset >= hw {
            return Ok(data);
        }
        if let Some(n) = self.log.borrow().read_cached(offset, hw, max_bytes, &mut data.records) {
            data.bytes = n;
            return Ok(data);
        }
        self.read_disk(offset, hw, max_bytes, &mut data).await?;
        Ok(data)
    }

    async fn read_disk(&self, offset: i64, hw: i64, max_bytes: usize, data: &mut FetchData) -> Result<(), PartitionError> {
        let mut next = self.log.borrow().locate(offset);
        while let Some(plan) = next.take() {
            if self.read_segment(&plan, offset, hw, max_bytes, data).await? || data.bytes > 0 {
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
        data: &mut FetchData,
    ) -> Result<bool, PartitionError> {
        let chunk_bytes = max_bytes.max(MIN_DISK_READ_BYTES);
        let mut reader = BatchReader::new(plan.file.clone(), plan.position, plan.end, chunk_bytes);
        loop {
            // A batch the last chunk cut is read whole only if it may still be sent.
            if reader.cut_batch_len().is_some_and(|n| data.bytes > 0 && data.bytes + n > max_bytes) {
                return Ok(true);
            }
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
                if h.base_offset >= hw || (data.bytes > 0 && data.bytes + batch.len() > max_bytes) {
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
    async fn find_batch(
        plan: &DiskRead,
        mut pick: impl FnMut(&BatchHeader) -> Pick,
    ) -> Result<Option<(BatchHeader, Bytes)>, PartitionError> {
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
        if timestamp < 0 {
            return Err(PartitionError::InvalidTimestamp(timestamp));
        }
        let (plans, hw, start) = {
            let log = self.log.borrow();
            (log.timestamp_scan_plan(timestamp), log.written_offset(), log.log_start_offset())
        };
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

    /// DeleteRecords: moves the log start offset to `offset` (-1 = high watermark) and
    /// deletes whole segments below it. Returns the new low watermark.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, PartitionError> {
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        let start = self.log_start_offset();
        if target < 0 || target > hw {
            return Err(PartitionError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: hw });
        }
        self.advance_log_start(target).await?;
        Ok(self.log_start_offset())
    }

    async fn advance_log_start(&self, target: i64) -> Result<(), PartitionError> {
        let (removed, dir, start) = {
            let mut log = self.log.borrow_mut();
            let removed = log.advance_log_start(target);
            (removed, log.dir().to_path_buf(), log.log_start_offset())
        };
        Log::save_log_start_offset(&dir, start).await?;
        for seg in removed {
            let base = seg.base_offset;
            drop(seg);
            remove_file(&dir.join(log_file_name(base))).await?;
            remove_file(&index_path(&dir, base)).await?;
            remove_file(&time_index_path(&dir, base)).await?;
            remove_file(&producer_snapshot_path(&dir, base)).await?;
        }
        Ok(())
    }

    /// Applies retention.ms / retention.bytes: deletes old sealed segments.
    pub async fn apply_retention(&self, now: i64) -> Result<(), PartitionError> {
        let target = self.log.borrow().retention_target(now);
        if let Some(t) = target {
            let t = t.min(self.high_watermark());
            tracing::info!(topic = %self.topic, partition = self.index, log_start_offset = t, "retention");
            self.advance_log_start(t).await?;
        }
        Ok(())
    }

    /// Stops serving: pending waiters fail; later calls answer NotLeader.
    pub fn close(&self) {
        self.closed.set(true);
        self.fail_waiters(i64::MIN, "partition closed");
        for w in self.watchers.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }
}

/// The first record of a batch at or after `timestamp` (and at or after `min_offset`),
/// decoding the batch (ListOffsets only; not on the fetch path).
fn first_record_at_or_after(batch: Bytes, h: &BatchHeader, timestamp: i64, min_offset: i64) -> Option<(i64, i64)> {
    let mut buf = batch;
    match kafka_protocol::records::RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set
            .records
            .iter()
            .find(|r| r.timestamp >= timestamp && r.offset >= min_offset)
            .map(|r| (r.offset, r.timestamp))
            .or(Some((h.base_offset.max(min_offset), h.max_timestamp))),
        Err(_) => Some((h.base_offset.max(min_offset), h.max_timestamp)),
    }
}
