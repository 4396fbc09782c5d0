//! Cross-shard channels: every shard has one inbox; any shard (or the controller side)
//! holds a sender to each. Unbounded on purpose: a full mesh of bounded channels can
//! deadlock when shards await sends to each other in a cycle. What bounds an inbox
//! instead: a message carries one request's operations on the receiving shard's
//! partitions (at most one message per request and shard, see `cluster::router`), and
//! its sender awaits the reply, so an inbox holds at most connections
//! (max_connections_per_shard x shards) x max_inflight_requests_per_connection messages,
//! plus the group coordinator's own operations (one per group request, same bound).
//! Long polls (`Watch`) leave the owning shard as soon as their caller stops waiting (see
//! `cluster::router::serve_inbox`), so idle consumers do not pile them up.
use std::cell::Cell;

use crate::runtime::ShardId;

/// One shard's handle on the mesh (each shard holds its own clone).
pub struct Mesh<M> {
    senders: Vec<async_channel::Sender<M>>,
    /// Messages sent through this handle: a plain counter, since a handle stays on its
    /// shard (tests read it to count the messages a request costs).
    sent: Cell<u64>,
}

impl<M> Clone for Mesh<M> {
    /// A handle for another shard: same inboxes, its own count.
    fn clone(&self) -> Self {
        Mesh { senders: self.senders.clone(), sent: Cell::new(0) }
    }
}

impl<M> Mesh<M> {
    /// A mesh of `n` shards: the mesh (senders) and each shard's inbox.
    pub fn new(n: usize) -> (Mesh<M>, Vec<async_channel::Receiver<M>>) {
        let (senders, receivers) = (0..n).map(|_| async_channel::unbounded()).unzip();
        (Mesh { senders, sent: Cell::new(0) }, receivers)
    }

    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// Messages sent through this handle so far.
    pub fn sent(&self) -> u64 {
        self.sent.get()
    }

    /// Sends to `shard`'s inbox; fails only if that shard has stopped.
    pub fn send(&self, shard: ShardId, msg: M) -> Result<(), M> {
        let Some(s) = self.senders.get(usize::from(shard)) else { return Err(msg) };
        s.try_send(msg).map_err(|e| e.into_inner())?;
        self.sent.set(self.sent.get() + 1);
        Ok(())
    }
}
