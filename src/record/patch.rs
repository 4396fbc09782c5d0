//! Patching a stored batch's header: the fields Kafka sets on append (base offset and
//! partition leader epoch, outside the CRC; LogAppendTime, inside it) and the fields a
//! cleaned batch recomputes around its new records section.
use bytes::{Bytes, BytesMut};

use super::header::{
    compute_crc, frame_batch, header_array_mut, BatchError, BatchHeader, ATTR_TIMESTAMP_LOG_APPEND, ATTR_TRANSACTIONAL, BATCH_HEADER_LEN, LOG_OVERHEAD,
    OFF_ATTRIBUTES, OFF_BASE_OFFSET, OFF_BASE_SEQUENCE, OFF_BATCH_LENGTH, OFF_CRC, OFF_LEADER_EPOCH, OFF_MAX_TIMESTAMP, OFF_PRODUCER_EPOCH, OFF_PRODUCER_ID,
    OFF_RECORDS_COUNT,
};
use super::records::compress_into;

/// Patch the base offset (bytes 0..8, outside the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) -> Result<(), BatchError> {
    let h = header_array_mut(batch)?;
    h[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    Ok(())
}

/// Patch the partition leader epoch (bytes 12..16, outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<(), BatchError> {
    let h = header_array_mut(batch)?;
    h[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
    Ok(())
}

/// For topics with `message.timestamp.type=LogAppendTime`: as Kafka's
/// `DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now)`, set the timestamp-type
/// attribute bit and maxTimestamp (baseTimestamp and the records are left alone; readers
/// report maxTimestamp for every record of a LogAppendTime batch), then recompute the CRC.
/// A no-op when both already hold. `batch` must start with one whole batch.
pub fn set_log_append_time(batch: &mut [u8], ts_ms: i64) -> Result<(), BatchError> {
    let (h, total) = frame_batch(batch)?;
    if h.timestamp_type_is_log_append() && h.max_timestamp == ts_ms {
        return Ok(());
    }
    let batch = &mut batch[..total];
    {
        let arr = header_array_mut(batch)?;
        let attributes = h.attributes | ATTR_TIMESTAMP_LOG_APPEND;
        arr[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        arr[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&ts_ms.to_be_bytes());
    }
    rewrite_crc(batch)
}

/// Recomputes the CRC of one whole batch after a header field inside it changed.
fn rewrite_crc(batch: &mut [u8]) -> Result<(), BatchError> {
    let crc = compute_crc(batch);
    let arr = header_array_mut(batch)?;
    arr[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// A client's side: stamps one whole batch with its producer (id, epoch, base sequence)
/// and the transactional bit, then recomputes the CRC (all inside it). The load
/// generator reuses one encoded batch this way for every transaction.
pub fn set_producer(batch: &mut [u8], producer_id: i64, producer_epoch: i16, base_sequence: i32, transactional: bool) -> Result<(), BatchError> {
    let (h, total) = frame_batch(batch)?;
    let batch = &mut batch[..total];
    {
        let arr = header_array_mut(batch)?;
        let attributes = if transactional { h.attributes | ATTR_TRANSACTIONAL } else { h.attributes & !ATTR_TRANSACTIONAL };
        arr[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        arr[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
        arr[OFF_PRODUCER_EPOCH..OFF_PRODUCER_EPOCH + 2].copy_from_slice(&producer_epoch.to_be_bytes());
        arr[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
    }
    rewrite_crc(batch)
}

/// A new batch with the header of stored `batch` and `records` (plain, `count` of them)
/// as its records section, compressed with the batch's codec (Kafka's
/// `MemoryRecords.filterTo` output for v2). Keeps base offset, last offset delta,
/// producer id/epoch, base sequence, partition leader epoch, attributes and base
/// timestamp; recomputes length, records count, CRC and, for CreateTime batches, sets
/// maxTimestamp to `max_timestamp` (a LogAppendTime batch keeps its own).
pub fn rebuild_with_records(batch: &[u8], header: &BatchHeader, records: BytesMut, count: usize, max_timestamp: i64) -> Result<Bytes, BatchError> {
    let head = batch.get(..BATCH_HEADER_LEN).ok_or(BatchError::Truncated { needed: BATCH_HEADER_LEN, available: batch.len() })?;
    let compression = header.compression().ok_or(BatchError::UnknownCompression(header.compression_id()))?;
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + records.len());
    out.extend_from_slice(head);
    compress_into(&mut out, records, compression).map_err(|e| BatchError::CorruptRecord(e.to_string()))?;
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| BatchError::InvalidBatchLength { length: i32::MAX })?;
    out[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    if !header.timestamp_type_is_log_append() {
        out[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    }
    let count = i32::try_from(count).map_err(|_| BatchError::InvalidRecordCount(i32::MAX))?;
    out[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&count.to_be_bytes());
    let crc = compute_crc(&out);
    out[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}
