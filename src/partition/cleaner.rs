//! The log cleaner of one partition (Kafka's `Cleaner.doClean`), run by the shard's
//! `cleaner_loop` every `log_cleaner_backoff_ms` for compacted topics whose dirty ratio
//! reached `min.cleanable.dirty.ratio`, or called directly (tests).
//!
//! A pass: build key → latest offset over the whole log's durable data (sealed and
//! active segments), then rewrite every sealed segment keeping only each key's latest
//! record (and tombstones younger than `delete.retention.ms`), and swap each cleaned file
//! in (storage/compaction.rs). The active segment is never rewritten.
//!
//! Concurrency on the shard: the pass yields between batches, so appends, fetches,
//! retention and index saves interleave with it. Why that is safe:
//! - a fetch holds an `Rc<SegmentFile>` of the segment it reads; the swap renames a new file
//!   over the name and never writes the old one, so a read in flight keeps reading the
//!   old, valid bytes until it drops the handle;
//! - only segments whose indexes are saved are cleaned, so no index save of the log
//!   writer is in flight for them; the cleaner saves the new indexes itself;
//! - retention may delete a segment while it is being cleaned: the swap checks that the
//!   segment still has the file that was read (and holds retention off it meanwhile);
//! - the batch cache is cut below each cleaned segment's end when it is installed.
//!
//! Simplified compared with Kafka 4.1: every sealed segment is rewritten on its own
//! (no grouping of small segments), the key map holds whole keys for the whole log
//! rather than a bounded digest map over the dirty range, min/max.compaction.lag.ms are
//! not applied, and a tombstone is dropped once its batch's max timestamp is older than
//! now − delete.retention.ms (Kafka stamps a delete horizon into the batch on the first
//! clean and drops the tombstone on a later one).
use std::rc::Rc;

use crate::storage::file::SegmentFile;

use super::state::Partition;
use super::PartitionError;
use crate::record::parse_header;
use crate::storage::batch_reader::BatchReader;
use crate::storage::compaction::{
    cleaned_path, filter_batch, remove_partial_clean, retain, save_checkpoint, swap_in, CleanedSegmentWriter, Filtered, OffsetMap, READ_CHUNK_BYTES,
};
use crate::storage::dma::remove_file;
use crate::storage::segment::{index_path, log_file_name, snapshot_path, time_index_path};
use crate::storage::StorageError;

/// What a damaged batch met while cleaning is reported as.
const SEGMENT_BEING_CLEANED: &str = "segment being cleaned";

/// What one clean pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerStats {
    pub segments_cleaned: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub batches_dropped: usize,
    pub batches_rewritten: usize,
    pub keys: usize,
}

fn corrupt(e: impl std::fmt::Display) -> PartitionError {
    PartitionError::Storage(StorageError::Corrupt { what: "batch in a compacted log".into(), detail: e.to_string() })
}

impl Partition {
    /// True when the topic is compacted and dirty bytes make up at least
    /// min.cleanable.dirty.ratio of the sealed segments.
    pub fn needs_cleaning(&self) -> bool {
        let log = self.log.borrow();
        let cfg = log.config();
        cfg.compact && !log.is_uncleanable() && log.dirty_ratio().is_some_and(|r| r > 0.0 && r >= cfg.min_cleanable_dirty_ratio)
    }

    /// One clean pass over every sealed segment, its key map within `max_key_bytes`
    /// (log.cleaner.dedupe.buffer.size: `OffsetMap`'s budget). A second call while a pass
    /// runs does nothing.
    pub async fn clean(&self, now_ms: i64, max_key_bytes: usize) -> Result<CleanerStats, PartitionError> {
        self.assert_on_shard();
        if self.closed.get() {
            return Err(PartitionError::NotLeader);
        }
        if !self.log.borrow_mut().begin_clean() {
            return Ok(CleanerStats::default());
        }
        // Ends the clean even if this future is dropped half-way (shutdown).
        struct Running<'a>(&'a Partition);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                // No borrow of the log is held at any await point, so this cannot fail.
                if let Ok(mut log) = self.0.log.try_borrow_mut() {
                    log.end_swap();
                    log.end_clean();
                }
            }
        }
        let _running = Running(self);
        let res = self.clean_pass(now_ms, max_key_bytes).await;
        if let Err(PartitionError::Storage(StorageError::Corrupt { .. })) = &res {
            self.log.borrow_mut().mark_uncleanable();
        }
        res
    }

    async fn clean_pass(&self, now_ms: i64, max_key_bytes: usize) -> Result<CleanerStats, PartitionError> {
        let (segments, reads, bound, cfg, dir) = {
            let log = self.log.borrow();
            // Only data that is written and fdatasync'ed decides what is superseded: a
            // newer record lost in a crash must not have removed the older one. Nor does
            // data of a transaction still open (Kafka cleans below the last stable offset
            // only): its records may yet be aborted.
            let bound = log.written_offset().min(log.synced_offset()).min(self.last_stable_offset());
            (log.cleanable_segments(), log.disk_reads(), bound, log.config().clone(), log.dir().to_path_buf())
        };
        let mut stats = CleanerStats::default();
        if segments.is_empty() {
            return Ok(stats);
        }
        let Some(map) = self.build_offset_map(reads, bound, max_key_bytes).await? else { return Ok(stats) };
        stats.keys = map.len();
        let tombstone_horizon_ms = now_ms.saturating_sub(cfg.delete_retention_ms);
        let mut cleaned_upto = None;
        for (base, file, end, next_offset, created_ms) in segments {
            if self.closed.get() {
                return Err(PartitionError::NotLeader);
            }
            let mut writer = CleanedSegmentWriter::create(&dir, base, created_ms, cfg.index_interval_bytes).await?;
            if let Err(e) = self.copy_retained(&mut writer, file.clone(), end, &map, tombstone_horizon_ms, &mut stats).await {
                writer.abandon(&dir).await;
                return Err(e);
            }
            let after = writer.size();
            let cleaned = match writer.finish(next_offset).await {
                Ok(seg) => seg,
                Err(e) => {
                    remove_partial_clean(&dir, base).await;
                    return Err(e.into());
                }
            };
            if !self.swap(base, &file, cleaned).await? {
                continue;
            }
            stats.segments_cleaned += 1;
            stats.bytes_before += end;
            stats.bytes_after += after;
            cleaned_upto = Some(next_offset);
            glommio::yield_if_needed().await;
        }
        if let Some(upto) = cleaned_upto {
            self.log.borrow_mut().set_first_dirty_offset(upto);
            if let Err(e) = save_checkpoint(&dir, upto).await {
                // Only costs a needless clean after a restart.
                tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "could not save the cleaner checkpoint");
            }
        }
        tracing::info!(topic = %self.topic, partition = self.index, segments = stats.segments_cleaned,
            bytes_before = stats.bytes_before, bytes_after = stats.bytes_after, keys = stats.keys, "cleaned log");
        crate::metrics::with(|m| {
            m.cleaner.passes += 1;
            m.cleaner.segments += stats.segments_cleaned as u64;
            m.cleaner.bytes_read += stats.bytes_before;
            m.cleaner.bytes_written += stats.bytes_after;
        });
        Ok(stats)
    }

    /// Key → latest offset over every batch ending below `bound`. None when the map
    /// would exceed its budget.
    async fn build_offset_map(&self, reads: Vec<crate::storage::log::DiskRead>, bound: i64, max_key_bytes: usize) -> Result<Option<OffsetMap>, PartitionError> {
        let mut map = OffsetMap::new(max_key_bytes);
        for r in reads {
            let mut reader = BatchReader::new(r.file, r.position, r.end, READ_CHUNK_BYTES);
            loop {
                // Sealed data was validated when written: damage must stop the cleaner.
                let chunk = reader.next_chunk_strict(SEGMENT_BEING_CLEANED).await?;
                if chunk.is_empty() {
                    break;
                }
                for (h, batch) in chunk {
                    if h.last_offset() >= bound {
                        return Ok(Some(map));
                    }
                    // Aborted records never supersede anything.
                    if self.is_aborted_batch(&h) {
                        continue;
                    }
                    if !map.add_batch(&batch, &h).map_err(corrupt)? {
                        tracing::warn!(topic = %self.topic, partition = self.index, limit_bytes = max_key_bytes,
                            "too many distinct key bytes to compact this log; skipping it");
                        return Ok(None);
                    }
                }
                glommio::yield_if_needed().await;
                if self.closed.get() {
                    return Err(PartitionError::NotLeader);
                }
            }
        }
        Ok(Some(map))
    }

    /// A transactional data batch of a transaction that was aborted.
    fn is_aborted_batch(&self, h: &crate::record::BatchHeader) -> bool {
        h.is_transactional()
            && !h.is_control()
            && self
                .producers
                .borrow()
                .aborted_between(h.base_offset, h.last_offset() + 1)
                .iter()
                .any(|a| a.producer_id == h.producer_id && a.first_offset <= h.base_offset)
    }

    /// Streams one sealed segment through the filter into `writer`.
    async fn copy_retained(
        &self,
        writer: &mut CleanedSegmentWriter,
        file: Rc<SegmentFile>,
        end: u64,
        map: &OffsetMap,
        tombstone_horizon_ms: i64,
        stats: &mut CleanerStats,
    ) -> Result<(), PartitionError> {
        let mut reader = BatchReader::new(file, 0, end, READ_CHUNK_BYTES);
        loop {
            let chunk = reader.next_chunk_strict(SEGMENT_BEING_CLEANED).await?;
            if chunk.is_empty() {
                return Ok(());
            }
            for (h, batch) in chunk {
                // Kafka's cleaner discards the data of aborted transactions (their markers
                // stay, as control batches always do here).
                if self.is_aborted_batch(&h) {
                    stats.batches_dropped += 1;
                    continue;
                }
                let drop_tombstones = h.max_timestamp < tombstone_horizon_ms;
                match filter_batch(&batch, &h, |r, section| retain(r, section, map, drop_tombstones)).map_err(corrupt)? {
                    Filtered::Unchanged => writer.push(&h, &batch).await?,
                    Filtered::Rewritten(b) => {
                        let nh = parse_header(&b).map_err(corrupt)?;
                        writer.push(&nh, &b).await?;
                        stats.batches_rewritten += 1;
                    }
                    Filtered::Dropped => stats.batches_dropped += 1,
                }
                glommio::yield_if_needed().await;
            }
            if self.closed.get() {
                return Err(PartitionError::NotLeader);
            }
        }
    }

    /// Swaps the cleaned segment in for `base` (read from `read_file`). False when the
    /// segment went away meanwhile (retention); the cleaned file is then deleted.
    async fn swap(&self, base: i64, read_file: &Rc<SegmentFile>, cleaned: crate::storage::segment::Segment) -> Result<bool, PartitionError> {
        let dir = cleaned.dir.clone();
        if self.closed.get() || !self.log.borrow_mut().begin_swap(base, read_file) {
            drop(cleaned);
            remove_file(&cleaned_path(&dir, base)).await?;
            return Ok(false);
        }
        // Nothing left: delete the segment rather than keep an empty file (Kafka merges
        // small cleaned segments instead). The first segment stays: its base is the log
        // start offset recovery finds.
        let removed = self.log.borrow_mut().remove_swapped_if_empty(&cleaned);
        if let Some(old) = removed {
            drop(old);
            drop(cleaned);
            let res = async {
                remove_file(&cleaned_path(&dir, base)).await?;
                // Indexes first: a crash before the log file goes leaves a scannable segment.
                remove_file(&index_path(&dir, base)).await?;
                remove_file(&time_index_path(&dir, base)).await?;
                remove_file(&snapshot_path(&dir, base)).await?;
                remove_file(&dir.join(log_file_name(base))).await
            }
            .await;
            self.log.borrow_mut().end_swap();
            res?;
            return Ok(true);
        }
        if let Err(e) = swap_in(&dir, base, &cleaned.file).await {
            // The old file may still be in place or the cleaned one may be; either is a
            // whole segment without an index, which recovery rebuilds by scanning.
            // Reads go on from the open old file.
            self.log.borrow_mut().end_swap();
            drop(cleaned);
            remove_partial_clean(&dir, base).await;
            return Err(e.into());
        }
        // Only after the rename: an index saved earlier would describe the old file.
        if let Err(e) = cleaned.save_indexes().await {
            tracing::warn!(topic = %self.topic, partition = self.index, base, error = %e,
                "could not save the indexes of a cleaned segment; recovery will rebuild them");
        }
        let mut log = self.log.borrow_mut();
        log.install_cleaned(cleaned);
        log.end_swap();
        Ok(true)
    }
}
