//! The raft RPC seam between controllers.
//!
//! Today the quorum has one voter, so openraft never asks for a client; if it does (a peer
//! was added before a transport exists), every RPC fails as Unreachable and raft keeps
//! retrying with backoff. The cluster work replaces `PeerClient` with a transport over
//! the controller listener and adds the receiving side.
use std::future::Future;

use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::OptionalSend;

use super::types::{ControllerTypes, Snapshot, SnapshotData, Vote};

type Node = openraft::impls::BasicNode;

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
