//! The receiving side of the controller RPCs: a tokio `TcpListener` on the controller
//! listener, on the controller's own thread (its current-thread runtime), feeding
//! `raft.append_entries / vote / install_full_snapshot` and queueing forwarded client
//! requests behind the local ones (`server.rs` executes both, one at a time).
//!
//! Each connection is served by one task: read a request frame, answer it, repeat. A peer
//! that sends garbage gets its connection closed; nothing it sends can panic this side.
//!
//! Connections are numbered; forwarded requests carry the number (`Request::via`), and
//! the close of a connection that carried a broker heartbeat is reported
//! (`ConnectionClosed`): the quorum leader fences a crashed broker at once rather than
//! after its session timeout (`liveness.rs`).
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine;
use futures::channel::oneshot;
use openraft::async_runtime::WatchReceiver as _;
use tokio::net::TcpListener;

use super::handle::Request;
use super::rpc::{self, ClientRequest, RpcRequest, RpcResponse};
use super::rpc_tls::{RpcStream, RpcTls};
use super::state_machine::Publisher;
use super::types::{Raft, Snapshot};
use super::ControllerError;

/// Connections served at once; more are closed at accept (peers reconnect on their next
/// call). A quorum needs one or two per peer.
const MAX_RPC_CONNECTIONS: usize = 256;

/// A controller connection that carried a broker heartbeat closed (EOF, error, or this
/// side gave up on it).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionClosed {
    pub conn: u64,
}

/// Binds the controller listener (a host:port; host names are resolved).
pub async fn bind(addr: &str) -> Result<TcpListener, ControllerError> {
    TcpListener::bind(addr).await.map_err(|e| ControllerError::Config(format!("cannot listen on controller_listener {addr}: {e}")))
}

/// Accepts peers until the runtime stops; with `tls`, each must pass the mutual TLS
/// handshake and be allowed to act for the cluster before its first request is read.
pub async fn serve(
    listener: TcpListener,
    raft: Raft,
    requests: async_channel::Sender<Request>,
    closed: async_channel::Sender<ConnectionClosed>,
    tls: Option<Arc<RpcTls>>,
    publisher: Arc<Publisher>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let mut next_conn: u64 = 0;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "controller listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        if open.load(Ordering::Relaxed) >= MAX_RPC_CONNECTIONS {
            tracing::warn!(%peer, "controller listener: too many connections, closing");
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        next_conn += 1;
        let conn = next_conn;
        let (raft, requests, closed, open) = (raft.clone(), requests.clone(), closed.clone(), open.clone());
        let (tls, publisher) = (tls.clone(), publisher.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let stream: Box<dyn RpcStream> = match &tls {
                None => Box::new(stream),
                Some(tls) => match tls.accept(stream, &publisher.image()).await {
                    Ok((s, principal)) => {
                        tracing::debug!(%peer, principal, "controller listener: peer authenticated");
                        s
                    }
                    Err(why) => {
                        log_refusal(peer, &why);
                        open.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                },
            };
            let heartbeats = serve_connection(stream, peer, conn, &raft, &requests).await;
            // After the connection's last request was answered: its heartbeats were all
            // handled before the controller hears of the close (`Liveness` relies on it).
            if heartbeats {
                let _ = closed.send(ConnectionClosed { conn }).await;
            }
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// A refused peer retries every few milliseconds: one warning per 10 s, the rest at debug.
fn log_refusal(peer: SocketAddr, why: &str) {
    static LAST_WARNED_SECS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let now = START.get_or_init(std::time::Instant::now).elapsed().as_secs() + 10;
    let last = LAST_WARNED_SECS.load(Ordering::Relaxed);
    if now >= last + 10 && LAST_WARNED_SECS.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        tracing::warn!(%peer, why, "controller listener: peer refused (more refusals within 10 s are logged at debug)");
    } else {
        tracing::debug!(%peer, why, "controller listener: peer refused");
    }
}

/// Serves one connection until it closes; true if it carried a broker heartbeat.
async fn serve_connection(mut stream: Box<dyn RpcStream>, peer: SocketAddr, conn: u64, raft: &Raft, requests: &async_channel::Sender<Request>) -> bool {
    let mut heartbeats = false;
    loop {
        let req: RpcRequest = match rpc::read_msg(&mut stream).await {
            Ok(Some(r)) => r,
            Ok(None) => return heartbeats,
            // A TLS peer that closed without close_notify (every restart or dropped
            // connection): an end like any other.
            Err(rpc::RpcError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return heartbeats,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "controller RPC: bad request, closing the connection");
                return heartbeats;
            }
        };
        heartbeats |= matches!(req, RpcRequest::Client(ClientRequest::BrokerHeartbeat { .. }));
        let resp = answer(raft, requests, req, conn).await;
        if let Err(e) = rpc::write_msg(&mut stream, &resp).await {
            tracing::debug!(%peer, error = %e, "controller RPC: cannot answer");
            return heartbeats;
        }
    }
}

async fn answer(raft: &Raft, requests: &async_channel::Sender<Request>, req: RpcRequest, conn: u64) -> RpcResponse {
    let failed = |e: &dyn std::fmt::Display| RpcResponse::Failed(e.to_string());
    match req {
        RpcRequest::AppendEntries(r) => match raft.append_entries(r).await {
            Ok(resp) => RpcResponse::AppendEntries(resp),
            Err(e) => failed(&e),
        },
        RpcRequest::Vote(r) => match raft.vote(r).await {
            Ok(resp) => RpcResponse::Vote(resp),
            Err(e) => failed(&e),
        },
        RpcRequest::InstallSnapshot { vote, meta, data_base64 } => {
            let data = match base64::engine::general_purpose::STANDARD.decode(data_base64) {
                Ok(d) => d,
                Err(e) => return failed(&format!("snapshot data is not base64: {e}")),
            };
            let snapshot = Snapshot { meta, snapshot: data };
            match raft.install_full_snapshot(vote, snapshot).await {
                Ok(resp) => RpcResponse::InstallSnapshot(resp),
                Err(e) => failed(&e),
            }
        }
        RpcRequest::Client(body) => {
            // Not the leader: say so now rather than queue behind this node's own requests
            // (two nodes forwarding to each other on stale beliefs would wait out a TTL).
            let (me, leader) = {
                let m = raft.metrics();
                let m = m.borrow_watched();
                (m.id, m.current_leader)
            };
            if leader != Some(me) {
                return RpcResponse::Client {
                    result: Err(ControllerError::NotController(format!("node {me} does not lead the metadata quorum (leader: {leader:?})"))),
                    applied_index: None,
                };
            }
            let (reply, rx) = oneshot::channel();
            let req = Request { body, forwarded: true, via: Some(conn), reply };
            let stopping = || RpcResponse::Client { result: Err(ControllerError::NotController("the controller is stopping".into())), applied_index: None };
            if requests.send(req).await.is_err() {
                return stopping();
            }
            match rx.await {
                Ok(result) => {
                    // Requests run one at a time and each waits for its apply, so this index
                    // covers this request's entry.
                    let applied_index = raft.metrics().borrow_watched().last_applied.as_ref().map(|l| l.index);
                    RpcResponse::Client { result, applied_index }
                }
                Err(_) => stopping(),
            }
        }
    }
}
