//! The raft RPC seam between controllers.
//!
//! Today the quorum has one voter, so openraft never asks for a client; if it does (a peer
//! was added before a transport exists), every RPC fails as Unreachable and raft keeps
//! retrying with backoff. The wire messages a transport will carry are defined here
//! (`RaftRpc`/`RaftRpcReply`, serde) together with the receiving side (`serve`), so a
//! multi-node version only has to move bytes between `PeerClient` and `serve`.
use std::future::Future;

use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::OptionalSend;
use serde::{Deserialize, Serialize};

use super::types::{ControllerTypes, Raft, Snapshot, SnapshotData, SnapshotMeta, Vote};

type Node = openraft::impls::BasicNode;

/// A request from one controller to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRpc {
    AppendEntries(AppendEntriesRequest<ControllerTypes>),
    Vote(VoteRequest<ControllerTypes>),
    PreVote(VoteRequest<ControllerTypes>),
    /// A whole snapshot: its meta and the snapshot-file bytes (checked on receipt).
    FullSnapshot {
        vote: Vote,
        meta: SnapshotMeta,
        data: SnapshotData,
    },
}

/// The answer to a `RaftRpc`; `Err` carries the remote raft error as text.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRpcReply {
    AppendEntries(AppendEntriesResponse<ControllerTypes>),
    Vote(VoteResponse<ControllerTypes>),
    Snapshot(SnapshotResponse<ControllerTypes>),
    Err(String),
}

/// Receiving side: hands a peer's request to the local raft node.
#[allow(dead_code)] // Used once a transport exists.
pub async fn serve(raft: &Raft, rpc: RaftRpc) -> RaftRpcReply {
    match rpc {
        RaftRpc::AppendEntries(req) => match raft.append_entries(req).await {
            Ok(r) => RaftRpcReply::AppendEntries(r),
            Err(e) => RaftRpcReply::Err(e.to_string()),
        },
        RaftRpc::Vote(req) => match raft.vote(req).await {
            Ok(r) => RaftRpcReply::Vote(r),
            Err(e) => RaftRpcReply::Err(e.to_string()),
        },
        RaftRpc::PreVote(req) => match raft.pre_vote(req).await {
            Ok(r) => RaftRpcReply::Vote(r),
            Err(e) => RaftRpcReply::Err(e.to_string()),
        },
        RaftRpc::FullSnapshot { vote, meta, data } => {
            match raft
                .install_full_snapshot(
                    vote,
                    Snapshot {
                        meta,
                        snapshot: data,
                    },
                )
                .await
            {
                Ok(r) => RaftRpcReply::Snapshot(r),
                Err(e) => RaftRpcReply::Err(e.to_string()),
            }
        }
    }
}

/// Creates clients to peer controllers.
#[derive(Default)]
pub struct Network;

impl RaftNetworkFactory<ControllerTypes> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &Node) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
        }
    }
}

/// A client to one peer. No transport yet: every call is Unreachable.
pub struct PeerClient {
    target: u64,
    addr: String,
}

impl PeerClient {
    fn unreachable(&self, what: &str) -> Unreachable<ControllerTypes> {
        Unreachable::from_string(format!(
            "controller {} at '{}': no controller-to-controller transport yet ({what})",
            self.target, self.addr
        ))
    }
}

impl RaftNetworkV2<ControllerTypes> for PeerClient {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<ControllerTypes>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<ControllerTypes>, RPCError<ControllerTypes>> {
        Err(RPCError::Unreachable(self.unreachable("append_entries")))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<ControllerTypes>,
        _option: RPCOption,
    ) -> Result<VoteResponse<ControllerTypes>, RPCError<ControllerTypes>> {
        Err(RPCError::Unreachable(self.unreachable("vote")))
    }

    async fn full_snapshot(
        &mut self,
        _vote: Vote,
        _snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<ControllerTypes>, StreamingError<ControllerTypes>> {
        Err(StreamingError::Unreachable(
            self.unreachable("full_snapshot"),
        ))
    }
}
