//! Request decoding: one frame (the bytes after the length prefix) into header + body.
//!
//! Decoding works on `Bytes`, so byte fields (Produce `records` above all) come out as
//! slices of the frame, not copies. Admission is decided from the first 8 bytes, before
//! any body parsing: unknown or unserved APIs and versions never reach the codec.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::{decode_budget, Decodable};

use super::api_versions::{is_served, supported};

/// A decoded, admitted request.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub version: i16,
    pub body: RequestKind,
}

/// Why a frame is not a request we serve. What Kafka 4.1 does, and so the caller:
/// - `UnsupportedVersion` for ApiVersions: answer with
///   `api_versions::unsupported_version_response_v0(correlation_id)`.
/// - `UnsupportedVersion` for Produce v0-2 (advertised, then rejected) and any other API:
///   Kafka closes the connection (it cannot encode a response in a version it does not
///   know); do the same.
/// - `UnknownApiKey` (unknown to the codec, or an API we do not serve): close.
/// - `Malformed`: close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("unknown or unserved api key (correlation id {correlation_id})")]
    UnknownApiKey { correlation_id: i32 },
    #[error("{api_key:?} v{version} not supported (correlation id {correlation_id})")]
    UnsupportedVersion { api_key: ApiKey, version: i16, correlation_id: i32 },
    #[error("malformed request (correlation id {correlation_id:?}): {reason}")]
    Malformed { correlation_id: Option<i32>, reason: String },
}

impl RequestError {
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            RequestError::UnknownApiKey { correlation_id } | RequestError::UnsupportedVersion { correlation_id, .. } => Some(*correlation_id),
            RequestError::Malformed { correlation_id, .. } => *correlation_id,
        }
    }
}

/// What a request may decode to, per byte of its frame: its arrays' elements and unknown
/// tagged fields (strings and byte fields are slices of the frame). Real clients' requests
/// stay under 4x (a Metadata v12 topic: 19+ bytes on the wire, 72 in memory; a Fetch
/// partition ~3x); a frame of empty names or bare tags, up to ~40x, is refused as
/// malformed, so a 100 MiB frame cannot build more than 800 MiB (issue 28; Kafka's
/// KAFKA-14063 bounds array counts by the bytes left, which we also do).
pub const DECODE_AMPLIFICATION: usize = 8;
/// Besides: every request may decode to this much, whatever its size (a small request of
/// one-character topic names is fine).
pub const DECODE_SLACK_BYTES: usize = 1 << 20;

/// The decoded-memory budget of a frame of `frame_len` bytes.
pub fn decoded_memory_budget(frame_len: usize) -> usize {
    frame_len.saturating_mul(DECODE_AMPLIFICATION).saturating_add(DECODE_SLACK_BYTES)
}

/// Decode one request frame (without its 4-byte length prefix; bound it with
/// `frame::frame_len` first). Never panics; trailing bytes after the body are ignored, as Kafka does.
pub fn decode_request(frame: Bytes) -> Result<DecodedRequest, RequestError> {
    // Every request header starts api_key i16 | api_version i16 | correlation_id i32.
    let Some(fixed) = frame.get(..8) else {
        return Err(RequestError::Malformed { correlation_id: None, reason: format!("frame of {} bytes is shorter than a request header", frame.len()) });
    };
    let raw_key = i16::from_be_bytes([fixed[0], fixed[1]]);
    let version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);

    let Ok(api_key) = ApiKey::try_from(raw_key) else {
        return Err(RequestError::UnknownApiKey { correlation_id });
    };
    if supported(api_key).is_none() {
        return Err(RequestError::UnknownApiKey { correlation_id });
    }
    if !is_served(api_key, version) {
        return Err(RequestError::UnsupportedVersion { api_key, version, correlation_id });
    }

    let malformed = |reason: String| RequestError::Malformed { correlation_id: Some(correlation_id), reason };
    let budget = decoded_memory_budget(frame.len());
    let mut buf = frame;
    let header_version = api_key.request_header_version(version);
    let (header, body) = decode_budget::decode_with_budget(budget, || {
        let header = RequestHeader::decode(&mut buf, header_version).map_err(|e| malformed(format!("request header v{header_version}: {e:#}")))?;
        let body = RequestKind::decode(api_key, &mut buf, version).map_err(|e| malformed(format!("{e:#}")))?;
        Ok((header, body))
    })?;
    if buf.has_remaining() {
        // Kafka's parser ignores bytes after the body, and real clients send some
        // (librdkafka 2.16's Metadata v13 carries 3); so do we.
        tracing::debug!(api = ?api_key, version, trailing = buf.remaining(), "ignoring bytes after the request body");
    }
    Ok(DecodedRequest { header, api_key, version, body })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiVersionsRequest, FetchRequest, MetadataRequest, ProduceRequest, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

    /// A request frame body (no length prefix), as a client would send it.
    pub(crate) fn encode_req<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Bytes {
        let mut b = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("test-client")))
            .encode(&mut b, R::header_version(version))
            .unwrap();
        body.encode(&mut b, version).unwrap();
        b.freeze()
    }

    pub(crate) fn produce_request(records: Bytes) -> ProduceRequest {
        ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(records))])])
    }

    #[test]
    fn decodes_api_versions_v3() {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("x"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let f = encode_req(ApiKey::ApiVersions, 3, 11, &req);
        let d = decode_request(f).unwrap();
        assert_eq!(d.api_key, ApiKey::ApiVersions);
        assert_eq!(d.version, 3);
        assert_eq!(d.header.correlation_id, 11);
        assert_eq!(d.header.client_id.as_deref(), Some("test-client"));
        assert_eq!(d.body, RequestKind::ApiVersions(req));
    }

    #[test]
    fn produce_records_are_zero_copy() {
        let records = Bytes::from(vec![7u8; 300]);
        let f = encode_req(ApiKey::Produce, 9, 5, &produce_request(records.clone()));
        let frame_range = f.as_ptr() as usize..f.as_ptr() as usize + f.len();
        let d = decode_request(f).unwrap();
        let RequestKind::Produce(p) = d.body else { panic!("not produce") };
        let got = p.topic_data[0].partition_data[0].records.clone().unwrap();
        assert_eq!(got, records);
        assert!(frame_range.contains(&(got.as_ptr() as usize)), "records were copied");
    }

    #[test]
    fn admission_errors() {
        // unknown api key
        let mut f = encode_req(ApiKey::Metadata, 12, 3, &MetadataRequest::default()).to_vec();
        f[0..2].copy_from_slice(&999i16.to_be_bytes());
        assert_eq!(decode_request(Bytes::from(f)), Err(RequestError::UnknownApiKey { correlation_id: 3 }));
        // known to the codec, not served by us
        let f = encode_req(ApiKey::UpdateRaftVoter, 0, 4, &kafka_protocol::messages::UpdateRaftVoterRequest::default());
        assert_eq!(decode_request(f), Err(RequestError::UnknownApiKey { correlation_id: 4 }));
        // unsupported ApiVersions version: answerable, header not even needed
        let mut f = encode_req(ApiKey::ApiVersions, 3, 8, &ApiVersionsRequest::default()).to_vec();
        f[2..4].copy_from_slice(&9i16.to_be_bytes());
        assert_eq!(decode_request(Bytes::from(f)), Err(RequestError::UnsupportedVersion { api_key: ApiKey::ApiVersions, version: 9, correlation_id: 8 }));
        // Produce v2: advertised but rejected
        let mut f = encode_req(ApiKey::Produce, 3, 6, &produce_request(Bytes::new())).to_vec();
        f[2..4].copy_from_slice(&2i16.to_be_bytes());
        assert_eq!(decode_request(Bytes::from(f)), Err(RequestError::UnsupportedVersion { api_key: ApiKey::Produce, version: 2, correlation_id: 6 }));
        // Fetch v19: beyond what is served
        let mut f = encode_req(ApiKey::Fetch, 18, 2, &FetchRequest::default()).to_vec();
        f[2..4].copy_from_slice(&19i16.to_be_bytes());
        assert!(matches!(decode_request(Bytes::from(f)), Err(RequestError::UnsupportedVersion { version: 19, .. })));
        // UnregisterController: the codec knows it, this broker does not serve it
        let f = encode_req(ApiKey::UnregisterController, 0, 3, &kafka_protocol::messages::UnregisterControllerRequest::default());
        assert!(matches!(decode_request(f), Err(RequestError::UnknownApiKey { correlation_id: 3 })));
    }

    #[test]
    fn malformed_frames() {
        for n in 0..8 {
            assert!(matches!(decode_request(Bytes::from(vec![0u8; n])), Err(RequestError::Malformed { correlation_id: None, .. })));
        }
        let f = encode_req(ApiKey::Metadata, 12, 21, &MetadataRequest::default());
        // trailing bytes are ignored, as Kafka does
        let mut t = f.to_vec();
        t.push(0);
        assert!(decode_request(Bytes::from(t)).is_ok());
        // every truncation is an error with the correlation id once it is present
        for k in 0..f.len() {
            let e = decode_request(f.slice(..k)).unwrap_err();
            if k >= 8 {
                assert_eq!(e.correlation_id(), Some(21), "cut at {k}");
            }
        }
        assert!(decode_request(f).is_ok());
    }

    #[test]
    fn every_served_version_decodes_default_bodies() {
        // A default body of each served API and version must round-trip (where the codec
        // can encode defaults), proving header versions line up with bodies.
        use kafka_protocol::messages::*;
        fn check<R: Encodable + HeaderVersion + Default>(key: ApiKey) {
            let (lo, hi) = supported(key).unwrap();
            for v in lo.max(if key == ApiKey::Produce { 3 } else { lo })..=hi {
                let mut b = BytesMut::new();
                if R::default().encode(&mut b, v).is_err() {
                    continue;
                }
                let f = encode_req(key, v, 99, &R::default());
                let d = decode_request(f).unwrap_or_else(|e| panic!("{key:?} v{v}: {e}"));
                assert_eq!(d.version, v);
                assert_eq!(d.header.correlation_id, 99);
            }
        }
        check::<ProduceRequest>(ApiKey::Produce);
        check::<FetchRequest>(ApiKey::Fetch);
        check::<ListOffsetsRequest>(ApiKey::ListOffsets);
        check::<MetadataRequest>(ApiKey::Metadata);
        check::<ApiVersionsRequest>(ApiKey::ApiVersions);
        check::<CreateTopicsRequest>(ApiKey::CreateTopics);
        check::<DeleteTopicsRequest>(ApiKey::DeleteTopics);
        check::<DeleteRecordsRequest>(ApiKey::DeleteRecords);
        check::<InitProducerIdRequest>(ApiKey::InitProducerId);
        check::<DescribeConfigsRequest>(ApiKey::DescribeConfigs);
        check::<CreatePartitionsRequest>(ApiKey::CreatePartitions);
        check::<IncrementalAlterConfigsRequest>(ApiKey::IncrementalAlterConfigs);
        check::<AlterConfigsRequest>(ApiKey::AlterConfigs);
        check::<DescribeClusterRequest>(ApiKey::DescribeCluster);
        check::<DescribeQuorumRequest>(ApiKey::DescribeQuorum);
        check::<OffsetCommitRequest>(ApiKey::OffsetCommit);
        check::<OffsetFetchRequest>(ApiKey::OffsetFetch);
        check::<FindCoordinatorRequest>(ApiKey::FindCoordinator);
        check::<JoinGroupRequest>(ApiKey::JoinGroup);
        check::<HeartbeatRequest>(ApiKey::Heartbeat);
        check::<LeaveGroupRequest>(ApiKey::LeaveGroup);
        check::<SyncGroupRequest>(ApiKey::SyncGroup);
        check::<DescribeGroupsRequest>(ApiKey::DescribeGroups);
        check::<ListGroupsRequest>(ApiKey::ListGroups);
        check::<DeleteGroupsRequest>(ApiKey::DeleteGroups);
        check::<OffsetDeleteRequest>(ApiKey::OffsetDelete);
    }

    /// Regenerates the fuzz seed corpus: `cargo test --lib protocol::request::tests::write_fuzz_seeds -- --ignored`.
    #[test]
    #[ignore]
    fn write_fuzz_seeds() {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::records::Compression;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/request_decode");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, frame: Bytes| {
            let mut f = (frame.len() as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&frame);
            assert!(decode_request(frame).is_ok(), "{name}");
            std::fs::write(dir.join(name), f).unwrap();
        };
        let av = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("librdkafka"))
            .with_client_software_version(StrBytes::from_static_str("2.6.0"));
        write("api_versions_v3", encode_req(ApiKey::ApiVersions, 3, 1, &av));
        let md = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("orders"))))]))
            .with_allow_auto_topic_creation(true);
        write("metadata_v12", encode_req(ApiKey::Metadata, 12, 2, &md));
        let batch = crate::record::tests::make_batch(&[b"hello".to_vec(), b"world".to_vec()], Compression::None, -1, 1_700_000_000_000);
        write("produce_v9", encode_req(ApiKey::Produce, 9, 3, &produce_request(batch.freeze())));
        let batch = crate::record::tests::make_batch(&vec![b"zstd".to_vec(); 3], Compression::Zstd, 5, 1_700_000_000_000);
        write("produce_v9_zstd_idempotent", encode_req(ApiKey::Produce, 9, 4, &produce_request(batch.freeze())));
        let fetch = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(52_428_800)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![FetchPartition::default().with_partition(0).with_fetch_offset(0).with_partition_max_bytes(1_048_576)])]);
        write("fetch_v12", encode_req(ApiKey::Fetch, 12, 5, &fetch));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
        #[test]
        fn arbitrary_frames_never_panic(
            key in 0i16..80, version in -1i16..20, corr in proptest::prelude::any::<i32>(),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)
        ) {
            let mut f = Vec::with_capacity(8 + tail.len());
            f.extend_from_slice(&key.to_be_bytes());
            f.extend_from_slice(&version.to_be_bytes());
            f.extend_from_slice(&corr.to_be_bytes());
            f.extend_from_slice(&tail);
            let _ = decode_request(Bytes::from(f));
        }
    }
}
