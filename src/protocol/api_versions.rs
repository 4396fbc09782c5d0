//! The APIs and versions this broker serves, written out by hand.
//!
//! Not derived from `ApiKey::valid_versions()`: that reflects what the codec can parse,
//! which is more than is served (InitProducerId 6, the
//! share and streams group APIs are in the codec's `ApiKey` table but not served here).
//!
//! Ranges follow Apache Kafka 4.4; `NOT_SERVED` names each API and version Kafka 4.4
//! advertises beyond this table, with why. Every range is inside what the codec decodes
//! (vendor/kafka-protocol, regenerated from Kafka 4.4.0's schemas; checked by
//! `table_within_codec` below) except Produce v0-2, which Kafka advertises
//! (librdkafka < 2.11.1 disables compression unless Produce v0 is listed, KAFKA-18659) and
//! then rejects with UNSUPPORTED_VERSION; the codec cannot parse them anyway.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::ErrorCode;

/// The feature levels an ApiVersions response carries (v3+), from the metadata image
/// (`cluster/features.rs` decides them; this layer only writes them).
#[derive(Clone, Debug, Default)]
pub struct FeatureLevels<'a> {
    /// (name, min, max) this broker supports.
    pub supported: Vec<(&'a str, i16, i16)>,
    /// (name, level) finalized in the cluster (level >= 1 only).
    pub finalized: Vec<(&'a str, i16)>,
    /// Kafka's finalized-features epoch: the metadata offset the levels were read at
    /// (clients keep the levels of the highest epoch they saw).
    pub epoch: i64,
}

/// `(api, min, max)` served. To enable an API add (or uncomment) one line; the
/// ApiVersions response, request admission and the tests all read this table.
const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 13), // v0-2 advertised but rejected, see produce_version_rejected
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 11),
    (ApiKey::Metadata, 0, 13),
    // Group APIs are served by src/group/.
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    // SASL (server/sasl_authenticator.rs), answered on every listener as Kafka does.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::ApiVersions, 0, 5),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    // Transactions (txn/ and the partition side); with transaction.version 2 finalized
    // (cluster/features.rs) v2 clients use EndTxn 5 and Produce 12+.
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 2),
    (ApiKey::TxnOffsetCommit, 0, 6),
    // ACLs are off (no authorizer): SECURITY_DISABLED, as Kafka without one.
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeLogDirs, 1, 5),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    // Delegation tokens in the metadata log, usable with SCRAM (server/handlers/delegation_tokens.rs).
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    (ApiKey::DescribeDelegationToken, 1, 3),
    (ApiKey::DeleteGroups, 0, 3),
    // Preferred and unclean elections through the quorum leader (controller/election.rs).
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    // Partition reassignment through the quorum leader (controller/reassignment.rs).
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::OffsetDelete, 0, 0),
    // Client quotas in the metadata log, enforced per shard (server/client_quotas.rs).
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // SCRAM credentials in the metadata log (security/scram.rs).
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // The openraft metadata quorum in KRaft's terms (server/handlers/describe_quorum.rs).
    (ApiKey::DescribeQuorum, 0, 2),
    // Finalized feature levels in the metadata log (cluster/features.rs).
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::DescribeCluster, 0, 2),
    // The producers of a partition (kafka-transactions describe-producers / find-hanging / abort).
    (ApiKey::DescribeProducers, 0, 0),
    // Forgets a broker's registration (server/handlers/quorum_membership.rs).
    (ApiKey::UnregisterBroker, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    // KIP-848 consumer groups, served by src/group/consumer/.
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    // KIP-932 share groups (group/share/): served while
    // share.version >= 1, UNSUPPORTED_VERSION otherwise (as Kafka 4.4).
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    // KIP-853 voter changes of the metadata quorum (server/handlers/quorum_membership.rs).
    (ApiKey::AddRaftVoter, 0, 1),
    (ApiKey::RemoveRaftVoter, 0, 0),
    // The share coordinator's state APIs, asked by share-partition leaders
    // (server/handlers/share_group_state.rs; group/share/state_coordinator.rs).
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 1),
    (ApiKey::DeleteShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupStateSummary, 0, 1),
    // KIP-1071 streams groups (group/streams/): served while streams.version >= 1 (a new
    // cluster's level), UNSUPPORTED_VERSION otherwise.
    (ApiKey::StreamsGroupHeartbeat, 0, 1),
    (ApiKey::StreamsGroupDescribe, 0, 1),
    // The share-group offset admin APIs (kafka-share-groups.sh --describe / --reset-offsets /
    // --delete-offsets; server/handlers/*_share_group_offsets.rs, group/share/offsets_admin.rs).
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    // Answered as a Kafka 4.4 broker without a topology description plugin answers it.
    (ApiKey::StreamsGroupTopologyDescriptionUpdate, 0, 0),
];

/// Every API Apache Kafka 4.4 advertises that `SUPPORTED` does not serve, or serves in
/// fewer versions: `(key, name, Kafka's min, Kafka's max, why)`. docs/kafka-apis.md's API table is
/// made from this and `SUPPORTED` (`readme_section`); tests keep both in step with what a
/// Kafka 4.4 broker advertises.
const NOT_SERVED: &[(i16, &str, i16, i16, &str)] = &[(
    94,
    "UnregisterController",
    0,
    0,
    "shardlog controllers keep no registration (KRaft's ControllerRegistration records) to remove: RemoveRaftVoter takes a controller out of the quorum",
)];

/// The API table of docs/kafka-apis.md, generated from `SUPPORTED` and `NOT_SERVED` (a test
/// fails, printing this text, when docs/kafka-apis.md differs).
pub fn readme_section() -> String {
    let mut s = String::from("| API | key | versions |\n|---|---|---|\n");
    for &(k, lo, hi) in SUPPORTED {
        let note = if k == ApiKey::Produce { " (v0-2 advertised, rejected, as Kafka 4.4)" } else { "" };
        s += &format!("| {k:?} | {} | {lo}-{hi}{note} |\n", k as i16);
    }
    s += "\nApache Kafka 4.4 APIs not served here (or served in fewer versions):\n\n| API | key | Kafka 4.4 | why |\n|---|---|---|---|\n";
    for &(key, name, lo, hi, why) in NOT_SERVED {
        s += &format!("| {name} | {key} | {lo}-{hi} | {why} |\n");
    }
    s
}

/// Kafka 4.4 ranges of the group APIs, kept here so the codec check covers them before
/// they are switched on.
#[cfg(test)]
const GROUP_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 3),
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
        Some((lo, hi)) => (lo..=hi).contains(&version) && !(api_key == ApiKey::Produce && produce_version_rejected(version)),
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
/// Features (v3+), as Kafka 4.4 writes them: v3 leaves out supported features whose
/// minimum is 0 (clients before KIP-1022 cannot read them), v4+ lists them all; finalized
/// features at level 0 are not listed.
pub fn api_versions_response(version: i16, features: &FeatureLevels<'_>) -> ApiVersionsResponse {
    let api_keys = SUPPORTED.iter().map(|&(k, lo, hi)| ApiVersion::default().with_api_key(k as i16).with_min_version(lo).with_max_version(hi)).collect();
    let mut resp = ApiVersionsResponse::default().with_error_code(ErrorCode::NONE.code()).with_api_keys(api_keys).with_throttle_time_ms(0);
    if version >= 3 {
        let supported = features
            .supported
            .iter()
            .filter(|&&(_, min, _)| version >= 4 || min > 0)
            .map(|&(name, min, max)| {
                SupportedFeatureKey::default().with_name(StrBytes::from_string(name.to_string())).with_min_version(min).with_max_version(max)
            })
            .collect();
        let finalized = features
            .finalized
            .iter()
            .filter(|&&(_, level)| level > 0)
            .map(|&(name, level)| {
                FinalizedFeatureKey::default().with_name(StrBytes::from_string(name.to_string())).with_min_version_level(level).with_max_version_level(level)
            })
            .collect();
        resp = resp.with_supported_features(supported).with_finalized_features_epoch(features.epoch).with_finalized_features(finalized);
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

#[cfg(test)]
fn test_features() -> FeatureLevels<'static> {
    FeatureLevels {
        supported: vec![("metadata.version", 7, 33), ("transaction.version", 0, 2)],
        finalized: vec![("metadata.version", 33), ("transaction.version", 2), ("share.version", 0)],
        epoch: 42,
    }
}

/// Size check helper used by tests: the encoded response for `version`.
#[cfg(test)]
fn encode_body(version: i16) -> bytes::Bytes {
    use kafka_protocol::protocol::Encodable;
    let mut b = BytesMut::new();
    api_versions_response(version, &test_features()).encode(&mut b, version).unwrap();
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

    /// What an Apache Kafka 4.4.0 node advertises on its broker listener (ApiVersions v0,
    /// read off the wire: 77 APIs).
    const KAFKA_44: &[(i16, i16, i16)] = &[
        (0, 0, 13),
        (1, 4, 18),
        (2, 1, 11),
        (3, 0, 13),
        (8, 2, 10),
        (9, 1, 10),
        (10, 0, 6),
        (11, 0, 9),
        (12, 0, 4),
        (13, 0, 5),
        (14, 0, 5),
        (15, 0, 6),
        (16, 0, 5),
        (17, 0, 1),
        (18, 0, 5),
        (19, 2, 7),
        (20, 1, 6),
        (21, 0, 2),
        (22, 0, 5),
        (23, 2, 4),
        (24, 0, 5),
        (25, 0, 4),
        (26, 0, 5),
        (27, 1, 2),
        (28, 0, 6),
        (29, 1, 3),
        (30, 1, 3),
        (31, 1, 3),
        (32, 1, 4),
        (33, 0, 2),
        (34, 1, 2),
        (35, 1, 5),
        (36, 0, 2),
        (37, 0, 3),
        (38, 1, 3),
        (39, 1, 2),
        (40, 1, 2),
        (41, 1, 3),
        (42, 0, 3),
        (43, 0, 2),
        (44, 0, 1),
        (45, 0, 1),
        (46, 0, 0),
        (47, 0, 0),
        (48, 0, 1),
        (49, 0, 1),
        (50, 0, 0),
        (51, 0, 0),
        (55, 0, 2),
        (57, 0, 2),
        (60, 0, 2),
        (61, 0, 0),
        (64, 0, 0),
        (65, 0, 0),
        (66, 0, 2),
        (68, 0, 1),
        (69, 0, 1),
        (74, 0, 1),
        (75, 0, 0),
        (76, 1, 1),
        (77, 1, 1),
        (78, 1, 2),
        (79, 1, 2),
        (80, 0, 1),
        (81, 0, 0),
        (83, 0, 0),
        (84, 0, 0),
        (85, 0, 1),
        (86, 0, 0),
        (87, 0, 1),
        (88, 0, 1),
        (89, 0, 1),
        (90, 0, 1),
        (91, 0, 0),
        (92, 0, 0),
        (93, 0, 0),
        (94, 0, 0),
    ];

    /// Every Kafka 4.4 API is served in Kafka's range or listed in NOT_SERVED with Kafka's
    /// range and a reason; nothing is served that Kafka does not advertise.
    #[test]
    fn every_kafka_api_served_or_explained() {
        assert_eq!(KAFKA_44.len(), 77);
        for &(key, lo, hi) in KAFKA_44 {
            let ours = ApiKey::try_from(key).ok().and_then(supported);
            let listed = NOT_SERVED.iter().find(|(k, ..)| *k == key);
            match (ours, listed) {
                (Some(r), None) => assert_eq!(r, (lo, hi), "{key} served in other versions than Kafka's, unexplained"),
                (_, Some(&(_, name, klo, khi, why))) => {
                    assert_eq!((klo, khi), (lo, hi), "{name}: NOT_SERVED has the wrong Kafka range");
                    assert!(!why.is_empty());
                    if let Ok(api) = ApiKey::try_from(key) {
                        assert_eq!(format!("{api:?}"), name, "NOT_SERVED names key {key} wrongly");
                    }
                    assert_ne!(ours, Some((lo, hi)), "{name} is served in full: drop it from NOT_SERVED");
                }
                (None, None) => panic!("API key {key} (Kafka 4.4: {lo}-{hi}) is neither served nor listed in NOT_SERVED"),
            }
        }
        for &(k, ..) in SUPPORTED.iter() {
            assert!(KAFKA_44.iter().any(|&(key, ..)| key == k as i16), "{k:?} is not a Kafka 4.4 API");
        }
    }

    #[test]
    fn readme_lists_the_table() {
        let readme = include_str!("../../docs/kafka-apis.md");
        let (begin, end) = ("<!-- api-versions:begin (generated: cargo test --lib readme_lists_the_table) -->\n", "<!-- api-versions:end -->");
        let section = readme.split_once(begin).and_then(|(_, rest)| rest.split_once(end)).map(|(s, _)| s);
        let want = readme_section();
        assert!(
            section == Some(want.as_str()),
            "docs/kafka-apis.md's API table differs from the ApiVersions table; put this between the markers:\n{begin}{want}{end}"
        );
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
        assert_eq!(supported(ApiKey::Fetch), Some((4, 18)));
        assert_eq!(supported(ApiKey::InitProducerId), Some((0, 5)));
        assert_eq!(supported(ApiKey::JoinGroup), Some((0, 9)));
        assert_eq!(supported(ApiKey::OffsetCommit), Some((2, 10)));
        assert!(produce_version_rejected(2) && !produce_version_rejected(3));
        assert!(!is_served(ApiKey::Produce, 2));
        assert!(is_served(ApiKey::Produce, 3));
        assert!(is_served(ApiKey::Fetch, 18) && !is_served(ApiKey::Fetch, 19));
        assert!(is_served(ApiKey::OffsetCommit, 8));
        assert!(is_served(ApiKey::OffsetCommit, 10) && is_served(ApiKey::OffsetFetch, 10));
        assert!(!is_served(ApiKey::OffsetCommit, 11) && !is_served(ApiKey::OffsetFetch, 11));
        assert_eq!(supported(ApiKey::ConsumerGroupHeartbeat), Some((0, 1)));
        assert_eq!(supported(ApiKey::ConsumerGroupDescribe), Some((0, 1)));
    }

    #[test]
    fn response_roundtrips_every_version() {
        for v in 0..=5 {
            let mut b = encode_body(v);
            let r = ApiVersionsResponse::decode(&mut b, v).unwrap();
            assert!(b.is_empty());
            assert_eq!(r.api_keys.len(), SUPPORTED.len());
            let p = r.api_keys.iter().find(|a| a.api_key == 0).unwrap();
            assert_eq!((p.min_version, p.max_version), (0, 13));
            if v >= 3 {
                // v3 leaves out supported features with minimum 0, as Kafka 4.4 does.
                assert_eq!(r.supported_features.len(), if v == 3 { 1 } else { 2 });
                assert_eq!(r.finalized_features_epoch, 42);
                assert_eq!(r.finalized_features.len(), 2, "a level-0 feature is not finalized");
                let tv = r.finalized_features.iter().find(|f| f.name.as_str() == "transaction.version").unwrap();
                assert_eq!((tv.min_version_level, tv.max_version_level), (2, 2));
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
        assert_eq!((r.api_keys[0].min_version, r.api_keys[0].max_version), (0, 5));
    }
}
