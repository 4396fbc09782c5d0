//! The records inside a batch (Kafka's DefaultRecord layout): zigzag varints, the
//! records section decompressed with a size bound, walking the records, and the
//! compacted-topic key check. Used by the log cleaner and by produce on compacted topics;
//! never on the fetch path.
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self as codec, Compressor};
use kafka_protocol::records::Compression;

use super::header::{BatchError, BatchHeader, BATCH_HEADER_LEN};

type Result<T> = std::result::Result<T, BatchError>;

/// One record inside a batch's (decompressed) records section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRef {
    pub offset: i64,
    pub timestamp: i64,
    /// Key bytes within the records section; None for a null key.
    pub key: Option<Range<usize>>,
    /// A tombstone: the value is null.
    pub is_tombstone: bool,
    /// The whole record (length prefix included) within the records section.
    pub bytes: Range<usize>,
}

fn corrupt(detail: impl Into<String>) -> BatchError {
    BatchError::CorruptRecord(detail.into())
}

/// Reads a zigzag varint (Kafka's `ByteUtils.readVarlong`), at most 10 bytes.
pub fn read_varlong(data: &[u8], at: &mut usize) -> Result<i64> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let b = *data.get(*at).ok_or_else(|| corrupt("varint past the end"))?;
        *at += 1;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(corrupt("varint longer than 10 bytes"))
}

pub fn read_varint(data: &[u8], at: &mut usize) -> Result<i32> {
    let v = read_varlong(data, at)?;
    i32::try_from(v).map_err(|_| corrupt("varint out of i32 range"))
}

/// A length-prefixed byte field (-1 = null) starting at `at`, bounded by `end`.
pub fn read_field(data: &[u8], at: &mut usize, end: usize) -> Result<Option<Range<usize>>> {
    let len = read_varint(data, at)?;
    if len < 0 {
        return Ok(None);
    }
    let start = *at;
    let stop = start.checked_add(len as usize).filter(|&s| s <= end).ok_or_else(|| corrupt("field past the record"))?;
    *at = stop;
    Ok(Some(start..stop))
}

/// Most bytes a batch's records may decompress to (a producer's batch is at most
/// max.message.bytes compressed; this bounds what it may expand to).
pub const MAX_DECOMPRESSED_BYTES: usize = 128 << 20;

/// The records section of a stored batch, decompressed (a cheap slice when uncompressed),
/// refusing to expand past `MAX_DECOMPRESSED_BYTES`.
pub fn records_section(batch: &Bytes, header: &BatchHeader) -> Result<Bytes> {
    let end = header.total_len().min(batch.len());
    let body = batch.slice(BATCH_HEADER_LEN.min(end)..end);
    match header.compression() {
        Some(Compression::None) => Ok(body),
        Some(Compression::Gzip) => read_bounded(flate2::read::GzDecoder::new(&body[..])),
        Some(Compression::Lz4) => {
            let d = lz4::Decoder::new(&body[..]).map_err(|e| corrupt(format!("lz4: {e}")))?;
            read_bounded(d)
        }
        Some(Compression::Zstd) => {
            let d = zstd::stream::read::Decoder::new(&body[..]).map_err(|e| corrupt(format!("zstd: {e}")))?;
            read_bounded(d)
        }
        Some(Compression::Snappy) => snappy_bounded(&body),
        None => Err(BatchError::UnknownCompression(header.compression_id())),
    }
}

fn read_bounded(r: impl std::io::Read) -> Result<Bytes> {
    use std::io::Read;
    let mut out = Vec::new();
    r.take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(format!("decompressing: {e}")))?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        return Err(corrupt(format!("records expand past {MAX_DECOMPRESSED_BYTES} bytes")));
    }
    Ok(Bytes::from(out))
}

/// Kafka's snappy: xerial framing (magic header, then [u32 length][raw block]...), or
/// one raw block. Each block states its decompressed length, checked before allocating.
fn snappy_bounded(data: &[u8]) -> Result<Bytes> {
    const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
    let blocks: Vec<&[u8]> = match data.strip_prefix(&XERIAL_MAGIC[..]) {
        None => vec![data],
        Some(mut rest) => {
            let mut v = Vec::new();
            while !rest.is_empty() {
                let len = rest.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
                let block = len.and_then(|l| rest.get(4..4 + l)).ok_or_else(|| corrupt("snappy block past the end"))?;
                rest = &rest[4 + block.len()..];
                v.push(block);
            }
            v
        }
    };
    let mut total = 0usize;
    for b in &blocks {
        total = total.saturating_add(snap::raw::decompress_len(b).map_err(|e| corrupt(format!("snappy: {e}")))?);
    }
    if total > MAX_DECOMPRESSED_BYTES {
        return Err(corrupt(format!("records expand past {MAX_DECOMPRESSED_BYTES} bytes")));
    }
    let mut out = vec![0u8; total];
    let mut at = 0;
    let mut dec = snap::raw::Decoder::new();
    for b in blocks {
        at += dec.decompress(b, &mut out[at..]).map_err(|e| corrupt(format!("snappy: {e}")))?;
    }
    out.truncate(at);
    Ok(Bytes::from(out))
}

/// Walks the records of a batch's records section (Kafka's DefaultRecord layout:
/// length, attributes, timestampDelta, offsetDelta, key, value, headers).
pub fn parse_records(section: &[u8], header: &BatchHeader) -> Result<Vec<RecordRef>> {
    let count = usize::try_from(header.records_count).map_err(|_| BatchError::InvalidRecordCount(header.records_count))?;
    // Each record takes at least 7 bytes: a hostile count cannot make us allocate much.
    let mut out = Vec::with_capacity(count.min(section.len() / 7 + 1));
    let mut at = 0usize;
    for _ in 0..count {
        let start = at;
        let len = read_varint(section, &mut at)?;
        let body_start = at;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= section.len())
            .ok_or_else(|| corrupt("record past the batch"))?;
        at += 1; // attributes (unused in v2)
        let ts_delta = read_varlong(section, &mut at)?;
        let offset_delta = read_varint(section, &mut at)?;
        let key = read_field(section, &mut at, end)?;
        let value = read_field(section, &mut at, end)?;
        if at > end {
            return Err(corrupt("record header past its length"));
        }
        // Offsets inside a batch only grow and stay within the batch's range (a cleaned
        // batch has gaps, a produced one is 0..n-1, see check_keys_for_compaction).
        let prev_delta = out.last().map_or(-1, |r: &RecordRef| r.offset - header.base_offset);
        if i64::from(offset_delta) <= prev_delta || offset_delta > header.last_offset_delta {
            return Err(corrupt(format!("record offset delta {offset_delta} out of order")));
        }
        out.push(RecordRef {
            offset: header.base_offset.saturating_add(i64::from(offset_delta)),
            timestamp: header.base_timestamp.saturating_add(ts_delta),
            key,
            is_tombstone: value.is_none(),
            bytes: start..end,
        });
        at = end;
    }
    if at != section.len() {
        return Err(corrupt("bytes after the last record"));
    }
    Ok(out)
}

/// Kafka refuses a record without a key on a compacted topic (INVALID_RECORD). Called on
/// produce for compacted topics only: it decompresses the batch. Also checks that the
/// records' offset deltas are 0..n-1 (Kafka checks inner offsets when it decompresses),
/// so the cleaner can rely on well-formed records.
pub fn check_keys_for_compaction(batch: &Bytes, header: &BatchHeader) -> Result<()> {
    let section = records_section(batch, header)?;
    let records = parse_records(&section, header)?;
    if records.iter().enumerate().any(|(i, r)| r.offset != header.base_offset + i as i64) {
        return Err(corrupt("record offset deltas are not 0..n-1"));
    }
    if records.iter().any(|r| r.key.is_none()) {
        return Err(BatchError::NullKeyInCompactedTopic);
    }
    Ok(())
}

/// Compresses `plain` into the end of `out` with `compression`.
pub(super) fn compress_into(out: &mut BytesMut, mut plain: BytesMut, compression: Compression) -> anyhow::Result<()> {
    let fill = |b: &mut BytesMut| {
        *b = std::mem::take(&mut plain);
        Ok(())
    };
    match compression {
        Compression::None => {
            out.extend_from_slice(&plain);
            Ok(())
        }
        Compression::Gzip => codec::Gzip::compress(out, fill),
        Compression::Snappy => codec::Snappy::compress(out, fill),
        Compression::Lz4 => codec::Lz4::compress(out, fill),
        Compression::Zstd => codec::Zstd::compress(out, fill),
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::parse_header;
    use crate::record::tests::{compression_of, decode_kv, kv_batch};

    #[test]
    fn parse_records_matches_kafka_protocol_decoder() {
        for c in 0..5u8 {
            let recs = [(Some("a"), Some("1")), (None, Some("2")), (Some("b"), None), (Some("a"), Some("3"))];
            let b = kv_batch(100, &recs, compression_of(c), None, 5000);
            let h = parse_header(&b).unwrap();
            let section = records_section(&b, &h).unwrap();
            let parsed = parse_records(&section, &h).unwrap();
            let expect = decode_kv(&b);
            assert_eq!(parsed.len(), expect.len());
            for (p, e) in parsed.iter().zip(&expect) {
                assert_eq!(p.offset, e.0);
                assert_eq!(p.key.clone().map(|k| section.slice(k)), e.1);
                assert_eq!(p.is_tombstone, e.2.is_none());
                assert_eq!(p.timestamp, e.3);
            }
            assert_eq!(check_keys_for_compaction(&b, &h), Err(BatchError::NullKeyInCompactedTopic));
        }
    }

    #[test]
    fn decompression_is_bounded() {
        let big = std::io::Read::take(std::io::repeat(0), MAX_DECOMPRESSED_BYTES as u64 + 10);
        assert!(matches!(read_bounded(big), Err(BatchError::CorruptRecord(_))));
        // A raw snappy block whose header claims 200 MiB is refused before allocating.
        let mut claim = Vec::new();
        let mut n = 200u64 << 20;
        while n >= 0x80 {
            claim.push((n as u8) | 0x80);
            n >>= 7;
        }
        claim.push(n as u8);
        claim.extend_from_slice(&[0u8; 8]);
        assert!(matches!(snappy_bounded(&claim), Err(BatchError::CorruptRecord(_))));
    }

    #[test]
    fn varints_round_trip_kafka_zigzag() {
        let cases: [(i64, &[u8]); 5] = [(0, &[0]), (-1, &[1]), (1, &[2]), (63, &[0x7e]), (-65, &[0x81, 0x01])];
        for (v, enc) in cases {
            let mut at = 0;
            assert_eq!(read_varlong(enc, &mut at).unwrap(), v);
            assert_eq!(at, enc.len());
        }
        let mut at = 0;
        assert!(read_varlong(&[0x80; 11], &mut at).is_err());
        let mut at = 0;
        assert!(read_varlong(&[0x80], &mut at).is_err());
    }
}
