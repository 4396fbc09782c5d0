//! The records inside a batch (Kafka's DefaultRecord layout): zigzag varints, the one
//! bounded decompression every reader of records goes through (`decompress_bounded`,
//! `records_section`, `with_records_section`), and the one record walker
//! (`walk_records`, `parse_records`). Used by produce validation, the log cleaner, the
//! group coordinator's replay and ListOffsets by timestamp; never on the fetch path.
use std::cell::RefCell;
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
    /// baseTimestamp + timestampDelta (the create time; a LogAppendTime batch's records
    /// all carry the batch's maxTimestamp instead, see `BatchHeader`).
    pub timestamp: i64,
    /// Key bytes within the records section; None for a null key.
    pub key: Option<Range<usize>>,
    /// Value bytes within the records section; None for a null value.
    pub value: Option<Range<usize>>,
    /// A tombstone: the value is null.
    pub is_tombstone: bool,
    /// The whole record (length prefix included) within the records section.
    pub bytes: Range<usize>,
}

/// A record that does not follow the DefaultRecord layout (Kafka: InvalidRecordException).
fn invalid(detail: impl Into<String>) -> BatchError {
    BatchError::InvalidRecord(detail.into())
}

/// Reads a zigzag varint (Kafka's `ByteUtils.readVarlong`), at most 10 bytes.
pub fn read_varlong(data: &[u8], at: &mut usize) -> Result<i64> {
    // Fast path: most record fields (deltas, small lengths) fit one byte.
    if let Some(&b) = data.get(*at) {
        if b < 0x80 {
            *at += 1;
            return Ok(i64::from(b >> 1) ^ -i64::from(b & 1));
        }
    }
    let mut raw: u64 = 0;
    for i in 0..10 {
        let b = *data.get(*at).ok_or_else(|| invalid("varint past the end"))?;
        *at += 1;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(invalid("varint longer than 10 bytes"))
}

pub fn read_varint(data: &[u8], at: &mut usize) -> Result<i32> {
    let v = read_varlong(data, at)?;
    i32::try_from(v).map_err(|_| invalid("varint out of i32 range"))
}

/// A length-prefixed byte field (negative length = null, as Kafka reads it) starting at
/// `at`, bounded by `end`.
pub fn read_field(data: &[u8], at: &mut usize, end: usize) -> Result<Option<Range<usize>>> {
    let len = read_varint(data.get(..end).unwrap_or(data), at)?;
    if len < 0 {
        return Ok(None);
    }
    let start = *at;
    let stop = start.checked_add(len as usize).filter(|&s| s <= end).ok_or_else(|| invalid("field past the record"))?;
    *at = stop;
    Ok(Some(start..stop))
}

/// Most bytes a batch's records may decompress to, anywhere in the broker (produce
/// validation, cleaner, group replay, ListOffsets). Kafka streams and has no such limit;
/// a client batch is at most max.message.bytes compressed, and this bounds what it may
/// expand to (a decompression bomb is refused instead of allocated).
pub const MAX_DECOMPRESSED_BYTES: usize = 128 << 20;

/// Capacity of the per-thread scratch buffer kept between validations; a larger one
/// (a batch that expanded past this) is freed after use, so a shard holds at most this
/// much between produce requests.
const SCRATCH_RETAIN_BYTES: usize = 4 << 20;

thread_local! {
    /// Where produce validation decompresses a batch: one per thread, that is one per
    /// shard (glommio executors are pinned threads), reused so validating a compressed
    /// batch allocates nothing in the steady state. Borrowed only inside
    /// `with_records_section`, never across an await (the validation is synchronous).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Decompresses `compressed` (a batch's records section as stored) with `compression`
/// into `out` (cleared first), writing at most `limit` bytes: a section that would
/// expand further is refused with `DecompressedTooLarge` without allocating past the
/// limit. Undecodable input is `CorruptRecord`. The one decompression of record bytes
/// in the broker: every reader of records comes through here.
pub fn decompress_bounded(compression: Compression, compressed: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    match compression {
        Compression::None => {
            if compressed.len() > limit {
                return Err(BatchError::DecompressedTooLarge { limit });
            }
            out.extend_from_slice(compressed);
            Ok(())
        }
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(compressed), limit, out),
        Compression::Lz4 => {
            let d = lz4::Decoder::new(compressed).map_err(|e| corrupt(format!("lz4: {e}")))?;
            read_bounded(d, limit, out)
        }
        Compression::Zstd => zstd_bounded(compressed, limit, out),
        Compression::Snappy => snappy_bounded(compressed, limit, out),
    }
}

/// The records section of a stored batch, decompressed into a new buffer (a cheap
/// slice when uncompressed), at most `MAX_DECOMPRESSED_BYTES`. For callers that keep
/// record bytes (the cleaner, the group replay); produce validation uses
/// `with_records_section`.
pub fn records_section(batch: &Bytes, header: &BatchHeader) -> Result<Bytes> {
    let end = header.total_len().min(batch.len());
    let body = batch.slice(BATCH_HEADER_LEN.min(end)..end);
    match header.compression() {
        Some(Compression::None) => Ok(body),
        Some(c) => {
            let mut out = Vec::new();
            decompress_bounded(c, &body, MAX_DECOMPRESSED_BYTES, &mut out)?;
            Ok(Bytes::from(out))
        }
        None => Err(BatchError::UnknownCompression(header.compression_id())),
    }
}

/// Runs `f` on the records section of `batch`: the bytes in place when uncompressed,
/// else decompressed (at most `MAX_DECOMPRESSED_BYTES`) into this thread's reusable
/// scratch buffer, so the hot path allocates nothing per batch or per record.
pub fn with_records_section<T>(batch: &[u8], header: &BatchHeader, f: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
    let end = header.total_len().min(batch.len());
    let body = batch.get(BATCH_HEADER_LEN.min(end)..end).unwrap_or(&[]);
    let compression = header.compression().ok_or(BatchError::UnknownCompression(header.compression_id()))?;
    if compression == Compression::None {
        return f(body);
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buf) => {
            let result = decompress_bounded(compression, body, MAX_DECOMPRESSED_BYTES, &mut buf).and_then(|()| f(&buf));
            if buf.capacity() > SCRATCH_RETAIN_BYTES {
                *buf = Vec::new();
            } else {
                buf.clear();
            }
            result
        }
        // Only if `f` itself validates another batch: give that one its own buffer.
        Err(_) => {
            let mut buf = Vec::new();
            decompress_bounded(compression, body, MAX_DECOMPRESSED_BYTES, &mut buf)?;
            f(&buf)
        }
    })
}

/// Undecodable compressed bytes (Kafka fails such a produce too; see error_map.rs).
fn corrupt(detail: impl Into<String>) -> BatchError {
    BatchError::CorruptRecord(detail.into())
}

thread_local! {
    /// This thread's zstd decompression context (a shard's executor is one thread). A
    /// context per batch allocated and freed its window buffer (2 MiB at Kafka's default
    /// level) and its tables for every produced batch: with 16 KiB keyed batches that
    /// was most of the broker's cost per zstd batch.
    static ZSTD_DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

/// A context grown past this (a frame with a window above 8 MiB: zstd levels 20-22) is
/// dropped after use rather than kept by the thread.
const ZSTD_DCTX_KEEP_BYTES: usize = 16 << 20;

fn zstd_bounded(compressed: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<()> {
    ZSTD_DCTX.with(|cell| {
        // Not re-entrant: nothing below calls back into decompression.
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(zstd::zstd_safe::DCtx::try_create().ok_or_else(|| corrupt("zstd: cannot allocate a context"))?),
        };
        // A `&[u8]` is already a BufRead: no extra copy buffer. `with_context` resets
        // the session, so a frame a previous batch left unfinished cannot leak into this.
        let result = read_bounded(zstd::stream::read::Decoder::with_context(compressed, ctx), limit, out);
        if ctx.sizeof() > ZSTD_DCTX_KEEP_BYTES {
            *slot = None;
        }
        result
    })
}

fn read_bounded(r: impl std::io::Read, limit: usize, out: &mut Vec<u8>) -> Result<()> {
    use std::io::Read;
    r.take(limit as u64 + 1).read_to_end(out).map_err(|e| corrupt(format!("decompressing: {e}")))?;
    if out.len() > limit {
        return Err(BatchError::DecompressedTooLarge { limit });
    }
    Ok(())
}

/// Kafka's snappy framing (xerial): a 16-byte magic header, then `[u32 length][raw block]`...
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// The raw snappy blocks of `data`: xerial-framed blocks, or `data` as one raw block.
fn snappy_blocks(data: &[u8]) -> impl Iterator<Item = Result<&[u8]>> {
    let (mut rest, framed) = match data.strip_prefix(&XERIAL_MAGIC[..]) {
        Some(rest) => (rest, true),
        None => (data, false),
    };
    let mut single = Some(data).filter(|_| !framed);
    std::iter::from_fn(move || {
        if !framed {
            return single.take().map(Ok);
        }
        if rest.is_empty() {
            return None;
        }
        let block = rest.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize).and_then(|len| rest.get(4..4usize.checked_add(len)?));
        match block {
            Some(b) => {
                rest = &rest[4 + b.len()..];
                Some(Ok(b))
            }
            None => {
                rest = &[];
                Some(Err(corrupt("snappy block past the end")))
            }
        }
    })
}

/// Snappy, bounded: each raw block states its decompressed length, so the total is
/// checked against `limit` before anything is allocated.
fn snappy_bounded(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<()> {
    let mut total = 0usize;
    for block in snappy_blocks(data) {
        total = total.saturating_add(snap::raw::decompress_len(block?).map_err(|e| corrupt(format!("snappy: {e}")))?);
        if total > limit {
            return Err(BatchError::DecompressedTooLarge { limit });
        }
    }
    out.resize(total, 0);
    let mut at = 0;
    let mut dec = snap::raw::Decoder::new();
    for block in snappy_blocks(data) {
        at += dec.decompress(block?, &mut out[at..]).map_err(|e| corrupt(format!("snappy: {e}")))?;
    }
    out.truncate(at);
    Ok(())
}

/// The one record walker: visits the `header.records_count` records of a (decompressed)
/// records section in order, with their index, following Kafka's `DefaultRecord.readFrom`
/// and the batch iterator around it:
/// length, attributes, timestampDelta, offsetDelta, key, value, headers (each header a
/// non-null key and a value), and a record's length must be exactly what it holds.
/// Fewer records than the count ("premature EOF") or bytes left after the last one
/// ("records still remaining") are `InvalidRecord`. Offset deltas must grow strictly and
/// stay within `lastOffsetDelta` (a cleaned batch has gaps; a producer's is 0..n-1,
/// which the produce validation checks on top). Allocates nothing.
pub fn walk_records(section: &[u8], header: &BatchHeader, mut visit: impl FnMut(usize, RecordRef) -> Result<()>) -> Result<()> {
    let count = usize::try_from(header.records_count).map_err(|_| BatchError::InvalidRecordCount(header.records_count))?;
    let mut at = 0usize;
    let mut prev_delta: i64 = -1;
    for index in 0..count {
        if at >= section.len() {
            return Err(invalid(format!("batch declares {count} records but holds {index}")));
        }
        let start = at;
        let len = read_varint(section, &mut at)?;
        let body_start = at;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= section.len())
            .ok_or_else(|| invalid(format!("record {index} of {len} bytes runs past the batch")))?;
        // attributes: unused in v2, one byte.
        if at >= end {
            return Err(invalid(format!("record {index} is empty")));
        }
        at += 1;
        let ts_delta = read_varlong(&section[..end], &mut at)?;
        let offset_delta = read_varint(&section[..end], &mut at)?;
        let key = read_field(section, &mut at, end)?;
        let value = read_field(section, &mut at, end)?;
        let header_count = read_varint(&section[..end], &mut at)?;
        if header_count < 0 {
            return Err(invalid(format!("record {index} has {header_count} headers")));
        }
        for _ in 0..header_count {
            // Each header takes at least two bytes, so a hostile count ends at `end`.
            let Some(_key) = read_field(section, &mut at, end)? else {
                return Err(invalid(format!("record {index} has a header with a null key")));
            };
            read_field(section, &mut at, end)?;
        }
        if at != end {
            return Err(invalid(format!("record {index} declares {len} bytes but holds {}", at - body_start)));
        }
        if i64::from(offset_delta) <= prev_delta || offset_delta > header.last_offset_delta {
            return Err(invalid(format!("record {index} has offset delta {offset_delta} (out of order)")));
        }
        prev_delta = i64::from(offset_delta);
        visit(
            index,
            RecordRef {
                offset: header.base_offset.saturating_add(i64::from(offset_delta)),
                timestamp: header.base_timestamp.saturating_add(ts_delta),
                is_tombstone: value.is_none(),
                key,
                value,
                bytes: start..end,
            },
        )?;
    }
    if at != section.len() {
        return Err(invalid(format!("bytes after the {count} records the batch declares")));
    }
    Ok(())
}

/// Every record of a records section (see `walk_records`), collected.
pub fn parse_records(section: &[u8], header: &BatchHeader) -> Result<Vec<RecordRef>> {
    let count = usize::try_from(header.records_count).map_err(|_| BatchError::InvalidRecordCount(header.records_count))?;
    // Each record takes at least 7 bytes: a hostile count cannot make us allocate much.
    let mut out = Vec::with_capacity(count.min(section.len() / 7 + 1));
    walk_records(section, header, |_, r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
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

/// The first record of a batch at or after `timestamp` (and at or after `min_offset`),
/// walking its records after a bounded decompression (ListOffsets only; not on the fetch
/// path). A LogAppendTime batch's records all carry its maxTimestamp, as in Kafka.
pub fn first_record_at_or_after(batch: Bytes, h: &BatchHeader, timestamp: i64, min_offset: i64) -> Option<(i64, i64)> {
    let fallback = Some((h.base_offset.max(min_offset), h.max_timestamp));
    let Ok(records) = records_section(&batch, h).and_then(|section| parse_records(&section, h)) else {
        return fallback;
    };
    let record_timestamp = |t: i64| if h.timestamp_type_is_log_append() { h.max_timestamp } else { t };
    records.iter().map(|r| (r.offset, record_timestamp(r.timestamp))).find(|&(offset, ts)| ts >= timestamp && offset >= min_offset).or(fallback)
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
                assert_eq!(p.value.clone().map(|v| section.slice(v)), e.2);
                assert_eq!(p.is_tombstone, e.2.is_none());
                assert_eq!(p.timestamp, e.3);
            }
            // The scratch-buffer path sees the same records.
            let n = with_records_section(&b, &h, |s| parse_records(s, &h).map(|v| v.len())).unwrap();
            assert_eq!(n, recs.len());
        }
    }

    #[test]
    fn decompression_is_bounded() {
        let mut out = Vec::new();
        let big = std::io::Read::take(std::io::repeat(0), 1000);
        assert_eq!(read_bounded(big, 999, &mut out), Err(BatchError::DecompressedTooLarge { limit: 999 }));
        assert!(out.len() <= 1000);
        // A raw snappy block whose header claims 200 MiB is refused before allocating.
        let mut claim = Vec::new();
        let mut n = 200u64 << 20;
        while n >= 0x80 {
            claim.push((n as u8) | 0x80);
            n >>= 7;
        }
        claim.push(n as u8);
        claim.extend_from_slice(&[0u8; 8]);
        let mut out = Vec::new();
        assert_eq!(snappy_bounded(&claim, MAX_DECOMPRESSED_BYTES, &mut out), Err(BatchError::DecompressedTooLarge { limit: MAX_DECOMPRESSED_BYTES }));
        assert_eq!(out.capacity(), 0);
    }

    /// The thread's zstd context is kept between batches, and a frame cut off in the
    /// middle (an error while the context was mid-frame) does not leak into the next.
    #[test]
    fn zstd_context_is_reused_and_reset_between_batches() {
        let plain: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut packed = BytesMut::new();
        compress_into(&mut packed, BytesMut::from(&plain[..]), Compression::Zstd).unwrap();
        let mut out = Vec::new();
        let cut = &packed[..packed.len() / 2];
        assert!(decompress_bounded(Compression::Zstd, cut, MAX_DECOMPRESSED_BYTES, &mut out).is_err());
        assert!(ZSTD_DCTX.with(|c| c.borrow().is_some()), "the context stays with the thread");
        for _ in 0..3 {
            decompress_bounded(Compression::Zstd, &packed, MAX_DECOMPRESSED_BYTES, &mut out).unwrap();
            assert_eq!(out, plain);
        }
    }

    /// Every codec: a section of 1 MiB of zeros (a few KiB compressed) is refused past a
    /// 64 KiB limit and accepted at 1 MiB, and garbage is CorruptRecord, not a panic.
    #[test]
    fn every_codec_is_bounded_and_refuses_garbage() {
        let plain = BytesMut::from(&vec![0u8; 1 << 20][..]);
        for c in 1..5u8 {
            let compression = compression_of(c);
            let mut packed = BytesMut::new();
            compress_into(&mut packed, plain.clone(), compression).unwrap();
            assert!(packed.len() < 64 << 10, "{compression:?} packs zeros");
            let mut out = Vec::new();
            assert_eq!(
                decompress_bounded(compression, &packed, 64 << 10, &mut out),
                Err(BatchError::DecompressedTooLarge { limit: 64 << 10 }),
                "{compression:?}"
            );
            assert!(out.len() <= (64 << 10) + 1, "{compression:?} wrote {} bytes", out.len());
            decompress_bounded(compression, &packed, 1 << 20, &mut out).unwrap();
            assert_eq!(out.len(), 1 << 20);
            assert!(out.iter().all(|&b| b == 0));
            let garbage = [0x5au8; 64];
            assert!(matches!(decompress_bounded(compression, &garbage, 1 << 20, &mut out), Err(BatchError::CorruptRecord(_))), "{compression:?}");
        }
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
