//! TLS over one glommio TCP connection, in user space (rustls): the server handshake
//! (client listeners) or the client one (a follower's connection to its leader), then a
//! read half and a write half for the connection's two tasks, as
//! `server/socket_split.rs` gives plaintext connections.
//!
//! Both halves share the rustls connection through `Rc<RefCell<..>>`: a borrow lasts one
//! synchronous `poll_*` call and both tasks run on one thread, so borrows never overlap.
//! The read half only ever reads the socket and the write half only writes it, so each
//! keeps its own waker with glommio (a read never sends: a post-handshake message that
//! wants an answer, such as a TLS 1.3 KeyUpdate, is answered with the next write).
//!
//! File slices (zero-copy fetch) are read into memory here and encrypted: without kernel
//! TLS (`ktls.rs`) there is no way to encrypt what `sendfile` sends.
use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

use crate::runtime::file_slice::FileSlice;

/// Ciphertext read from the socket per read.
const READ_BYTES: usize = 64 * 1024;
/// Plaintext a connection may hold encrypted and unsent (rustls's default is 64 KiB; a
/// Fetch response is often megabytes, and each refill costs a send).
const SEND_BUFFER_BYTES: usize = 256 * 1024;
/// File bytes read per step of a file slice.
const FILE_CHUNK_BYTES: usize = 64 * 1024;

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("the peer did not finish the TLS handshake within {0:?}")]
    Timeout(Duration),
    #[error("TLS handshake: {0}")]
    Tls(#[from] rustls::Error),
    #[error("TLS handshake: {0}")]
    Io(#[from] io::Error),
}

struct Inner {
    tcp: TcpStream,
    tls: Connection,
    /// Ciphertext received and not yet given to rustls: `incoming[in_start..in_end]`.
    incoming: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    /// Ciphertext rustls produced and the socket has not taken: `out[sent..]`.
    out: Vec<u8>,
    sent: usize,
    /// Scratch for file-slice bytes on their way into rustls.
    file_chunk: Vec<u8>,
    /// close_notify is queued (sent once, however often the close is polled).
    close_notify_sent: bool,
}

/// Runs the server side of the handshake on `tcp`, bounded by `timeout`. Plaintext the
/// client sent right after its Finished stays buffered in rustls for the read half.
pub async fn accept(tcp: TcpStream, config: Arc<ServerConfig>, timeout: Duration) -> Result<(TlsReadHalf, TlsWriteHalf), HandshakeError> {
    let tls = ServerConnection::new(config)?;
    establish(tcp, tls.into(), timeout).await
}

/// Runs the client side of the handshake with the server `server_name` (checked against
/// its certificate unless the config's verifier skips names), bounded by `timeout`.
pub async fn connect(
    tcp: TcpStream,
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
    timeout: Duration,
) -> Result<(TlsReadHalf, TlsWriteHalf), HandshakeError> {
    let tls = ClientConnection::new(config, server_name)?;
    establish(tcp, tls.into(), timeout).await
}

async fn establish(tcp: TcpStream, tls: Connection, timeout: Duration) -> Result<(TlsReadHalf, TlsWriteHalf), HandshakeError> {
    let mut inner = Inner {
        tcp,
        tls,
        incoming: vec![0u8; READ_BYTES].into_boxed_slice(),
        in_start: 0,
        in_end: 0,
        out: Vec::new(),
        sent: 0,
        file_chunk: Vec::new(),
        close_notify_sent: false,
    };
    match glommio::timer::timeout(timeout, async { Ok(handshake(&mut inner).await) }).await {
        Ok(result) => result?,
        Err(glommio::GlommioError::TimedOut(_)) => return Err(HandshakeError::Timeout(timeout)),
        Err(other) => return Err(HandshakeError::Io(other.into())),
    }
    inner.tls.set_buffer_limit(Some(SEND_BUFFER_BYTES));
    let shared = Rc::new(RefCell::new(inner));
    Ok((TlsReadHalf(shared.clone()), TlsWriteHalf(shared)))
}

fn to_io(e: HandshakeError) -> io::Error {
    match e {
        HandshakeError::Io(e) => e,
        HandshakeError::Tls(t) => io::Error::new(io::ErrorKind::InvalidData, t),
        HandshakeError::Timeout(_) => io::ErrorKind::TimedOut.into(),
    }
}

async fn handshake(inner: &mut Inner) -> Result<(), HandshakeError> {
    loop {
        while inner.tls.wants_write() {
            inner.out.clear();
            inner.tls.write_tls(&mut inner.out)?;
            inner.tcp.write_all(&inner.out).await?;
        }
        inner.out.clear();
        if !inner.tls.is_handshaking() {
            return Ok(());
        }
        let n = inner.tcp.read(&mut inner.incoming).await?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        inner.in_start = 0;
        inner.in_end = n;
        while inner.in_start < inner.in_end {
            if let Err(e) = inner.feed() {
                // Send the alert rustls queued (bad certificate, protocol version, ...),
                // so the peer learns why; the connection closes either way.
                if inner.tls.wants_write() && inner.tls.write_tls(&mut inner.out).is_ok() {
                    let _ = inner.tcp.write_all(&inner.out).await;
                }
                return Err(e);
            }
            if !inner.tls.is_handshaking() {
                break;
            }
        }
    }
}

impl Inner {
    /// Gives rustls the next received ciphertext and decrypts it.
    fn feed(&mut self) -> Result<(), HandshakeError> {
        let mut rest = &self.incoming[self.in_start..self.in_end];
        let before = rest.len();
        self.tls.read_tls(&mut rest)?;
        self.in_start += before - rest.len();
        self.tls.process_new_packets()?;
        Ok(())
    }

    /// Sends the ciphertext rustls holds; ready when the socket took all of it.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.sent == self.out.len() {
                self.out.clear();
                self.sent = 0;
                if !self.tls.wants_write() {
                    return Poll::Ready(Ok(()));
                }
                self.tls.write_tls(&mut self.out)?;
            }
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
    }
}

pub struct TlsReadHalf(Rc<RefCell<Inner>>);
pub struct TlsWriteHalf(Rc<RefCell<Inner>>);

impl TlsReadHalf {
    /// The peer's certificate chain (the client's with mutual TLS), leaf first.
    pub fn peer_certificates(&self) -> Option<Vec<CertificateDer<'static>>> {
        self.0.borrow().tls.peer_certificates().map(|c| c.to_vec())
    }

    /// The negotiated version and suite, for the connection's log line.
    /// The client's certificate (end entity, DER), when it presented one (mutual TLS).
    pub fn peer_certificate(&self) -> Option<Vec<u8>> {
        let inner = self.0.borrow();
        inner.tls.peer_certificates().and_then(|chain| chain.first()).map(|c| c.as_ref().to_vec())
    }

    pub fn describe(&self) -> String {
        let inner = self.0.borrow();
        format!("{:?} {:?}", inner.tls.protocol_version(), inner.tls.negotiated_cipher_suite().map(|s| s.suite()))
    }
}

impl AsyncRead for TlsReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut guard = self.0.borrow_mut();
        let inner = &mut *guard;
        loop {
            match inner.tls.reader().read(buf) {
                // 0: the client sent close_notify.
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket closed without close_notify: an end of stream like any other
                // (Kafka clients close sockets without it).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(0)),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if inner.in_start == inner.in_end {
                let n = ready!(Pin::new(&mut inner.tcp).poll_read(cx, &mut inner.incoming))?;
                if n == 0 {
                    return Poll::Ready(Ok(0));
                }
                inner.in_start = 0;
                inner.in_end = n;
            }
            inner.feed().map_err(to_io)?;
        }
    }
}

impl TlsWriteHalf {
    /// Encrypts bytes of `slice` from `done` on (bytes already sent): how many rustls took.
    /// Ready once the ciphertext of earlier bytes is on the socket.
    pub fn poll_send_file(&mut self, cx: &mut Context<'_>, slice: &FileSlice, done: usize) -> Poll<io::Result<usize>> {
        let mut guard = self.0.borrow_mut();
        let inner = &mut *guard;
        ready!(inner.poll_drain(cx))?;
        let want = FILE_CHUNK_BYTES.min(slice.len() - done);
        if inner.file_chunk.len() < want {
            inner.file_chunk.resize(want, 0);
        }
        let n = slice.read_at(done, &mut inner.file_chunk[..want])?;
        let taken = inner.tls.writer().write(&inner.file_chunk[..n])?;
        // Start sending now; the bytes are taken either way (the next call or the flush
        // finishes the send).
        if let Poll::Ready(Err(e)) = inner.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }
}

impl AsyncWrite for TlsWriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut guard = self.0.borrow_mut();
        let inner = &mut *guard;
        ready!(inner.poll_drain(cx))?;
        let taken = inner.tls.writer().write_vectored(bufs)?;
        if let Poll::Ready(Err(e)) = inner.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.borrow_mut().poll_drain(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut guard = self.0.borrow_mut();
        let inner = &mut *guard;
        ready!(inner.poll_drain(cx))?;
        if !inner.close_notify_sent {
            inner.tls.send_close_notify();
            inner.close_notify_sent = true;
        }
        ready!(inner.poll_drain(cx))?;
        Pin::new(&mut inner.tcp).poll_close(cx)
    }
}
