//! Cross-shard channels: every shard has one inbox; any shard holds a sender to each.
//!
//! Bounded, with backpressure: an inbox holds at most `capacity` messages not yet taken
//! by its shard; a sender finding it full waits for room (its request waits with it, and
//! its connection stops reading once its in-flight requests are all waiting). Waiting
//! cannot deadlock: the receiving side (`cluster::router::serve_inbox`) only takes a
//! message and spawns its work, it never waits on another inbox, so room comes back
//! whenever the receiving shard runs.
//!
//! What the inbox bound does not cover is the work already taken: each taken message runs
//! as a task until it replies. That is bounded by what sends it: a message carries one
//! request's operations on the receiving shard's partitions (at most one message per
//! request and shard, see `cluster::router`), its sender awaits the reply, and requests
//! are bounded per connection (max_inflight_requests_per_connection) and in bytes per
//! shard (queued_max_request_bytes). Long polls (`Watch`) leave the owning shard as soon
//! as their caller stops waiting, so idle consumers do not pile them up.
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

/// How a message reached its inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// There was room.
    Queued,
    /// The inbox was full: the sender waited for room.
    Waited,
}

impl<M> Mesh<M> {
    /// A mesh of `n` shards whose inboxes hold `capacity` messages each (at least 1): the
    /// mesh (senders) and each shard's inbox.
    pub fn new(n: usize, capacity: usize) -> (Mesh<M>, Vec<async_channel::Receiver<M>>) {
        let (senders, receivers) = (0..n).map(|_| async_channel::bounded(capacity.max(1))).unzip();
        (Mesh { senders, sent: Cell::new(0) }, receivers)
    }

    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// Messages sent through this handle so far.
    pub fn sent(&self) -> u64 {
        self.sent.get()
    }

    /// Sends to `shard`'s inbox, waiting for room when it is full; fails only if that
    /// shard has stopped. The first attempt is made at the call, not at the first poll:
    /// a caller that also runs work of its own sends before starting it, so the other
    /// shard starts at once.
    pub fn send(&self, shard: ShardId, msg: M) -> impl std::future::Future<Output = Result<Sent, M>> + '_ {
        let first = match self.senders.get(usize::from(shard)) {
            None => Err(async_channel::TrySendError::Closed(msg)),
            Some(s) => s.try_send(msg),
        };
        async move {
            let how = match first {
                Ok(()) => Sent::Queued,
                Err(async_channel::TrySendError::Closed(msg)) => return Err(msg),
                Err(async_channel::TrySendError::Full(msg)) => {
                    self.senders[usize::from(shard)].send(msg).await.map_err(|e| e.into_inner())?;
                    Sent::Waited
                }
            };
            self.sent.set(self.sent.get() + 1);
            Ok(how)
        }
    }
}
