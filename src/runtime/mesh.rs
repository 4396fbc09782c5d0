//! Cross-shard channels: every shard has one inbox; any shard (or the controller side)
//! holds a sender to each. Unbounded on purpose: a full mesh of bounded channels can
//! deadlock when shards await sends to each other in a cycle. What bounds an inbox
//! instead: every message is one partition operation of a request a connection is
//! serving, and its sender awaits the reply, so an inbox holds at most
//! connections (max_connections_per_shard x shards) x max_inflight_requests_per_connection
//! x partitions per request (bounded by socket_request_max_bytes) messages, plus the
//! group coordinator's own operations (one per group request, same bound). Long polls
//! (`Watch`) leave the owning shard as soon as their caller stops waiting (see
//! `cluster::router::serve_inbox`), so idle consumers do not pile them up.
use crate::runtime::ShardId;

pub struct Mesh<M> {
    senders: Vec<async_channel::Sender<M>>,
}

impl<M> Clone for Mesh<M> {
    fn clone(&self) -> Self {
        Mesh { senders: self.senders.clone() }
    }
}

impl<M> Mesh<M> {
    /// A mesh of `n` shards: the mesh (senders) and each shard's inbox.
    pub fn new(n: usize) -> (Mesh<M>, Vec<async_channel::Receiver<M>>) {
        let (senders, receivers) = (0..n).map(|_| async_channel::unbounded()).unzip();
        (Mesh { senders }, receivers)
    }

    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// Sends to `shard`'s inbox; fails only if that shard has stopped.
    pub fn send(&self, shard: ShardId, msg: M) -> Result<(), M> {
        match self.senders.get(usize::from(shard)) {
            Some(s) => s.try_send(msg).map_err(|e| e.into_inner()),
            None => Err(msg),
        }
    }
}
