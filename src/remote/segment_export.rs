//! Reads a sealed local segment for upload, on the remote I/O side (blocking std::fs,
//! never on a shard), and hands out its batches without the padding O_DIRECT writes leave
//! (storage's padding rule, `storage::after_padding`). Every batch's CRC is checked and its
//! offsets must rise inside the segment's range: a damaged segment is never uploaded.
//! Builds the remote offset and time indexes as it goes.
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::record::{iter_batches, IterStop};
use crate::storage::{after_padding, PADDING_BLOCK};

use super::remote_indexes::OFFSET_INDEX_INTERVAL;
use super::RemoteError;

/// Bytes read from the file at a time (a cut batch may need more, once).
const READ_BYTES: usize = 4 << 20;

pub struct SegmentExport {
    file: File,
    file_len: u64,
    /// Bytes read and not handed out yet, and the file position of the first.
    carry: Vec<u8>,
    carry_pos: u64,
    /// The file position of the next read (past `carry`).
    read_pos: u64,
    start_offset: i64,
    end_offset: i64,
    /// The next offset a batch may start at.
    next_offset: i64,
    /// Bytes handed out: the position of the next batch in the `.log` object.
    out_len: u64,
    next_index_at: u64,
    max_timestamp: i64,
    offset_index: Vec<(i64, u64)>,
    time_index: Vec<(i64, i64)>,
    done: bool,
    batches: u64,
}

/// What a finished export found.
#[derive(Debug, PartialEq, Eq)]
pub struct Exported {
    pub size_bytes: u64,
    pub batches: u64,
    pub max_timestamp: i64,
    pub offset_index: Vec<(i64, u64)>,
    pub time_index: Vec<(i64, i64)>,
}

impl SegmentExport {
    /// The segment file at `path`, holding offsets `[start_offset, end_offset]`.
    pub fn open(path: &Path, start_offset: i64, end_offset: i64) -> Result<SegmentExport, RemoteError> {
        let file = File::open(path).map_err(|e| RemoteError::LocalSegment(format!("{}: {e}", path.display())))?;
        let file_len = file.metadata().map_err(|e| RemoteError::LocalSegment(format!("{}: {e}", path.display())))?.len();
        Ok(SegmentExport {
            file,
            file_len,
            carry: Vec::new(),
            carry_pos: 0,
            read_pos: 0,
            start_offset,
            end_offset,
            next_offset: start_offset,
            out_len: 0,
            next_index_at: 0,
            max_timestamp: -1,
            offset_index: Vec::new(),
            time_index: Vec::new(),
            done: false,
            batches: 0,
        })
    }

    /// Reads `want` more bytes (fewer at the end of the file) onto `carry`.
    fn read_more(&mut self, want: usize) -> Result<usize, RemoteError> {
        let want = want.min(usize::try_from(self.file_len.saturating_sub(self.read_pos)).unwrap_or(usize::MAX));
        let old = self.carry.len();
        self.carry.resize(old + want, 0);
        let mut got = 0;
        while got < want {
            match self.file.read_at(&mut self.carry[old + got..], self.read_pos + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RemoteError::LocalSegment(format!("read at {}: {e}", self.read_pos + got as u64))),
            }
        }
        self.carry.truncate(old + got);
        self.read_pos += got as u64;
        Ok(got)
    }

    fn corrupt(&self, what: String) -> RemoteError {
        RemoteError::LocalSegment(format!("segment [{}, {}] not uploaded: {what}", self.start_offset, self.end_offset))
    }

    /// Whole batches, about `max` bytes of them (at least one), or None once the segment's
    /// last offset was handed out.
    pub fn next_chunk(&mut self, max: usize) -> Result<Option<Vec<u8>>, RemoteError> {
        let mut out = Vec::new();
        while !self.done && out.len() < max {
            let mut it = iter_batches(&self.carry);
            let mut took = 0;
            while let Some(Ok((h, range))) = it.next() {
                let last = h.base_offset + i64::from(h.last_offset_delta);
                if h.base_offset < self.next_offset || last > self.end_offset {
                    return Err(self.corrupt(format!("batch [{}, {last}] out of order (next offset {})", h.base_offset, self.next_offset)));
                }
                if self.out_len >= self.next_index_at {
                    self.offset_index.push((h.base_offset, self.out_len));
                    self.time_index.push((self.max_timestamp.max(h.max_timestamp), h.base_offset));
                    self.next_index_at = self.out_len + OFFSET_INDEX_INTERVAL;
                }
                self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
                out.extend_from_slice(&self.carry[range.clone()]);
                self.out_len += range.len() as u64;
                self.batches += 1;
                self.next_offset = last + 1;
                took = range.end;
                if last == self.end_offset {
                    self.done = true;
                    break;
                }
                if out.len() >= max {
                    break;
                }
            }
            let stop = it.stop().cloned();
            let stop_at = self.carry_pos + it.valid_len() as u64;
            self.carry.drain(..took);
            self.carry_pos += took as u64;
            if self.done || out.len() >= max {
                break;
            }
            match stop {
                // Every byte read was a whole batch, or a batch is cut by the end of what
                // was read: read on (enough for the cut batch, bounded by the file).
                Some(IterStop::End) | Some(IterStop::Cut { .. }) | None => {
                    let need = match stop {
                        Some(IterStop::Cut { total_len: Some(n) }) => n.saturating_sub(self.carry.len()),
                        _ => 0,
                    };
                    if self.read_more(READ_BYTES.max(need))? == 0 {
                        return Err(self.corrupt(format!("the file ends at offset {} (position {stop_at})", self.next_offset)));
                    }
                }
                Some(IterStop::ZeroTail) if !stop_at.is_multiple_of(PADDING_BLOCK) => {
                    // Padding: the data goes on at the next block boundary.
                    let resume = after_padding(stop_at);
                    let skip = usize::try_from(resume - self.carry_pos).unwrap_or(usize::MAX).min(self.carry.len());
                    self.carry.drain(..skip);
                    self.carry_pos += skip as u64;
                    if self.carry.is_empty() {
                        self.carry_pos = resume;
                        self.read_pos = resume;
                    }
                    if self.carry.is_empty() && self.read_more(READ_BYTES)? == 0 {
                        return Err(self.corrupt(format!("the data ends at offset {} (position {stop_at})", self.next_offset)));
                    }
                }
                Some(IterStop::ZeroTail) => return Err(self.corrupt(format!("the data ends at offset {} (position {stop_at})", self.next_offset))),
                Some(IterStop::Invalid(e)) => return Err(self.corrupt(format!("bad batch at position {stop_at}: {e}"))),
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }

    /// The export's result, once every offset was handed out.
    pub fn finish(self) -> Result<Exported, RemoteError> {
        if !self.done {
            return Err(self.corrupt(format!("stopped at offset {}", self.next_offset)));
        }
        Ok(Exported {
            size_bytes: self.out_len,
            batches: self.batches,
            max_timestamp: self.max_timestamp,
            offset_index: self.offset_index,
            time_index: self.time_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_batch, set_base_offset, NewRecord};

    fn batch(base: i64, n: usize, ts: i64, value_len: usize) -> Vec<u8> {
        let records = (0..n).map(|i| NewRecord { key: None, value: Some(vec![i as u8; value_len].into()), timestamp_ms: ts + i as i64 });
        let mut b = encode_batch(records, kafka_protocol::records::Compression::None).unwrap().to_vec();
        // The base offset is outside the CRC.
        set_base_offset(&mut b, base).unwrap();
        b
    }

    fn export_all(path: &Path, start: i64, end: i64, max: usize) -> Result<(Vec<u8>, Exported), RemoteError> {
        let mut ex = SegmentExport::open(path, start, end)?;
        let mut all = Vec::new();
        while let Some(chunk) = ex.next_chunk(max)? {
            all.extend_from_slice(&chunk);
        }
        Ok((all, ex.finish()?))
    }

    #[test]
    fn strips_padding_and_indexes_what_it_hands_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        // Batch 0-9, padding to the next block (as an O_DIRECT sync leaves it), batch
        // 10-19 of 300 KiB (past one index interval), batch 20-24.
        let (a, b, c) = (batch(0, 10, 1_000, 10), batch(10, 10, 3_000, 30 << 10), batch(20, 5, 2_000, 10));
        let mut file = a.clone();
        file.resize(after_padding(a.len() as u64) as usize, 0);
        file.extend_from_slice(&b);
        file.extend_from_slice(&c);
        file.resize(file.len().next_multiple_of(4096), 0);
        std::fs::write(&path, &file).unwrap();
        let want: Vec<u8> = [a.clone(), b.clone(), c.clone()].concat();
        for max in [1, 100 << 10, 8 << 20] {
            let (got, ex) = export_all(&path, 0, 24, max).unwrap();
            assert_eq!(got, want, "max {max}");
            assert_eq!((ex.size_bytes, ex.batches, ex.max_timestamp), (want.len() as u64, 3, 3_009));
            let after_b = (a.len() + b.len()) as u64;
            assert_eq!(ex.offset_index, vec![(0, 0), (20, after_b)]);
            assert_eq!(ex.time_index, vec![(1_009, 0), (3_009, 20)]);
        }
    }

    #[test]
    fn refuses_a_damaged_or_short_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let mut file = [batch(0, 5, 1, 10), batch(5, 5, 1, 10)].concat();
        std::fs::write(&path, &file).unwrap();
        assert!(export_all(&path, 0, 19, 1 << 20).unwrap_err().to_string().contains("ends at offset 10"));
        assert!(export_all(&path, 0, 7, 1 << 20).unwrap_err().to_string().contains("out of order"));
        let last = file.len() - 1;
        file[last] ^= 0xff;
        std::fs::write(&path, &file).unwrap();
        assert!(export_all(&path, 0, 9, 1 << 20).unwrap_err().to_string().contains("bad batch"));
    }
}
