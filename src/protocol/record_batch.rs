//! RecordBatch v2 (magic 2) header handling, without decoding records.
//!
//! Batches are stored and served exactly as the producer sent them; the broker only
//! reads the fixed 61-byte header, checks it, and patches the fields Kafka patches
//! (base offset and partition leader epoch, which the CRC does not cover, and for
//! LogAppendTime topics the timestamp type and max timestamp, which it does).
//!
//! Layout (big-endian), offsets in bytes:
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32
//! 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32 | 57 recordsCount i32 | 61 records...
//! ```
//! `batchLength` counts the bytes after itself, so a batch occupies `12 + batchLength`.

use std::ops::Range;

use kafka_protocol::records::Compression;
use smallvec::SmallVec;

/// Size of the fixed RecordBatch v2 header; also the smallest possible batch.
pub const BATCH_HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the bytes not counted by `batchLength` (Kafka's LOG_OVERHEAD).
pub const LOG_OVERHEAD: usize = 12;
/// Smallest legal `batchLength` value (a batch with no records).
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only record format we accept or store.
pub const MAGIC_V2: i8 = 2;

const OFF_BASE_OFFSET: usize = 0;
const OFF_BATCH_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORDS_COUNT: usize = 57;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_LOG_APPEND: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;
const ATTR_DELETE_HORIZON: i16 = 1 << 6;

/// Why a batch (or a partition's records) was refused. Map to a Kafka error code with
/// `ErrorCode::from(&err)` (protocol/errors.rs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("invalid record batch length {length} (minimum {MIN_BATCH_LENGTH})")]
    InvalidBatchLength { length: i32 },
    #[error("record batch magic {0} not supported (only magic 2)")]
    UnsupportedMagic(i8),
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CorruptMessage { stored: u32, computed: u32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    #[error("invalid record count {0}")]
    InvalidRecordCount(i32),
    #[error("lastOffsetDelta {last_offset_delta} inconsistent with recordsCount {records_count}")]
    InconsistentOffsetDelta { last_offset_delta: i32, records_count: i32 },
    #[error("client batch base offset must be 0, got {0}")]
    NonZeroBaseOffset(i64),
    #[error("clients may not write control batches")]
    ControlBatchFromClient,
    #[error("invalid base sequence {base_sequence} for producer id {producer_id}")]
    InvalidSequence { producer_id: i64, base_sequence: i32 },
    #[error("produce partition carries no record batch")]
    NoBatch,
    #[error("produce partition must carry exactly one record batch")]
    MultipleBatches,
    #[error("zstd compression needs Produce v7+, request is v{version}")]
    CompressionNeedsNewerProduce { version: i16 },
    /// A record inside a batch (after decompression) does not parse.
    #[error("record batch holds an unreadable record: {0}")]
    CorruptRecord(String),
    /// Kafka's LogValidator: a compacted topic needs a key on every record.
    #[error("Compacted topic cannot accept message without key")]
    NullKeyInCompactedTopic,
}

/// The decoded fixed header of one RecordBatch v2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// The codec in attributes bits 0-2; `None` for ids Kafka does not define (5-7).
    pub fn compression(&self) -> Option<Compression> {
        match self.attributes & ATTR_COMPRESSION_MASK {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }
    pub fn timestamp_type_is_log_append(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_LOG_APPEND != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & ATTR_DELETE_HORIZON != 0
    }
    /// Idempotent or transactional producer (Kafka: `hasProducerId`).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    pub fn record_count(&self) -> i32 {
        self.records_count
    }
    /// Offset of the last record: `base_offset + last_offset_delta` (saturating, so a
    /// hostile header cannot overflow).
    pub fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(i64::from(self.last_offset_delta))
    }
    /// Bytes the whole batch occupies: `LOG_OVERHEAD + batch_length`. Only meaningful for
    /// a header with a non-negative length (every header returned by this module's
    /// validating functions).
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + usize::try_from(self.batch_length).unwrap_or(0)
    }
    /// Sequence number of the last record (wrapping as Kafka's DefaultRecordBatch does).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
}

#[inline]
fn rd_i16(h: &[u8; BATCH_HEADER_LEN], off: usize) -> i16 {
    i16::from_be_bytes([h[off], h[off + 1]])
}
#[inline]
fn rd_i32(h: &[u8; BATCH_HEADER_LEN], off: usize) -> i32 {
    i32::from_be_bytes([h[off], h[off + 1], h[off + 2], h[off + 3]])
}
#[inline]
fn rd_i64(h: &[u8; BATCH_HEADER_LEN], off: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&h[off..off + 8]);
    i64::from_be_bytes(a)
}

/// Borrow the fixed header as an array so every field read below is in bounds by type.
fn header_array(buf: &[u8]) -> Result<&[u8; BATCH_HEADER_LEN], BatchError> {
    buf.get(..BATCH_HEADER_LEN)
        .and_then(|s| <&[u8; BATCH_HEADER_LEN]>::try_from(s).ok())
        .ok_or(BatchError::Truncated { needed: BATCH_HEADER_LEN, available: buf.len() })
}

fn header_array_mut(buf: &mut [u8]) -> Result<&mut [u8; BATCH_HEADER_LEN], BatchError> {
    let available = buf.len();
    buf.get_mut(..BATCH_HEADER_LEN)
        .and_then(|s| <&mut [u8; BATCH_HEADER_LEN]>::try_from(s).ok())
        .ok_or(BatchError::Truncated { needed: BATCH_HEADER_LEN, available })
}

/// Parse the fixed header at the start of `buf`. Checks only that the bytes are there
/// and that magic is 2 (older formats have a different layout); no length, CRC or
/// content checks.
pub fn parse_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    // Magic first, so an old-format batch shorter than 61 bytes reports its magic.
    if let Some(&m) = buf.get(OFF_MAGIC) {
        if m as i8 != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(m as i8));
        }
    }
    let h = header_array(buf)?;
    Ok(BatchHeader {
        base_offset: rd_i64(h, OFF_BASE_OFFSET),
        batch_length: rd_i32(h, OFF_BATCH_LENGTH),
        partition_leader_epoch: rd_i32(h, OFF_LEADER_EPOCH),
        magic: h[OFF_MAGIC] as i8,
        crc: rd_i32(h, OFF_CRC) as u32,
        attributes: rd_i16(h, OFF_ATTRIBUTES),
        last_offset_delta: rd_i32(h, OFF_LAST_OFFSET_DELTA),
        base_timestamp: rd_i64(h, OFF_BASE_TIMESTAMP),
        max_timestamp: rd_i64(h, OFF_MAX_TIMESTAMP),
        producer_id: rd_i64(h, OFF_PRODUCER_ID),
        producer_epoch: rd_i16(h, OFF_PRODUCER_EPOCH),
        base_sequence: rd_i32(h, OFF_BASE_SEQUENCE),
        records_count: rd_i32(h, OFF_RECORDS_COUNT),
    })
}

/// Frame one batch at the start of `buf`: returns its header and total size after
/// checking the length field against the bytes present, the magic and the CRC.
fn frame_batch(buf: &[u8]) -> Result<(BatchHeader, usize), BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated { needed: LOG_OVERHEAD, available: buf.len() });
    }
    let length = i32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if length < 0 {
        return Err(BatchError::InvalidBatchLength { length });
    }
    // i32 -> usize cannot overflow on 64-bit; saturate anyway so a 32-bit build stays safe.
    let total = LOG_OVERHEAD.saturating_add(length as usize);
    if total > buf.len() {
        return Err(BatchError::Truncated { needed: total, available: buf.len() });
    }
    let batch = &buf[..total];
    // Magic before the minimum length: old-format batches are legitimately shorter.
    if let Some(&m) = batch.get(OFF_MAGIC) {
        if m as i8 != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(m as i8));
        }
    }
    if length < MIN_BATCH_LENGTH {
        return Err(BatchError::InvalidBatchLength { length });
    }
    Ok((parse_header(batch)?, total))
}

/// CRC-32C over attributes..end, the region Kafka's batch checksum covers.
/// `batch` must be exactly one batch (at least `BATCH_HEADER_LEN` bytes).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(OFF_ATTRIBUTES..).unwrap_or(&[]))
}

fn check_crc(header: &BatchHeader, batch: &[u8]) -> Result<(), BatchError> {
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CorruptMessage { stored: header.crc, computed });
    }
    Ok(())
}

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
        return Err(BatchError::UnknownCompression((h.attributes & ATTR_COMPRESSION_MASK) as u8));
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

/// Kafka's per-version check on a produce batch: zstd needs Produce v7+
/// (UNSUPPORTED_COMPRESSION_TYPE). Call after `validate_produce_records`.
pub fn check_produce_version(version: i16, header: &BatchHeader) -> Result<(), BatchError> {
    if version < 7 && header.compression() == Some(Compression::Zstd) {
        return Err(BatchError::CompressionNeedsNewerProduce { version });
    }
    Ok(())
}

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
    let crc = compute_crc(batch);
    let arr = header_array_mut(batch)?;
    arr[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Walk stored batches (storage recovery, segment scans). Each item is a batch header and
/// its byte range in `buf`. Checks framing, magic 2 and CRC-32C; allows what stored data
/// may legitimately hold (control batches, empty compacted batches, any base offset).
///
/// Stops cleanly (returns `None`) at the end of `buf` or at a zero-filled tail: a length
/// field of 0 (DMA writes pad the last block with zeros). After the first error it returns
/// `None`; `valid_len()` is then where the log should be truncated.
pub fn iter_batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter { buf, pos: 0, done: false }
}

/// Iterator returned by [`iter_batches`].
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

impl BatchIter<'_> {
    /// Bytes of `buf` covered by the good batches yielded so far.
    pub fn valid_len(&self) -> usize {
        self.pos
    }

    fn step(&mut self) -> Option<Result<(BatchHeader, Range<usize>), BatchError>> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        if rest.is_empty() {
            return None;
        }
        if rest.len() < LOG_OVERHEAD {
            if rest.iter().all(|&b| b == 0) {
                return None;
            }
            return Some(Err(BatchError::Truncated { needed: LOG_OVERHEAD, available: rest.len() }));
        }
        if rest[8..12] == [0, 0, 0, 0] {
            return None; // zero length field: end of data (zero-padded tail)
        }
        let (h, total) = match frame_batch(rest) {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = check_crc(&h, &rest[..total]) {
            return Some(Err(e));
        }
        if h.records_count < 0 {
            return Some(Err(BatchError::InvalidRecordCount(h.records_count)));
        }
        if h.last_offset_delta < 0 {
            return Some(Err(BatchError::InconsistentOffsetDelta {
                last_offset_delta: h.last_offset_delta,
                records_count: h.records_count,
            }));
        }
        let start = self.pos;
        self.pos += total;
        Some(Ok((h, start..self.pos)))
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(BatchHeader, Range<usize>), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use proptest::prelude::*;

    pub(crate) fn compression_of(i: u8) -> Compression {
        match i % 5 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            _ => Compression::Zstd,
        }
    }

    /// One batch as a producer would send it (base offset 0).
    pub(crate) fn make_batch(
        values: &[Vec<u8>],
        compression: Compression,
        producer_id: i64,
        base_ts: i64,
    ) -> BytesMut {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut headers = IndexMap::new();
                if i % 3 == 0 {
                    headers.insert(StrBytes::from_static_str("h"), Some(Bytes::from_static(b"x")));
                }
                Record {
                    transactional: false,
                    control: false,
                    delete_horizon: false,
                    partition_leader_epoch: -1,
                    producer_id,
                    producer_epoch: if producer_id >= 0 { 0 } else { -1 },
                    timestamp_type: TimestampType::Creation,
                    offset: i as i64,
                    // The encoder starts a new batch whenever offset - sequence changes, so keep
                    // it constant; non-idempotent batches then get base sequence -1.
                    sequence: if producer_id >= 0 { 7 + i as i32 } else { i as i32 - 1 },
                    timestamp: base_ts + i as i64,
                    key: if i % 2 == 0 { Some(Bytes::from(format!("k{i}"))) } else { None },
                    value: Some(Bytes::from(v.clone())),
                    headers,
                }
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions { version: 2, compression },
        )
        .expect("test batch encodes");
        buf
    }

    #[test]
    fn header_fields_and_helpers() {
        let b = make_batch(&[b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()], Compression::Lz4, 42, 1000);
        let h = parse_header(&b).unwrap();
        assert_eq!(h.magic, 2);
        assert_eq!(h.base_offset, 0);
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.last_offset(), 2);
        assert_eq!(h.total_len(), b.len());
        assert_eq!(h.compression(), Some(Compression::Lz4));
        assert_eq!(h.producer_id, 42);
        assert_eq!(h.base_sequence, 7);
        assert_eq!(h.last_sequence(), 9);
        assert_eq!(h.base_timestamp, 1000);
        assert_eq!(h.max_timestamp, 1002);
        assert!(!h.is_control() && !h.is_transactional() && !h.timestamp_type_is_log_append());
        let v = validate_produce_records(&b, 1 << 20).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0], h);
    }

    fn reseal(b: &mut [u8]) {
        let crc = compute_crc(b);
        b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn produce_rules_like_kafka() {
        let good = make_batch(&vec![b"v".to_vec(); 4], Compression::None, -1, 5);
        assert_eq!(validate_produce_records(&[], 1 << 20), Err(BatchError::NoBatch));
        // too large: whole batch size counts
        assert_eq!(
            validate_produce_records(&good, good.len() - 1),
            Err(BatchError::MessageTooLarge { size: good.len(), max: good.len() - 1 })
        );
        assert!(validate_produce_records(&good, good.len()).is_ok());
        // two batches
        let mut two = good.clone();
        two.extend_from_slice(&good);
        assert_eq!(validate_produce_records(&two, 1 << 20), Err(BatchError::MultipleBatches));
        // base offset must be 0
        let mut b = good.clone();
        set_base_offset(&mut b, 5).unwrap();
        assert_eq!(validate_produce_records(&b, 1 << 20), Err(BatchError::NonZeroBaseOffset(5)));
        // old magic
        let mut b = good.clone();
        b[OFF_MAGIC] = 1;
        assert_eq!(validate_produce_records(&b, 1 << 20), Err(BatchError::UnsupportedMagic(1)));
        // control batch (CRC resealed so the content check is reached)
        let mut b = good.clone();
        b[OFF_ATTRIBUTES + 1] |= ATTR_CONTROL as u8;
        reseal(&mut b);
        assert_eq!(validate_produce_records(&b, 1 << 20), Err(BatchError::ControlBatchFromClient));
        // inconsistent lastOffsetDelta
        let mut b = good.clone();
        b[OFF_LAST_OFFSET_DELTA + 3] = 9;
        reseal(&mut b);
        assert!(matches!(
            validate_produce_records(&b, 1 << 20),
            Err(BatchError::InconsistentOffsetDelta { .. })
        ));
        // zero records
        let mut b = good.clone();
        b[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&0i32.to_be_bytes());
        reseal(&mut b);
        assert_eq!(validate_produce_records(&b, 1 << 20), Err(BatchError::InvalidRecordCount(0)));
        // unknown codec
        let mut b = good.clone();
        b[OFF_ATTRIBUTES + 1] |= 7;
        reseal(&mut b);
        assert_eq!(validate_produce_records(&b, 1 << 20), Err(BatchError::UnknownCompression(7)));
        // idempotent producer with negative sequence
        let mut b = make_batch(&[b"v".to_vec()], Compression::None, 3, 5);
        b[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
        reseal(&mut b);
        assert!(matches!(
            validate_produce_records(&b, 1 << 20),
            Err(BatchError::InvalidSequence { .. })
        ));
        // zstd on old produce versions
        let z = make_batch(&[b"v".to_vec()], Compression::Zstd, -1, 5);
        let h = validate_produce_records(&z, 1 << 20).unwrap()[0];
        assert!(check_produce_version(6, &h).is_err());
        assert!(check_produce_version(7, &h).is_ok());
        // length field below the minimum
        let mut b = good.clone();
        b[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&10i32.to_be_bytes());
        assert!(validate_produce_records(&b, 1 << 20).is_err());
        let mut b = good.clone();
        b[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            validate_produce_records(&b, 1 << 20),
            Err(BatchError::InvalidBatchLength { length: -5 })
        );
    }

    #[test]
    fn iter_batches_stops_at_zero_tail_and_reports_bad_batch() {
        let a = make_batch(&[b"one".to_vec(), b"two".to_vec()], Compression::Snappy, -1, 1);
        let b = make_batch(&[b"three".to_vec()], Compression::Gzip, -1, 2);
        let mut log = BytesMut::new();
        log.extend_from_slice(&a);
        set_base_offset(&mut log[..], 0).unwrap();
        let at = log.len();
        log.extend_from_slice(&b);
        set_base_offset(&mut log[at..], 2).unwrap();
        let end = log.len();
        log.extend_from_slice(&[0u8; 4096 - 7]); // DMA zero padding
        let got: Vec<_> = iter_batches(&log).collect();
        assert_eq!(got.len(), 2);
        let (h0, r0) = got[0].clone().unwrap();
        let (h1, r1) = got[1].clone().unwrap();
        assert_eq!((h0.base_offset, r0), (0, 0..at));
        assert_eq!((h1.base_offset, r1), (2, at..end));
        // a short zero tail too
        let mut it = iter_batches(&log[..end + 5]);
        assert_eq!(it.by_ref().count(), 2);
        assert_eq!(it.valid_len(), end);
        // a torn second batch: first batch ok, then an error, then nothing
        let mut it = iter_batches(&log[..end - 3]);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(it.next(), Some(Err(BatchError::Truncated { .. }))));
        assert!(it.next().is_none());
        assert_eq!(it.valid_len(), at);
        // a corrupted byte in the second batch
        let mut bad = log.clone();
        bad[at + 70] ^= 0x40;
        let mut it = iter_batches(&bad);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(it.next(), Some(Err(BatchError::CorruptMessage { .. }))));
        assert_eq!(it.valid_len(), at);
        // non-zero garbage shorter than a header
        let mut g = log[..end].to_vec();
        g.extend_from_slice(&[1, 2, 3]);
        let mut it = iter_batches(&g);
        assert_eq!(it.by_ref().filter(|r| r.is_ok()).count(), 2);
        assert!(iter_batches(&g).any(|r| r.is_err()));
    }

    #[test]
    fn setters_reject_short_buffers() {
        let mut short = [0u8; 10];
        assert!(set_base_offset(&mut short, 1).is_err());
        assert!(set_partition_leader_epoch(&mut short, 1).is_err());
        assert!(set_log_append_time(&mut short, 1).is_err());
        assert!(parse_header(&short).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn roundtrip_patch_and_decode(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20),
            codec in 0u8..5,
            idempotent in any::<bool>(),
            base_ts in 0i64..2_000_000_000_000,
            base_offset in 0i64..(1i64 << 50),
            epoch in 0i32..1000,
            append_ts in 0i64..2_000_000_000_000,
        ) {
            let compression = compression_of(codec);
            let mut b = make_batch(&values, compression, if idempotent { 9 } else { -1 }, base_ts);
            let n = values.len() as i32;
            let v = validate_produce_records(&b, 1 << 20).unwrap();
            prop_assert_eq!(v.len(), 1);
            let h = v[0];
            prop_assert_eq!(h.records_count, n);
            prop_assert_eq!(h.last_offset_delta, n - 1);
            prop_assert_eq!(h.total_len(), b.len());
            prop_assert_eq!(h.compression(), Some(compression));
            prop_assert_eq!(h.max_timestamp, base_ts + i64::from(n) - 1);

            set_base_offset(&mut b, base_offset).unwrap();
            set_partition_leader_epoch(&mut b, epoch).unwrap();
            set_log_append_time(&mut b, append_ts).unwrap();

            let h2 = parse_header(&b).unwrap();
            prop_assert_eq!(h2.base_offset, base_offset);
            prop_assert_eq!(h2.partition_leader_epoch, epoch);
            prop_assert_eq!(h2.max_timestamp, append_ts);
            prop_assert_eq!(h2.base_timestamp, base_ts);
            prop_assert!(h2.timestamp_type_is_log_append());
            prop_assert_eq!(h2.compression(), Some(compression));
            prop_assert_eq!(h2.last_offset(), base_offset + i64::from(n) - 1);
            // still a valid stored batch
            let stored: Vec<_> = iter_batches(&b).collect();
            prop_assert_eq!(stored.len(), 1);
            prop_assert!(stored[0].is_ok());

            // kafka-protocol (independent CRC check) decodes it with the patched offsets
            let mut bytes = b.clone().freeze();
            let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
            prop_assert_eq!(set.records.len(), values.len());
            for (i, r) in set.records.iter().enumerate() {
                prop_assert_eq!(r.offset, base_offset + i as i64);
                prop_assert_eq!(r.partition_leader_epoch, epoch);
                prop_assert_eq!(r.timestamp_type, TimestampType::LogAppend);
                prop_assert_eq!(r.value.as_deref(), Some(&values[i][..]));
            }
        }

        #[test]
        fn any_flipped_crc_byte_is_detected(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
            codec in 0u8..5,
            pos_seed in any::<usize>(),
            flip in 1u8..=255,
        ) {
            let mut b = make_batch(&values, compression_of(codec), -1, 77);
            let covered = OFF_ATTRIBUTES..b.len();
            let pos = covered.start + pos_seed % covered.len();
            b[pos] ^= flip;
            let corrupt = matches!(validate_produce_records(&b, 1 << 20), Err(BatchError::CorruptMessage { .. }));
            prop_assert!(corrupt, "flip at {} not reported as corrupt", pos);
            let first = iter_batches(&b).next();
            let corrupt = matches!(first, Some(Err(BatchError::CorruptMessage { .. })));
            prop_assert!(corrupt);
        }

        #[test]
        fn truncation_is_an_error(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
            codec in 0u8..5,
        ) {
            let b = make_batch(&values, compression_of(codec), -1, 3);
            for k in 0..b.len() {
                prop_assert!(validate_produce_records(&b[..k], 1 << 20).is_err());
                let mut copy = b[..k].to_vec();
                let _ = set_log_append_time(&mut copy, 1);
                let _ = parse_header(&b[..k]);
                // iter_batches on a prefix either yields an error or stops: never a batch
                prop_assert!(iter_batches(&b[..k]).all(|r| r.is_err()));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = validate_produce_records(&data, 1 << 20);
            let _ = parse_header(&data);
            for r in iter_batches(&data) { let _ = r; }
            let mut d = data.clone();
            let _ = set_log_append_time(&mut d, 5);
            let _ = set_base_offset(&mut d, 5);
        }
    }
}
