//! The one iterator over the stored batches in a byte range (a fetch chunk, a segment
//! scan, a cleaner read, a produce request's records).
use std::ops::Range;

use super::header::{check_crc, frame_batch, BatchError, BatchHeader, LOG_OVERHEAD};

/// Walk stored batches (storage recovery, segment scans). Each item is a batch header and
/// its byte range in `buf`. Checks framing, magic 2 and CRC-32C; allows what stored data
/// may legitimately hold (control batches, empty compacted batches, any base offset).
///
/// Stops cleanly (returns `None`) at the end of `buf` or at a zero-filled tail: a length
/// field of 0 (DMA writes pad the last block with zeros). After the first error it returns
/// `None`; `valid_len()` is then where the log should be truncated, and `stop()` says why
/// it stopped — in particular whether the batch there is merely cut by the end of `buf`
/// (and how long it is), so a chunked reader can read it whole next time.
pub fn iter_batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter { buf, pos: 0, stop: None }
}

/// Why a [`BatchIter`] stopped; see [`BatchIter::stop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IterStop {
    /// Every byte of the buffer was a good batch.
    End,
    /// A length field of 0: the zero-padded tail of a segment written with DMA.
    ZeroTail,
    /// The batch at `valid_len()` runs past the end of the buffer. `total_len` is the
    /// whole batch's size when its length field is readable; `None` when fewer than 12
    /// bytes remain (zero or not: the start of a batch at offset 0 is zeros too).
    Cut { total_len: Option<usize> },
    /// The batch at `valid_len()` is invalid where it stands (framing, magic, CRC, counts).
    Invalid(BatchError),
}

/// Iterator returned by [`iter_batches`].
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Set once the iterator has returned its last item.
    stop: Option<IterStop>,
}

impl BatchIter<'_> {
    /// Bytes of `buf` covered by the good batches yielded so far.
    pub fn valid_len(&self) -> usize {
        self.pos
    }

    /// Why the iteration ended; `None` while it has not ended yet.
    pub fn stop(&self) -> Option<&IterStop> {
        self.stop.as_ref()
    }

    fn step(&mut self) -> Result<(BatchHeader, Range<usize>), IterStop> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        if rest.is_empty() {
            return Err(IterStop::End);
        }
        if rest.len() < LOG_OVERHEAD {
            return Err(IterStop::Cut { total_len: None });
        }
        if rest[8..12] == [0, 0, 0, 0] {
            return Err(IterStop::ZeroTail);
        }
        let (h, total) = match frame_batch(rest) {
            Ok(v) => v,
            Err(BatchError::Truncated { needed, available }) if needed > available => return Err(IterStop::Cut { total_len: Some(needed) }),
            Err(e) => return Err(IterStop::Invalid(e)),
        };
        check_crc(&h, &rest[..total]).map_err(IterStop::Invalid)?;
        if h.records_count < 0 {
            return Err(IterStop::Invalid(BatchError::InvalidRecordCount(h.records_count)));
        }
        if h.last_offset_delta < 0 {
            return Err(IterStop::Invalid(BatchError::InconsistentOffsetDelta { last_offset_delta: h.last_offset_delta, records_count: h.records_count }));
        }
        let start = self.pos;
        self.pos += total;
        Ok((h, start..self.pos))
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(BatchHeader, Range<usize>), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stop.is_some() {
            return None;
        }
        match self.step() {
            Ok(item) => Some(Ok(item)),
            Err(stop) => {
                // Items stay as they always were: a clean end, a zero tail and fewer than
                // 12 zero bytes end silently; anything else ends with its error.
                let item = match &stop {
                    IterStop::End | IterStop::ZeroTail => None,
                    IterStop::Cut { total_len: None } => {
                        let rest = &self.buf[self.pos..];
                        (!rest.iter().all(|&b| b == 0)).then_some(Err(BatchError::Truncated { needed: LOG_OVERHEAD, available: rest.len() }))
                    }
                    IterStop::Cut { total_len: Some(needed) } => Some(Err(BatchError::Truncated { needed: *needed, available: self.buf.len() - self.pos })),
                    IterStop::Invalid(e) => Some(Err(e.clone())),
                };
                self.stop = Some(stop);
                item
            }
        }
    }
}
