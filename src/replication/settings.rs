//! What a replica fetcher needs from the broker config (Kafka's replica.fetch.* keys).
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::remote::store::RemoteStore;
use crate::security::peer_security::PeerSecurity;

#[derive(Clone, Debug)]
pub struct FetcherSettings {
    /// This broker's id, sent as the fetch's replica id.
    pub node_id: i32,
    /// This process's broker epoch, sent as the fetch's replica epoch (KIP-903).
    pub broker_epoch: i64,
    /// replica.fetch.wait.max.ms: how long the leader may hold a fetch with no new data.
    pub max_wait_ms: i32,
    /// replica.fetch.max.bytes: per partition (the first batch may exceed it).
    pub partition_max_bytes: i32,
    /// replica.fetch.response.max.bytes: per fetch.
    pub response_max_bytes: i32,
    /// replica.fetch.backoff.ms: after an error, before the partition (or connection) is
    /// tried again.
    pub backoff: Duration,
    /// How long a fetch may take before the connection is dropped (the leader holds it up
    /// to `max_wait_ms`; Kafka's replica.socket.timeout.ms is 30 s).
    pub request_timeout: Duration,
    /// How to reach and authenticate to a leader: its inter-broker listener's security.
    pub security: Arc<PeerSecurity>,
    /// The remote store when tiered storage is on: a partition whose leader answers
    /// OFFSET_MOVED_TO_TIERED_STORAGE restarts from the remote log's end
    /// (`tiered_start.rs`); without it, it waits.
    pub remote_store: Option<RemoteStore>,
}

impl FetcherSettings {
    pub fn from_config(c: &Config, broker_epoch: i64, security: Arc<PeerSecurity>, remote_store: Option<RemoteStore>) -> FetcherSettings {
        FetcherSettings {
            node_id: c.node_id,
            broker_epoch,
            max_wait_ms: c.replica_fetch_wait_max_ms,
            partition_max_bytes: c.replica_fetch_max_bytes,
            response_max_bytes: c.replica_fetch_response_max_bytes,
            backoff: Duration::from_millis(c.replica_fetch_backoff_ms),
            request_timeout: Duration::from_millis(c.replica_socket_timeout_ms),
            security,
            remote_store,
        }
    }
}
