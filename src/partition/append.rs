//! Produce: validate batches (framing, CRC-32C, size, then every record, as Kafka's
//! LogValidator) outside the lock, then under the partition's append lock check producer
//! sequences, roll the segment if needed, patch
//! base offset / leader epoch / LogAppendTime into a copy of each batch and append it.
//! The lock is released before waiting for the disk so concurrent producers share one
//! write and one fdatasync (group commit, driven by the log's writer,
//! `storage/log_writer.rs`).
//!
//! Invariant 2 on this path: offsets are assigned densely and strictly increasing (each
//! batch gets `log.next_offset()`; `Log::append` asserts it), and nothing is acknowledged
//! before the writer says it is as durable as acks ask — and, for acks=all, before the
//! high watermark (the ISR) has it too.
//!
//! Only a leader appends here (NotLeader on a follower, whose log grows by
//! `append_as_follower`), and an append acknowledges only if its replica led from the
//! moment it took the append lock to the acknowledgement (`check_still_leading`).
use bytes::Bytes;

use super::error::PartitionError;
use super::producer_state::{SequenceCheck, SequenceError, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use super::state::{Partition, PartitionSettings, TxnGuard};
use crate::config::FlushMode;
use crate::record::{
    build_marker, parse_header, parse_marker, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_produce_records, Marker, ProduceChecks,
};
use crate::runtime::now_ms;
use crate::storage::dma::open_segment;
use crate::storage::log_writer::Durability;
use crate::storage::segment::SealSnapshot;
use crate::storage::StorageError;

/// Tries at a roll (see `Partition::roll`).
const ROLL_ATTEMPTS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

impl Partition {
    /// Appends the batches of one Produce partition entry. acks=-1 (all): refused with
    /// NotEnoughReplicas when the ISR is smaller than min.insync.replicas; once appended,
    /// answered when the leader's write is as durable as its flush mode promises and the
    /// high watermark has passed the batch, with NotEnoughReplicasAfterAppend if the ISR
    /// shrank below min.insync.replicas meanwhile.
    pub async fn append(&self, records: Bytes, acks: i16) -> Result<AppendOutcome, PartitionError> {
        self.append_within(records, acks, None).await
    }

    /// `append`, where acks=-1 waits for the in-sync replicas at most `replication_timeout`
    /// (Produce's `timeout_ms`, Kafka's delayed produce): then `RequestTimedOut` — the
    /// batch stays appended (it may still be replicated and become visible), it is just
    /// not acknowledged. A leader cut off from its followers answers this way.
    pub async fn append_within(&self, records: Bytes, acks: i16, replication_timeout: Option<std::time::Duration>) -> Result<AppendOutcome, PartitionError> {
        self.append_checked(records, acks, replication_timeout, None).await
    }

    /// A client's produce: `append_within`, where the first transactional batch of a
    /// producer's transaction here needs `txn_guard` (KIP-890 part 1): without it, or with
    /// a guard a marker has cleared since, the answer is `TxnVerificationNeeded` with a
    /// fresh guard; the caller verifies the partition with the transaction coordinator
    /// and calls again with it.
    pub async fn append_client(
        &self,
        records: Bytes,
        acks: i16,
        replication_timeout: Option<std::time::Duration>,
        txn_guard: Option<u64>,
    ) -> Result<AppendOutcome, PartitionError> {
        self.append_checked(records, acks, replication_timeout, Some(txn_guard)).await
    }

    /// `verification`: None = no KIP-890 check (the broker's own appends); Some(guard).
    async fn append_checked(
        &self,
        records: Bytes,
        acks: i16,
        replication_timeout: Option<std::time::Duration>,
        verification: Option<Option<u64>>,
    ) -> Result<AppendOutcome, PartitionError> {
        self.assert_on_shard();
        if self.closed.get() || !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        self.check_online()?;
        let settings = self.settings.borrow().clone();
        // Kafka's LogValidator, records included (a compacted topic needs keys).
        let checks = ProduceChecks {
            max_message_bytes: settings.max_message_bytes,
            compacted_topic: self.log.borrow().config().compact,
            log_append_time: settings.log_append_time,
            timestamp_before_max_ms: settings.timestamp_before_max_ms,
            timestamp_after_max_ms: settings.timestamp_after_max_ms,
            now_ms: now_ms(),
        };
        let headers = validate_produce_records(&records, &checks)?;
        self.append_batches(records, &headers, acks, &settings, replication_timeout, verification, 0).await
    }

    /// Appends transaction marker `marker` for producer `producer_id` at `producer_epoch`
    /// (WriteTxnMarkers, from the transaction coordinator): acks=all, within
    /// `replication_timeout`. Refused with InvalidProducerEpoch / CoordinatorFenced
    /// (`ProducerStateTable::check_marker`) when a newer producer epoch or coordinator
    /// epoch has written here.
    pub async fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        replication_timeout: std::time::Duration,
    ) -> Result<AppendOutcome, PartitionError> {
        self.append_marker_of_version(producer_id, producer_epoch, marker, 0, replication_timeout).await
    }

    /// `append_marker` for a marker of WriteTxnMarkers v2's `transaction_version`
    /// (KIP-1228: >= 2 checks the epoch strictly, `ProducerStateTable::check_marker`).
    pub async fn append_marker_of_version(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        transaction_version: i8,
        replication_timeout: std::time::Duration,
    ) -> Result<AppendOutcome, PartitionError> {
        self.assert_on_shard();
        if self.closed.get() || !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        self.check_online()?;
        let settings = self.settings.borrow().clone();
        let batch = build_marker(producer_id, producer_epoch, marker, now_ms());
        let h = parse_header(&batch)?;
        let out = self.append_batches(batch, &[h], -1, &settings, Some(replication_timeout), None, transaction_version).await;
        // The transaction ended here: a write verified before that must verify again.
        if let Some(g) = self.txn_guards.borrow_mut().get_mut(&producer_id) {
            g.live = false;
        }
        out
    }

    /// Appends a batch the broker built for a producer (the group coordinator's
    /// TxnOffsetCommit: transactional, no sequence), with acks=all. Not a client's batch,
    /// so not put through produce validation (Kafka's AppendOrigin.COORDINATOR).
    pub async fn append_from_coordinator(&self, batch: Bytes) -> Result<AppendOutcome, PartitionError> {
        self.assert_on_shard();
        if self.closed.get() || !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        self.check_online()?;
        let settings = self.settings.borrow().clone();
        let h = parse_header(&batch)?;
        debug_assert_eq!(h.total_len(), batch.len(), "one batch");
        self.append_batches(batch, &[h], -1, &settings, None, None, 0).await
    }

    /// Appends checked batches (`headers` of `records`, in order): producer checks, roll,
    /// patch, stage, then wait as `acks` asks. `marker_transaction_version`: a marker's
    /// WriteTxnMarkers TransactionVersion (0 for every other batch).
    #[allow(clippy::too_many_arguments)]
    async fn append_batches(
        &self,
        records: Bytes,
        headers: &[crate::record::BatchHeader],
        acks: i16,
        settings: &PartitionSettings,
        replication_timeout: Option<std::time::Duration>,
        verification: Option<Option<u64>>,
        marker_transaction_version: i8,
    ) -> Result<AppendOutcome, PartitionError> {
        let total: usize = headers.iter().map(|h| h.total_len()).sum();
        let _permit = self.append_lock.acquire_permit(1).await.map_err(|_| PartitionError::NotLeader)?;
        if self.closed.get() || !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        self.check_online()?;
        let leadership = self.leadership.get();
        if acks == -1 {
            if let Some((isr, min_insync)) = self.insync_shortfall(settings) {
                return Err(PartitionError::NotEnoughReplicas { isr, min_insync });
            }
        }
        // Idempotence: a batch already appended answers with its original offsets.
        let dup = {
            let producers = self.producers.borrow();
            let mut dup = None;
            let mut at = 0usize;
            for h in headers {
                let len = h.total_len();
                if h.is_control() {
                    // Only the broker writes markers (produce validation refuses them).
                    let marker = parse_marker(&records[at..at + len], h)?;
                    producers.check_marker(h.producer_id, h.producer_epoch, marker.coordinator_epoch, marker_transaction_version)?;
                } else {
                    match producers.check(h) {
                        Ok(SequenceCheck::Append) => {}
                        Ok(SequenceCheck::Duplicate(meta)) => dup = Some(meta),
                        // A pipelined later batch of a transaction whose first write is
                        // being verified right now, or whose earlier batch waits for it:
                        // it waits too (the produce path appends it again shortly)
                        // rather than fail back to the producer.
                        Err(SequenceError::OutOfOrder { first_seq, expected })
                            if verification.is_some()
                                && h.is_transactional()
                                && first_seq > expected
                                && (self.txn_guards.borrow().get(&h.producer_id).is_some_and(|g| g.epoch == h.producer_epoch)
                                    || producers.get(h.producer_id).is_some_and(|e| e.epoch == h.producer_epoch && e.current_txn_first_offset.is_some())) =>
                        {
                            return Err(PartitionError::TxnEarlierWritePending { first_seq, lowest: expected });
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                at += len;
            }
            dup
        };
        // KIP-890 part 1: a transaction's first write here waits for its coordinator to
        // confirm this partition is in the transaction (no hanging transaction from a
        // late or stray write). Checked under the append lock, where markers are
        // appended too, so a marker between the verification and this append is seen.
        if let (Some(guard), None) = (verification, dup) {
            let first_of_txn = headers.iter().find(|h| {
                // A new transaction here: none open for the producer, or (transactions
                // v2) a bumped epoch, whose previous transaction's marker may not be here
                // yet — the coordinator refuses to add the partition until it is.
                h.is_transactional()
                    && !h.is_control()
                    && self.producers.borrow().get(h.producer_id).is_none_or(|e| e.current_txn_first_offset.is_none() || h.producer_epoch > e.epoch)
            });
            if let Some(h) = first_of_txn {
                let mut guards = self.txn_guards.borrow_mut();
                let held = guards.get(&h.producer_id).copied().filter(|held| held.epoch == h.producer_epoch);
                match (guard, held.filter(|held| held.live)) {
                    (Some(g), Some(held)) if g == held.guard => {
                        // Verified: only the transaction's lowest sequence may start it
                        // (a later pipelined batch verified first retries after it).
                        if h.base_sequence > held.lowest_sequence {
                            return Err(PartitionError::TxnEarlierWritePending { first_seq: h.base_sequence, lowest: held.lowest_sequence });
                        }
                        guards.remove(&h.producer_id);
                    }
                    (_, Some(held)) => {
                        // Verification already pending for this transaction: the same guard.
                        let lowest = held.lowest_sequence.min(h.base_sequence);
                        guards.insert(h.producer_id, TxnGuard { lowest_sequence: lowest, ..held });
                        return Err(PartitionError::TxnVerificationNeeded { producer_id: h.producer_id, guard: held.guard });
                    }
                    (_, None) => {
                        let fresh = self.next_txn_guard.get();
                        self.next_txn_guard.set(fresh + 1);
                        guards.insert(h.producer_id, TxnGuard { guard: fresh, epoch: h.producer_epoch, lowest_sequence: h.base_sequence, live: true });
                        return Err(PartitionError::TxnVerificationNeeded { producer_id: h.producer_id, guard: fresh });
                    }
                }
            }
        }
        if let Some(meta) = dup {
            drop(_permit);
            tracing::debug!(topic = %self.topic, partition = self.index, base_offset = meta.base_offset, "duplicate batch");
            self.wait_durable(meta.last_offset + 1, acks, settings.flush).await?;
            self.wait_acks(meta.last_offset + 1, acks, settings, leadership, replication_timeout).await?;
            return Ok(AppendOutcome { base_offset: meta.base_offset, log_append_time_ms: -1, log_start_offset: self.log_start_offset() });
        }
        let now = now_ms();
        if self.log.borrow().should_roll(total, now) {
            self.roll(now).await?;
        }
        let epoch = self.leader_epoch.get();
        // The first append of a new leader epoch records where it begins, saved before
        // anything is staged: waiting here lets the writer run, and a write it fails must
        // not roll back records whose waiter is not registered yet (see below). Still
        // under the append lock, so epochs are saved in order.
        let start = self.log.borrow().next_offset();
        // (Or the epoch a leader was opened in, assigned without a save: `open_epochs`.)
        if self.epochs.borrow_mut().assign(epoch, start) || self.epochs.borrow().is_unsaved() {
            let saved = self.epochs.borrow().save_job();
            saved.await?;
        }
        // The waits above let a leadership change run: a deposed leader stages nothing.
        self.check_still_leading(leadership)?;
        let log_append_time = if settings.log_append_time { now } else { -1 };
        let mut first_offset = -1;
        {
            let mut log = self.log.borrow_mut();
            let mut producers = self.producers.borrow_mut();
            let mut at = 0usize;
            for h in headers {
                let len = h.total_len();
                // The one copy of record bytes on the produce path: into the segment's
                // stage buffer, patched there, then written and cached from there.
                let mut batch = log.stage_batch(&records[at..at + len]);
                at += len;
                let base = log.next_offset();
                set_base_offset(&mut batch, base)?;
                set_partition_leader_epoch(&mut batch, epoch)?;
                if log_append_time >= 0 {
                    set_log_append_time(&mut batch, log_append_time)?;
                }
                let patched = parse_header(&batch)?;
                // Invariant 2: dense, strictly increasing offsets.
                debug_assert!(patched.base_offset == base && patched.last_offset() >= base);
                producers.update(&patched, &batch);
                log.append(&patched, batch.freeze());
                if first_offset < 0 {
                    first_offset = base;
                }
            }
            self.bound_producers(&mut producers);
        }
        let end = self.log.borrow().next_offset();
        // Kafka's BytesInPerSec / MessagesInPerSec: counted when appended, on this shard.
        crate::metrics::with(|m| {
            let t = m.topic(&self.topic);
            t.bytes_in += total as u64;
            t.messages_in += u64::try_from(end - first_offset).unwrap_or(0);
        });
        // The waiter is registered before the writer can run (and fail the write), so a
        // rollback always reaches it. `durable` starts the writer.
        let durable = (acks != 0).then(|| self.writer.durable(end, durability(acks, settings.flush)));
        drop(_permit);
        self.writer.kick();
        if let Some(durable) = durable {
            durable.await?;
        }
        self.wait_acks(end, acks, settings, leadership, replication_timeout).await?;
        Ok(AppendOutcome { base_offset: first_offset, log_append_time_ms: log_append_time, log_start_offset: self.log_start_offset() })
    }

    /// After the leader's own write is durable: acks=-1 waits for the high watermark to
    /// reach `end_offset` and checks min.insync.replicas again; any acks that waits
    /// answers only if this replica led throughout (`leadership` unchanged).
    async fn wait_acks(
        &self,
        end_offset: i64,
        acks: i16,
        settings: &PartitionSettings,
        leadership: u64,
        replication_timeout: Option<std::time::Duration>,
    ) -> Result<(), PartitionError> {
        if acks == 0 {
            return Ok(());
        }
        self.check_still_leading(leadership)?;
        if acks == -1 {
            match replication_timeout {
                None => self.wait_high_watermark(end_offset).await?,
                Some(t) => {
                    use futures::FutureExt;
                    futures::select! {
                        r = self.wait_high_watermark(end_offset).fuse() => r?,
                        _ = glommio::timer::sleep(t).fuse() => return Err(PartitionError::RequestTimedOut { timeout_ms: t.as_millis() as u64 }),
                    }
                }
            }
            self.check_still_leading(leadership)?;
            if let Some((isr, min_insync)) = self.insync_shortfall(settings) {
                return Err(PartitionError::NotEnoughReplicasAfterAppend { isr, min_insync });
            }
        }
        Ok(())
    }

    /// (ISR size, min.insync.replicas) when the committed ISR is smaller (Kafka counts
    /// the committed ISR, not the maximal one).
    fn insync_shortfall(&self, settings: &PartitionSettings) -> Option<(usize, i32)> {
        let isr = self.tracker.borrow().isr().len();
        let min_insync = settings.min_insync_replicas;
        (i64::try_from(isr).unwrap_or(i64::MAX) < i64::from(min_insync)).then_some((isr, min_insync))
    }

    /// Waits until offsets below `end_offset` are as durable as `acks` and the topic's
    /// flush mode promise: fdatasync'ed for acks=-1 with flush=always, written otherwise.
    async fn wait_durable(&self, end_offset: i64, acks: i16, flush: FlushMode) -> Result<(), PartitionError> {
        self.writer.durable(end_offset, durability(acks, flush)).await?;
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end. Called with the
    /// append lock held, so it only opens the new file (no fsync here): the writer syncs
    /// the sealed segment and the directory, then saves the producer snapshot handed over
    /// here (the producer state as of `base`, every batch appended so far) and the sealed
    /// segment's indexes, off the append path. A crash before that leaves no snapshot at
    /// `base`: recovery then starts from an older snapshot (or none) and replays the
    /// batches on disk, so producer state never counts a batch a crash lost (a retry of
    /// it is appended again, never answered "duplicate").
    pub(super) async fn roll(&self, now: i64) -> Result<(), PartitionError> {
        // The append lock is held, so nothing is appended while the file opens; but the
        // writer runs meanwhile, and a write that fails rolls the log's end back. Then
        // the file opened is named for an end that no longer is: it goes, and the roll
        // starts again at the new end (each retry needs another failed write, and a
        // failed write leaves nothing in flight to fail).
        for _ in 0..ROLL_ATTEMPTS {
            let (path, base, mode) = {
                let log = self.log.borrow();
                (log.next_segment_path(), log.next_offset(), log.write_mode())
            };
            let file = open_segment(&path, mode).await?;
            if self.log.borrow().next_offset() != base {
                drop(file);
                self.writer.discard_unused_segment_file(&path).await?;
                tracing::info!(topic = %self.topic, partition = self.index, base, "a failed write moved the log end back while a segment opened; rolling again");
                continue;
            }
            self.log.borrow().check_online()?;
            let snapshot = SealSnapshot { magic: SNAPSHOT_MAGIC, version: SNAPSHOT_VERSION, payload: self.producers.borrow().encode() };
            self.log.borrow_mut().roll(file, now, Some(snapshot));
            tracing::debug!(topic = %self.topic, partition = self.index, base, "rolled segment");
            return Ok(());
        }
        Err(PartitionError::Storage(StorageError::io("rolling a segment", std::io::Error::other("the log end kept moving back while a segment opened"))))
    }
}

/// What an ack waits for: fdatasync for acks=-1 with flush=always, the write otherwise.
pub(super) fn durability(acks: i16, flush: FlushMode) -> Durability {
    if acks == -1 && flush == FlushMode::Always {
        Durability::Synced
    } else {
        Durability::Written
    }
}
