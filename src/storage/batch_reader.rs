//! The one chunked reader of the batches in a segment file's byte range, used by fetch
//! reads, ListOffsets scans, recovery and the cleaner.
//!
//! It reads bounded chunks, yields the whole batches of each (checked by
//! `record::iter_batches`: framing, magic 2, CRC-32C) as `Bytes` slices of the chunk with
//! their headers, reads a batch cut by a chunk's end whole on the next call, skips the
//! zero padding O_DIRECT writes leave inside a block (the padding rule of `storage`'s
//! module comment: a zero length field off a `PADDING_BLOCK` boundary continues at the
//! boundary past it, `after_padding`), and stops cleanly at the end of the range or at zeros on a boundary. A batch
//! that runs past the end of the range (a torn write) or is invalid stops it too; `stop()`
//! says which, and each caller decides what that means (recovery truncates there, the
//! cleaner gives up, a fetch reports the damage).
use std::rc::Rc;

use bytes::Bytes;

use super::dma::read_bytes;
use super::file::SegmentFile;
use super::{after_padding, Result, StorageError, PADDING_BLOCK};
use crate::record::{iter_batches, BatchError, BatchHeader, IterStop, BATCH_HEADER_LEN, LOG_OVERHEAD};

/// Why a [`BatchReader`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadStop {
    /// The end of the range, or zeros at a block boundary after the last batch.
    End,
    /// The batch at `position` runs past the end of the range (or of the file).
    Torn { position: u64, error: BatchError },
    /// The batch at `position` is invalid.
    Invalid { position: u64, error: BatchError },
}

/// Reads the batches of `[start, end)` of a segment file in chunks of `chunk_bytes` (or
/// one whole batch, when a batch is larger).
pub struct BatchReader {
    file: Rc<SegmentFile>,
    /// File position of the next batch not yet yielded.
    pos: u64,
    /// File position of the first batch of the last chunk yielded.
    chunk_start: u64,
    end: u64,
    chunk_bytes: usize,
    /// Size of the batch at `pos`, which the last chunk cut: the next read covers it.
    cut_len: Option<usize>,
    stop: Option<ReadStop>,
    /// The unparsed rest of the last read (its file position, its bytes), when padding
    /// was skipped inside it: the next batches are parsed from it, not read again. Without
    /// it, a segment of small padded batches (flush = always, one sync per batch) costs a
    /// whole chunk read per batch.
    rest_of_read: Option<(u64, Bytes)>,
}

impl BatchReader {
    pub fn new(file: Rc<SegmentFile>, start: u64, end: u64, chunk_bytes: usize) -> BatchReader {
        // A chunk holds at least a header, so every read makes progress.
        let chunk_bytes = chunk_bytes.max(BATCH_HEADER_LEN);
        BatchReader { file, pos: start, chunk_start: start, end, chunk_bytes, cut_len: None, stop: None, rest_of_read: None }
    }

    /// Changes the size of the next reads (a fetch shrinks it to what it may still
    /// return, so no read asks for much more than the response can carry).
    pub fn set_chunk_bytes(&mut self, chunk_bytes: usize) {
        self.chunk_bytes = chunk_bytes.max(BATCH_HEADER_LEN);
    }

    /// File position of the next batch not yet yielded (where a stop happened).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// File position of the first batch `next_chunk` returned last (the batches of one
    /// chunk are contiguous; padding is only ever skipped between chunks).
    pub fn chunk_start(&self) -> u64 {
        self.chunk_start
    }

    /// The size of the next batch when the last chunk cut it (the next call reads it).
    pub fn cut_batch_len(&self) -> Option<usize> {
        self.cut_len
    }

    /// Why reading stopped; `None` while there may be more.
    pub fn stop(&self) -> Option<&ReadStop> {
        self.stop.as_ref()
    }

    /// A torn or invalid batch as a storage error about `what`; `None` at a clean end.
    pub fn damage(&self, what: &str) -> Option<StorageError> {
        match self.stop.as_ref()? {
            ReadStop::End => None,
            ReadStop::Torn { position, error } | ReadStop::Invalid { position, error } => {
                Some(StorageError::Corrupt { what: what.to_string(), detail: format!("bad batch at position {position}: {error}") })
            }
        }
    }

    /// The next whole batches, in order; empty once reading stopped (see `stop()`).
    /// Every call that does not stop yields at least one batch.
    pub async fn next_chunk(&mut self) -> Result<Vec<(BatchHeader, Bytes)>> {
        loop {
            if self.stop.is_some() {
                return Ok(Vec::new());
            }
            if self.pos >= self.end {
                self.stop = Some(ReadStop::End);
                return Ok(Vec::new());
            }
            let cut = self.cut_len.take();
            let want = self.chunk_bytes.max(cut.unwrap_or(0));
            let len = (want as u64).min(self.end - self.pos) as usize;
            // The rest of the last read serves unless a batch it cut must be read whole.
            let rest = self.rest_of_read.take().filter(|(at, b)| cut.is_none() && *at == self.pos && !b.is_empty());
            let from_rest = rest.is_some();
            let chunk = match rest {
                Some((_, b)) => b.slice(..b.len().min(len)),
                None => read_bytes(&self.file, self.pos, len).await?,
            };
            let chunk_start = self.pos;
            if chunk.len() < len && !from_rest {
                // The file is shorter than the range: its data ends here.
                self.end = self.pos + chunk.len() as u64;
            }
            let mut it = iter_batches(&chunk);
            let out: Vec<(BatchHeader, Bytes)> = it.by_ref().map_while(|item| item.ok()).map(|(h, range)| (h, chunk.slice(range))).collect();
            self.pos += it.valid_len() as u64;
            let rest = self.end - self.pos;
            match it.stop() {
                None | Some(IterStop::End) => {}
                Some(IterStop::ZeroTail) if !self.pos.is_multiple_of(PADDING_BLOCK) => {
                    // Padding: the data continues at the next block boundary, if anywhere.
                    self.pos = after_padding(self.pos);
                    if self.pos >= self.end {
                        self.pos = self.pos.min(self.end);
                        self.stop = Some(ReadStop::End);
                    } else if self.pos < chunk_start + chunk.len() as u64 {
                        // Progress was made (pos moved past the padding), so parsing the
                        // rest next cannot loop.
                        self.rest_of_read = Some((self.pos, chunk.slice((self.pos - chunk_start) as usize..)));
                    }
                }
                Some(IterStop::ZeroTail) => self.stop = Some(ReadStop::End),
                Some(IterStop::Cut { total_len: Some(n) }) if *n as u64 <= rest => self.cut_len = Some(*n),
                Some(IterStop::Cut { total_len: Some(n) }) => {
                    let error = BatchError::Truncated { needed: *n, available: rest as usize };
                    self.stop = Some(ReadStop::Torn { position: self.pos, error });
                }
                // Fewer than 12 bytes left in the chunk: more follow unless the range ends.
                Some(IterStop::Cut { total_len: None }) if rest > (chunk.len() - it.valid_len()) as u64 => {}
                Some(IterStop::Cut { total_len: None }) => {
                    let tail = &chunk[it.valid_len()..];
                    self.stop = Some(if tail.iter().all(|&b| b == 0) {
                        ReadStop::End
                    } else {
                        let error = BatchError::Truncated { needed: LOG_OVERHEAD, available: tail.len() };
                        ReadStop::Torn { position: self.pos, error }
                    });
                }
                Some(IterStop::Invalid(e)) => {
                    self.stop = Some(ReadStop::Invalid { position: self.pos, error: e.clone() });
                }
            }
            if !out.is_empty() || self.stop.is_some() {
                self.chunk_start = chunk_start;
                return Ok(out);
            }
            // The chunk's first batch was cut: the loop reads it whole.
        }
    }

    /// Like `next_chunk`, but a torn or invalid batch is an error about `what` (data that
    /// was validated when written and must not be silently cut short).
    pub async fn next_chunk_strict(&mut self, what: &str) -> Result<Vec<(BatchHeader, Bytes)>> {
        let out = self.next_chunk().await?;
        match self.damage(what) {
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::set_base_offset;
    use crate::record::tests::make_batch;
    use crate::storage::testing::run;
    use kafka_protocol::records::Compression;

    /// Three stored batches at offsets 0, 2, 3 (the middle one larger than 4 KiB).
    fn three_batches() -> (Vec<u8>, Vec<usize>) {
        let mut log = Vec::new();
        let mut ends = Vec::new();
        for (base, values) in [(0i64, vec![b"a".to_vec(), b"b".to_vec()]), (2, vec![vec![7u8; 6000]]), (3, vec![b"c".to_vec()])] {
            let mut b = make_batch(&values, Compression::None, -1, 1);
            set_base_offset(&mut b, base).unwrap();
            log.extend_from_slice(&b);
            ends.push(log.len());
        }
        (log, ends)
    }

    /// Reads `[0, end)` of a file holding `data` (zero-padded to a block) through a reader.
    async fn read_all(dir: &std::path::Path, data: &[u8], end: u64, chunk_bytes: usize) -> (Vec<i64>, Option<ReadStop>, u64) {
        let path = dir.join(format!("{end}-{chunk_bytes}.log"));
        let file = crate::storage::dma::open_rw(&path).await.unwrap();
        crate::storage::dma::write_padded(&file, 0, data).await.unwrap();
        let mut r = BatchReader::new(file, 0, end, chunk_bytes);
        let mut bases = Vec::new();
        loop {
            let chunk = r.next_chunk().await.unwrap();
            if chunk.is_empty() {
                break;
            }
            for (h, b) in chunk {
                assert_eq!(h.total_len(), b.len(), "whole batches only");
                bases.push(h.base_offset);
            }
        }
        (bases, r.stop().cloned(), r.position())
    }

    #[test]
    fn reads_cut_batches_whole_and_stops_at_the_padding() {
        run(|dir| async move {
            let (log, ends) = three_batches();
            let end = *ends.last().unwrap() as u64;
            for chunk in [61, 100, 4096, 1 << 20] {
                // The exact range, and the whole padded file: both end cleanly.
                assert_eq!(read_all(&dir, &log, end, chunk).await, (vec![0, 2, 3], Some(ReadStop::End), end), "chunk {chunk}");
                let padded = end.next_multiple_of(4096);
                let (bases, stop, _) = read_all(&dir, &log, padded, chunk).await;
                assert_eq!((bases, stop), (vec![0, 2, 3], Some(ReadStop::End)), "chunk {chunk}");
            }
        });
    }

    /// A stored batch of exactly `len` bytes at offset `base`.
    fn batch_of_len(base: i64, len: usize) -> Vec<u8> {
        for n in len.saturating_sub(120)..len {
            let mut b = make_batch(&[vec![7u8; n]], Compression::None, -1, 1);
            if b.len() == len {
                set_base_offset(&mut b, base).unwrap();
                return b.to_vec();
            }
        }
        panic!("no batch of {len} bytes");
    }

    #[test]
    fn skips_padding_inside_blocks_and_ends_at_zeros_on_a_boundary() {
        run(|dir| async move {
            // A batch ending 6 bytes before a boundary (the padding runs on to the next
            // one: it always holds a whole offset-and-length field), one ending mid-block,
            // and one after that padding; then zeros on a boundary: the end.
            let mut log = batch_of_len(0, 4090);
            assert_eq!(crate::storage::after_padding(4090), 8192);
            log.resize(8192, 0);
            log.extend_from_slice(&batch_of_len(1, 300));
            let second_end = log.len() as u64;
            log.resize(crate::storage::after_padding(second_end) as usize, 0);
            log.extend_from_slice(&batch_of_len(2, 5000));
            let end = log.len() as u64;
            for chunk in [61, 100, 4096, 1 << 20] {
                let padded = end.next_multiple_of(4096) + 4096;
                let (bases, stop, _) = read_all(&dir, &log, padded, chunk).await;
                assert_eq!((bases, stop), (vec![0, 1, 2], Some(ReadStop::End)), "chunk {chunk}");
            }
        });
    }

    #[test]
    fn torn_and_invalid_batches_stop_the_reader() {
        run(|dir| async move {
            let (log, ends) = three_batches();
            // The range ends inside the last batch: torn.
            let (bases, stop, pos) = read_all(&dir, &log, ends[2] as u64 - 5, 100).await;
            assert_eq!((bases, pos), (vec![0, 2], ends[1] as u64));
            assert!(matches!(stop, Some(ReadStop::Torn { position, error: BatchError::Truncated { .. } }) if position == ends[1] as u64));
            // Fewer than 12 non-zero bytes at the end: torn; zeros: the end.
            let mut short = log[..ends[2]].to_vec();
            short.extend_from_slice(&[1, 2, 3]);
            let (bases, stop, _) = read_all(&dir, &short, short.len() as u64, 100).await;
            assert_eq!(bases, vec![0, 2, 3]);
            assert!(matches!(stop, Some(ReadStop::Torn { .. })), "{stop:?}");
            // A damaged middle batch: the first is yielded, then the damage is reported.
            let mut bad = log.clone();
            bad[ends[0] + 100] ^= 0x10;
            let (bases, stop, pos) = read_all(&dir, &bad, ends[2] as u64, 100).await;
            assert_eq!((bases, pos), (vec![0], ends[0] as u64));
            assert!(matches!(stop, Some(ReadStop::Invalid { error: BatchError::CorruptMessage { .. }, .. })), "{stop:?}");
        });
    }
}
