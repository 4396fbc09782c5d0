//! One piece of a response on the wire: bytes in memory, or a range of a segment file
//! the connection sends with `sendfile` (zero-copy fetch, `runtime/file_slice.rs`). The
//! connection writes a response's pieces in order (`server/vectored_write.rs`).
use bytes::Bytes;

use crate::runtime::file_slice::FileSlice;

/// A response's pieces, in order. Inline up to four: a one-frame response, or a Fetch
/// response of one partition with one new batch (head, batch, tail), allocates no list.
pub type ResponseBufs = smallvec::SmallVec<[ResponseBuf; 4]>;

#[derive(Debug, Clone)]
pub enum ResponseBuf {
    Memory(Bytes),
    File(FileSlice),
}

impl ResponseBuf {
    pub fn len(&self) -> usize {
        match self {
            ResponseBuf::Memory(b) => b.len(),
            ResponseBuf::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The piece's bytes in memory (a file range is read: tests and diagnostics only).
    pub fn to_bytes(&self) -> std::io::Result<Bytes> {
        match self {
            ResponseBuf::Memory(b) => Ok(b.clone()),
            ResponseBuf::File(f) => f.read_to_vec().map(Bytes::from),
        }
    }
}

impl From<Bytes> for ResponseBuf {
    fn from(b: Bytes) -> Self {
        ResponseBuf::Memory(b)
    }
}
