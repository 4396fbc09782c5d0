//! Validating the records of one Produce partition as Kafka 4.1 does for a client append:
//! `ProduceRequest.validateRecords` (one magic-2 batch; zstd needs Produce v7),
//! `UnifiedLog.analyzeAndValidateRecords` (base offset, size, CRC) and `LogValidator`
//! (counts and offset range, control batches, sequences, then every record: its layout,
//! offset deltas 0..n-1, keys on compacted topics, timestamps).
use kafka_protocol::records::Compression;
use smallvec::SmallVec;

use super::header::{check_crc, frame_batch, parse_header, BatchError, BatchHeader, BATCH_HEADER_LEN};
use super::records::{walk_records, with_records_section};

/// Kafka's `RecordBatch.NO_TIMESTAMP`: a record without a timestamp is not range-checked.
const NO_TIMESTAMP: i64 = -1;

/// What a client's batch is checked against besides its own layout: the topic's
/// settings as Kafka's `LogValidator` takes them, and the broker's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceChecks {
    /// `max.message.bytes`: the whole batch as sent (Kafka's `sizeInBytes`).
    pub max_message_bytes: usize,
    /// `cleanup.policy` includes compact: every record needs a key.
    pub compacted_topic: bool,
    /// `message.timestamp.type` is LogAppendTime: the broker stamps the batch, and a
    /// client batch claiming LogAppendTime is refused.
    pub log_append_time: bool,
    /// `message.timestamp.before.max.ms` / `after.max.ms` (CreateTime topics): a
    /// record's timestamp must lie within `[now_ms - before, now_ms + after]`.
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// The broker's wall clock for the timestamp window.
    pub now_ms: i64,
}

impl ProduceChecks {
    /// Only the size limit: CreateTime, not compacted, any timestamp.
    pub fn with_max_message_bytes(max_message_bytes: usize) -> ProduceChecks {
        ProduceChecks {
            max_message_bytes,
            compacted_topic: false,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            now_ms: 0,
        }
    }
}

/// Kafka's `ProduceRequest.validateRecords` part that depends on the request version:
/// zstd needs Produce v7+ (UNSUPPORTED_COMPRESSION_TYPE below). Looks only at the first
/// batch's header; anything else wrong with the bytes is left to
/// `validate_produce_records`, which runs after this.
pub fn check_produce_version(records: &[u8], produce_version: i16) -> Result<(), BatchError> {
    match parse_header(records) {
        Ok(h) if produce_version < 7 && h.compression() == Some(Compression::Zstd) => {
            Err(BatchError::CompressionNeedsNewerProduce { version: produce_version })
        }
        _ => Ok(()),
    }
}

/// Validate the `records` of one Produce partition as Kafka 4.1 does for a client append
/// (Produce v3+): exactly one magic-2 batch filling the field, base offset 0, size within
/// `max_message_bytes`, CRC-32C valid, a known codec, `recordsCount >= 1` with
/// `lastOffsetDelta == recordsCount - 1`, not a control batch, a non-negative base
/// sequence when a producer id is set; then the records themselves (decompressed, at most
/// `MAX_DECOMPRESSED_BYTES`): exactly `recordsCount` well-formed records with offset
/// deltas 0..n-1, keyed on a compacted topic, timestamps within the topic's window.
///
/// Kafka refuses more than one batch per partition since Produce v3
/// (`ProduceRequest.validateRecords`), so the result holds one header; it is a `SmallVec`
/// so callers iterate and the API survives if that ever relaxes.
pub fn validate_produce_records(records: &[u8], checks: &ProduceChecks) -> Result<SmallVec<[BatchHeader; 1]>, BatchError> {
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
    if total > checks.max_message_bytes {
        return Err(BatchError::MessageTooLarge { size: total, max: checks.max_message_bytes });
    }
    check_crc(&h, batch)?;
    if h.compression().is_none() {
        return Err(BatchError::UnknownCompression(h.compression_id()));
    }
    if h.records_count <= 0 {
        return Err(BatchError::InvalidRecordCount(h.records_count));
    }
    if h.last_offset_delta < 0 || i64::from(h.last_offset_delta) + 1 != i64::from(h.records_count) {
        return Err(BatchError::InconsistentOffsetDelta { last_offset_delta: h.last_offset_delta, records_count: h.records_count });
    }
    if h.is_control() {
        return Err(BatchError::ControlBatchFromClient);
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(BatchError::InvalidSequence { producer_id: h.producer_id, base_sequence: h.base_sequence });
    }
    validate_records(batch, &h, checks)?;
    let mut out = SmallVec::new();
    out.push(h);
    Ok(out)
}

/// LogValidator's per-record pass over one client batch whose header passed.
fn validate_records(batch: &[u8], h: &BatchHeader, checks: &ProduceChecks) -> Result<(), BatchError> {
    debug_assert!(batch.len() >= BATCH_HEADER_LEN && h.base_offset == 0 && h.records_count >= 1);
    // Kafka: a client may not claim LogAppendTime on a LogAppendTime topic; on a
    // CreateTime topic such a batch's records carry its maxTimestamp, range-checked.
    if checks.log_append_time && h.timestamp_type_is_log_append() {
        return Err(BatchError::LogAppendTimeFromClient);
    }
    let window = (!checks.log_append_time)
        .then(|| (checks.now_ms.saturating_sub(checks.timestamp_before_max_ms), checks.now_ms.saturating_add(checks.timestamp_after_max_ms)));
    // Kafka collects every record's key and timestamp error before refusing the batch, so
    // the Produce response (v8+, KIP-467) can name each bad record.
    let mut record_errors = Vec::new();
    with_records_section(batch, h, |section| {
        walk_records(section, h, |index, r| {
            // Invariant the offsets assigned at append rely on: record i is at base + i.
            let offset_delta = r.offset - h.base_offset;
            if offset_delta != index as i64 {
                return Err(BatchError::InvalidRecord(format!(
                    "record {index} has offset delta {offset_delta}; a producer's batch has deltas 0..{}",
                    h.last_offset_delta
                )));
            }
            // `index` < records_count (an i32), checked by walk_records.
            let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
            if checks.compacted_topic && r.key.is_none() {
                record_errors.push(RecordError { batch_index, kind: RecordErrorKind::NoKeyOnCompactedTopic });
                return Ok(());
            }
            if let Some((min, max)) = window {
                let timestamp = if h.timestamp_type_is_log_append() { h.max_timestamp } else { r.timestamp };
                if timestamp != NO_TIMESTAMP && (timestamp < min || timestamp > max) {
                    let kind = RecordErrorKind::TimestampOutOfRange { timestamp, offset: r.offset, min, max };
                    record_errors.push(RecordError { batch_index, kind });
                }
            }
            Ok(())
        })
    })?;
    if record_errors.is_empty() {
        Ok(())
    } else {
        Err(BatchError::RecordErrors(Box::new(RecordErrors { errors: record_errors })))
    }
}

/// Why LogValidator refused one record of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordErrorKind {
    /// The topic's cleanup.policy includes compact and the record has no key.
    NoKeyOnCompactedTopic,
    /// The record's timestamp (the batch's max timestamp for a LogAppendTime batch on a
    /// CreateTime topic) lies outside `[min, max]`.
    TimestampOutOfRange { timestamp: i64, offset: i64, min: i64, max: i64 },
}

/// One refused record: its index in the batch and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub kind: RecordErrorKind,
}

impl RecordError {
    /// Kafka's RecordError message; `topic_partition` ("topic-0") where Kafka names it.
    pub fn message(&self, topic_partition: &str) -> String {
        match self.kind {
            RecordErrorKind::NoKeyOnCompactedTopic => {
                format!("Compacted topic cannot accept message without key in topic partition {topic_partition}")
            }
            RecordErrorKind::TimestampOutOfRange { timestamp, offset, min, max } => {
                format!("Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{min}, {max}]")
            }
        }
    }
}

/// Every refused record of one batch, in batch order (never empty): Kafka's
/// RecordValidationException. The whole batch is refused; the response lists these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordErrors {
    pub errors: Vec<RecordError>,
}

/// Kafka's processRecordErrors shows at most this many record errors in the batch message.
const ERRORS_IN_BATCH_MESSAGE: usize = 3;

impl RecordErrors {
    /// Any timestamp error makes the batch's code INVALID_TIMESTAMP, else INVALID_RECORD.
    pub fn has_timestamp_error(&self) -> bool {
        self.errors.iter().any(|e| matches!(e.kind, RecordErrorKind::TimestampOutOfRange { .. }))
    }

    /// Kafka's batch error message (the partition's `error_message`).
    pub fn batch_message(&self, topic_partition: &str) -> String {
        if self.has_timestamp_error() {
            return "One or more records have been rejected due to invalid timestamp".to_string();
        }
        let shown: Vec<String> = self
            .errors
            .iter()
            .take(ERRORS_IN_BATCH_MESSAGE)
            .map(|e| format!("RecordError(batchIndex={}, message='{}')", e.batch_index, e.message(topic_partition)))
            .collect();
        format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
            self.errors.len(),
            shown.join(", ")
        )
    }
}

impl std::fmt::Display for RecordErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Without the topic partition, which record/ does not know.
        f.write_str(&self.batch_message("?"))
    }
}
