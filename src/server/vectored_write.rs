//! Writes a response's buffers with as few sends as the socket allows: each send is one
//! vectored write (`sendmsg`, the vendored glommio's `poll_write_vectored`) of up to
//! `SLICES_PER_SEND` buffers, resumed where the kernel stopped. A Fetch response of 1 MiB
//! per partition in 16 KiB batches is ~70 buffers per partition: one buffer per send made
//! it ~70 sends, this makes it one or a few (as many as the socket buffer needs).
//!
//! No allocation: the slices of one send live in an array on the stack.
use std::io::{self, IoSlice};

use bytes::Bytes;
use futures::{AsyncWrite, AsyncWriteExt};

/// Buffers per send (the kernel takes up to 1024; 64 covers the socket buffer's worth of
/// 16 KiB batches and keeps the array small).
const SLICES_PER_SEND: usize = 64;

/// Writes all of `bufs`, in order.
pub async fn write_all_buffers<W: AsyncWrite + Unpin>(w: &mut W, bufs: &[Bytes]) -> io::Result<()> {
    // The next byte to send is bufs[at][offset].
    let (mut at, mut offset) = (0usize, 0usize);
    loop {
        while at < bufs.len() && offset == bufs[at].len() {
            at += 1;
            offset = 0;
        }
        if at == bufs.len() {
            return Ok(());
        }
        let mut slices = [IoSlice::new(&[]); SLICES_PER_SEND];
        let mut n = 0;
        for (k, b) in bufs[at..].iter().enumerate() {
            if n == SLICES_PER_SEND {
                break;
            }
            let rest = if k == 0 { &b[offset..] } else { &b[..] };
            if !rest.is_empty() {
                slices[n] = IoSlice::new(rest);
                n += 1;
            }
        }
        let mut sent = w.write_vectored(&slices[..n]).await?;
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
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A socket that takes at most `per_send` bytes per call, from the first `max_slices`
    /// slices only, and counts its calls.
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

    fn buffers() -> Vec<Bytes> {
        // Empty buffers among them, and more than one send's worth of slices.
        (0..150u32).map(|i| Bytes::from(vec![i as u8; (i as usize * 37) % 300])).collect()
    }

    #[test]
    fn sends_every_byte_in_order_whatever_each_send_takes() {
        let bufs = buffers();
        let want: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        for (per_send, max_slices) in [(1, 1024), (7, 1024), (1000, 1), (1000, 3), (usize::MAX, 1024)] {
            let mut s = Socket { out: Vec::new(), per_send, max_slices, sends: 0 };
            futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap();
            assert_eq!(s.out, want, "per_send {per_send}, max_slices {max_slices}");
        }
    }

    #[test]
    fn many_buffers_go_in_few_sends() {
        let bufs = buffers();
        let mut s = Socket { out: Vec::new(), per_send: usize::MAX, max_slices: 1024, sends: 0 };
        futures::executor::block_on(write_all_buffers(&mut s, &bufs)).unwrap();
        let non_empty = bufs.iter().filter(|b| !b.is_empty()).count();
        assert_eq!(s.sends, non_empty.div_ceil(SLICES_PER_SEND));
    }

    #[test]
    fn a_socket_that_takes_nothing_is_an_error_not_a_loop() {
        let mut s = Socket { out: Vec::new(), per_send: 0, max_slices: 1024, sends: 0 };
        let err = futures::executor::block_on(write_all_buffers(&mut s, &buffers())).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    }
}
