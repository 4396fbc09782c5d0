//! Writes a response's pieces with as few sends as the socket allows: each run of
//! in-memory buffers goes out as vectored writes (`sendmsg`, the vendored glommio's
//! `poll_write_vectored`) of up to `SLICES_PER_SEND` buffers, resumed where the kernel
//! stopped; each file slice (zero-copy fetch) goes out with `sendfile`. A Fetch response
//! of 1 MiB per partition in 16 KiB batches is ~70 buffers per partition: one buffer per
//! send made it ~70 sends, this makes it one or a few (as many as the socket buffer needs).
//!
//! No allocation: the slices of one send live in an array on the stack.
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{AsyncWrite, AsyncWriteExt};

use crate::protocol::ResponseBuf;
use crate::runtime::file_slice::FileSlice;

/// Buffers per send (the kernel takes up to 1024; 64 covers the socket buffer's worth of
/// 16 KiB batches and keeps the array small).
const SLICES_PER_SEND: usize = 64;

/// A socket a response is written to: vectored writes, and `sendfile` from a file slice.
pub trait ResponseSink: AsyncWrite + Unpin {
    /// Sends bytes of `slice` from `done` on (bytes already sent): how many went out, or
    /// pending until the socket can take more. A file that ends before the slice does is
    /// an error (`UnexpectedEof`): the response's length already counts those bytes.
    fn poll_send_file(self: Pin<&mut Self>, cx: &mut Context<'_>, slice: &FileSlice, done: usize) -> Poll<io::Result<usize>>;
}

/// Writes all of `bufs`, in order.
pub async fn write_all_buffers<W: ResponseSink>(w: &mut W, bufs: &[ResponseBuf]) -> io::Result<()> {
    // The next byte to send is bufs[at] at `offset`.
    let (mut at, mut offset) = (0usize, 0usize);
    loop {
        while at < bufs.len() && offset == bufs[at].len() {
            at += 1;
            offset = 0;
        }
        if at == bufs.len() {
            return Ok(());
        }
        let mut sent = match &bufs[at] {
            ResponseBuf::File(slice) => poll_fn(|cx| Pin::new(&mut *w).poll_send_file(cx, slice, offset)).await?,
            ResponseBuf::Memory(_) => {
                // The run of memory buffers from here, up to the next file slice.
                let mut slices = [IoSlice::new(&[]); SLICES_PER_SEND];
                let mut n = 0;
                for (k, b) in bufs[at..].iter().enumerate() {
                    let ResponseBuf::Memory(b) = b else { break };
                    if n == SLICES_PER_SEND {
                        break;
                    }
                    let rest = if k == 0 { &b[offset..] } else { &b[..] };
                    if !rest.is_empty() {
                        slices[n] = IoSlice::new(rest);
                        n += 1;
                    }
                }
                w.write_vectored(&slices[..n]).await?
            }
        };
        if sent == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while sent > 0 {
            let left = bufs[at].len() - offset;
            if sent < left {
                offset += sent;
                sent = 0;
            } else {
                sent -= left;
                at += 1;
                offset = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;

    /// A socket that takes at most `per_send` bytes per call, from the first `max_slices`
    /// slices only, and counts its calls (file slices: one per call, as `sendfile`).
    struct Socket {
        out: Vec<u8>,
        per_send: usize,
        max_slices: usize,
        sends: usize,
    }

    impl AsyncWrite for Socket {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(buf)])
        }
        fn poll_write_vectored(mut self: Pin<&mut Self>, _: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
            self.sends += 1;
            let mut budget = self.per_send;
            for b in bufs.iter().take(self.max_slices) {
                let take = b.len().min(budget);
                self.out.extend_from_slice(&b[..take]);
                budget -= take;
                if budget == 0 {
                    break;
                }
            }
            Poll::Ready(Ok(self.per_send - budget))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl ResponseSink for Socket {
        fn poll_send_file(mut self: Pin<&mut Self>, _: &mut Context<'_>, slice: &FileSlice, done: usize) -> Poll<io::Result<usize>> {
            self.sends += 1;
            let bytes = slice.read_to_vec()?;
            let take = (bytes.len() - done).min(self.per_send);
            self.out.extend_from_slice(&bytes[done..done + take]);
            Poll::Ready(Ok(take))
        }
    }

    fn memory() -> Vec<ResponseBuf> {
        // Empty buffers among them, and more than one send's worth of slices.
        (0..150u32).map(|i| Bytes::from(vec![i as u8; (i as usize * 37) % 300]).into()).collect()
    }

    /// Memory buffers with file slices between them (one right after another, one last).
    fn mixed(dir: &std::path::Path) -> Vec<ResponseBuf> {
        let path = dir.join("seg.log");
        std::fs::write(&path, (0..50_000u32).map(|i| (i % 253) as u8).collect::<Vec<u8>>()).unwrap();
        let fd: Arc<std::os::fd::OwnedFd> = Arc::new(std::fs::File::open(&path).unwrap().into());
        let mut bufs = memory();
        bufs.insert(3, ResponseBuf::File(FileSlice::new(fd.clone(), 10, 20_000)));
        bufs.insert(4, ResponseBuf::File(FileSlice::new(fd.clone(), 30_000, 7)));
        bufs.insert(100, ResponseBuf::File(FileSlice::new(fd.clone(), 0, 0)));
        bufs.push(ResponseBuf::File(FileSlice::new(fd, 40_000, 10_000)));
        bufs
    }

    fn all_bytes(bufs: &[ResponseBuf]) -> Vec<u8> {
        bufs.iter().flat_map(|b| b.to_bytes().unwrap().to_vec()).collect()
    }

    #[test]
    fn sends_every_byte_in_order_whatever_each_send_takes() {
        let dir = tempfile::tempdir().unwrap();
        for bufs in [memory(), mixed(dir.path())] {
            let want = all_bytes(&bufs);
            for (per_send, max_slices) in [(1, 1024), (7, 1024), (1000, 1), (1000, 3), (usize::MAX, 1024)] {
                let mut s = Socket { out: Vec::new(), per_send, max_slices, sends: 0 };
                futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap();
                assert_eq!(s.out, want, "per_send {per_send}, max_slices {max_slices}");
            }
        }
    }

    #[test]
    fn many_buffers_go_in_few_sends() {
        let bufs = memory();
        let mut s = Socket { out: Vec::new(), per_send: usize::MAX, max_slices: 1024, sends: 0 };
        futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap();
        let non_empty = bufs.iter().filter(|b| !b.is_empty()).count();
        assert_eq!(s.sends, non_empty.div_ceil(SLICES_PER_SEND));
        // File slices split the memory buffers into runs: 3 buffers, then 95 (two sends
        // of at most 64), then 52; and one send per non-empty slice (3; the empty one
        // costs nothing).
        let dir = tempfile::tempdir().unwrap();
        let bufs = mixed(dir.path());
        let mut s = Socket { out: Vec::new(), per_send: usize::MAX, max_slices: 1024, sends: 0 };
        futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap();
        assert_eq!(s.sends, (1 + 2 + 1) + 3);
    }

    #[test]
    fn a_socket_that_takes_nothing_is_an_error_not_a_loop() {
        let dir = tempfile::tempdir().unwrap();
        for bufs in [memory(), mixed(dir.path())[3..].to_vec()] {
            let mut s = Socket { out: Vec::new(), per_send: 0, max_slices: 1024, sends: 0 };
            let err = futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::WriteZero);
        }
    }
}
