//! Log compaction (Kafka's LogCleaner) — the parts that do not need a partition: the
//! key → latest offset map, filtering one batch (Kafka's `MemoryRecords.filterTo`),
//! writing the cleaned copy of a segment and swapping it in crash-safely. Walking the
//! records inside a batch and rebuilding a batch are `record/`'s; reading a segment's
//! batches is `batch_reader.rs`'s.
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
//! Transactions (`partition/cleaner.rs` decides): the key map stops at the last stable
//! offset, aborted transactions' batches are dropped and never enter the map; control
//! batches (markers) are kept as they are (Kafka drops a marker after
//! delete.retention.ms once its transaction's data is gone: not done here).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::file::SegmentFile;
use bytes::{Bytes, BytesMut};

use super::dma::{open_rw, read_rebuildable_file, remove_file, report_unusable, sync_dir, write_checked_file, write_padded};
use super::segment::{index_path, log_file_name, time_index_path, Segment};
use super::Result;
use crate::record::{parse_header, parse_records, rebuild_with_records, records_section, BatchError, BatchHeader, RecordRef};

/// Suffix of a segment being rewritten by the cleaner.
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
const CHECKPOINT_MAGIC: u32 = 0x534c_434f; // "SLCO"
const CHECKPOINT_VERSION: u16 = 1;
/// Bytes read from a segment at a time while cleaning.
pub const READ_CHUNK_BYTES: usize = 1 << 20;
/// Bytes of the cleaned segment buffered before an aligned write.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

pub fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    let mut name = log_file_name(base_offset);
    name.push_str(CLEANED_SUFFIX);
    dir.join(name)
}

/// Key → offset of its latest record (Kafka's OffsetMap, holding whole keys rather than
/// digests), with a byte budget: a log with more distinct key bytes (plus a fixed cost per
/// key for the map's entry) is not cleaned. Keys are copied out of the batches they came
/// from: a view would pin its whole read chunk or decompressed batch for the pass, so the
/// map's memory would be the chunks read, not the keys counted.
#[derive(Debug, Default)]
pub struct OffsetMap {
    latest: HashMap<Bytes, i64>,
    key_bytes: usize,
    max_key_bytes: usize,
}

/// What one key costs the budget beyond its bytes: the map entry (key handle, offset,
/// hash slot) and the key's own allocation header, rounded up.
pub const KEY_OVERHEAD_BYTES: usize = 64;

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
            let key = &section[k];
            match self.latest.get_mut(key) {
                // Data from disk: out of order is damage, reported rather than asserted.
                Some(prev) if *prev >= r.offset => return Err(BatchError::CorruptRecord(format!("offset {} after {prev} for the same key", r.offset))),
                Some(prev) => *prev = r.offset,
                None => {
                    self.key_bytes += key.len() + KEY_OVERHEAD_BYTES;
                    self.latest.insert(Bytes::copy_from_slice(key), r.offset);
                }
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
pub fn filter_batch(batch: &Bytes, header: &BatchHeader, mut keep: impl FnMut(&RecordRef, &[u8]) -> bool) -> std::result::Result<Filtered, BatchError> {
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
    // Kafka's builder tracks the max timestamp of what it wrote.
    let max_ts = kept.iter().map(|r| r.timestamp).max().unwrap_or(header.max_timestamp);
    let out = rebuild_with_records(batch, header, plain, kept.len(), max_ts)?;
    debug_assert!(parse_header(&out).is_ok_and(|h| h.base_offset == header.base_offset
        && h.last_offset_delta == header.last_offset_delta
        && h.base_sequence == header.base_sequence
        && h.records_count as usize == kept.len()));
    Ok(Filtered::Rewritten(out))
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

    pub fn file(&self) -> &Rc<SegmentFile> {
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
        file.truncate(size).await?;
        file.fdatasync().await?;
        drop(file);
        Ok(Segment::cleaned(self.scratch, next_offset))
    }

    /// Gives up: deletes the partial file.
    pub async fn abandon(self, dir: &Path) {
        let base = self.scratch.base_offset;
        drop(self);
        remove_partial_clean(dir, base).await;
    }
}

/// Deletes a clean's partial `<base>.log.cleaned` file; a failure is logged, not fatal:
/// the log's next open removes such leftovers (`recovery::remove_cleaner_leftovers`).
pub async fn remove_partial_clean(dir: &Path, base: i64) {
    if let Err(e) = remove_file(&cleaned_path(dir, base)).await {
        tracing::warn!(dir = %dir.display(), base, error = %e, "could not remove a partial cleaned segment; the log's next open removes it");
    }
}

/// Steps 2 and 3 of the swap (module comment): afterwards `<base>.log` is the cleaned
/// file and has no index on disk. `file` is the open cleaned file (it keeps its fd).
pub async fn swap_in(dir: &Path, base_offset: i64, file: &SegmentFile) -> Result<()> {
    remove_file(&index_path(dir, base_offset)).await?;
    remove_file(&time_index_path(dir, base_offset)).await?;
    sync_dir(dir).await?;
    file.rename(&dir.join(log_file_name(base_offset))).await?;
    sync_dir(dir).await
}

/// The first offset not yet cleaned (Kafka's cleaner-offset-checkpoint), or None (missing,
/// or unusable: logged and counted; the whole log is then dirty and cleaned again).
pub async fn load_checkpoint(dir: &Path) -> Option<i64> {
    let path = dir.join(CHECKPOINT_FILE);
    let payload = read_rebuildable_file(&path, CHECKPOINT_MAGIC, CHECKPOINT_VERSION, "cleaner_checkpoint").await?;
    let Some(b) = payload.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
        report_unusable(&path, "cleaner_checkpoint", "shorter than an offset");
        return None;
    };
    Some(i64::from_be_bytes(b))
}

pub async fn save_checkpoint(dir: &Path, first_dirty_offset: i64) -> Result<()> {
    write_checked_file(&dir.join(CHECKPOINT_FILE), CHECKPOINT_MAGIC, CHECKPOINT_VERSION, &first_dirty_offset.to_be_bytes()).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::iter_batches;
    use crate::record::tests::{compression_of, decode_kv as decode, kv_batch};
    use kafka_protocol::records::Compression;

    #[test]
    fn the_key_map_copies_keys_and_counts_their_entries() {
        let b = kv_batch(0, &[(Some("a"), Some("1")), (Some("bb"), Some("2")), (Some("a"), Some("3"))], Compression::None, None, 9000);
        let h = parse_header(&b).unwrap();
        let mut map = OffsetMap::new(2 * KEY_OVERHEAD_BYTES + 3);
        assert!(map.add_batch(&b, &h).unwrap(), "two keys, 3 bytes: at the budget");
        assert!(b.is_unique(), "no key pins the batch it was read from");
        assert_eq!((map.latest(b"a"), map.latest(b"bb"), map.len()), (Some(2), Some(1), 2));
        let more = kv_batch(3, &[(Some("c"), Some("4"))], Compression::None, None, 9001);
        assert!(!map.add_batch(&more, &parse_header(&more).unwrap()).unwrap(), "a third key is over the budget");
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
}
