//! Validating the records of one Produce partition as Kafka does for a client append.
use smallvec::SmallVec;

use super::header::{check_crc, frame_batch, BatchError, BatchHeader};

/// Validate the `records` of one Produce partition as Kafka 4.1 does for a client append
/// (Produce v3+): exactly one magic-2 batch filling the field, base offset 0, size within
/// `max_message_bytes` (the whole batch, as Kafka's `sizeInBytes`), CRC-32C valid, a known
/// codec, `recordsCount >= 1` with `lastOffsetDelta == recordsCount - 1`, not a control
/// batch, and a non-negative base sequence when a producer id is set.
///
/// Kafka refuses more than one batch per partition since Produce v3
/// (`ProduceRequest.validateRecords`), so the result holds one header; it is a `SmallVec`
/// so callers iterate and the API survives if that ever relaxes.
pub fn validate_produce_records(
    records: &[u8],
    max_message_bytes: usize,
) -> Result<SmallVec<[BatchHeader; 1]>, BatchError> {
    if records.is_empty() {
        return Err(BatchError::NoBatch);
    }
    let (h, total) = frame_batch(records)?;
    if total != records.len() {
        // Anything after the first batch: a second batch or garbage, refused either way.
        return Err(BatchError::MultipleBatches);
    }
    let batch = &records[..total];
    // Order follows Kafka: base offset and size (analyzeAndValidateRecords), CRC, then the
    // content checks of LogValidator, so a damaged batch reports CORRUPT_MESSAGE.
    if h.base_offset != 0 {
        return Err(BatchError::NonZeroBaseOffset(h.base_offset));
    }
    if total > max_message_bytes {
        return Err(BatchError::MessageTooLarge { size: total, max: max_message_bytes });
    }
    check_crc(&h, batch)?;
    if h.compression().is_none() {
        return Err(BatchError::UnknownCompression(h.compression_id()));
    }
    if h.records_count <= 0 {
        return Err(BatchError::InvalidRecordCount(h.records_count));
    }
    if h.last_offset_delta < 0 || i64::from(h.last_offset_delta) + 1 != i64::from(h.records_count)
    {
        return Err(BatchError::InconsistentOffsetDelta {
            last_offset_delta: h.last_offset_delta,
            records_count: h.records_count,
        });
    }
    if h.is_control() {
        return Err(BatchError::ControlBatchFromClient);
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(BatchError::InvalidSequence {
            producer_id: h.producer_id,
            base_sequence: h.base_sequence,
        });
    }
    let mut out = SmallVec::new();
    out.push(h);
    Ok(out)
}

