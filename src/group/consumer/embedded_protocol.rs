//! The consumer embedded protocol a classic member speaks inside JoinGroup / SyncGroup
//! (Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment, each prefixed by
//! its i16 version), read and written where a consumer group hosts classic members or
//! converts to or from a classic group (classic_member.rs, migration.rs).
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};
use uuid::Uuid;

use super::group::Assignment;
use crate::cluster::image::MetadataImage;
use crate::protocol::strings::str_bytes;

/// The newest version of both messages the codec knows: newer ones only append fields, so
/// they are read as this one.
const NEWEST_VERSION: i16 = 3;

/// Bytes that are not the message they should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// What a classic member's subscription says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Sorted, without duplicates or empty names.
    pub topics: Vec<String>,
    /// The partitions the member says it owns (v1+), by topic name.
    pub owned: Vec<(String, Vec<i32>)>,
    pub rack_id: Option<String>,
}

/// The version prefix of an embedded-protocol message (0 when too short to have one).
pub fn version_of(message: &[u8]) -> i16 {
    match message {
        [a, b, ..] => i16::from_be_bytes([*a, *b]),
        _ => 0,
    }
}

/// The version prefix of a message (read as at most the newest known) and its body.
fn versioned(message: &Bytes) -> Result<(i16, Bytes), Malformed> {
    let mut b = message.clone();
    if b.remaining() < 2 {
        return Err(Malformed);
    }
    let version = b.get_i16();
    if version < 0 {
        return Err(Malformed);
    }
    Ok((version.min(NEWEST_VERSION), b))
}

/// Reads a ConsumerProtocolSubscription; Err for malformed bytes.
pub fn parse_subscription(metadata: &Bytes) -> Result<Subscription, Malformed> {
    let (version, mut b) = versioned(metadata)?;
    let s = ConsumerProtocolSubscription::decode(&mut b, version).map_err(|_| Malformed)?;
    let topics: std::collections::BTreeSet<String> = s.topics.iter().map(|t| t.to_string()).filter(|t| !t.is_empty()).collect();
    Ok(Subscription {
        topics: topics.into_iter().collect(),
        owned: s.owned_partitions.iter().map(|t| (t.topic.0.to_string(), t.partitions.clone())).collect(),
        rack_id: s.rack_id.map(|r| r.to_string()).filter(|r| !r.is_empty()),
    })
}

/// Reads a ConsumerProtocolAssignment: its partitions by topic name, and whether it
/// carries user data (a custom assignor's). Empty bytes are an empty assignment (a member
/// that never synced).
pub fn parse_assignment(bytes: &Bytes) -> Result<(Vec<(String, Vec<i32>)>, bool), Malformed> {
    if bytes.is_empty() {
        return Ok((Vec::new(), false));
    }
    let (version, mut b) = versioned(bytes)?;
    let a = ConsumerProtocolAssignment::decode(&mut b, version).map_err(|_| Malformed)?;
    let user_data = a.user_data.as_ref().is_some_and(|u| !u.is_empty());
    Ok((a.assigned_partitions.iter().map(|t| (t.topic.0.to_string(), t.partitions.clone())).collect(), user_data))
}

/// Partitions by topic name → by topic id; topics the image does not have are dropped.
pub fn to_ids(named: &[(String, Vec<i32>)], image: &MetadataImage) -> Assignment {
    let mut a = Assignment::new();
    for (name, ps) in named {
        if let (Some(t), false) = (image.topic(name), ps.is_empty()) {
            a.entry(Uuid::from_bytes(t.topic_id)).or_default().extend(ps.iter().copied());
        }
    }
    a
}

/// A ConsumerProtocolAssignment of `a` (no user data), at `version` (the version of the
/// member's subscription, as Kafka answers); topics the image no longer has are left out.
pub fn serialize_assignment(version: i16, a: &Assignment, image: &MetadataImage) -> Bytes {
    let version = version.clamp(0, NEWEST_VERSION);
    let assigned_partitions = a
        .iter()
        .filter_map(|(id, ps)| {
            let t = image.topic_by_id(id.as_bytes())?;
            Some(AssignedTopic::default().with_topic(TopicName(str_bytes(&t.name))).with_partitions(ps.iter().copied().collect()))
        })
        .collect();
    let msg = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned_partitions);
    let mut b = BytesMut::new();
    b.put_i16(version);
    // Encoding a message built here at a version the codec supports does not fail; an
    // empty assignment is the safe answer if it ever did.
    if msg.encode(&mut b, version).is_err() {
        return Bytes::new();
    }
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{PartitionMeta, TopicMeta};
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;

    fn image() -> MetadataImage {
        let mut img = MetadataImage::default();
        let partitions = (0..3).map(|p| PartitionMeta::unassigned(p, 0)).collect();
        img.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions, configs: Default::default() });
        img
    }

    fn subscription(version: i16, s: &ConsumerProtocolSubscription) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(version);
        s.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn subscriptions_of_every_version_are_read() {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![str_bytes("t"), str_bytes("a"), str_bytes("t")])
            .with_owned_partitions(vec![OwnedTopic::default().with_topic(TopicName(str_bytes("t"))).with_partitions(vec![2])])
            .with_rack_id(Some(str_bytes("r1")));
        let v0 = parse_subscription(&subscription(0, &s)).unwrap();
        assert_eq!((v0.topics.clone(), v0.owned.clone(), v0.rack_id.clone()), (vec!["a".to_string(), "t".to_string()], vec![], None));
        let v3 = parse_subscription(&subscription(3, &s)).unwrap();
        assert_eq!(v3.owned, vec![("t".to_string(), vec![2])]);
        assert_eq!(v3.rack_id.as_deref(), Some("r1"));
        // A newer version is read as the newest known (fields are only appended).
        let mut newer = subscription(3, &s).to_vec();
        newer[1] = 4;
        assert_eq!(parse_subscription(&Bytes::from(newer)).unwrap().topics, v3.topics);
        for bad in [&b""[..], &b"\x00"[..], &b"\xff\xff\x00\x00"[..], &b"\x00\x01\x00\x00\x00\x05ab"[..]] {
            assert!(parse_subscription(&Bytes::copy_from_slice(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn assignments_round_trip_and_user_data_is_seen() {
        let img = image();
        let mut a = Assignment::new();
        a.insert(Uuid::from_bytes([1; 16]), [0, 2].into_iter().collect());
        // A topic the image no longer has is left out.
        a.insert(Uuid::from_bytes([9; 16]), [0].into_iter().collect());
        for version in [0, 1, 3] {
            let bytes = serialize_assignment(version, &a, &img);
            assert_eq!(version_of(&bytes), version);
            let (named, user_data) = parse_assignment(&bytes).unwrap();
            assert_eq!((named.clone(), user_data), (vec![("t".to_string(), vec![0, 2])], false));
            assert_eq!(to_ids(&named, &img).len(), 1);
        }
        assert_eq!(parse_assignment(&Bytes::new()).unwrap(), (vec![], false));
        let custom = ConsumerProtocolAssignment::default().with_user_data(Some(Bytes::from_static(b"x")));
        let mut b = BytesMut::new();
        b.put_i16(1);
        custom.encode(&mut b, 1).unwrap();
        assert!(parse_assignment(&b.freeze()).unwrap().1);
        assert!(parse_assignment(&Bytes::from_static(b"\x00\x01\x00")).is_err());
    }
}
