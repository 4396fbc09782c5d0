//! TEMPORARY minimal RecordBatch v2 header parsing; replaced by the protocol branch.
use std::ops::Range;

pub const BATCH_HEADER_LEN: usize = 61;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    pub fn total_len(&self) -> usize { self.batch_length as usize + 12 }
    pub fn last_offset(&self) -> i64 { self.base_offset + i64::from(self.last_offset_delta) }
    pub fn record_count(&self) -> i64 { i64::from(self.last_offset_delta) + 1 }
    pub fn is_transactional(&self) -> bool { self.attributes & 0x10 != 0 }
    pub fn is_control(&self) -> bool { self.attributes & 0x20 != 0 }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("corrupt")]
    CorruptMessage,
    #[error("truncated")]
    Truncated,
    #[error("too large")]
    MessageTooLarge,
    #[error("magic")]
    UnsupportedMagic(i8),
}

fn be<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

pub fn parse_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    if buf.len() < BATCH_HEADER_LEN { return Err(BatchError::Truncated); }
    let h = BatchHeader {
        base_offset: i64::from_be_bytes(be(buf, 0)),
        batch_length: i32::from_be_bytes(be(buf, 8)),
        partition_leader_epoch: i32::from_be_bytes(be(buf, 12)),
        magic: buf[16] as i8,
        crc: u32::from_be_bytes(be(buf, 17)),
        attributes: i16::from_be_bytes(be(buf, 21)),
        last_offset_delta: i32::from_be_bytes(be(buf, 23)),
        base_timestamp: i64::from_be_bytes(be(buf, 27)),
        max_timestamp: i64::from_be_bytes(be(buf, 35)),
        producer_id: i64::from_be_bytes(be(buf, 43)),
        producer_epoch: i16::from_be_bytes(be(buf, 51)),
        base_sequence: i32::from_be_bytes(be(buf, 53)),
        records_count: i32::from_be_bytes(be(buf, 57)),
    };
    if h.magic != 2 { return Err(BatchError::UnsupportedMagic(h.magic)); }
    if (h.batch_length as i64) < (BATCH_HEADER_LEN as i64 - 12) { return Err(BatchError::CorruptMessage); }
    Ok(h)
}

pub fn validate_produce_records(records: &[u8], max_message_bytes: usize) -> Result<Vec<BatchHeader>, BatchError> {
    let mut out = Vec::new();
    for r in iter_batches(records) {
        let (h, range) = r?;
        if h.total_len() > max_message_bytes { return Err(BatchError::MessageTooLarge); }
        if crc32c::crc32c(&records[range.start + 21..range.end]) != h.crc { return Err(BatchError::CorruptMessage); }
        out.push(h);
    }
    Ok(out)
}

pub fn set_base_offset(batch: &mut [u8], base_offset: i64) { batch[0..8].copy_from_slice(&base_offset.to_be_bytes()); }
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) { batch[12..16].copy_from_slice(&epoch.to_be_bytes()); }
pub fn set_log_append_time(batch: &mut [u8], ts_ms: i64) {
    let attrs = i16::from_be_bytes(be(batch, 21)) | 0x08;
    batch[21..23].copy_from_slice(&attrs.to_be_bytes());
    batch[35..43].copy_from_slice(&ts_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

pub fn iter_batches(buf: &[u8]) -> impl Iterator<Item = Result<(BatchHeader, Range<usize>), BatchError>> + '_ {
    let mut pos = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || pos >= buf.len() { return None; }
        let rest = &buf[pos..];
        if rest.len() >= 12 && rest[8..12] == [0, 0, 0, 0] { done = true; return None; }
        match parse_header(rest) {
            Ok(h) if h.total_len() <= rest.len() => { let r = pos..pos + h.total_len(); pos += h.total_len(); Some(Ok((h, r))) }
            Ok(_) => { done = true; Some(Err(BatchError::Truncated)) }
            Err(e) => { done = true; Some(Err(e)) }
        }
    })
}
