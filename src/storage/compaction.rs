//! Log compaction (Kafka's LogCleaner) — the parts that do not need a partition:
//! walking the records inside a stored batch, the key → latest offset map, filtering one
//! batch (Kafka's `MemoryRecords.filterTo`), streaming a segment's batches, writing the
//! cleaned copy of a segment and swapping it in crash-safely.
//!
//! The orchestration (which partitions, when, borrow discipline around awaits) lives in
//! `partition/cleaner.rs`.
//!
//! On-disk protocol of a swap (recovery deletes a leftover `<base>.log.cleaned`):
//! 1. write `<base>.log.cleaned`, truncate to its logical size, fdatasync;
//! 2. delete `<base>.index` / `<base>.timeindex` (they describe the old file) and fsync
//!    the directory, so a crash from here on rebuilds the indexes by scanning;
//! 3. rename `<base>.log.cleaned` over `<base>.log`, fsync the directory;
//! 4. save the new indexes (tmp + rename, as every checked file).
//!
//! Not supported yet (we have no transactions): aborted-transaction removal and Kafka's
//! control-batch / transaction-marker retention rules. Control batches are kept as they
//! are; transactional batches are cleaned like any other.
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use glommio::io::DmaFile;
use kafka_protocol::compression::{self as codec, Compressor};
use kafka_protocol::records::Compression;

use super::dma::{open_rw, read_bytes, read_checked_file, remove_file, write_checked_file, write_padded};
use super::segment::{index_path, log_file_name, time_index_path, Segment};
use super::{Result, StorageError};
use crate::protocol::record_batch::{compute_crc, iter_batches, parse_header, BatchError, BatchHeader, BATCH_HEADER_LEN};

/// Suffix of a segment being rewritten by the cleaner.
pub const CLEANED_SUFFIX: &str = ".cleaned";
const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
const CHECKPOINT_MAGIC: u32 = 0x534c_434f; // "SLCO"
const CHECKPOINT_VERSION: u16 = 1;
/// Bytes read from a segment at a time while cleaning.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// Bytes of the cleaned segment buffered before an aligned write.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

// Header field offsets that filtering rewrites (see record_batch.rs for the layout).
const OFF_BATCH_LENGTH: usize = 8;
const OFF_CRC: usize = 17;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_RECORDS_COUNT: usize = 57;

pub fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    let mut name = log_file_name(base_offset);
    name.push_str(CLEANED_SUFFIX);
    dir.join(name)
}

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
fn read_varlong(data: &[u8], at: &mut usize) -> std::result::Result<i64, BatchError> {
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

fn read_varint(data: &[u8], at: &mut usize) -> std::result::Result<i32, BatchError> {
    let v = read_varlong(data, at)?;
    i32::try_from(v).map_err(|_| corrupt("varint out of i32 range"))
}

/// A length-prefixed byte field (-1 = null) starting at `at`, bounded by `end`.
fn read_field(data: &[u8], at: &mut usize, end: usize) -> std::result::Result<Option<Range<usize>>, BatchError> {
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
pub fn records_section(batch: &Bytes, header: &BatchHeader) -> std::result::Result<Bytes, BatchError> {
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
        None => Err(BatchError::UnknownCompression((header.attributes & 0x07) as u8)),
    }
}

fn read_bounded(r: impl std::io::Read) -> std::result::Result<Bytes, BatchError> {
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
fn snappy_bounded(data: &[u8]) -> std::result::Result<Bytes, BatchError> {
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
pub fn parse_records(section: &[u8], header: &BatchHeader) -> std::result::Result<Vec<RecordRef>, BatchError> {
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
pub fn check_keys_for_compaction(batch: &Bytes, header: &BatchHeader) -> std::result::Result<(), BatchError> {
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

/// Key → offset of its latest record (Kafka's OffsetMap, holding whole keys rather than
/// digests), with a byte budget: a log with more distinct key bytes is not cleaned.
#[derive(Debug, Default)]
pub struct OffsetMap {
    latest: HashMap<Bytes, i64>,
    key_bytes: usize,
    max_key_bytes: usize,
}

impl OffsetMap {
    pub fn new(max_key_bytes: usize) -> OffsetMap {
        OffsetMap { latest: HashMap::new(), key_bytes: 0, max_key_bytes }
    }

    /// Adds the records of one batch; batches must come in offset order. Returns false
    /// when the map is over its budget.
    pub fn add_batch(&mut self, batch: &Bytes, header: &BatchHeader) -> std::result::Result<bool, BatchError> {
        if header.is_control() {
            return Ok(true);
        }
        let section = records_section(batch, header)?;
        for r in parse_records(&section, header)? {
            let Some(k) = r.key else { continue };
            let key = section.slice(k);
            let len = key.len();
            match self.latest.insert(key, r.offset) {
                None => self.key_bytes += len,
                // Data from disk: out of order is damage, reported rather than asserted.
                Some(prev) if prev >= r.offset => {
                    return Err(corrupt(format!("offset {} after {prev} for the same key", r.offset)))
                }
                Some(_) => {}
            }
        }
        Ok(self.key_bytes <= self.max_key_bytes)
    }

    pub fn latest(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }
}

/// What filtering did to one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Every record stays: the stored bytes are kept as they are.
    Unchanged,
    /// Some records stay: the re-encoded batch.
    Rewritten(Bytes),
    /// No record stays.
    Dropped,
}

/// Kafka's cleaner rule for one record: keep it if it is the latest record of its key
/// and, for a tombstone, if the delete horizon has not passed. Records without a key are
/// dropped (Kafka counts them as invalid in a compacted log).
pub fn retain(record: &RecordRef, section: &[u8], map: &OffsetMap, drop_tombstones: bool) -> bool {
    let Some(k) = &record.key else { return false };
    let newest = map.latest(&section[k.clone()]).is_none_or(|latest| latest <= record.offset);
    newest && !(record.is_tombstone && drop_tombstones)
}

/// Filters one stored batch (Kafka's `MemoryRecords.filterTo` for v2):
/// the retained records keep their bytes (offset and timestamp deltas, so offsets and
/// timestamps are unchanged); the new batch keeps the base offset, the last offset delta
/// (so the producer's last sequence stays derivable), producer id, epoch, base sequence,
/// partition leader epoch, attributes (codec, timestamp type, transactional) and base
/// timestamp; records count, max timestamp (CreateTime), length and CRC are recomputed.
/// Kafka re-bases the timestamp deltas on the first retained record; keeping the
/// original base gives consumers the same timestamps.
///
/// Kafka keeps an empty batch header when it holds a live producer's last sequence
/// (`BatchRetention.RETAIN_EMPTY`); we drop it: producer state is rebuilt from snapshots
/// taken at each roll and from the active segment, never from sealed segments.
pub fn filter_batch(
    batch: &Bytes,
    header: &BatchHeader,
    mut keep: impl FnMut(&RecordRef, &[u8]) -> bool,
) -> std::result::Result<Filtered, BatchError> {
    if header.is_control() {
        return Ok(Filtered::Unchanged);
    }
    let section = records_section(batch, header)?;
    let records = parse_records(&section, header)?;
    let kept: Vec<&RecordRef> = records.iter().filter(|r| keep(r, &section)).collect();
    if kept.len() == records.len() {
        return Ok(Filtered::Unchanged);
    }
    if kept.is_empty() {
        return Ok(Filtered::Dropped);
    }
    let mut plain = BytesMut::with_capacity(kept.iter().map(|r| r.bytes.len()).sum());
    for r in &kept {
        plain.extend_from_slice(&section[r.bytes.clone()]);
    }
    let compression = header.compression().ok_or(BatchError::UnknownCompression((header.attributes & 0x07) as u8))?;
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + plain.len());
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    let compressed = compress_into(&mut out, plain, compression);
    compressed.map_err(|e| corrupt(e.to_string()))?;
    let batch_length = i32::try_from(out.len() - 12).map_err(|_| BatchError::InvalidBatchLength { length: i32::MAX })?;
    out[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    if !header.timestamp_type_is_log_append() {
        // Kafka's builder tracks the max timestamp of what it wrote.
        let max_ts = kept.iter().map(|r| r.timestamp).max().unwrap_or(header.max_timestamp);
        out[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&max_ts.to_be_bytes());
    }
    let count = i32::try_from(kept.len()).map_err(|_| BatchError::InvalidRecordCount(i32::MAX))?;
    out[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&count.to_be_bytes());
    let crc = compute_crc(&out);
    out[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    let out = out.freeze();
    debug_assert!(parse_header(&out).is_ok_and(|h| h.base_offset == header.base_offset
        && h.last_offset_delta == header.last_offset_delta
        && h.base_sequence == header.base_sequence
        && h.records_count == count));
    Ok(Filtered::Rewritten(out))
}

fn compress_into(out: &mut BytesMut, mut plain: BytesMut, compression: Compression) -> anyhow::Result<()> {
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

/// Reads the batches of `[start, end)` of a segment file in chunks, checking every CRC.
pub struct BatchStream {
    file: Rc<DmaFile>,
    pos: u64,
    end: u64,
}

impl BatchStream {
    pub fn new(file: Rc<DmaFile>, start: u64, end: u64) -> BatchStream {
        BatchStream { file, pos: start, end }
    }

    /// The next batches, in order; empty at the end. A bad batch before `end` is an
    /// error (sealed data was validated when written; damage must stop the cleaner).
    pub async fn next_chunk(&mut self) -> Result<Vec<(BatchHeader, Bytes)>> {
        let mut want = READ_CHUNK_BYTES;
        while self.pos < self.end {
            let len = want.min((self.end - self.pos) as usize);
            let chunk = read_bytes(&self.file, self.pos, len).await?;
            let mut out = Vec::new();
            let mut consumed = 0usize;
            let mut need = None;
            for item in iter_batches(&chunk) {
                match item {
                    Ok((h, range)) => {
                        consumed = range.end;
                        out.push((h, chunk.slice(range)));
                    }
                    Err(BatchError::Truncated { needed, .. }) if (chunk.len() as u64) < self.end - self.pos => {
                        need = Some(needed);
                    }
                    Err(e) => {
                        return Err(StorageError::Corrupt {
                            what: "segment being cleaned".into(),
                            detail: format!("bad batch at position {}: {e}", self.pos + consumed as u64),
                        })
                    }
                }
            }
            if consumed == 0 {
                match need {
                    // A batch larger than the chunk: read it whole.
                    Some(n) if n > want => {
                        want = n;
                        continue;
                    }
                    // Zero padding or nothing: the end of the data.
                    _ => {
                        self.pos = self.end;
                        return Ok(out);
                    }
                }
            }
            self.pos += consumed as u64;
            return Ok(out);
        }
        Ok(Vec::new())
    }
}

/// Writes the cleaned copy of one sealed segment to `<base>.log.cleaned`, tracking its
/// indexes in a scratch `Segment` as batches go in.
pub struct CleanedSegmentWriter {
    scratch: Segment,
    /// Bytes not yet written, starting at file position `flushed`.
    buf: Vec<u8>,
    flushed: u64,
    index_interval_bytes: usize,
}

impl CleanedSegmentWriter {
    pub async fn create(dir: &Path, base_offset: i64, created_ms: i64, index_interval_bytes: usize) -> Result<Self> {
        let path = cleaned_path(dir, base_offset);
        remove_file(&path).await?;
        let file = open_rw(&path).await?;
        Ok(CleanedSegmentWriter {
            scratch: Segment::empty(dir, base_offset, file, created_ms),
            buf: Vec::with_capacity(WRITE_CHUNK_BYTES + READ_CHUNK_BYTES),
            flushed: 0,
            index_interval_bytes,
        })
    }

    pub fn file(&self) -> &Rc<DmaFile> {
        &self.scratch.file
    }

    pub fn size(&self) -> u64 {
        self.scratch.size()
    }

    pub async fn push(&mut self, header: &BatchHeader, batch: &[u8]) -> Result<()> {
        debug_assert_eq!(header.total_len(), batch.len());
        self.scratch.index_existing(header, batch.len(), self.index_interval_bytes);
        self.buf.extend_from_slice(batch);
        if self.buf.len() >= WRITE_CHUNK_BYTES {
            let aligned = self.scratch.file.align_down(self.buf.len() as u64) as usize;
            write_padded(&self.scratch.file, self.flushed, &self.buf[..aligned]).await?;
            self.buf.drain(..aligned);
            self.flushed += aligned as u64;
        }
        Ok(())
    }

    /// Writes the rest, cuts the file to its logical size and syncs it. Returns the new
    /// sealed segment (ending at `next_offset`, the old segment's end: cleaning never
    /// moves a segment's end, so the next segment's base stays adjacent).
    pub async fn finish(self, next_offset: i64) -> Result<Segment> {
        let file = self.scratch.file.clone();
        if !self.buf.is_empty() {
            write_padded(&file, self.flushed, &self.buf).await?;
        }
        let size = self.scratch.size();
        debug_assert_eq!(self.flushed + self.buf.len() as u64, size);
        file.truncate(size).await.map_err(|e| StorageError::glommio("truncating a cleaned segment", e))?;
        file.fdatasync().await.map_err(|e| StorageError::glommio("syncing a cleaned segment", e))?;
        let head_start = (file.align_down(size) - self.flushed) as usize;
        let head = self.buf[head_start..].to_vec();
        drop(file);
        Ok(Segment::cleaned(self.scratch, next_offset, head))
    }

    /// Gives up: deletes the partial file.
    pub async fn abandon(self, dir: &Path) {
        let base = self.scratch.base_offset;
        drop(self);
        let _ = remove_file(&cleaned_path(dir, base)).await;
    }
}

/// fsync of a directory, so renames and unlinks in it are durable.
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::File::open(&d).and_then(|f| f.sync_all()))
        .await
        .map_err(|e| StorageError::io(format!("syncing directory {}", dir.display()), e))
}

/// Steps 2 and 3 of the swap (module comment): afterwards `<base>.log` is the cleaned
/// file and has no index on disk. `file` is the open cleaned file (it keeps its fd).
pub async fn swap_in(dir: &Path, base_offset: i64, file: &DmaFile) -> Result<()> {
    remove_file(&index_path(dir, base_offset)).await?;
    remove_file(&time_index_path(dir, base_offset)).await?;
    sync_dir(dir).await?;
    file.rename(dir.join(log_file_name(base_offset)))
        .await
        .map_err(|e| StorageError::glommio("renaming a cleaned segment into place", e))?;
    sync_dir(dir).await
}

/// The first offset not yet cleaned (Kafka's cleaner-offset-checkpoint), or None.
pub async fn load_checkpoint(dir: &Path) -> Option<i64> {
    let payload = read_checked_file(&dir.join(CHECKPOINT_FILE), CHECKPOINT_MAGIC, CHECKPOINT_VERSION).await.ok()??;
    let b: [u8; 8] = payload.get(..8)?.try_into().ok()?;
    Some(i64::from_be_bytes(b))
}

pub async fn save_checkpoint(dir: &Path, first_dirty_offset: i64) -> Result<()> {
    write_checked_file(&dir.join(CHECKPOINT_FILE), CHECKPOINT_MAGIC, CHECKPOINT_VERSION, &first_dirty_offset.to_be_bytes())
        .await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::record_batch::tests::compression_of;
    use kafka_protocol::records::{Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    /// A stored batch at `base` of (key, value) records; producer (id, epoch, base seq).
    pub(crate) fn kv_batch(
        base: i64,
        recs: &[(Option<&str>, Option<&str>)],
        compression: Compression,
        producer: Option<(i64, i16, i32)>,
        ts: i64,
    ) -> Bytes {
        let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
        let records: Vec<Record> = recs
            .iter()
            .enumerate()
            .map(|(i, (k, v))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: pid,
                producer_epoch: epoch,
                timestamp_type: TimestampType::Creation,
                offset: base + i as i64,
                sequence: if seq < 0 { i as i32 - 1 } else { seq + i as i32 },
                timestamp: ts + i as i64,
                key: k.map(|s| Bytes::from(s.to_string())),
                value: v.map(|s| Bytes::from(s.to_string())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression })
            .expect("test batch encodes");
        buf.freeze()
    }

    fn decode(b: &Bytes) -> Vec<(i64, Option<Bytes>, Option<Bytes>, i64)> {
        let mut b = b.clone();
        let set = RecordBatchDecoder::decode(&mut b).expect("decodes");
        set.records.into_iter().map(|r| (r.offset, r.key, r.value, r.timestamp)).collect()
    }

    #[test]
    fn parse_records_matches_kafka_protocol_decoder() {
        for c in 0..5u8 {
            let recs = [(Some("a"), Some("1")), (None, Some("2")), (Some("b"), None), (Some("a"), Some("3"))];
            let b = kv_batch(100, &recs, compression_of(c), None, 5000);
            let h = parse_header(&b).unwrap();
            let section = records_section(&b, &h).unwrap();
            let parsed = parse_records(&section, &h).unwrap();
            let expect = decode(&b);
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
    fn filter_keeps_offsets_producer_fields_and_codec() {
        for c in 0..5u8 {
            let compression = compression_of(c);
            let recs = [(Some("a"), Some("1")), (Some("b"), Some("2")), (Some("a"), Some("3")), (Some("c"), None)];
            let b = kv_batch(40, &recs, compression, Some((7, 2, 11)), 9000);
            let h = parse_header(&b).unwrap();
            let mut map = OffsetMap::new(1 << 20);
            assert!(map.add_batch(&b, &h).unwrap());
            // b is superseded later in the log.
            let later = kv_batch(50, &[(Some("b"), Some("9"))], Compression::None, None, 9500);
            assert!(map.add_batch(&later, &parse_header(&later).unwrap()).unwrap());
            let out = filter_batch(&b, &h, |r, s| retain(r, s, &map, false)).unwrap();
            let Filtered::Rewritten(nb) = out else { panic!("expected a rewrite, got {out:?}") };
            let nh = parse_header(&nb).unwrap();
            assert_eq!(nh.compression(), Some(compression));
            assert_eq!((nh.base_offset, nh.last_offset_delta, nh.records_count), (40, 3, 2));
            assert_eq!((nh.producer_id, nh.producer_epoch, nh.base_sequence), (7, 2, 11));
            assert_eq!(nh.max_timestamp, 9003);
            assert_eq!(nh.total_len(), nb.len());
            assert!(iter_batches(&nb).next().is_some_and(|r| r.is_ok()), "valid CRC");
            let got = decode(&nb);
            assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![42, 43]);
            assert_eq!(got[0].2.as_deref(), Some(&b"3"[..]));
            assert_eq!(got[1].2, None, "a young tombstone stays");
            // Dropping tombstones too.
            let out = filter_batch(&b, &h, |r, s| retain(r, s, &map, true)).unwrap();
            let Filtered::Rewritten(nb) = out else { panic!() };
            assert_eq!(decode(&nb).iter().map(|r| r.0).collect::<Vec<_>>(), vec![42]);
            // Nothing superseded: unchanged; everything superseded: dropped.
            assert_eq!(filter_batch(&b, &h, |_, _| true).unwrap(), Filtered::Unchanged);
            assert_eq!(filter_batch(&b, &h, |_, _| false).unwrap(), Filtered::Dropped);
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
