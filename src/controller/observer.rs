//! Nodes outside the voters follow the metadata quorum as openraft learners (KRaft's
//! observers): broker-only nodes, and controllers joining through
//! controller_quorum_bootstrap_servers until AddRaftVoter makes them voters (`voters.rs`).
//!
//! Why a learner rather than fetching committed deltas: the learner receives the same
//! AppendEntries and InstallSnapshot as a voter, applies them through the same state
//! machine (`state_machine.rs`) and so publishes to its shards through the same per-shard
//! channels; there is one apply path, one snapshot path and one catch-up path (a learner
//! behind the purge point gets the snapshot, as a lagging voter does). A delta fetcher
//! would need its own cursor, its own snapshot download and its own gap handling. The cost
//! is that the leader pushes to every learner (a few bytes per metadata change and a
//! heartbeat every 50 ms per learner), which is what Kafka's observers cost in fetches.
//!
//! - Learner side (`join`): at start-up, before waiting for the log, the node asks the
//!   quorum to add it (`ClientRequest::AddObserver` with its controller listener, its
//!   directory id and whether it has the controller role), trying each contact (the
//!   configured voters and bootstrap servers) in turn until the leader answers: one that
//!   does not lead says NOT_CONTROLLER and the next one is asked. Idempotent across restarts.
//! - Leader side (`add`): adds or re-records the learner with one membership change, or
//!   does nothing if the membership already has it so. A voter id is refused (a voter
//!   becomes an observer only by RemoveRaftVoter).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver as _;
use openraft::ChangeMembers;

use super::network::Connection;
use super::rpc::{ClientReply, ClientRequest, RpcRequest, RpcResponse};
use super::types::{ControllerNode, Raft};
use super::ControllerError;

/// One attempt to reach a voter.
const ASK_TTL: Duration = Duration::from_secs(5);
/// Pause after every voter has been asked once without success.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

/// Asks the quorum (any contact; forwarded answers come only from the leader) to add this
/// node as a learner reached at `addr`; retries until `deadline`.
pub async fn join(
    me: &ControllerNode,
    id: u64,
    contacts: &[String],
    tls: Option<std::sync::Arc<super::rpc_tls::RpcTls>>,
    deadline: Instant,
) -> Result<(), ControllerError> {
    let req = ClientRequest::AddObserver { id, addr: me.addr.clone(), directory_id: me.directory_id, controller: me.controller };
    ask_leader(req, contacts, tls, deadline).await?;
    tracing::info!(node = id, addr = %me.addr, "controller: joined the metadata quorum as an observer (raft learner)");
    Ok(())
}

/// Sends `req` to the quorum leader through any of `contacts` (a contact that does not
/// lead says NOT_CONTROLLER or forwards it), trying each in turn until one accepts it or
/// `deadline` passes. For a node that cannot yet reach the leader through its own raft:
/// a joining observer, a voter whose listener moved (the leader still replicates to the
/// old one).
pub async fn ask_leader(
    req: ClientRequest,
    contacts: &[String],
    tls: Option<std::sync::Arc<super::rpc_tls::RpcTls>>,
    deadline: Instant,
) -> Result<(), ControllerError> {
    let req = RpcRequest::Client(req);
    let mut conns: Vec<(&String, Connection)> = contacts.iter().map(|a| (a, Connection::new(a.clone(), tls.clone()))).collect();
    let mut last = String::from("no voter asked yet");
    while Instant::now() < deadline {
        for (voter, conn) in conns.iter_mut() {
            match conn.call(&req, ASK_TTL).await {
                Ok(RpcResponse::Client { result: Ok(_), .. }) => return Ok(()),
                // A refusal other than NOT_CONTROLLER or a membership change in flight
                // (REQUEST_TIMED_OUT) is final (e.g. this id is a voter).
                Ok(RpcResponse::Client { result: Err(e), .. }) if !retriable(&e) => return Err(e),
                Ok(RpcResponse::Client { result: Err(e), .. }) => last = format!("voter {voter}: {e}"),
                Ok(other) => last = format!("voter {voter} answered {other:?}"),
                Err(e) => last = format!("voter {voter}: {e}"),
            }
        }
        tracing::debug!(%last, "controller: waiting for the quorum leader to accept a request");
        tokio::time::sleep(ROUND_PAUSE).await;
    }
    Err(ControllerError::NotController(format!("no quorum leader accepted the request: {last}")))
}

fn retriable(e: &ControllerError) -> bool {
    matches!(e, ControllerError::NotController(_) | ControllerError::Membership(super::MembershipError::RequestTimedOut, _))
}

/// On the leader: makes `id` a learner reached at `node.addr` (one membership entry,
/// committed before the answer), unless the membership already says so.
pub async fn add(raft: &Raft, id: u64, node: ControllerNode, timeout: Duration) -> Result<ClientReply, ControllerError> {
    let addr = node.addr.clone();
    if addr.is_empty() {
        return Err(ControllerError::InvalidRequest("an observer needs a controller listener address".into()));
    }
    let current = raft.metrics().borrow_watched().membership_config.clone();
    let membership = current.membership();
    if membership.voter_ids().any(|v| v == id) {
        // A voter (added by AddRaftVoter) restarting with its bootstrap servers asks again
        // before its own log says what it is: it is a member already.
        if membership.get_node(&id).is_some_and(|n| n.directory_id == node.directory_id && node.directory_id != [0; 16]) {
            return Ok(ClientReply::Done);
        }
        return Err(ControllerError::InvalidRequest(format!("node {id} is a voter of the metadata quorum; it cannot also follow it as an observer")));
    }
    if membership.get_node(&id) == Some(&node) {
        return Ok(ClientReply::Done);
    }
    tracing::info!(node = id, addr, "controller: adding an observer (raft learner)");
    // SetNodes adds the learner or replaces its address; it never touches the voters.
    let change = ChangeMembers::SetNodes(BTreeMap::from([(id, node)]));
    match tokio::time::timeout(timeout, raft.change_membership(change, true)).await {
        Ok(Ok(_)) => Ok(ClientReply::Done),
        Ok(Err(e)) => Err(ControllerError::NotController(format!("adding observer {id}: {e}"))),
        Err(_) => Err(ControllerError::NotController(format!("adding observer {id} was not committed within {} s", timeout.as_secs()))),
    }
}
