//! Produce: validate batches (CRC-32C, size) outside the lock, then under the
//! partition's append lock check producer sequences, roll the segment if needed, patch
//! base offset / leader epoch / LogAppendTime into a copy of each batch and append it.
//! The lock is released before waiting for the disk so concurrent producers share one
//! write and one fdatasync (group commit, driven by `flush_loop`).
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;

use super::error::PartitionError;
use super::producer_state::SequenceCheck;
use super::state::{producer_snapshot_path, Partition, Waiter, PRODUCER_SNAPSHOT_MAGIC, PRODUCER_SNAPSHOT_VERSION};
use crate::config::FlushMode;
use crate::record::{parse_header, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_produce_records};
use crate::runtime::now_ms;
use crate::storage::dma::{open_rw, remove_file, write_checked_file};
use crate::storage::segment::{index_path, log_file_name, time_index_path};
use crate::storage::StorageError;

/// A segment write slower than this is logged (the disk, not the broker, set the latency).
const SLOW_WRITE: std::time::Duration = std::time::Duration::from_millis(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

impl Partition {

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
    pub(super) fn fail_waiters(&self, end: i64, message: &str) {
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
}
