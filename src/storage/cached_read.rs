//! Reads of page-cache segment files (`flush = never`) that the page cache can serve now,
//! straight into a pooled buffer: one copy (page cache → buffer), no wait.
//!
//! Why: the io_uring read of a `BufferedFile` fills a buffer glommio allocates per read,
//! which `SegmentFile::read_bytes` then copies into a `Bytes` (glommio's buffers are tied
//! to their executor, and fetch responses may be sent from another shard). Both buffers
//! were fresh memory each time: under W4 (consume a pre-filled topic) the broker spent
//! ~3.5% in that memmove and ~7% faulting in and zeroing new pages (`clear_page_erms`,
//! page faults). Here the read lands in a buffer of a per-shard pool, already faulted in
//! and reused once the fetch responses that point into it are sent.
//!
//! `preadv2(RWF_NOWAIT)` never blocks the shard: it reads only what is cached, and fails
//! with EAGAIN otherwise. Anything short of the whole range (not cached, end of file, a
//! range larger than a pooled buffer) returns `None`, and the caller takes the io_uring
//! path, which waits for the disk without blocking the executor.
use std::cell::RefCell;
use std::os::fd::RawFd;

use bytes::{Bytes, BytesMut};

use crate::runtime::buffer_pool::BufferPool;

/// Size of a pooled read buffer: the largest chunk a fetch reads at once (`partition/read.rs`
/// reads at most 1 MiB per chunk; a larger single batch takes the io_uring path).
pub const CACHED_READ_BUFFER_BYTES: usize = 1 << 20;

/// Given-back buffers a shard's pool keeps (see `READ_POOL`).
const READ_POOL_BUFFERS: usize = 8;

thread_local! {
    /// Not zeroed: a read fills the bytes it exposes. The pool keeps at most
    /// `READ_POOL_BUFFERS` given-back buffers (those still referenced by responses in
    /// flight among them), so it holds at most 8 MiB per shard once they are sent:
    /// about what a shard's fetches have in flight under W4, and little against the bound
    /// `test_fetch_limits.py` puts on the broker's growth while large fetches run (68–75
    /// MiB there, bound 128, once `runtime::malloc_policy` keeps freed 1 MiB buffers from
    /// staying resident; before that, 105–139 MiB whatever this limit was).
    static READ_POOL: BufferPool = const { BufferPool::new(CACHED_READ_BUFFER_BYTES, 64, READ_POOL_BUFFERS, false) };
    /// The buffer reads are cut from: each read takes the next part of it (views of
    /// earlier reads stay valid), and a new pooled buffer replaces it when too little
    /// is left.
    static CURRENT: RefCell<Option<BytesMut>> = const { RefCell::new(None) };
}

/// The `len` bytes at `pos` of `fd` if the page cache holds all of them now; `None`
/// otherwise (nothing was waited for).
pub fn read_if_cached(fd: RawFd, pos: u64, len: usize) -> Option<Bytes> {
    if len == 0 || len > CACHED_READ_BUFFER_BYTES {
        return None;
    }
    let offset = libc::off_t::try_from(pos).ok()?;
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        if current.as_ref().is_none_or(|b| b.capacity() < len) {
            let fresh = READ_POOL.with(|p| p.take());
            if let Some(old) = current.replace(fresh) {
                // The pool reuses it once the views cut from it are gone.
                READ_POOL.with(|p| p.give_back(old));
            }
        }
        let buf = current.as_mut().expect("set above");
        debug_assert!(buf.is_empty() && buf.capacity() >= len);
        let spare = buf.spare_capacity_mut();
        let iov = libc::iovec { iov_base: spare.as_mut_ptr().cast(), iov_len: len };
        // SAFETY: the iovec covers `len` bytes of `buf`'s spare capacity, which nothing
        // else references; the kernel writes at most `len` bytes there.
        let n = unsafe { libc::preadv2(fd, &iov, 1, offset, libc::RWF_NOWAIT) };
        if n != len as isize {
            // EAGAIN (not cached), an error, or a short read: the io_uring path decides.
            return None;
        }
        // SAFETY: the kernel initialised the first `len` bytes of the spare capacity.
        unsafe { buf.set_len(len) };
        Some(buf.split().freeze())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn reads_cached_bytes_and_declines_what_it_cannot_serve_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        // Just written: in the page cache.
        let a = read_if_cached(f.as_raw_fd(), 1000, 100_000).unwrap();
        let b = read_if_cached(f.as_raw_fd(), 200_000, 100_000).unwrap();
        assert_eq!(&a[..], &data[1000..101_000]);
        assert_eq!(&b[..], &data[200_000..300_000], "a later read leaves earlier views intact");
        assert_eq!(&a[..], &data[1000..101_000]);
        // Past the end of the file, or larger than a pooled buffer: declined.
        assert!(read_if_cached(f.as_raw_fd(), 250_000, 100_000).is_none());
        assert!(read_if_cached(f.as_raw_fd(), 0, CACHED_READ_BUFFER_BYTES + 1).is_none());
        assert!(read_if_cached(-1, 0, 10).is_none());
    }

    #[test]
    fn buffers_are_reused_once_their_views_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        std::fs::File::create(&path).unwrap().write_all(&vec![7u8; CACHED_READ_BUFFER_BYTES]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let before = READ_POOL.with(|p| p.stats());
        for _ in 0..10 {
            // Each read fills a whole buffer and is dropped before the next.
            let r = read_if_cached(f.as_raw_fd(), 0, CACHED_READ_BUFFER_BYTES).unwrap();
            assert!(r.iter().all(|&b| b == 7));
        }
        let after = READ_POOL.with(|p| p.stats());
        assert!(after.allocated - before.allocated <= 2, "{before:?} -> {after:?}");
        assert!(after.reused - before.reused >= 8, "{before:?} -> {after:?}");
    }
}
