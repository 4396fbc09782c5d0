//! The fixed RecordBatch v2 (magic 2) header: layout constants, `BatchHeader`, parsing,
//! framing one batch, CRC-32C, and `BatchError` (why a batch is refused).
//!
//! Layout (big-endian), offsets in bytes:
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32
//! 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32 | 57 recordsCount i32 | 61 records...
//! ```
//! `batchLength` counts the bytes after itself, so a batch occupies `12 + batchLength`.

use kafka_protocol::records::Compression;

/// Size of the fixed RecordBatch v2 header; also the smallest possible batch.
pub const BATCH_HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the bytes not counted by `batchLength` (Kafka's LOG_OVERHEAD).
pub const LOG_OVERHEAD: usize = 12;
/// Smallest legal `batchLength` value (a batch with no records).
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only record format we accept or store.
pub const MAGIC_V2: i8 = 2;

pub(super) const OFF_BASE_OFFSET: usize = 0;
pub(super) const OFF_BATCH_LENGTH: usize = 8;
pub(super) const OFF_LEADER_EPOCH: usize = 12;
pub(super) const OFF_MAGIC: usize = 16;
pub(super) const OFF_CRC: usize = 17;
pub(super) const OFF_ATTRIBUTES: usize = 21;
pub(super) const OFF_LAST_OFFSET_DELTA: usize = 23;
pub(super) const OFF_BASE_TIMESTAMP: usize = 27;
pub(super) const OFF_MAX_TIMESTAMP: usize = 35;
pub(super) const OFF_PRODUCER_ID: usize = 43;
pub(super) const OFF_PRODUCER_EPOCH: usize = 51;
pub(super) const OFF_BASE_SEQUENCE: usize = 53;
pub(super) const OFF_RECORDS_COUNT: usize = 57;

pub(super) const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub(super) const ATTR_TIMESTAMP_LOG_APPEND: i16 = 1 << 3;
pub(super) const ATTR_TRANSACTIONAL: i16 = 1 << 4;
pub(super) const ATTR_CONTROL: i16 = 1 << 5;

/// Why a batch (or a partition's records) was refused. Map to a Kafka error code with
/// `ErrorCode::from(&err)` (protocol/errors.rs; record/ itself knows no Kafka error codes).
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
    /// The compressed records section does not decompress.
    #[error("record batch does not decompress: {0}")]
    CorruptRecord(String),
    /// A record inside a batch (after decompression) does not follow the DefaultRecord
    /// layout, or the records disagree with the header (count, offset deltas).
    #[error("invalid record in batch: {0}")]
    InvalidRecord(String),
    /// The records section would expand past the decompression limit.
    #[error("record batch expands past {limit} bytes when decompressed")]
    DecompressedTooLarge { limit: usize },
    /// A client batch claims LogAppendTime on a LogAppendTime topic.
    #[error("producer should not set timestamp type to LogAppendTime")]
    LogAppendTimeFromClient,
    /// Kafka's LogValidator refused records of the batch one by one (a compacted topic
    /// needs keys, timestamps within the topic's window); boxed to keep the enum small.
    #[error("{0}")]
    RecordErrors(Box<super::validate::RecordErrors>),
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
    /// The codec id in attributes bits 0-2, as stored (for error reports).
    pub fn compression_id(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
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
    /// Idempotent or transactional producer (Kafka: `hasProducerId`).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
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

pub(super) fn header_array_mut(buf: &mut [u8]) -> Result<&mut [u8; BATCH_HEADER_LEN], BatchError> {
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
pub(super) fn frame_batch(buf: &[u8]) -> Result<(BatchHeader, usize), BatchError> {
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

pub(super) fn check_crc(header: &BatchHeader, batch: &[u8]) -> Result<(), BatchError> {
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CorruptMessage { stored: header.crc, computed });
    }
    Ok(())
}
