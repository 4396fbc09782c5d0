//! Building the reusable record batch and walking fetched batches (RecordBatch v2).
//!
//! Fetched bytes come from the network: every offset is checked, a truncated last batch
//! (normal: Fetch cuts at `partition_max_bytes`) ends the walk, anything malformed is an
//! error.
use std::ops::Range;

use anyhow::{anyhow, bail};
use bytes::Bytes;
use kafka_protocol::records::Compression;

use crate::record::{compute_crc, encode_batch, parse_header, NewRecord, BATCH_HEADER_LEN};

/// Offset of the CRC field in a batch.
pub const OFF_CRC: usize = 17;

/// `n` records of `size` bytes of incompressible filler, no key, encoded once.
pub fn build_batch(n: usize, size: usize, seed: u64) -> anyhow::Result<Bytes> {
    build_keyed_batch(n, size, seed, &[], Compression::None)
}

/// Text repeated in the second half of compressible values.
const TEXT: &[u8] = b"shardlog bench value: the quick brown fox jumps over the lazy dog. ";

/// `n` records of `size`-byte values, record i keyed `keys[i % keys.len()]` (no keys:
/// unkeyed), encoded once with `compression`. Uncompressed values are xorshift filler so
/// no layer (disk, network) gets to compress them; compressed ones are half filler, half
/// repeated text, so a codec has real work and a ratio near 2:1 (a realistic payload,
/// not a best case).
pub fn build_keyed_batch(n: usize, size: usize, seed: u64, keys: &[Bytes], compression: Compression) -> anyhow::Result<Bytes> {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let filler_len = if compression == Compression::None { size } else { size / 2 };
    let mut x = seed | 1;
    let records: Vec<NewRecord> = (0..n)
        .map(|i| {
            let mut v = Vec::with_capacity(size);
            while v.len() < filler_len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.extend_from_slice(&x.to_le_bytes()[..(filler_len - v.len()).min(8)]);
            }
            while v.len() < size {
                let take = (size - v.len()).min(TEXT.len());
                v.extend_from_slice(&TEXT[..take]);
            }
            let key = (!keys.is_empty()).then(|| keys[i % keys.len()].clone());
            NewRecord { key, value: Some(Bytes::from(v)), timestamp_ms: now_ms }
        })
        .collect();
    let buf = encode_batch(records, compression).map_err(|e| anyhow!("encode record batch: {e}"))?;
    let h = parse_header(&buf).map_err(|e| anyhow!("encoded batch: {e}"))?;
    if h.total_len() != buf.len() || h.records_count as usize != n || h.base_sequence != -1 {
        bail!("record batch encoder produced {} bytes for {n} records in more than one batch", buf.len());
    }
    Ok(buf)
}

/// What a walk over fetched bytes found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Walked {
    /// Offset after the last complete batch seen (None: no complete batch).
    pub next_offset: Option<i64>,
    /// Records at or above the fetch offset.
    pub records: u64,
    /// Their value bytes (batch bytes for compressed batches, which we do not inflate).
    pub value_bytes: u64,
}

/// Walks the complete batches in `buf`, calling `on_value` for each record value at an
/// offset >= `from_offset` (Kafka may return a batch that starts before it).
pub fn walk_batches(buf: &[u8], from_offset: i64, mut on_value: impl FnMut(&[u8])) -> anyhow::Result<Walked> {
    let mut out = Walked::default();
    let mut pos = 0usize;
    while buf.len() - pos >= BATCH_HEADER_LEN {
        let rest = &buf[pos..];
        let h = parse_header(rest).map_err(|e| anyhow!("fetched batch at byte {pos}: {e}"))?;
        if h.batch_length < 0 {
            bail!("fetched batch with negative length {}", h.batch_length);
        }
        let total = h.total_len();
        if total < BATCH_HEADER_LEN {
            bail!("fetched batch shorter than its header");
        }
        if total > rest.len() {
            break; // truncated by partition_max_bytes: fetch it again next time
        }
        let batch = &rest[..total];
        if compute_crc(batch) != h.crc {
            bail!("fetched batch at offset {} fails its CRC", h.base_offset);
        }
        let last = h.last_offset();
        if last >= from_offset && !h.is_control() {
            if h.compression() == Some(kafka_protocol::records::Compression::None) {
                for r in record_values(batch)? {
                    let (offset, value) = r;
                    if offset >= from_offset {
                        out.records += 1;
                        out.value_bytes += value.len() as u64;
                        on_value(&batch[value]);
                    }
                }
            } else {
                out.records += u64::try_from(h.records_count).unwrap_or(0);
                out.value_bytes += total as u64;
            }
        }
        out.next_offset = Some(last.saturating_add(1));
        pos += total;
    }
    Ok(out)
}

/// (absolute offset, value range within `batch`) of every record of one uncompressed batch.
pub fn record_values(batch: &[u8]) -> anyhow::Result<Vec<(i64, Range<usize>)>> {
    let h = parse_header(batch).map_err(|e| anyhow!("{e}"))?;
    let count = usize::try_from(h.records_count).map_err(|_| anyhow!("negative record count"))?;
    // Each record takes at least 7 bytes: bound the allocation by what is there.
    let mut out = Vec::with_capacity(count.min(batch.len() / 7));
    let mut pos = BATCH_HEADER_LEN;
    for _ in 0..count {
        let len = read_varint(batch, &mut pos)?;
        let len = usize::try_from(len).map_err(|_| anyhow!("negative record length"))?;
        let end = pos.checked_add(len).filter(|&e| e <= batch.len()).ok_or_else(|| anyhow!("record overruns its batch"))?;
        let rec = &batch[..end];
        let mut p = pos + 1; // attributes
        let _ts_delta = read_varint(rec, &mut p)?;
        let offset_delta = read_varint(rec, &mut p)?;
        let key_len = read_varint(rec, &mut p)?;
        if key_len > 0 {
            p = p.checked_add(key_len as usize).filter(|&e| e <= end).ok_or_else(|| anyhow!("key overruns its record"))?;
        }
        let value_len = read_varint(rec, &mut p)?;
        let value = if value_len >= 0 {
            let ve = p.checked_add(value_len as usize).filter(|&e| e <= end).ok_or_else(|| anyhow!("value overruns its record"))?;
            p..ve
        } else {
            p..p // null value
        };
        out.push((h.base_offset.saturating_add(offset_delta), value));
        pos = end;
    }
    Ok(out)
}

/// Zig-zag varint (Kafka's record fields), up to 10 bytes.
fn read_varint(buf: &[u8], pos: &mut usize) -> anyhow::Result<i64> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos).ok_or_else(|| anyhow!("truncated varint in record"))?;
        *pos += 1;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    bail!("varint longer than 10 bytes in record")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_batch_walks_back() {
        let b = build_batch(5, 100, 42).unwrap();
        let values = record_values(&b).unwrap();
        assert_eq!(values.len(), 5);
        for (i, (off, v)) in values.iter().enumerate() {
            assert_eq!(*off, i as i64);
            assert_eq!(v.len(), 100);
        }
        // Two batches back to back, the second truncated: only the first counts.
        let mut two = b.to_vec();
        two.extend_from_slice(&b[..b.len() - 10]);
        let mut seen = 0;
        let w = walk_batches(&two, 2, |v| {
            assert_eq!(v.len(), 100);
            seen += 1
        })
        .unwrap();
        assert_eq!(w, Walked { next_offset: Some(5), records: 3, value_bytes: 300 });
        assert_eq!(seen, 3);
    }

    #[test]
    fn corrupt_or_short_input_is_an_error_not_a_panic() {
        let b = build_batch(3, 16, 1).unwrap();
        let mut bad = b.to_vec();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert!(walk_batches(&bad, 0, |_| {}).is_err());
        for cut in 0..b.len() {
            let _ = record_values(&b[..cut]);
            let _ = walk_batches(&b[..cut], 0, |_| {});
        }
        assert_eq!(walk_batches(&[], 0, |_| {}).unwrap(), Walked::default());
    }

    #[test]
    fn keyed_batches_carry_their_keys_and_compress() {
        let keys = [Bytes::from_static(b"k0"), Bytes::from_static(b"k1")];
        let plain = build_keyed_batch(8, 1024, 3, &keys, Compression::None).unwrap();
        let h = parse_header(&plain).unwrap();
        let got: Vec<Bytes> = crate::record::with_records_section(&plain, &h, |section| {
            let recs = crate::record::parse_records(section, &h)?;
            Ok(recs.iter().map(|r| Bytes::copy_from_slice(&section[r.key.clone().unwrap()])).collect())
        })
        .unwrap();
        assert_eq!(got, [&keys[..], &keys[..], &keys[..], &keys[..]].concat());
        for c in [Compression::Lz4, Compression::Zstd] {
            let z = build_keyed_batch(8, 1024, 3, &keys, c).unwrap();
            let h = parse_header(&z).unwrap();
            assert_eq!((h.compression(), h.records_count), (Some(c), 8));
            // Half of each value is repeated text: the codec must find it.
            assert!(z.len() < plain.len() * 3 / 4, "{c:?}: {} of {} bytes", z.len(), plain.len());
            // Counted without inflating (the consumer does not decompress).
            let w = walk_batches(&z, 0, |_| panic!("compressed values are not walked")).unwrap();
            assert_eq!((w.records, w.next_offset), (8, Some(8)));
        }
    }
}
