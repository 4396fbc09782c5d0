//! A follower's connection to a leader broker: Kafka Fetch requests as a replica (Fetch
//! v15: `replica_state` names this broker, topics by id, diverging epochs) over one
//! connection (`peer_connection.rs`: secured as the inter-broker listener is) on the
//! fetcher's shard, one request at a time, as Kafka's
//! ReplicaFetcherThread does. The codecs are kafka-protocol's (a follower fetch is one
//! request per round, not a per-record hot path); record bytes stay in the `Bytes` the
//! response was read into, so appending them copies once, into the log's stage buffer.
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::FutureExt;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId as WireBrokerId, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use crate::cluster::image::BrokerMeta;
use crate::security::peer_security::PeerSecurity;

use super::peer_connection::{PeerConnection, PeerConnectionError};

/// The Fetch version followers send: the first with `replica_state` (KIP-903); v12+
/// carries diverging epochs, v13+ topic ids.
pub const REPLICA_FETCH_VERSION: i16 = 15;

/// Bytes a response may carry beyond its records' limit (headers, offsets, tags).
const RESPONSE_SLACK_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LeaderConnectionError {
    #[error("the leader: {0}")]
    Connection(#[from] PeerConnectionError),
    #[error("the leader did not answer within {0:?}")]
    Timeout(Duration),
    #[error("bad response from the leader: {0}")]
    Protocol(String),
}

/// One partition of a replica fetch, as the follower asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetch {
    pub topic_id: [u8; 16],
    pub partition: i32,
    /// The leader epoch this follower knows (the leader refuses a stale or future one).
    pub current_leader_epoch: i32,
    /// This follower's log end offset: where it wants data from, and what it tells the
    /// leader it has.
    pub fetch_offset: i64,
    /// The epoch of this follower's last batch (-1 for an empty log): the leader answers a
    /// diverging epoch when its own log disagrees.
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

/// What a replica fetch asks for as a whole.
#[derive(Clone, Copy, Debug)]
pub struct FetchShape {
    pub replica_id: i32,
    /// The follower process's broker epoch (KIP-903).
    pub replica_epoch: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
}

pub struct LeaderConnection {
    conn: PeerConnection,
    /// Largest response frame accepted (the request's `max_bytes` plus slack).
    max_response_bytes: usize,
    request_timeout: Duration,
}

impl LeaderConnection {
    pub async fn connect(
        leader: &BrokerMeta,
        security: &PeerSecurity,
        node_id: i32,
        max_bytes: i32,
        request_timeout: Duration,
    ) -> Result<LeaderConnection, LeaderConnectionError> {
        let conn = PeerConnection::connect(leader, security, format!("shardlog-replica-fetcher-{node_id}")).await?;
        Ok(LeaderConnection { conn, max_response_bytes: usize::try_from(max_bytes).unwrap_or(0) + RESPONSE_SLACK_BYTES, request_timeout })
    }

    /// The leader's address, for log lines.
    pub fn addr(&self) -> &str {
        self.conn.addr()
    }

    /// Sends one Fetch as a replica and waits for its response (at most the request
    /// timeout; a late answer fails the connection, which the fetcher then drops).
    pub async fn fetch(&mut self, shape: FetchShape, partitions: &[PartitionFetch]) -> Result<FetchResponse, LeaderConnectionError> {
        let correlation_id = self.conn.next_correlation_id();
        let frame = encode_fetch(correlation_id, self.conn.client_id(), shape, partitions)?;
        let timeout = self.request_timeout;
        let max = self.max_response_bytes;
        let exchange = async {
            self.conn.send(&frame).await?;
            let body = self.conn.read_frame(max).await?;
            decode_fetch_response(body, correlation_id)
        };
        futures::select! {
            r = exchange.fuse() => r,
            _ = glommio::timer::sleep(timeout).fuse() => Err(LeaderConnectionError::Timeout(timeout)),
        }
    }
}

/// The request frame (length prefix, header v2, body) for one replica fetch.
pub fn encode_fetch(correlation_id: i32, client_id: &StrBytes, shape: FetchShape, partitions: &[PartitionFetch]) -> Result<Bytes, LeaderConnectionError> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in partitions {
        let part = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(p.current_leader_epoch)
            .with_fetch_offset(p.fetch_offset)
            .with_last_fetched_epoch(p.last_fetched_epoch)
            .with_log_start_offset(p.log_start_offset)
            .with_partition_max_bytes(p.partition_max_bytes);
        match topics.last_mut() {
            Some(t) if t.topic_id.as_bytes() == &p.topic_id => t.partitions.push(part),
            _ => topics.push(FetchTopic::default().with_topic_id(uuid::Uuid::from_bytes(p.topic_id)).with_partitions(vec![part])),
        }
    }
    let req = FetchRequest::default()
        .with_replica_state(ReplicaState::default().with_replica_id(WireBrokerId(shape.replica_id)).with_replica_epoch(shape.replica_epoch))
        .with_max_wait_ms(shape.max_wait_ms)
        .with_min_bytes(shape.min_bytes)
        .with_max_bytes(shape.max_bytes)
        .with_isolation_level(0)
        // No fetch session (KIP-227): every fetch is a full one.
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(REPLICA_FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let mut body = BytesMut::new();
    let encoded = header.encode(&mut body, FetchRequest::header_version(REPLICA_FETCH_VERSION)).and_then(|_| req.encode(&mut body, REPLICA_FETCH_VERSION));
    encoded.map_err(|e| LeaderConnectionError::Protocol(format!("cannot encode the fetch: {e}")))?;
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    Ok(frame.freeze())
}

/// Decodes a Fetch response body (after the length prefix) to the request `correlation_id`.
pub fn decode_fetch_response(mut body: Bytes, correlation_id: i32) -> Result<FetchResponse, LeaderConnectionError> {
    let bad = |m: String| LeaderConnectionError::Protocol(m);
    if body.remaining() < 5 {
        return Err(bad("response shorter than its header".into()));
    }
    let got = body.get_i32();
    if got != correlation_id {
        return Err(bad(format!("correlation id {got}, expected {correlation_id}")));
    }
    // Response header v1 (flexible versions): a tagged-field section, empty from shardlog.
    let tags = body.get_u8();
    if tags != 0 {
        return Err(bad(format!("unexpected {tags} response header tagged fields")));
    }
    FetchResponse::decode(&mut body, REPLICA_FETCH_VERSION).map_err(|e| bad(format!("cannot decode the fetch response: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::HeaderVersion;

    #[test]
    fn the_request_decodes_as_a_replica_fetch_with_every_field() {
        let parts = vec![
            PartitionFetch {
                topic_id: [1; 16],
                partition: 0,
                current_leader_epoch: 3,
                fetch_offset: 10,
                last_fetched_epoch: 2,
                log_start_offset: 0,
                partition_max_bytes: 1 << 20,
            },
            PartitionFetch {
                topic_id: [1; 16],
                partition: 2,
                current_leader_epoch: 3,
                fetch_offset: 7,
                last_fetched_epoch: -1,
                log_start_offset: 5,
                partition_max_bytes: 1 << 20,
            },
            PartitionFetch {
                topic_id: [2; 16],
                partition: 1,
                current_leader_epoch: 0,
                fetch_offset: 0,
                last_fetched_epoch: -1,
                log_start_offset: 0,
                partition_max_bytes: 100,
            },
        ];
        let shape = FetchShape { replica_id: 7, replica_epoch: 99, max_wait_ms: 500, min_bytes: 1, max_bytes: 10 << 20 };
        let mut frame = encode_fetch(42, &StrBytes::from_static_str("t"), shape, &parts).unwrap();
        let len = frame.get_i32();
        assert_eq!(len as usize, frame.remaining());
        let header = RequestHeader::decode(&mut frame, FetchRequest::header_version(REPLICA_FETCH_VERSION)).unwrap();
        assert_eq!((header.request_api_key, header.request_api_version, header.correlation_id), (ApiKey::Fetch as i16, 15, 42));
        let req = FetchRequest::decode(&mut frame, REPLICA_FETCH_VERSION).unwrap();
        assert_eq!((req.replica_state.replica_id.0, req.replica_state.replica_epoch), (7, 99));
        assert_eq!((req.max_wait_ms, req.min_bytes, req.max_bytes), (500, 1, 10 << 20));
        assert_eq!(req.topics.len(), 2, "partitions of one topic travel together");
        assert_eq!(req.topics[0].topic_id.as_bytes(), &[1; 16]);
        let p = &req.topics[0].partitions[1];
        assert_eq!((p.partition, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, p.current_leader_epoch), (2, 7, -1, 5, 3));
        assert_eq!(req.topics[1].partitions[0].partition_max_bytes, 100);
        let _ = FetchResponse::header_version(REPLICA_FETCH_VERSION);
    }

    #[test]
    fn a_response_for_another_request_or_truncated_is_refused() {
        let mut b = BytesMut::new();
        b.put_i32(9);
        b.put_u8(0);
        assert!(matches!(decode_fetch_response(b.clone().freeze(), 8), Err(LeaderConnectionError::Protocol(_))));
        // The right correlation id, then a body cut short.
        assert!(matches!(decode_fetch_response(b.freeze(), 9), Err(LeaderConnectionError::Protocol(_))));
        assert!(decode_fetch_response(Bytes::from_static(&[0, 0]), 0).is_err());
    }
}
