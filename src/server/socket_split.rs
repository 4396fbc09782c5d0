//! Read and write halves of one glommio TCP stream for two tasks of the same executor
//! (TLS connections get theirs from `security::tls_stream`; their `ResponseSink` is here).
//!
//! Both halves share the stream through `Rc<RefCell<..>>`; a borrow lasts only for one
//! synchronous `poll_*` call, and both tasks run on one thread, so borrows never
//! overlap. glommio keeps separate io_uring sources for receive and send, so a pending
//! read and a pending write on the same socket do not disturb each other. (futures'
//! `split` would put a lock between the halves; this needs none.)
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;

use super::vectored_write::ResponseSink;
use crate::runtime::file_slice::FileSlice;

pub struct ReadHalf(Rc<RefCell<TcpStream>>);
pub struct WriteHalf(Rc<RefCell<TcpStream>>);

/// Splits `stream`, and makes its socket non-blocking: `sendfile` (zero-copy fetch) has
/// no per-call flag, and glommio's own sends and receives are unaffected (they pass
/// MSG_DONTWAIT and wait for readiness with io_uring polls).
pub fn split(stream: TcpStream) -> io::Result<(ReadHalf, WriteHalf)> {
    set_nonblocking(stream.as_raw_fd())?;
    let s = Rc::new(RefCell::new(stream));
    Ok((ReadHalf(s.clone()), WriteHalf(s)))
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the stream owns; F_GETFL/F_SETFL touch only its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl AsyncRead for ReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut s = self.0.borrow_mut();
        Pin::new(&mut *s).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut s = self.0.borrow_mut();
        Pin::new(&mut *s).poll_write(cx, buf)
    }

    /// One `sendmsg` of many slices (the vendored glommio's `shardlog patch`).
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut s = self.0.borrow_mut();
        Pin::new(&mut *s).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.0.borrow_mut();
        Pin::new(&mut *s).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.0.borrow_mut();
        Pin::new(&mut *s).poll_close(cx)
    }
}

impl ResponseSink for WriteHalf {
    /// One `sendfile` (the vendored glommio's `poll_send_with` waits while the socket
    /// is full).
    fn poll_send_file(self: Pin<&mut Self>, cx: &mut Context<'_>, slice: &FileSlice, done: usize) -> Poll<io::Result<usize>> {
        let mut s = self.0.borrow_mut();
        s.poll_send_with(cx, &mut |socket| slice.send_to(socket, done))
    }
}

/// A TLS connection's write half sends file slices through rustls (read into memory,
/// encrypted): no `sendfile` without kernel TLS.
impl ResponseSink for crate::security::tls_stream::TlsWriteHalf {
    fn poll_send_file(self: Pin<&mut Self>, cx: &mut Context<'_>, slice: &FileSlice, done: usize) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send_file(cx, slice, done)
    }
}
