//! The broker side of liveness: this node's broker heartbeats the quorum leader every
//! `heartbeat_interval` on a connection of their own.
//!
//! Why not through the request queue like every other request: the controller loop serves
//! requests one at a time, and a forwarded request may wait up to `FORWARD_TTL` (5 s) on
//! a leader that does not answer. Heartbeats queued behind it went silent for longer than
//! the broker session timeout (3 s in the tests), and the leader fenced a live broker
//! (seen in CI: a broker resumed after SIGSTOP was fenced again seconds later). Here a
//! heartbeat waits for nothing but its own round trip.
//!
//! When this node leads, its heartbeat is executed by its own controller loop (the
//! liveness table lives there), through the request queue: nothing to forward, and the
//! loop that would delay it is the one that would fence.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver as _;

use crate::cluster::image::BrokerMeta;

use super::handle::Request;
use super::network::Connection;
use super::rpc::{ClientRequest, RpcRequest, RpcResponse};
use super::rpc_tls::RpcTls;
use super::types::Raft;
use super::ControllerError;

/// What the sender needs to find the leader and reach it.
pub(super) struct HeartbeatSender {
    pub me: u64,
    pub broker: BrokerMeta,
    pub clean_shutdown_of: Option<[u8; 16]>,
    pub every: Duration,
    /// The broker session timeout: one heartbeat's round trip gets half of it, so a call
    /// lost on a dead connection leaves time for a retry on a new one before a fencing.
    pub session_timeout: Duration,
    /// controller_quorum_voters (the fallback address of a leader the membership lacks).
    pub voters: BTreeMap<u64, String>,
    /// Whom an observer that knows no leader asks.
    pub contacts: Vec<String>,
    pub tls: Option<Arc<RpcTls>>,
    /// Set by the controller loop on this broker's controlled shutdown: no heartbeat
    /// leaves from then on.
    pub stopped: Arc<AtomicBool>,
}

/// Where one heartbeat goes.
enum Target {
    /// This node leads: its own controller loop executes it.
    Local,
    /// The controller listener at `addr`, of quorum leader `leader` (None: an observer's
    /// guess among the voters).
    Remote { addr: String, leader: Option<u64> },
    /// No leader to ask (an election is under way): the next tick tries again.
    Nobody,
}

/// How one attempt ended.
enum Attempt {
    Done(Result<(), ControllerError>),
    /// The connection was lost or the leader moved while the heartbeat waited: worth one
    /// more attempt at once, to whoever leads now.
    Retry(ControllerError),
    /// The controller loop is gone (shutting down).
    Stop,
}

impl HeartbeatSender {
    /// Runs until the controller stops (its request queue closes) or the broker shuts down.
    pub async fn run(self, raft: Raft, requests: async_channel::Sender<Request>) {
        let mut conn: Option<Connection> = None;
        let mut next_contact = 0usize;
        loop {
            tokio::time::sleep(self.every).await;
            // Two attempts at most: the leader fences a broker whose heartbeat connection
            // closed unless it heartbeats again within `disconnect_grace` (100 ms).
            for attempt in 0..2 {
                if self.stopped.load(Ordering::Acquire) {
                    return;
                }
                let outcome = match self.target(&raft, &mut next_contact) {
                    Target::Nobody => break,
                    Target::Local => self.local(&requests).await,
                    Target::Remote { addr, leader } => self.remote(&raft, &mut conn, addr, leader).await,
                };
                match outcome {
                    Attempt::Stop => return,
                    Attempt::Done(Ok(())) => break,
                    Attempt::Retry(e) if attempt == 0 => tracing::debug!(error = %e, "broker heartbeat: trying again at once"),
                    Attempt::Done(Err(e)) | Attempt::Retry(e) => {
                        tracing::debug!(error = %e, "broker heartbeat not accepted");
                        break;
                    }
                }
            }
        }
    }

    fn heartbeat(&self) -> ClientRequest {
        ClientRequest::BrokerHeartbeat { broker: self.broker.clone(), clean_shutdown_of: self.clean_shutdown_of }
    }

    fn target(&self, raft: &Raft, next_contact: &mut usize) -> Target {
        let leader = raft.metrics().borrow_watched().current_leader;
        match leader {
            Some(leader) if leader == self.me => Target::Local,
            Some(leader) => match super::server::address_of(raft, &self.voters, leader) {
                Some(addr) => Target::Remote { addr, leader: Some(leader) },
                None => Target::Nobody,
            },
            // An observer learns the leader only from its appends: meanwhile it asks the
            // voters in turn (one that does not lead answers NOT_CONTROLLER).
            None if !super::server::is_voter(raft, self.me) => {
                let contacts = super::server::known_contacts(raft, &self.contacts);
                if contacts.is_empty() {
                    return Target::Nobody;
                }
                let addr = contacts[*next_contact % contacts.len()].clone();
                *next_contact = next_contact.wrapping_add(1);
                Target::Remote { addr, leader: None }
            }
            None => Target::Nobody,
        }
    }

    /// Through this node's own controller loop (it leads).
    async fn local(&self, requests: &async_channel::Sender<Request>) -> Attempt {
        let (reply, answer) = futures::channel::oneshot::channel();
        if requests.send(Request { body: self.heartbeat(), forwarded: false, via: None, reply }).await.is_err() {
            return Attempt::Stop;
        }
        match answer.await {
            Ok(r) => Attempt::Done(r.map(|_| ())),
            Err(_) => Attempt::Stop,
        }
    }

    /// To the controller at `addr` on this sender's own connection (`conn`, replaced when
    /// the address changes). Given up early when this node learns of another leader than
    /// `leader` meanwhile: a stopped or partitioned old leader would otherwise hold the
    /// heartbeat for the whole round-trip allowance.
    async fn remote(&self, raft: &Raft, conn: &mut Option<Connection>, addr: String, leader: Option<u64>) -> Attempt {
        let c = match conn.take() {
            Some(c) if c.addr() == addr => c,
            _ => Connection::new(addr, self.tls.clone()),
        };
        let c = conn.insert(c);
        let ttl = (self.session_timeout / 2).max(Duration::from_millis(10));
        let req = RpcRequest::Client(self.heartbeat());
        let answer = tokio::select! {
            answer = c.call(&req, ttl) => answer,
            () = super::server::leader_moved(raft, leader) => {
                // The call was cut short: its answer may still arrive on this connection,
                // where it would be taken for the next call's. A new connection then.
                *conn = None;
                return Attempt::Retry(ControllerError::NotController("the quorum leader moved while a heartbeat waited".into()));
            }
        };
        match answer {
            Ok(RpcResponse::Client { result, .. }) => match result {
                // A node that no longer leads says so at once: ask the new one now.
                Err(e @ ControllerError::NotController(_)) => Attempt::Retry(e),
                r => Attempt::Done(r.map(|_| ())),
            },
            Ok(other) => Attempt::Done(Err(ControllerError::NotController(format!("a broker heartbeat was answered with {other:?}")))),
            Err(e) if !c.is_open() => Attempt::Retry(ControllerError::NotController(format!("broker heartbeat: {e}"))),
            Err(e) => Attempt::Done(Err(ControllerError::NotController(format!("broker heartbeat: {e}")))),
        }
    }
}
