//! The quorum-membership admin APIs as Kafka 4.4 brokers serve them (forwarded to the
//! active controller; here to the quorum leader through the controller):
//! - AddRaftVoter 0-1 (KIP-853; `kafka-metadata-quorum.sh add-controller`): the observer
//!   with the named id and directory id becomes a voter, at the request's controller
//!   listener. v1's AckWhenCommitted=false (KIP-1186: answer before the commit) is
//!   answered after the commit all the same, which only makes the answer later.
//! - RemoveRaftVoter 0 (`kafka-metadata-quorum.sh remove-controller`).
//! - UnregisterBroker 0 (`kafka-cluster.sh unregister`).
//!
//! All need ALTER on the cluster. A request naming another cluster id is refused with
//! INCONSISTENT_CLUSTER_ID. The rules and words are `controller/voters.rs`'s.
//! (UpdateRaftVoter is a controller-listener API in Kafka: shardlog's voters send their
//! update over the controller RPC, `controller/voters.rs::announcement`.)
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, UnregisterBrokerRequest, UnregisterBrokerResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::controller::ControllerError;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// The outcome as (error code, message): authorization, then the cluster id, then the
/// controller's answer.
async fn outcome<F: std::future::Future<Output = Result<(), ControllerError>>>(
    ctx: &ShardContext,
    meta: &RequestMeta,
    cluster_id: Option<&StrBytes>,
    call: impl FnOnce() -> F,
) -> (ErrorCode, Option<StrBytes>) {
    if !ctx.access(meta).allows_cluster(Operation::Alter) {
        return (ErrorCode::CLUSTER_AUTHORIZATION_FAILED, Some(str_bytes("Cluster authorization failed.")));
    }
    let ours = ctx.image().cluster_id.clone();
    if let Some(theirs) = cluster_id.filter(|c| c.as_str() != ours) {
        let code = ErrorCode::from(kafka_protocol::ResponseError::InconsistentClusterId);
        return (code, Some(str_bytes(&format!("The request names cluster id {theirs}; this is cluster {ours}"))));
    }
    match call().await {
        Ok(()) => (ErrorCode::NONE, None),
        Err(e) => (ErrorCode::from(&e), Some(str_bytes(&e.to_string()))),
    }
}

/// A request's replica id as a raft node id; negative ids name no node.
fn node_id(id: i32) -> Option<u64> {
    u64::try_from(id).ok()
}

pub async fn add_raft_voter(ctx: &ShardContext, meta: RequestMeta, req: AddRaftVoterRequest) -> Response {
    // The controller listener is the request's first listener (Kafka: the one named by
    // the leader's controller.listener.names; shardlog's quorum has one).
    let addr = req.listeners.first().map(|l| crate::config::join_host_port(l.host.as_str(), l.port));
    let (code, message) = match (node_id(req.voter_id), addr) {
        (Some(id), Some(addr)) => outcome(ctx, &meta, req.cluster_id.as_ref(), || ctx.controller.add_voter(id, *req.voter_directory_id.as_bytes(), addr)).await,
        (None, _) => (ErrorCode::INVALID_REQUEST, Some(str_bytes(&format!("Invalid voter id {}", req.voter_id)))),
        (_, None) => (ErrorCode::INVALID_REQUEST, Some(str_bytes("The new voter names no listener"))),
    };
    meta.respond(&AddRaftVoterResponse::default().with_error_code(code.code()).with_error_message(message))
}

pub async fn remove_raft_voter(ctx: &ShardContext, meta: RequestMeta, req: RemoveRaftVoterRequest) -> Response {
    let (code, message) = match node_id(req.voter_id) {
        Some(id) => outcome(ctx, &meta, req.cluster_id.as_ref(), || ctx.controller.remove_voter(id, *req.voter_directory_id.as_bytes())).await,
        None => (ErrorCode::INVALID_REQUEST, Some(str_bytes(&format!("Invalid voter id {}", req.voter_id)))),
    };
    meta.respond(&RemoveRaftVoterResponse::default().with_error_code(code.code()).with_error_message(message))
}

pub async fn unregister_broker(ctx: &ShardContext, meta: RequestMeta, req: UnregisterBrokerRequest) -> Response {
    let broker = req.broker_id.0;
    let (code, message) = outcome(ctx, &meta, None, || ctx.controller.unregister_broker(broker)).await;
    if code == ErrorCode::NONE {
        // kafka-cluster.sh describes next: answer it from the new image.
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&UnregisterBrokerResponse::default().with_error_code(code.code()).with_error_message(message))
}
