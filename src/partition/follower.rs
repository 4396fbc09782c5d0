//! The follower's side of replication (Kafka's appendRecordsToFollowerOrFutureReplica,
//! truncateTo, truncateFullyAndStartAt): appending the batches fetched from the leader as
//! they are, and cutting a divergent tail.
//!
//! A follower stores the leader's bytes unchanged (offsets, leader epochs, timestamps as
//! the leader wrote them), so replicas' logs are byte-identical batch by batch. It checks
//! what could be damaged on the way (framing, CRC-32C) and where the batches go (at its
//! log end, dense), nothing a producer is checked for. Producer state and the
//! leader-epoch cache follow the batches, so a follower that becomes leader rejects the
//! duplicates and answers OffsetForLeaderEpoch as the old leader did.
//!
//! Everything here runs under the append lock, and nothing awaits between staging the
//! first batch and registering the durability waiter (a failed write must find it; see
//! `append.rs`).
use std::ops::Range;

use bytes::Bytes;

use super::append::durability;
use super::error::PartitionError;
use super::producer_state::{ProducerStateTable, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use super::state::{recover_producers, Partition};
use crate::record::{iter_batches, BatchError, BatchHeader, IterStop};
use crate::runtime::now_ms;
use crate::storage::dma::write_checked_file;
use crate::storage::leader_epoch_cache::EpochEntry;
use crate::storage::segment::snapshot_path;
use crate::storage::StorageError;

impl Partition {
    /// Appends batches fetched from the leader (a Fetch response's records for this
    /// partition) and returns the log end offset once they are as durable as this
    /// partition's flush mode promises (written for flush=never, fdatasync'ed for
    /// flush=always): the offset the follower's next fetch may send.
    ///
    /// The first batch must start at the log end offset and each next one where the
    /// previous ended (`OffsetMismatch` otherwise: the fetcher restarts from its log end).
    /// A batch cut by the end of `records` (a fetch size limit) is left for the next
    /// fetch; any other damage refuses the whole response (`PartitionError::Batch`).
    pub async fn append_as_follower(&self, records: Bytes) -> Result<i64, PartitionError> {
        self.assert_on_shard();
        self.check_follower()?;
        self.check_online()?;
        let batches = frame_fetched(&records)?;
        if batches.is_empty() {
            return Ok(self.log_end_offset());
        }
        let total: usize = batches.iter().map(|(h, _)| h.total_len()).sum();
        crate::metrics::with(|m| m.topic(&self.topic).replication_bytes_in += total as u64);
        let _permit = self.append_lock.acquire_permit(1).await.map_err(|_| PartitionError::NotFollower)?;
        self.check_follower()?;
        self.check_online()?;
        let expected = self.log_end_offset();
        check_dense(&batches, expected)?;
        // Kafka rolls once for the whole fetched set, before appending it.
        let now = now_ms();
        if self.log.borrow().should_roll(total, now) {
            self.roll(now).await?;
        }
        // Leader epochs new to this log, saved before anything is staged (see `append`).
        let mut epochs_changed = false;
        for (h, _) in &batches {
            epochs_changed |= self.epochs.borrow_mut().assign(h.partition_leader_epoch, h.base_offset);
        }
        if epochs_changed {
            let saved = self.epochs.borrow().save_job();
            if let Err(e) = saved.await {
                self.epochs.borrow_mut().truncate_from_end(self.log_end_offset());
                return Err(e.into());
            }
        }
        // The waits above let the writer roll back a failed write (moving the log end)
        // and a role change run.
        let still = self.check_follower().and_then(|()| check_dense(&batches, self.log_end_offset()));
        if let Err(e) = still {
            self.epochs.borrow_mut().truncate_from_end(self.log_end_offset());
            return Err(e);
        }
        {
            let mut log = self.log.borrow_mut();
            let mut producers = self.producers.borrow_mut();
            for (h, range) in &batches {
                // The one copy of the fetched bytes: into the segment's stage buffer.
                let batch = log.stage_batch(&records[range.clone()]);
                // As recovery replays every stored batch (`recover_producers`).
                producers.update(h, &batch);
                log.append(h, batch.freeze());
            }
            self.bound_producers(&mut producers);
        }
        let end = self.log_end_offset();
        let flush = self.settings.borrow().flush;
        // Registered before the writer can run (and fail the write); starts the writer.
        let durable = self.writer.durable(end, durability(-1, flush));
        drop(_permit);
        self.writer.kick();
        durable.await?;
        Ok(end)
    }

    /// Cuts the log so it ends at the base of the batch holding `offset` (all of it when
    /// `offset` is a batch boundary, Kafka's truncateTo), with the producer state, the
    /// leader-epoch cache and the high watermark. Returns the new log end offset.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64, PartitionError> {
        self.assert_on_shard();
        self.check_online()?;
        let _permit = self.append_lock.acquire_permit(1).await.map_err(|_| PartitionError::NotFollower)?;
        if offset >= self.log_end_offset() {
            // No record to cut, but epochs this replica started at its log end while it
            // led (and never wrote in) go: the leader has none of them. Kept, the next
            // fetch would name the same last epoch and get the same divergence forever.
            let end = self.log_end_offset();
            self.cut_epochs(end).await?;
            return Ok(end);
        }
        let end = self.writer.truncate_to(offset).await?;
        debug_assert_eq!(end, self.log_end_offset(), "the writer reports the log end");
        debug_assert!(end <= offset, "truncation never keeps an offset at or past its target");
        self.cut_high_watermark(end);
        self.cut_epochs(end).await?;
        let rebuild = self.producers.borrow().has_batches_from(end);
        if rebuild {
            self.rebuild_producers().await?;
        }
        tracing::info!(topic = %self.topic, partition = self.index, offset, log_end_offset = end,
            high_watermark = self.high_watermark(), "truncated the log");
        Ok(end)
    }

    /// Removes the whole log and starts it empty at `offset` (log start = end = high
    /// watermark = `offset`): the leader's log start is past this follower's end.
    pub async fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), PartitionError> {
        self.assert_on_shard();
        self.check_online()?;
        self.restart_log_at(offset, ProducerStateTable::default(), Vec::new(), None).await?;
        tracing::info!(topic = %self.topic, partition = self.index, offset, "truncated the whole log; restarting it");
        Ok(())
    }

    /// Kafka's "fetch from tiered offset" (KIP-405): the leader answered
    /// OFFSET_MOVED_TO_TIERED_STORAGE, so this replica's log restarts empty at `offset`
    /// (the end of the remote log) with the state the remote log had there: its leader
    /// epochs and the producer snapshot taken when that segment was sealed (the payload
    /// of a `.snapshot` file, empty for none). History below `offset` stays remote.
    /// A crash before that state is saved makes the next open start the log over
    /// (`tiered_restart`).
    pub async fn start_from_tiered(&self, offset: i64, epochs: Vec<EpochEntry>, producer_snapshot: &[u8]) -> Result<(), PartitionError> {
        self.assert_on_shard();
        self.check_follower()?;
        self.check_online()?;
        debug_assert!(epochs.iter().all(|e| e.start_offset < offset), "the remote log's epochs start below its end");
        let producers = if producer_snapshot.is_empty() {
            ProducerStateTable::default()
        } else {
            ProducerStateTable::decode(producer_snapshot).ok_or_else(|| StorageError::Corrupt {
                what: format!("{}-{} remote producer snapshot", self.topic, self.index),
                detail: "does not decode".into(),
            })?
        };
        self.restart_log_at(offset, producers, epochs, Some(producer_snapshot)).await?;
        tracing::info!(topic = %self.topic, partition = self.index, offset, epochs = self.epochs.borrow().entries().len(),
            producers = self.producers.borrow().len(), "restarted the log at the tiered offset");
        Ok(())
    }

    /// The log emptied and started at `offset` with the given producer state and leader
    /// epochs (all below `offset`), saved. `tiered_snapshot`: a restart at the tiered
    /// offset, bracketed by the `tiered_restart` marker, whose producer snapshot payload
    /// (empty for none) is written as the new log's first snapshot.
    async fn restart_log_at(
        &self,
        offset: i64,
        mut producers: ProducerStateTable,
        epochs: Vec<EpochEntry>,
        tiered_snapshot: Option<&[u8]>,
    ) -> Result<(), PartitionError> {
        let _permit = self.append_lock.acquire_permit(1).await.map_err(|_| PartitionError::NotFollower)?;
        self.check_follower()?;
        let dir = self.log.borrow().dir().to_path_buf();
        if tiered_snapshot.is_some() {
            super::tiered_restart::begin(&dir, offset).await?;
        }
        self.writer.truncate_fully_and_start_at(offset).await?;
        debug_assert_eq!((self.log_start_offset(), self.log_end_offset()), (offset, offset));
        self.reset_high_watermark(offset);
        if let Some(snapshot) = tiered_snapshot.filter(|s| !s.is_empty()) {
            // Found by the next open as the snapshot of the log's first segment.
            write_checked_file(&snapshot_path(&dir, offset), SNAPSHOT_MAGIC, SNAPSHOT_VERSION, snapshot).await?;
        }
        self.bound_producers(&mut producers);
        *self.producers.borrow_mut() = producers;
        self.epochs.borrow_mut().replace(epochs);
        let saved = self.epochs.borrow().save_job();
        saved.await?;
        if tiered_snapshot.is_some() {
            super::tiered_restart::finish(&dir).await?;
        }
        Ok(())
    }

    /// NotFollower unless this replica follows (and is open).
    fn check_follower(&self) -> Result<(), PartitionError> {
        if self.closed.get() {
            return Err(PartitionError::NotLeader);
        }
        if self.is_leader() {
            return Err(PartitionError::NotFollower);
        }
        Ok(())
    }

    /// The leader-epoch cache without the epochs that started at or after `end`, saved.
    async fn cut_epochs(&self, end: i64) -> Result<(), PartitionError> {
        if self.epochs.borrow_mut().truncate_from_end(end) {
            let saved = self.epochs.borrow().save_job();
            saved.await?;
        }
        Ok(())
    }

    /// The producer state as of the log end, rebuilt as at open (snapshot, then replay):
    /// cutting the table alone would lose the older batches and epochs a producer's cut
    /// batches had pushed out of it.
    async fn rebuild_producers(&self) -> Result<(), PartitionError> {
        debug_assert_eq!(self.log.borrow().written_offset(), self.log_end_offset(), "a truncated log is all written");
        // The append lock is held: nothing is appended while the batches on disk replay.
        let mut table = recover_producers(&self.log, None, None, &self.topic, self.index).await?;
        self.bound_producers(&mut table);
        *self.producers.borrow_mut() = table;
        Ok(())
    }
}

/// The whole batches at the start of `records` (header, byte range), framing and CRC
/// checked. A batch cut by the end is dropped (the next fetch gets it whole), unless it
/// is the only one (a fetch that can never make progress).
fn frame_fetched(records: &[u8]) -> Result<Vec<(BatchHeader, Range<usize>)>, PartitionError> {
    let mut out = Vec::new();
    let mut it = iter_batches(records);
    // The iteration ends at the first problem; `stop` says which.
    out.extend(it.by_ref().map_while(Result::ok));
    match it.stop() {
        Some(IterStop::Invalid(e)) => Err(e.clone().into()),
        Some(IterStop::Cut { .. }) if out.is_empty() => Err(BatchError::Truncated { needed: crate::record::LOG_OVERHEAD, available: records.len() }.into()),
        // A cut batch after whole ones waits for the next fetch; zero bytes after whole
        // batches are no batch (a leader never sends them; harmless).
        _ => Ok(out),
    }
}

/// The batches start at `expected` (or after it: a compacted leader's cleaned segments
/// skip the offsets of removed batches, and the follower copies those gaps) and increase.
/// Never below: that would rewrite offsets this log already holds.
fn check_dense(batches: &[(BatchHeader, Range<usize>)], expected: i64) -> Result<(), PartitionError> {
    let mut next = expected;
    for (h, _) in batches {
        if h.base_offset < next || h.last_offset() < h.base_offset {
            return Err(PartitionError::OffsetMismatch { expected: next, got: h.base_offset });
        }
        next = h.last_offset() + 1;
    }
    Ok(())
}
