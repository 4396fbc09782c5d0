//! One client connection, on the shard that accepted it.
//!
//! The reader task reads frames (length checked against socket.request.max.bytes before
//! anything is allocated), decodes them and starts a handler task per request; the
//! writer task writes the responses strictly in request order, as Kafka requires. At
//! most `max_inflight_requests_per_connection` requests are in flight. A malformed
//! request is logged once with the peer address and closes only this connection.
//!
//! Request memory: a frame's announced length is reserved in the shard's pool
//! (`request_memory.rs`, queued.max.request.bytes) before its body is read, and released
//! when its handler finishes; while it does not fit, this connection does not read. The
//! buffer grows only as bytes arrive (see `ReadBuf`), so an announced length costs
//! nothing until the client actually sends it.
use std::rc::Rc;

use bytes::{Buf, Bytes, BytesMut};
use futures::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::Task;

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::client_quotas::{ConnectionQuotaState, QuotaUse};
use super::dispatch::{dispatch, dispatch_produce_view, Origin, Response};
use super::idle_close::{close_when_idle, Activity};
use super::request_timing::{timed, Answered};
use super::sasl_authenticator::{Authenticator, SaslSettings, Step, SASL_SERVER_MAX_RECEIVE_SIZE};
use super::shard::ShardContext;
use super::socket_split::split;
use super::vectored_write::{write_all_buffers, ResponseSink};
use crate::protocol::api_versions::unsupported_version_response_v0;
use crate::protocol::produce_request_view::ProduceRequestView;
use crate::protocol::{decode_request, frame_len, RequestError};
use crate::runtime::buffer_pool::{with_frame_pool, FRAME_BUFFER_BYTES};
use crate::runtime::malloc_policy;
use crate::security::connection_limits::Refusal;
use crate::security::listeners::Listener;
use crate::security::principal::Principal;
use crate::security::ssl_principal::SslPrincipalMapper;
use crate::security::tls_stream;
use crate::server::dynamic_tls::ListenerTls;

/// Produce's API key (the in-place view knows no `ApiKey`).
const PRODUCE: i16 = 0;

/// Bytes asked of the socket per read when no bigger frame is pending; also the least
/// the buffer grows by.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// The most the buffer grows by at once while a large frame arrives.
const MAX_READ_STEP_BYTES: usize = 1024 * 1024;

/// What a connection needs to know of the listener that accepted it.
pub struct ListenerInfo {
    /// Index into `ShardContext::listeners.all` (`RequestMeta::listener`).
    index: u8,
    name: String,
    /// The TLS configuration, on SSL and SASL_SSL listeners (its key store may be replaced
    /// at run time: `dynamic_tls.rs`).
    tls: Option<ListenerTls>,
    /// What clients authenticate against, on SASL_PLAINTEXT and SASL_SSL listeners.
    sasl: Option<std::sync::Arc<SaslSettings>>,
    /// On SSL listeners: a client certificate's principal (ssl.principal.mapping.rules).
    cert_principals: Option<std::sync::Arc<SslPrincipalMapper>>,
}

/// A listener's security, the same on every shard.
pub struct ListenerSecurity {
    /// On SSL and SASL_SSL listeners.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// On SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<std::sync::Arc<SaslSettings>>,
    /// On SSL listeners.
    pub cert_principals: Option<std::sync::Arc<SslPrincipalMapper>>,
}

impl ListenerInfo {
    pub fn new(index: usize, l: &Listener, security: &ListenerSecurity) -> Rc<ListenerInfo> {
        // Config validation allows at most 16 listeners.
        debug_assert!(index <= usize::from(u8::MAX));
        assert_eq!(l.protocol.uses_tls(), security.tls.is_some(), "{}: a TLS listener needs the TLS configuration", l.name);
        assert_eq!(l.protocol.uses_sasl(), security.sasl.is_some(), "{}: a SASL listener needs the SASL settings", l.name);
        let (sasl, cert_principals) = (security.sasl.clone(), security.cert_principals.clone());
        let tls = security.tls.clone().map(ListenerTls::new);
        Rc::new(ListenerInfo { index: index as u8, name: l.name.clone(), tls, sasl, cert_principals })
    }

    /// Applies this broker's dynamic key store settings of the listener in `image`.
    pub fn update_tls(&self, config: &crate::config::Config, image: &crate::cluster::image::MetadataImage, shard: u16) {
        if let Some(tls) = &self.tls {
            tls.update(config, image, &self.name, shard);
        }
    }
}

pub async fn accept_loop(ctx: Rc<ShardContext>, listener: TcpListener, info: Rc<ListenerInfo>) {
    let inter_broker = usize::from(info.index) == ctx.listeners.inter_broker;
    loop {
        // max.connections: at the limit this listener stops accepting (clients wait in
        // the backlog, as Kafka's acceptor blocks) until a connection closes anywhere.
        while !inter_broker && ctx.connection_limits.at_broker_limit() {
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        }
        match listener.accept().await {
            Ok(stream) => {
                if ctx.connections.get() >= ctx.config.max_connections_per_shard {
                    tracing::warn!(
                        shard = ctx.shard,
                        limit = ctx.config.max_connections_per_shard,
                        "connection limit reached; closing a new connection (raise max_connections_per_shard)"
                    );
                    drop(stream);
                    continue;
                }
                let peer = stream.peer_addr().ok();
                let ip = peer.map(|p| p.ip());
                let creation_rate = ip.and_then(|ip| ctx.image().security.client_quotas.ip_connection_rate(ip));
                let slot = match ctx.connection_limits.admit(ip, inter_broker, creation_rate) {
                    Ok(slot) => slot,
                    Err(Refusal::Throttled { throttle_ms }) => {
                        // Closed after the throttle time, as Kafka does: a client told at
                        // once would reconnect at once.
                        tracing::info!(shard = ctx.shard, peer = ?peer, throttle_ms, "connection refused by connection_creation_rate");
                        glommio::spawn_local(async move {
                            glommio::timer::sleep(Duration::from_millis(throttle_ms)).await;
                            drop(stream);
                        })
                        .detach();
                        continue;
                    }
                    Err(refusal) => {
                        // Kafka logs these at info: a client problem, not the broker's.
                        tracing::info!(shard = ctx.shard, peer = ?peer, ?refusal, "connection refused by max.connections / max.connections.per.ip");
                        drop(stream);
                        continue;
                    }
                };
                let (ctx, info) = (ctx.clone(), info.clone());
                glommio::spawn_local(async move {
                    serve(ctx, stream, info).await;
                    drop(slot);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(shard = ctx.shard, error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve(ctx: Rc<ShardContext>, stream: TcpStream, listener: Rc<ListenerInfo>) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    ctx.connections.set(ctx.connections.get() + 1);
    let mut origin = Origin { peer, listener: listener.index, principal: Principal::ANONYMOUS, token_authenticated: false };
    let auth = listener.sasl.clone().map(|s| {
        Authenticator::new(s).with_node(&ctx.image().cluster_id, ctx.config.node_id).with_unstable_features(ctx.config.unstable_feature_versions_enable)
    });
    let socket = stream.as_raw_fd();
    match &listener.tls {
        None => match split(stream) {
            Ok((reader, writer)) => serve_halves(&ctx, reader, writer, socket, origin, auth).await,
            Err(e) => {
                tracing::warn!(shard = ctx.shard, peer = ?peer, error = %e, "cannot make the socket non-blocking; closing the connection");
            }
        },
        Some(tls) => {
            let timeout = std::time::Duration::from_millis(ctx.config.ssl_handshake_timeout_ms);
            match tls_stream::accept(stream, tls.current(), timeout).await {
                Ok((reader, writer)) => {
                    tracing::debug!(shard = ctx.shard, peer = ?peer, listener = %listener.name, tls = %reader.describe(), "TLS connection");
                    // Mutual TLS on an SSL listener: the certificate names the principal.
                    if let (Some(mapper), Some(cert)) = (&listener.cert_principals, reader.peer_certificate()) {
                        match mapper.principal_of(&cert) {
                            Ok(p) => origin.principal = Principal::intern(&p),
                            Err(e) => {
                                tracing::info!(shard = ctx.shard, peer = ?peer, error = %e, "client certificate unreadable; the connection is User:ANONYMOUS")
                            }
                        }
                    }
                    serve_halves(&ctx, reader, writer, socket, origin, auth).await
                }
                // A failed handshake is the client's problem (wrong trust, plaintext sent
                // to a TLS port, a scanner): one line, at info, with the peer.
                Err(e) => {
                    tracing::info!(shard = ctx.shard, peer = ?peer, listener = %listener.name, error = %e, "TLS handshake failed; closing the connection")
                }
            }
        }
    }
    if let Some(peer) = peer {
        super::handlers::share_common::release_sessions_of(&ctx, peer).await;
    }
    ctx.connections.set(ctx.connections.get() - 1);
}

/// Serves one connection's requests, plaintext or TLS alike, until either side closes.
/// `socket`: the connection's descriptor (owned by the halves); `auth`: the SASL
/// authentication the client must pass first (SASL listeners).
async fn serve_halves<R: AsyncRead + Unpin, W: ResponseSink + 'static>(
    ctx: &Rc<ShardContext>,
    reader: R,
    writer: W,
    socket: RawFd,
    origin: Origin,
    auth: Option<Authenticator>,
) {
    let (tx, rx) = local_channel::new_bounded::<Task<Answered>>(ctx.config.max_inflight_requests_per_connection);
    let activity = Rc::new(Activity::new());
    // connections.max.idle.ms: shuts the socket down under the reader when the connection
    // has been idle that long. Cancelled (dropped) below while the writer still holds the
    // socket open, so it never touches a descriptor number reused by another connection.
    let idle_close = glommio::spawn_local(close_when_idle(socket, activity.clone(), Duration::from_millis(ctx.config.connections_max_idle_ms)));
    let writer_task = glommio::spawn_local(write_responses(writer, rx, activity.clone()));
    read_requests(ctx, reader, Queue { tx, activity }, origin, auth).await;
    drop(idle_close);
    // The reader closed the channel; the writer drains the remaining responses.
    writer_task.await;
}

/// The reader's end of the response queue, with the connection's activity (requests in
/// flight are counted until their response is written).
struct Queue {
    tx: local_channel::LocalSender<Task<Answered>>,
    activity: Rc<Activity>,
}

impl Queue {
    /// Queues a response task; false when the writer is gone.
    async fn send(&self, task: Task<Answered>) -> bool {
        self.activity.request_started();
        self.tx.send(task).await.is_ok()
    }
}

async fn read_requests<R: AsyncRead + Unpin>(ctx: &Rc<ShardContext>, mut reader: R, tx: Queue, mut origin: Origin, mut auth: Option<Authenticator>) {
    let peer = origin.peer;
    let mut rb = ReadBuf::new();
    // Authentication must finish within the handshake bound (a client that stalls is cut
    // off), with frames no larger than Kafka's sasl.server.max.receive.size.
    let auth_timeout = Duration::from_millis(ctx.config.ssl_handshake_timeout_ms);
    let mut auth_deadline = std::time::Instant::now() + auth_timeout;
    let mut quota = ConnectionQuotaState::default();
    loop {
        // A client over its quota is not read from until its throttle time is over.
        quota.wait_while_muted(ctx).await;
        let authenticating = auth.as_ref().is_some_and(|a| !a.is_done());
        let max = if authenticating { SASL_SERVER_MAX_RECEIVE_SIZE } else { ctx.config.socket_request_max_bytes };
        // The next frame's length (an idle connection is shut down under this read by
        // `idle_close`).
        match fill_before(&mut rb, &mut reader, 4, authenticating.then_some(auth_deadline)).await {
            Fill::Done => {}
            Fill::Closed => return,
            Fill::TimedOut => {
                tracing::info!(shard = ctx.shard, peer = ?peer, "SASL authentication not finished; closing the connection");
                return;
            }
        }
        tx.activity.touch();
        let b = &rb.buf;
        let len = match frame_len([b[0], b[1], b[2], b[3]], max) {
            Ok(len) => len,
            Err(e) => {
                tracing::warn!(shard = ctx.shard, peer = ?peer, error = %e, "refusing frame; closing connection");
                return;
            }
        };
        // Back-pressure: until the frame fits the shard's request memory, this
        // connection reads nothing more.
        let memory = match ctx.request_memory.reserve(len) {
            Ok(reserve) => reserve.await,
            Err(e) => {
                tracing::warn!(shard = ctx.shard, peer = ?peer, error = %e, "refusing frame; closing connection");
                return;
            }
        };
        if !matches!(fill_before(&mut rb, &mut reader, 4 + len, authenticating.then_some(auth_deadline)).await, Fill::Done) {
            return;
        }
        let frame = rb.take_frame(len);
        let received = std::time::Instant::now();
        if let Some(a) = auth.as_mut().filter(|a| a.is_done()) {
            if a.starts_reauthentication(&frame) {
                // KIP-368: the client proves itself again on this connection, within the
                // same bound as the first time.
                a.begin_reauthentication();
                auth_deadline = std::time::Instant::now() + auth_timeout;
            } else if a.session_expired(std::time::Instant::now()) {
                tracing::info!(shard = ctx.shard, peer = ?peer, "SASL session expired without re-authentication; closing the connection");
                drop(memory);
                tx.send(glommio::spawn_local(async { Answered::untimed(Response::Close) })).await;
                return;
            }
        }
        if let Some(a) = auth.as_mut().filter(|a| !a.is_done()) {
            // Before authentication: one frame at a time, answered here, in order.
            // SCRAM credentials as committed (a connection authenticates once; a password
            // changed through another shard a moment ago is in force).
            let step = a.on_frame(frame, origin, &ctx.controller.image());
            drop(memory);
            let (response, close) = match step {
                Step::Respond(r) => (Some(r), None),
                Step::RespondAndClose(r) => (Some(r), Some("SASL authentication failed")),
                Step::Close(why) => (None, Some(why)),
            };
            if let Some(r) = response {
                if !tx.send(glommio::spawn_local(async move { Answered::untimed(r) })).await {
                    return;
                }
            }
            if let Some(why) = close {
                tracing::info!(shard = ctx.shard, peer = ?peer, reason = why, "closing an unauthenticated connection");
                tx.send(glommio::spawn_local(async { Answered::untimed(Response::Close) })).await;
                return;
            }
            if let Some(principal) = a.principal() {
                tracing::debug!(shard = ctx.shard, peer = ?peer, principal, "SASL authenticated");
                // Every later request of the connection runs as this principal.
                origin.principal = Principal::intern(principal);
                origin.token_authenticated = a.token_authenticated();
            }
            continue;
        }
        // Produce v3-v12 is read in place (no allocation per request); everything else,
        // and any Produce frame the view leaves to it, goes through the crate's decoder.
        let frame_len = frame.len();
        let view = ProduceRequestView::parse(frame.clone());
        let task = match view.map_err(|_| decode_request(frame)) {
            Ok(view) => {
                let throttle = quota.before(ctx, origin.principal, view.client_id(), QuotaUse::Produce(frame_len));
                let ctx = ctx.clone();
                let quota_timer = quota.timer(throttle);
                glommio::spawn_local(timed(PRODUCE, received, async move {
                    let response = quota_timer.run(dispatch_produce_view(&ctx, view, origin, throttle.ms_i32())).await;
                    drop(memory);
                    quota_timer.after(&ctx);
                    response
                }))
            }
            Err(Ok(req)) => {
                let client_id = req.header.client_id.as_deref().unwrap_or("");
                let throttle = quota.before(ctx, origin.principal, client_id, QuotaUse::of(&req, frame_len));
                let ctx = ctx.clone();
                let quota_timer = quota.timer(throttle);
                let api_key = req.api_key as i16;
                glommio::spawn_local(timed(api_key, received, async move {
                    let response = quota_timer.run(dispatch(&ctx, req, origin, throttle.ms_i32())).await;
                    // The handler is done with the request (and the frame it borrows from).
                    drop(memory);
                    if frame_len >= malloc_policy::LARGE_REQUEST_BYTES {
                        malloc_policy::return_free_memory_soon();
                    }
                    quota_timer.after(&ctx);
                    response
                }))
            }
            Err(Err(RequestError::UnsupportedVersion { api_key: kafka_protocol::messages::ApiKey::ApiVersions, correlation_id, .. })) => {
                let resp = Response::Frames(smallvec::smallvec![unsupported_version_response_v0(correlation_id).freeze().into()]);
                glommio::spawn_local(async move { Answered::untimed(resp) })
            }
            Err(Err(e)) => {
                tracing::warn!(shard = ctx.shard, peer = ?peer, error = %e, "bad request; closing connection");
                return;
            }
        };
        if !tx.send(task).await {
            return;
        }
    }
}

/// How a bounded read ended.
enum Fill {
    Done,
    /// End of stream or a read error.
    Closed,
    TimedOut,
}

/// `rb.fill`, bounded by `deadline` when there is one. A read cut off by the deadline
/// loses nothing: bytes count once a read completes, and an unfinished read is dropped
/// before it took any.
async fn fill_before<R: AsyncRead + Unpin>(rb: &mut ReadBuf, reader: &mut R, want: usize, deadline: Option<std::time::Instant>) -> Fill {
    let filled = match deadline {
        None => rb.fill(reader, want).await,
        Some(deadline) => {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match glommio::timer::timeout(left, async { Ok(rb.fill(reader, want).await) }).await {
                Ok(filled) => filled,
                Err(_) => return Fill::TimedOut,
            }
        }
    };
    if filled {
        Fill::Done
    } else {
        Fill::Closed
    }
}

/// The connection's receive buffer. `buf[..filled]` holds received bytes; the rest of
/// `buf` is initialised scratch that reads land in (zeroed when the buffer grew, or earlier
/// bytes of a pooled buffer). Keeping the scratch around means each byte of buffer is
/// zeroed once, not once per read (a profile under load showed the per-read memset of a
/// 64 KiB chunk among the top costs).
///
/// Memory is committed as bytes arrive, not when a frame's length is announced: the
/// scratch ahead of the received bytes is at most `max(READ_CHUNK_BYTES, min(filled,
/// MAX_READ_STEP_BYTES))`, so a large frame grows the buffer by doubling steps of at
/// most 1 MiB, and a client that announces 100 MiB and sends nothing costs 64 KiB.
///
/// Large frames (above `READ_CHUNK_BYTES`, up to the pool's 1 MiB): after one, the
/// connection reads on in a buffer of the shard's frame pool (`runtime/buffer_pool.rs`),
/// already allocated and touched, so the next large frame lands there whole — no growth
/// by reallocation (each a copy of the bytes received so far), no fresh mmapped pages to
/// fault in, no zeroing. A read never goes past a large frame's end, so nothing follows
/// it into the next buffer. The pool reuses the buffer once the frames cut from it are
/// released; a small frame after a pooled one moves the connection back to its own small
/// buffer.
struct ReadBuf {
    buf: BytesMut,
    filled: usize,
    /// `buf` came from the frame pool: all of its capacity is initialised bytes.
    pooled: bool,
}

impl ReadBuf {
    fn new() -> ReadBuf {
        ReadBuf { buf: BytesMut::new(), filled: 0, pooled: false }
    }

    /// Reads until at least `want` bytes are buffered; false on EOF or error. `want` is
    /// bounded by the frame limit before this is called.
    async fn fill<R: AsyncRead + Unpin>(&mut self, reader: &mut R, want: usize) -> bool {
        while self.filled < want {
            let ahead = self.filled.clamp(READ_CHUNK_BYTES, MAX_READ_STEP_BYTES);
            // Read past the frame's end only by one chunk (the next pipelined requests),
            // and not at all past a large frame (see the type's comment).
            let past_end = if want > READ_CHUNK_BYTES { want } else { want.max(self.filled + READ_CHUNK_BYTES) };
            let target = (self.filled + ahead).min(past_end);
            if self.buf.len() < target {
                if self.pooled && target <= self.buf.capacity() {
                    // SAFETY: a pooled buffer's whole capacity is initialised (zeroed at
                    // allocation, `BufferPool` with `zero_new`; bytes never become
                    // uninitialised), so exposing it as scratch reads nothing undefined.
                    unsafe { self.buf.set_len(target) };
                } else {
                    // Beyond a pooled buffer the growth reallocates: the memory is no
                    // longer the pool's.
                    self.buf.resize(target, 0);
                    self.pooled = false;
                }
            }
            debug_assert!(target <= 2 * self.filled + READ_CHUNK_BYTES, "committed ahead of arrival");
            match reader.read(&mut self.buf[self.filled..]).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => self.filled += n,
            }
        }
        true
    }

    /// Splits off the buffered frame of `len` bytes (after its 4-byte length prefix).
    fn take_frame(&mut self, len: usize) -> Bytes {
        assert!(self.filled >= 4 + len, "take_frame before the frame is buffered");
        self.buf.advance(4);
        let frame = self.buf.split_to(len).freeze();
        self.filled -= 4 + len;
        let large = len > READ_CHUNK_BYTES;
        if large || self.pooled {
            // The next (maybe long-lived) request must not share, and keep alive, this
            // frame's allocation after its pool reservation is released: the bytes after
            // the frame (none after a large one, which reads stop at) move to a buffer of
            // their own — a pooled one while large frames come.
            let mut next = if large && self.filled <= FRAME_BUFFER_BYTES { with_frame_pool(|p| p.take()) } else { BytesMut::new() };
            next.extend_from_slice(&self.buf[..self.filled]);
            let old = std::mem::replace(&mut self.buf, next);
            if self.pooled {
                with_frame_pool(|p| p.give_back(old));
            }
            self.pooled = large && self.buf.capacity() >= FRAME_BUFFER_BYTES;
        }
        frame
    }
}

async fn write_responses<W: ResponseSink>(mut writer: W, rx: local_channel::LocalReceiver<Task<Answered>>, activity: Rc<Activity>) {
    while let Some(task) = rx.recv().await {
        let answered = task.await;
        let taken = std::time::Instant::now();
        let buffers = match &answered.response {
            Response::Frames(b) => b,
            Response::NoResponse => {
                answered.record_written(taken);
                activity.request_ended();
                continue;
            }
            Response::Close => {
                // Shut the socket down so the client sees the close now, even while
                // the reader is still waiting for its next request.
                let _ = writer.close().await;
                return;
            }
        };
        // One vectored send per socket-buffer's worth (stored batch bytes not copied).
        if write_all_buffers(&mut writer, buffers).await.is_err() {
            return;
        }
        // A TLS writer may hold the response's last records; plaintext sockets hold
        // nothing (their flush returns at once).
        if writer.flush().await.is_err() {
            return;
        }
        answered.record_written(taken);
        activity.request_ended();
    }
    let _ = writer.flush().await;
}
