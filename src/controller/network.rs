//! The client side of the controller RPCs: openraft's `RaftNetworkV2` over TCP (or mutual
//! TLS, `rpc_tls.rs`) to the peers' controller listeners (`rpc.rs` is the wire format, `rpc_server.rs` the receiving
//! side).
//!
//! Each `PeerClient` owns one connection to its peer, opened on first use and dropped on
//! any error (the next call reconnects), and sends one request at a time. Every call is
//! bounded by openraft's hard TTL, so a stopped (SIGSTOP) peer costs a timeout, not a hang.
//! A single-node quorum never asks for a client.
//!
//! openraft makes a client once per target and keeps it while the target stays in the
//! membership, also when only the target's node (its address) changes (UpdateRaftVoter,
//! `voters::update`). So a client does not keep the address it was made with: it reads the
//! target's current address from `PeerAddresses`, which `track_peer_addresses` keeps equal
//! to the membership's, and reconnects when it moved.
use std::future::Future;
use std::time::Duration;

use base64::Engine;
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::OptionalSend;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use tokio::net::TcpStream;

use super::rpc::{self, RpcRequest, RpcResponse};
use super::rpc_tls::{RpcStream, RpcTls};
use super::types::{ControllerTypes, Snapshot, SnapshotData, Vote};

type Node = super::types::ControllerNode;

/// Creates clients to peer controllers; `ControllerNode.addr` is the peer's controller listener
/// (over mutual TLS when `tls` is set).
#[derive(Default)]
pub struct Network {
    pub tls: Option<Arc<RpcTls>>,
    pub addresses: PeerAddresses,
}

impl RaftNetworkFactory<ControllerTypes> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &Node) -> PeerClient {
        PeerClient { target, conn: Connection::new(node.addr.clone(), self.tls.clone()), addresses: self.addresses.clone() }
    }
}

/// Each peer's controller listener as the latest membership has it (the controller's own
/// thread only: a lock is fine off the data path).
#[derive(Clone, Default)]
pub struct PeerAddresses(Arc<RwLock<BTreeMap<u64, String>>>);

impl PeerAddresses {
    /// Replaces the table with the membership's nodes.
    pub fn set<'a>(&self, nodes: impl Iterator<Item = (u64, &'a Node)>) {
        let table = nodes.map(|(id, n)| (id, n.addr.clone())).collect();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = table;
    }

    fn get(&self, id: u64) -> Option<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
    }
}

/// Why a call failed: the peer could not be reached (connect/io/timeout), or it answered
/// with something other than the expected response.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("controller at '{addr}' unreachable: {why}")]
    Unreachable { addr: String, why: String },
    #[error("controller at '{addr}' answered unexpectedly: {why}")]
    Protocol { addr: String, why: String },
}

/// One lazily (re)opened connection to a peer's controller listener.
pub struct Connection {
    addr: String,
    tls: Option<Arc<RpcTls>>,
    stream: Option<Box<dyn RpcStream>>,
}

impl Connection {
    pub fn new(addr: String, tls: Option<Arc<RpcTls>>) -> Connection {
        Connection { addr, tls, stream: None }
    }

    /// The peer's controller listener.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether a connection is open now (else the next call opens one).
    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// Sends `req` and waits for the answer, all within `ttl`. Any failure drops the
    /// connection: a half-read answer must never be taken for the next call's.
    pub async fn call(&mut self, req: &RpcRequest, ttl: Duration) -> Result<RpcResponse, CallError> {
        let res = tokio::time::timeout(ttl, self.call_inner(req)).await;
        let res = match res {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", ttl.as_millis())),
        };
        match res {
            Ok(RpcResponse::Failed(why)) => Err(CallError::Protocol { addr: self.addr.clone(), why }),
            Ok(resp) => Ok(resp),
            Err(why) => {
                self.stream = None;
                Err(CallError::Unreachable { addr: self.addr.clone(), why })
            }
        }
    }

    async fn call_inner(&mut self, req: &RpcRequest) -> Result<RpcResponse, String> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr).await.map_err(|e| format!("connect: {e}"))?;
            // Small request/response messages: send each at once.
            let _ = s.set_nodelay(true);
            self.stream = Some(match &self.tls {
                Some(tls) => tls.connect(s, &self.addr).await?,
                None => Box::new(s),
            });
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err("no connection".into());
        };
        rpc::write_msg(stream, req).await.map_err(|e| e.to_string())?;
        match rpc::read_msg(stream).await {
            Ok(Some(resp)) => Ok(resp),
            Ok(None) => Err("connection closed by the peer".into()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A client to one peer.
pub struct PeerClient {
    target: u64,
    conn: Connection,
    addresses: PeerAddresses,
}

impl PeerClient {
    /// The connection to the target's current address: a new one when the membership
    /// moved the target to another listener since the last call.
    fn connection(&mut self) -> &mut Connection {
        if let Some(addr) = self.addresses.get(self.target).filter(|a| !a.is_empty() && *a != self.conn.addr) {
            tracing::info!(node = self.target, from = %self.conn.addr, to = %addr, "controller: a peer's listener changed; reconnecting");
            self.conn = Connection::new(addr, self.conn.tls.clone());
        }
        &mut self.conn
    }

    fn rpc_error(&self, e: CallError) -> RPCError<ControllerTypes> {
        match e {
            CallError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Protocol { .. } => RPCError::Network(NetworkError::new(&e)),
        }
    }

    fn unexpected(&self, what: &str, got: &RpcResponse) -> CallError {
        CallError::Protocol { addr: format!("{} (node {})", self.conn.addr, self.target), why: format!("expected a {what} response, got {got:?}") }
    }
}

impl RaftNetworkV2<ControllerTypes> for PeerClient {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        req: AppendEntriesRequest<ControllerTypes>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<ControllerTypes>, RPCError<ControllerTypes>> {
        let req = RpcRequest::AppendEntries(req);
        match self.connection().call(&req, option.hard_ttl()).await {
            Ok(RpcResponse::AppendEntries(r)) => Ok(r),
            Ok(other) => Err(self.rpc_error(self.unexpected("AppendEntries", &other))),
            Err(e) => Err(self.rpc_error(e)),
        }
    }

    async fn vote(&mut self, req: VoteRequest<ControllerTypes>, option: RPCOption) -> Result<VoteResponse<ControllerTypes>, RPCError<ControllerTypes>> {
        let req = RpcRequest::Vote(req);
        match self.connection().call(&req, option.hard_ttl()).await {
            Ok(RpcResponse::Vote(r)) => Ok(r),
            Ok(other) => Err(self.rpc_error(self.unexpected("Vote", &other))),
            Err(e) => Err(self.rpc_error(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<ControllerTypes>, StreamingError<ControllerTypes>> {
        let req = RpcRequest::InstallSnapshot { vote, meta: snapshot.meta, data_base64: base64::engine::general_purpose::STANDARD.encode(&snapshot.snapshot) };
        // A snapshot may be large: allow it the hard TTL times a few, and stop early when
        // openraft closes the replication stream.
        let ttl = option.hard_ttl().saturating_mul(10);
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            res = self.connection().call(&req, ttl) => match res {
                Ok(RpcResponse::InstallSnapshot(r)) => Ok(r),
                Ok(other) => Err(StreamingError::Network(NetworkError::new(&self.unexpected("InstallSnapshot", &other)))),
                Err(e @ CallError::Unreachable { .. }) => Err(StreamingError::Unreachable(Unreachable::new(&e))),
                Err(e) => Err(StreamingError::Network(NetworkError::new(&e))),
            }
        }
    }
}
