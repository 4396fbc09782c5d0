//! The controller-to-controller wire format: raft RPCs and forwarded client requests over
//! TCP on the controller listener.
//!
//! One request frame, then one response frame, on a connection, in turn (a client keeps a
//! connection per peer and sends the next request after the answer). Each frame is the
//! controller's record framing (`frame.rs`: magic, version, length, CRC-32C) around a
//! serde_json payload: openraft's messages are serde types, metadata RPCs are rare and
//! small, and JSON keeps them readable in a packet capture; not a hot path. The length
//! is checked against `MAX_RPC_FRAME` before anything is allocated, the payload buffer
//! grows only as its bytes arrive, and the frames being read at once, over every
//! connection of this process, share `MAX_RPC_BYTES_IN_FLIGHT` (a reader waits for room):
//! up to 256 connections claiming the largest frame each cannot make a node hold 64 GiB.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};

use crate::cluster::image::{BrokerId, BrokerMeta, ConfigResource, PartitionMeta, TopicMeta};

use super::election::{ElectionType, TopicElection};
use super::frame::{self, FrameError, HEADER_LEN};
use super::quorum_info::QuorumInfo;
use super::reassignment::{PartitionReassignment, TopicReassignmentResult};
use super::types::{ControllerTypes, QuotaAlteration, ScramUpsertion, SnapshotMeta, Vote};
use super::{ConfigOp, ControllerError};
use crate::security::acl::{AclBinding, AclFilter};
use crate::security::scram::ScramMechanism;

const RPC_MAGIC: u32 = u32::from_le_bytes(*b"SLCR");
const RPC_VERSION: u16 = 1;
/// Largest RPC frame either side reads; a longer length from the network is refused
/// before allocation. Bounds a snapshot sent to a lagging follower (base64 in JSON), so it
/// bounds the metadata a cluster may hold: far above what 100k partitions need.
pub const MAX_RPC_FRAME: usize = 256 * 1024 * 1024;

/// Payload bytes of the frames this process reads at once; at least `MAX_RPC_FRAME`, so
/// the largest frame always fits when it reads alone.
pub const MAX_RPC_BYTES_IN_FLIGHT: usize = 2 * MAX_RPC_FRAME;

static FRAME_BUDGET: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_RPC_BYTES_IN_FLIGHT);

/// The payload buffer starts at most this large and grows with the bytes received.
const FIRST_READ_CAPACITY: usize = 64 * 1024;

/// A client request to the controller, as the broker side makes it. Forwarded as is from
/// a controller that does not lead to the one that does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    CreateTopic {
        name: String,
        num_partitions: i32,
        replication_factor: i16,
        /// Explicit replica assignment (broker ids per partition), or empty.
        #[serde(default)]
        assignments: Vec<Vec<BrokerId>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total_count: i32,
        /// Explicit replica assignment of the new partitions (broker ids); empty = placed.
        assignments: Vec<Vec<BrokerId>>,
        validate_only: bool,
    },
    AlterConfigs {
        name: String,
        ops: Vec<ConfigOp>,
        /// Legacy AlterConfigs: the ops (all `Set`) replace every override.
        replace: bool,
        validate_only: bool,
    },
    AlterResourceConfigs {
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
        validate_only: bool,
    },
    AllocateProducerIds {
        count: i64,
    },
    /// DescribeQuorum: read-only, answered by the leader (it alone knows the followers'
    /// progress).
    DescribeQuorum,
    /// A broker's heartbeat, carrying its registration: the leader notes it alive and
    /// registers or unfences it when the image says otherwise (Kafka's
    /// BrokerRegistration and BrokerHeartbeat in one idempotent request).
    BrokerHeartbeat {
        broker: BrokerMeta,
        /// The incarnation whose clean shutdown this process found recorded
        /// (`clean_shutdown.rs`; None: a first start or an unclean shutdown).
        #[serde(default)]
        clean_shutdown_of: Option<[u8; 16]>,
    },
    /// A broker process is stopping (SIGTERM): fence it now, so its leaderships move and
    /// it leaves the ISRs while it still serves (Kafka's BrokerHeartbeat with
    /// WantShutDown, a controlled shutdown). Its later heartbeats are ignored.
    ControlledShutdown {
        broker: BrokerId,
        incarnation: [u8; 16],
    },
    /// A node outside the voters asks to follow the metadata log as an observer (a raft
    /// learner the leader replicates to at `addr`, its controller listener). Idempotent.
    AddObserver {
        id: u64,
        addr: String,
        /// Its metadata dir's directory id (KIP-853); zero from nodes before it was sent.
        #[serde(default)]
        directory_id: [u8; 16],
        /// It has the controller role, so it may later be made a voter.
        #[serde(default)]
        controller: bool,
    },
    /// AddRaftVoter (KIP-853): makes the observer `id` with `directory_id` a voter, reached
    /// at `addr` (its controller listener; empty = the address it joined with).
    AddVoter {
        id: u64,
        directory_id: [u8; 16],
        addr: String,
    },
    /// RemoveRaftVoter (KIP-853).
    RemoveVoter {
        id: u64,
        directory_id: [u8; 16],
    },
    /// UpdateRaftVoter (KIP-853): a voter tells the leader its controller listener and
    /// directory id (sent by the voter itself at start when the membership records
    /// another address, or no directory id).
    UpdateVoter {
        id: u64,
        directory_id: [u8; 16],
        addr: String,
    },
    /// UnregisterBroker: removes a broker's registration (as if fenced, then forgotten);
    /// an observer whose broker is fenced is removed from the quorum's membership too.
    UnregisterBroker {
        broker: BrokerId,
    },
    /// ElectLeaders: `topics` None = every partition.
    ElectLeaders {
        election: ElectionType,
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
    /// AlterPartitionReassignments: per topic, per partition, the target brokers (None =
    /// cancel).
    AlterPartitionReassignments {
        topics: Vec<(String, Vec<PartitionReassignment>)>,
        allow_replication_factor_change: bool,
    },
    /// A partition leader's ISR change (Kafka's AlterPartition, one partition).
    AlterPartition {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<BrokerId>,
        #[serde(default)]
        new_isr_epochs: Vec<i64>,
    },
    /// AlterUserScramCredentials, checked and derived by the receiving broker; the leader
    /// refuses deletions of credentials that do not exist and writes the rest atomically.
    AlterScramCredentials {
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, ScramMechanism)>,
    },
    /// CreateAcls, bindings checked by the receiving broker.
    CreateAcls {
        acls: Vec<AclBinding>,
    },
    /// DeleteAcls: the leader removes every binding any filter matches, in one record.
    DeleteAcls {
        filters: Vec<AclFilter>,
    },
    /// UpdateFeatures: checked by the quorum leader against its image (all or none).
    UpdateFeatures {
        updates: Vec<crate::cluster::features::FeatureUpdate>,
        validate_only: bool,
    },
    /// AlterClientQuotas, validated by the receiving broker.
    AlterClientQuotas {
        entries: Vec<QuotaAlteration>,
    },
    /// Create/Renew/ExpireDelegationToken, decided by the receiving broker (it knows the
    /// secret the requests name tokens by): the token as it now is.
    PutDelegationToken {
        token: crate::security::delegation_token::DelegationToken,
    },
    /// ExpireDelegationToken with a negative period: the token goes now.
    RemoveDelegationToken {
        token_id: String,
    },
    /// A partition leader's remote segment record (tiered storage), fenced on apply.
    RemoteLogSegment {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        segment: crate::remote::segment_metadata::RemoteLogSegmentMetadata,
        expected: Option<crate::remote::segment_metadata::RemoteSegmentState>,
    },
    /// A tiered partition's leader moved its log start offset into remote storage.
    RemoteLogStartOffset {
        topic_id: [u8; 16],
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        offset: i64,
    },
}

/// The answer to a `ClientRequest`, one variant per kind of result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    Topic(TopicMeta),
    TopicId([u8; 16]),
    Done,
    FirstProducerId(i64),
    Quorum(QuorumInfo),
    Elections(Vec<TopicElection>),
    /// AlterPartitionReassignments: the answer per partition, in request order.
    Reassignments(Vec<TopicReassignmentResult>),
    /// The partition as committed (AlterPartition).
    Partition(PartitionMeta),
    /// AlterScramCredentials: the deletions refused because no such credential exists
    /// (everything else was written).
    MissingScramCredentials(Vec<(String, ScramMechanism)>),
    /// DeleteAcls: per filter, in request order, the bindings it removed.
    DeletedAcls(Vec<Vec<AclBinding>>),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<ControllerTypes>),
    Vote(VoteRequest<ControllerTypes>),
    /// The snapshot file's bytes travel base64-encoded (JSON has no bytes type).
    InstallSnapshot {
        vote: Vote,
        meta: SnapshotMeta,
        data_base64: String,
    },
    /// A client request forwarded to the node its sender believes leads. The receiver
    /// executes it only if it leads, and never forwards it again (no forwarding loops).
    Client(ClientRequest),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(AppendEntriesResponse<ControllerTypes>),
    Vote(VoteResponse<ControllerTypes>),
    InstallSnapshot(SnapshotResponse<ControllerTypes>),
    /// The leader's answer to a forwarded request, with the index its state machine had
    /// applied when it answered: the forwarding node waits until it has applied that far
    /// too, so the client's next request to it sees the change (as on a single node).
    Client {
        result: Result<ClientReply, ControllerError>,
        applied_index: Option<u64>,
    },
    /// The receiver could not handle the request (raft stopped, bad payload).
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    #[error("payload: {0}")]
    Payload(String),
}

/// Frames `msg` (JSON inside the controller's record framing).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, RpcError> {
    let payload = serde_json::to_vec(msg).map_err(|e| RpcError::Payload(e.to_string()))?;
    if payload.len() > MAX_RPC_FRAME {
        return Err(RpcError::Frame(FrameError::TooLong { len: payload.len(), limit: MAX_RPC_FRAME }));
    }
    Ok(frame::encode(RPC_MAGIC, RPC_VERSION, &payload))
}

/// Decodes one whole frame (header and payload) into a message.
pub fn decode<T: for<'de> Deserialize<'de>>(buf: &[u8]) -> Result<T, RpcError> {
    let (payload, used) = frame::decode(buf, RPC_MAGIC, RPC_VERSION, MAX_RPC_FRAME)?;
    if used != buf.len() {
        return Err(RpcError::Payload(format!("{} bytes after the frame", buf.len() - used)));
    }
    serde_json::from_slice(payload).map_err(|e| RpcError::Payload(e.to_string()))
}

pub async fn write_msg<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, msg: &T) -> Result<(), RpcError> {
    let bytes = encode(msg)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame; the header's magic, version and length are checked before the
/// payload buffer is allocated. `Ok(None)` = the peer closed the connection between frames.
pub async fn read_msg<R: AsyncRead + Unpin, T: for<'de> Deserialize<'de>>(r: &mut R) -> Result<Option<T>, RpcError> {
    let mut header = [0u8; HEADER_LEN];
    // A close before the first byte is a clean end; a close inside a frame is an error.
    if r.read(&mut header[..1]).await? == 0 {
        return Ok(None);
    }
    r.read_exact(&mut header[1..]).await?;
    let len = frame::payload_len(&header, RPC_MAGIC, RPC_VERSION, MAX_RPC_FRAME)?;
    const _: () = assert!(MAX_RPC_BYTES_IN_FLIGHT >= MAX_RPC_FRAME && MAX_RPC_FRAME <= u32::MAX as usize);
    // Held until the frame is decoded; `len <= MAX_RPC_FRAME` fits in a u32 (above).
    let _budget = FRAME_BUDGET.acquire_many(len as u32).await.map_err(|_| RpcError::Io(std::io::Error::other("RPC frame budget closed")))?;
    let mut buf = Vec::with_capacity(HEADER_LEN + len.min(FIRST_READ_CAPACITY));
    buf.extend_from_slice(&header);
    let got = r.take(len as u64).read_to_end(&mut buf).await?;
    if got < len {
        return Err(RpcError::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("RPC frame cut after {got} of {len} bytes"))));
    }
    decode(&buf).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(name: &str) -> RpcRequest {
        RpcRequest::Client(ClientRequest::CreateTopic {
            name: name.into(),
            num_partitions: 3,
            replication_factor: -1,
            assignments: Vec::new(),
            configs: BTreeMap::from([("cleanup.policy".into(), "compact".into())]),
            validate_only: false,
        })
    }

    #[test]
    fn roundtrip() {
        let bytes = encode(&create("t")).unwrap();
        match decode::<RpcRequest>(&bytes).unwrap() {
            RpcRequest::Client(c) => assert_eq!(
                c,
                match create("t") {
                    RpcRequest::Client(c) => c,
                    _ => unreachable!(),
                }
            ),
            other => panic!("{other:?}"),
        }
        let resp = RpcResponse::Client { result: Err(ControllerError::NotController("x".into())), applied_index: Some(7) };
        let back: RpcResponse = decode(&encode(&resp).unwrap()).unwrap();
        assert!(matches!(back, RpcResponse::Client { result: Err(ControllerError::NotController(m)), applied_index: Some(7) } if m == "x"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stream_roundtrip_and_clean_eof() {
        let mut wire = Vec::new();
        write_msg(&mut wire, &create("a")).await.unwrap();
        write_msg(&mut wire, &create("b")).await.unwrap();
        let mut r = &wire[..];
        assert!(read_msg::<_, RpcRequest>(&mut r).await.unwrap().is_some());
        assert!(read_msg::<_, RpcRequest>(&mut r).await.unwrap().is_some());
        assert!(read_msg::<_, RpcRequest>(&mut r).await.unwrap().is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn oversized_length_is_refused_before_allocation() {
        let mut wire = encode(&create("a")).unwrap();
        // Claim a 4 GiB payload: refused from the header alone, nothing allocated.
        wire[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut r = &wire[..];
        let err = read_msg::<_, RpcRequest>(&mut r).await.unwrap_err();
        assert!(matches!(err, RpcError::Frame(FrameError::TooLong { .. })), "{err}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_frame_that_claims_the_maximum_but_stops_costs_only_what_arrived() {
        let mut wire = encode(&create("a")).unwrap();
        let sent = wire.len() - HEADER_LEN;
        // Claim the largest frame, send only the small payload, then close.
        wire[6..10].copy_from_slice(&(MAX_RPC_FRAME as u32).to_le_bytes());
        let mut r = &wire[..];
        let err = read_msg::<_, RpcRequest>(&mut r).await.unwrap_err();
        assert!(err.to_string().contains(&format!("cut after {sent} of {MAX_RPC_FRAME} bytes")), "{err}");
        // Its share of the budget came back when the read ended (other tests of this
        // process may be reading small frames meanwhile).
        assert!(FRAME_BUDGET.available_permits() > MAX_RPC_BYTES_IN_FLIGHT - (1 << 20));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn malformed_input_is_an_error_never_a_panic() {
        let good = encode(&create("a")).unwrap();
        // Every truncation, every single-byte flip, and seeded random garbage.
        for cut in 0..good.len() {
            let mut r = &good[..cut];
            let res = read_msg::<_, RpcRequest>(&mut r).await;
            assert!(cut == 0 && matches!(res, Ok(None)) || res.is_err(), "cut {cut}");
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            let mut r = &bad[..];
            assert!(read_msg::<_, RpcRequest>(&mut r).await.is_err(), "flip at {i}");
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let len = (x % 64) as usize;
            let mut junk = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                junk.push(x as u8);
            }
            let mut r = &junk[..];
            let _ = read_msg::<_, RpcRequest>(&mut r).await;
            // A well-framed payload that is not a valid message is an error too.
            let framed = frame::encode(RPC_MAGIC, RPC_VERSION, &junk);
            assert!(decode::<RpcRequest>(&framed).is_err());
        }
    }
}
