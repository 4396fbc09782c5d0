//! Reads: fetch (cache first, then disk through storage's `BatchReader`), the ListOffsets
//! scans by timestamp, and the long-poll watchers woken when the high watermark moves.
use std::cell::RefCell;

use bytes::Bytes;
use futures::channel::oneshot;

use super::error::PartitionError;
use super::state::Partition;
use crate::record::BatchHeader;
use crate::storage::batch_reader::BatchReader;
use crate::storage::log::DiskRead;

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

#[derive(Clone, Debug, Default)]
pub struct FetchData {
    /// Stored batch bytes, whole batches, in offset order.
    pub records: Vec<Bytes>,
    pub bytes: usize,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// Long-poll fetches waiting for the high watermark to move. The log's writer wakes
/// them (through its `on_written` hook) every time it has completed writes, and
/// `Partition::close` wakes them; a woken fetch re-reads and waits again if need be.
#[derive(Default)]
pub(super) struct Watchers(RefCell<Vec<oneshot::Sender<()>>>);

impl Watchers {
    fn add(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.0.borrow_mut().push(tx);
        rx
    }

    pub(super) fn wake_all(&self) {
        for w in self.0.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }
}

impl Partition {
    /// Resolves when the high watermark moves (or the partition closes).
    pub fn watch(&self) -> oneshot::Receiver<()> {
        self.watchers.add()
    }

    /// Reads whole batches from `offset`, below the high watermark, up to `max_bytes`
    /// (at least one batch if any is available).
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<FetchData, PartitionError> {
        self.assert_on_shard();
        self.check_online()?;
        let (hw, start, leo) = (self.high_watermark(), self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > leo {
            return Err(PartitionError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: leo });
        }
        let mut data = FetchData { high_watermark: hw, log_start_offset: start, ..Default::default() };
        if offset >= hw {
            return Ok(data);
        }
        let cached = self.log.borrow().read_cached(offset, hw, max_bytes, &mut data.records);
        match cached {
            Some(n) => data.bytes = n,
            None => self.read_disk(offset, hw, max_bytes, &mut data).await?,
        }
        // Invariant 2: a consumer never sees an offset at or above the high watermark.
        debug_assert!(
            data.records.iter().all(|b| crate::record::parse_header(b).is_ok_and(|h| h.base_offset < hw)),
            "fetch read a batch at or above the high watermark {hw}"
        );
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
