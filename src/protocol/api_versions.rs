//! The APIs and versions this broker serves, written out by hand.
//!
//! Not derived from `ApiKey::valid_versions()`: that reflects what the codec can parse,
//! which over-advertises (OffsetCommit 10, OffsetFetch 10, InitProducerId 6, Fetch 18,
//! DescribeCluster 2 are in kafka-protocol 0.18 but are not served here).
//!
//! Ranges follow Apache Kafka 4.1. Every range is inside what kafka-protocol 0.18 decodes
//! (checked by `table_within_codec` below) except Produce v0-2, which Kafka 4.1 advertises
//! (librdkafka < 2.11.1 disables compression unless Produce v0 is listed, KAFKA-18659) and
//! then rejects with UNSUPPORTED_VERSION; the codec cannot parse them anyway.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::{ApiVersion, SupportedFeatureKey};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::ErrorCode;

/// `(api, min, max)` served. To enable an API add (or uncomment) one line; the
/// ApiVersions response, request admission and the tests all read this table.
const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 13), // v0-2 advertised but rejected, see produce_version_rejected
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    // Group APIs (Kafka 4.1 ranges) are served by src/group/.
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    // ACLs are off (no authorizer): SECURITY_DISABLED, as Kafka without one.
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    // KIP-848 consumer groups, served by src/group/consumer/.
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
];

/// Kafka 4.1 ranges of the group APIs, kept here so the codec check covers them before
/// they are switched on.
#[cfg(test)]
const GROUP_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
];

/// The `(min, max)` versions we advertise for `api_key`, or `None` if not served.
pub fn supported(api_key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().find(|(k, _, _)| *k == api_key).map(|&(_, lo, hi)| (lo, hi))
}

/// Whether a request of this API and version is served (advertised and not rejected).
pub fn is_served(api_key: ApiKey, version: i16) -> bool {
    match supported(api_key) {
        Some((lo, hi)) => {
            (lo..=hi).contains(&version)
                && !(api_key == ApiKey::Produce && produce_version_rejected(version))
        }
        None => false,
    }
}

/// Produce v0-2 are advertised (for librdkafka) but answered with UNSUPPORTED_VERSION,
/// as Kafka 4.1 does; they would also need message format v0/v1.
pub fn produce_version_rejected(version: i16) -> bool {
    version < 3
}

/// The ApiVersions response body for a request of `version` (a supported one).
///
/// Supported features: Kafka always lists `metadata.version` (4.1 brokers: levels 7..=27,
/// 3.3-IV3..4.1-IV1). Finalized features are left empty (epoch -1) on purpose: clients
/// then stay on transaction version 0, which is what this broker implements. KIP-848
/// consumer groups are served to clients that ask for them (`group.protocol=consumer`
/// checks ConsumerGroupHeartbeat in this table); `group.version` is not listed.
pub fn api_versions_response(version: i16) -> ApiVersionsResponse {
    let api_keys = SUPPORTED
        .iter()
        .map(|&(k, lo, hi)| {
            ApiVersion::default().with_api_key(k as i16).with_min_version(lo).with_max_version(hi)
        })
        .collect();
    let mut resp = ApiVersionsResponse::default()
        .with_error_code(ErrorCode::NONE.code())
        .with_api_keys(api_keys)
        .with_throttle_time_ms(0);
    if version >= 3 {
        resp = resp
            .with_supported_features(vec![SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str("metadata.version"))
                .with_min_version(7)
                .with_max_version(27)])
            .with_finalized_features_epoch(-1)
            .with_finalized_features(Vec::new());
    }
    resp
}

/// The whole frame (length, header v0, ApiVersions v0 body) answering an ApiVersions
/// request whose version we do not serve: error UNSUPPORTED_VERSION and our ApiVersions
/// range, so the client retries with a version we know (KIP-511 behaviour).
pub fn unsupported_version_response_v0(correlation_id: i32) -> BytesMut {
    let (lo, hi) = supported(ApiKey::ApiVersions).unwrap_or((0, 0));
    // Written by hand: 4 + 4 + 2 + 4 + 6 bytes, cannot fail.
    let mut buf = BytesMut::with_capacity(20);
    buf.put_i32(16); // correlation id + error + array length + one entry
    buf.put_i32(correlation_id);
    buf.put_i16(ErrorCode::UNSUPPORTED_VERSION.code());
    buf.put_i32(1);
    buf.put_i16(ApiKey::ApiVersions as i16);
    buf.put_i16(lo);
    buf.put_i16(hi);
    debug_assert_eq!(buf.len(), 20);
    buf
}

/// Size check helper used by tests: the encoded response for `version`.
#[cfg(test)]
fn encode_body(version: i16) -> bytes::Bytes {
    use kafka_protocol::protocol::Encodable;
    let mut b = BytesMut::new();
    api_versions_response(version).encode(&mut b, version).unwrap();
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn table_within_codec() {
        for &(k, lo, hi) in SUPPORTED.iter().chain(GROUP_APIS) {
            let codec = k.valid_versions();
            let lo = if k == ApiKey::Produce { 3 } else { lo };
            assert!(codec.min <= lo && hi <= codec.max, "{k:?} {lo}-{hi} vs codec {codec}");
        }
    }

    #[test]
    fn table_sorted_and_unique() {
        let keys: Vec<i16> = SUPPORTED.iter().map(|(k, _, _)| *k as i16).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn brief_ranges() {
        assert_eq!(supported(ApiKey::Produce), Some((0, 13)));
        assert_eq!(supported(ApiKey::Fetch), Some((4, 17)));
        assert_eq!(supported(ApiKey::InitProducerId), Some((0, 5)));
        assert_eq!(supported(ApiKey::JoinGroup), Some((0, 9)));
        assert_eq!(supported(ApiKey::OffsetCommit), Some((2, 9)));
        assert!(produce_version_rejected(2) && !produce_version_rejected(3));
        assert!(!is_served(ApiKey::Produce, 2));
        assert!(is_served(ApiKey::Produce, 3));
        assert!(!is_served(ApiKey::Fetch, 18));
        assert!(is_served(ApiKey::OffsetCommit, 8));
        assert!(!is_served(ApiKey::OffsetCommit, 10) && !is_served(ApiKey::OffsetFetch, 10));
        assert_eq!(supported(ApiKey::ConsumerGroupHeartbeat), Some((0, 1)));
        assert_eq!(supported(ApiKey::ConsumerGroupDescribe), Some((0, 1)));
    }

    #[test]
    fn response_roundtrips_every_version() {
        for v in 0..=4 {
            let mut b = encode_body(v);
            let r = ApiVersionsResponse::decode(&mut b, v).unwrap();
            assert!(b.is_empty());
            assert_eq!(r.api_keys.len(), SUPPORTED.len());
            let p = r.api_keys.iter().find(|a| a.api_key == 0).unwrap();
            assert_eq!((p.min_version, p.max_version), (0, 13));
            if v >= 3 {
                assert_eq!(r.supported_features.len(), 1);
                assert_eq!(r.finalized_features_epoch, -1);
            }
        }
    }

    #[test]
    fn unsupported_fallback_decodes_as_v0() {
        let mut f = unsupported_version_response_v0(1234).freeze();
        let len = f.get_i32() as usize;
        assert_eq!(len, f.len());
        let h = ResponseHeader::decode(&mut f, 0).unwrap();
        assert_eq!(h.correlation_id, 1234);
        let r = ApiVersionsResponse::decode(&mut f, 0).unwrap();
        assert!(f.is_empty());
        assert_eq!(r.error_code, 35);
        assert_eq!(r.api_keys.len(), 1);
        assert_eq!(r.api_keys[0].api_key, ApiKey::ApiVersions as i16);
        assert_eq!((r.api_keys[0].min_version, r.api_keys[0].max_version), (0, 4));
    }
}
