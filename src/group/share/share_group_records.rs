//! Share-group (KIP-932) records in `__consumer_offsets`, in Kafka 4.4's layout, so a
//! restarted or moved coordinator brings a share group back with its epoch, members and
//! assignments, and the members keep heartbeating into it.
//!
//! | record (Kafka's name) | key | value (flexible v0) |
//! |---|---|---|
//! | ShareGroupMemberMetadata | v10: `i16 10, str group, str member` | `i16 0, cnstr rack_id, cstr client_id, cstr client_host, carray<cstr> subscribed_topic_names, tagged` |
//! | ShareGroupMetadata | v11: `i16 11, str group` | `i16 0, i32 epoch, i64 metadata_hash, tagged` |
//! | ShareGroupTargetAssignmentMetadata | v12: `i16 12, str group` | `i16 0, i32 assignment_epoch, tagged {0: i64 assignment_timestamp}` |
//! | ShareGroupTargetAssignmentMember | v13: `i16 13, str group, str member` | `i16 0, carray<TopicPartitions> topic_partitions, tagged` |
//! | ShareGroupCurrentMemberAssignment | v14: `i16 14, str group, str member` | `i16 0, i32 member_epoch, i32 previous_member_epoch, i8 state, carray<TopicPartitions> assigned_partitions, tagged` |
//! | ShareGroupStatePartitionMetadata | v15: `i16 15, str group` | `i16 0, carray<TopicPartitionsInfo> initializing, carray<TopicPartitionsInfo> initialized, carray<TopicInfo> deleting, tagged` |
//!
//! `TopicPartitions` = `uuid topic_id, carray<i32> partitions, tagged`;
//! `TopicPartitionsInfo` = `uuid topic_id, cstr topic_name, carray<i32> partitions, tagged`;
//! `TopicInfo` = `uuid topic_id, cstr topic_name, tagged`. Encodings as in
//! `consumer/consumer_group_records.rs` (helpers in `group/flexible_records.rs`). A null
//! value is a tombstone. Everything read back is bounded by the bytes that remain.
use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::group::coordinator_records::{get_i16, get_i32, get_i64, get_str, put_str, RecordError};
use crate::group::flexible_records::{
    get_array_len, get_assignment, get_compact_nullable_str, get_compact_str, get_i8, get_tagged_fields, get_uuid, put_assignment, put_compact_nullable_str,
    put_compact_str, put_len, put_uvarint, TopicPartitions,
};

pub const MEMBER_METADATA_KEY_VERSION: i16 = 10;
pub const GROUP_METADATA_KEY_VERSION: i16 = 11;
pub const TARGET_ASSIGNMENT_METADATA_KEY_VERSION: i16 = 12;
pub const TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: i16 = 13;
pub const CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION: i16 = 14;
pub const STATE_PARTITION_METADATA_KEY_VERSION: i16 = 15;
/// Every share-group value is version 0 (flexible).
const VALUE_VERSION: i16 = 0;
/// Tag of ShareGroupTargetAssignmentMetadataValue.AssignmentTimestamp (KIP-1263).
const ASSIGNMENT_TIMESTAMP_TAG: u32 = 0;
/// Kafka's MemberState.STABLE: a share member is always stable (no revocation step).
pub const MEMBER_STATE_STABLE: i8 = 0;

/// ShareGroupMemberMetadataValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
}

/// ShareGroupCurrentMemberAssignmentValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned_partitions: TopicPartitions,
}

/// ShareGroupStatePartitionMetadataValue: which share-partitions the group coordinator
/// has initialized in the share coordinator (topic id → (name, partitions)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatePartitionMetadataValue {
    pub initializing: BTreeMap<Uuid, (String, BTreeSet<i32>)>,
    pub initialized: BTreeMap<Uuid, (String, BTreeSet<i32>)>,
    pub deleting: BTreeMap<Uuid, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareRecord {
    /// One member's subscription and client; None = the member left.
    MemberMetadata { group: String, member: String, value: Option<MemberMetadataValue> },
    /// The group epoch and the subscribed topics' metadata hash; None = tombstone.
    GroupEpoch { group: String, epoch: Option<i32>, metadata_hash: i64 },
    /// The target assignment's epoch and when it was computed; None = tombstone.
    TargetAssignmentMetadata { group: String, assignment_epoch: Option<(i32, i64)> },
    /// One member's target assignment; None = tombstone.
    TargetAssignmentMember { group: String, member: String, partitions: Option<TopicPartitions> },
    /// One member's epoch and current partitions; None = tombstone.
    CurrentMemberAssignment { group: String, member: String, value: Option<CurrentAssignmentValue> },
    /// The group's initialized share-partitions; None = tombstone.
    StatePartitionMetadata { group: String, value: Option<StatePartitionMetadataValue> },
}

fn put_topic_infos(b: &mut BytesMut, topics: &BTreeMap<Uuid, (String, BTreeSet<i32>)>) {
    put_len(b, topics.len());
    for (id, (name, partitions)) in topics {
        b.put_slice(id.as_bytes());
        put_compact_str(b, name);
        put_len(b, partitions.len());
        for p in partitions {
            b.put_i32(*p);
        }
        put_uvarint(b, 0);
    }
}

fn get_topic_infos(b: &mut Bytes) -> Result<BTreeMap<Uuid, (String, BTreeSet<i32>)>, RecordError> {
    // uuid + empty name + empty partitions + no tagged fields.
    let n = get_array_len(b, 19)?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let id = get_uuid(b)?;
        let name = get_compact_str(b)?;
        let count = get_array_len(b, 4)?;
        let mut partitions = BTreeSet::new();
        for _ in 0..count {
            partitions.insert(get_i32(b)?);
        }
        get_tagged_fields(b, None)?;
        out.entry(id).or_insert_with(|| (name, BTreeSet::new())).1.extend(partitions);
    }
    Ok(out)
}

impl ShareRecord {
    fn group(&self) -> &str {
        match self {
            ShareRecord::MemberMetadata { group, .. }
            | ShareRecord::GroupEpoch { group, .. }
            | ShareRecord::TargetAssignmentMetadata { group, .. }
            | ShareRecord::TargetAssignmentMember { group, .. }
            | ShareRecord::CurrentMemberAssignment { group, .. }
            | ShareRecord::StatePartitionMetadata { group, .. } => group,
        }
    }

    pub fn key(&self) -> Bytes {
        let (version, member) = match self {
            ShareRecord::MemberMetadata { member, .. } => (MEMBER_METADATA_KEY_VERSION, Some(member)),
            ShareRecord::GroupEpoch { .. } => (GROUP_METADATA_KEY_VERSION, None),
            ShareRecord::TargetAssignmentMetadata { .. } => (TARGET_ASSIGNMENT_METADATA_KEY_VERSION, None),
            ShareRecord::TargetAssignmentMember { member, .. } => (TARGET_ASSIGNMENT_MEMBER_KEY_VERSION, Some(member)),
            ShareRecord::CurrentMemberAssignment { member, .. } => (CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION, Some(member)),
            ShareRecord::StatePartitionMetadata { .. } => (STATE_PARTITION_METADATA_KEY_VERSION, None),
        };
        let mut b = BytesMut::new();
        b.put_i16(version);
        put_str(&mut b, self.group());
        if let Some(m) = member {
            put_str(&mut b, m);
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut b = BytesMut::new();
        b.put_i16(VALUE_VERSION);
        match self {
            ShareRecord::MemberMetadata { value: Some(v), .. } => {
                put_compact_nullable_str(&mut b, v.rack_id.as_deref());
                put_compact_str(&mut b, &v.client_id);
                put_compact_str(&mut b, &v.client_host);
                put_len(&mut b, v.subscribed_topic_names.len());
                for n in &v.subscribed_topic_names {
                    put_compact_str(&mut b, n);
                }
            }
            ShareRecord::GroupEpoch { epoch: Some(e), metadata_hash, .. } => {
                b.put_i32(*e);
                b.put_i64(*metadata_hash);
            }
            ShareRecord::TargetAssignmentMetadata { assignment_epoch: Some((e, timestamp)), .. } => {
                b.put_i32(*e);
                // A tagged field is written only when it is not its default (0), as Kafka.
                if *timestamp != 0 {
                    put_uvarint(&mut b, 1);
                    put_uvarint(&mut b, ASSIGNMENT_TIMESTAMP_TAG);
                    put_uvarint(&mut b, 8);
                    b.put_i64(*timestamp);
                    return Some(b.freeze());
                }
            }
            ShareRecord::TargetAssignmentMember { partitions: Some(a), .. } => put_assignment(&mut b, a),
            ShareRecord::CurrentMemberAssignment { value: Some(v), .. } => {
                b.put_i32(v.member_epoch);
                b.put_i32(v.previous_member_epoch);
                b.put_i8(v.state);
                put_assignment(&mut b, &v.assigned_partitions);
            }
            ShareRecord::StatePartitionMetadata { value: Some(v), .. } => {
                put_topic_infos(&mut b, &v.initializing);
                put_topic_infos(&mut b, &v.initialized);
                put_len(&mut b, v.deleting.len());
                for (id, name) in &v.deleting {
                    b.put_slice(id.as_bytes());
                    put_compact_str(&mut b, name);
                    put_uvarint(&mut b, 0);
                }
            }
            _ => return None,
        }
        put_uvarint(&mut b, 0); // no tagged fields
        Some(b.freeze())
    }

    /// Parses a record whose key version (already read from `key`) is 10-15.
    pub fn parse(key_version: i16, mut key: Bytes, value: Option<Bytes>) -> Result<ShareRecord, RecordError> {
        if !(MEMBER_METADATA_KEY_VERSION..=STATE_PARTITION_METADATA_KEY_VERSION).contains(&key_version) {
            return Err(RecordError::UnknownVersion(key_version));
        }
        let group = get_str(&mut key)?;
        let mut value = value;
        if let Some(v) = value.as_mut() {
            match get_i16(v)? {
                VALUE_VERSION => {}
                version => return Err(RecordError::UnknownVersion(version)),
            }
        }
        Ok(match key_version {
            MEMBER_METADATA_KEY_VERSION => {
                let member = get_str(&mut key)?;
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        let rack_id = get_compact_nullable_str(&mut v)?;
                        let client_id = get_compact_str(&mut v)?;
                        let client_host = get_compact_str(&mut v)?;
                        let n = get_array_len(&mut v, 1)?;
                        let mut subscribed_topic_names = Vec::with_capacity(n);
                        for _ in 0..n {
                            subscribed_topic_names.push(get_compact_str(&mut v)?);
                        }
                        Some(MemberMetadataValue { rack_id, client_id, client_host, subscribed_topic_names })
                    }
                };
                ShareRecord::MemberMetadata { group, member, value }
            }
            GROUP_METADATA_KEY_VERSION => match value {
                None => ShareRecord::GroupEpoch { group, epoch: None, metadata_hash: 0 },
                Some(mut v) => {
                    let epoch = get_i32(&mut v)?;
                    ShareRecord::GroupEpoch { group, epoch: Some(epoch), metadata_hash: get_i64(&mut v)? }
                }
            },
            TARGET_ASSIGNMENT_METADATA_KEY_VERSION => match value {
                None => ShareRecord::TargetAssignmentMetadata { group, assignment_epoch: None },
                Some(mut v) => {
                    let epoch = get_i32(&mut v)?;
                    let timestamp = match get_tagged_fields(&mut v, Some(ASSIGNMENT_TIMESTAMP_TAG))? {
                        Some(mut t) => get_i64(&mut t)?,
                        None => 0,
                    };
                    ShareRecord::TargetAssignmentMetadata { group, assignment_epoch: Some((epoch, timestamp)) }
                }
            },
            TARGET_ASSIGNMENT_MEMBER_KEY_VERSION => {
                let member = get_str(&mut key)?;
                let partitions = match value {
                    None => None,
                    Some(mut v) => Some(get_assignment(&mut v)?),
                };
                ShareRecord::TargetAssignmentMember { group, member, partitions }
            }
            CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION => {
                let member = get_str(&mut key)?;
                let value = match value {
                    None => None,
                    Some(mut v) => Some(CurrentAssignmentValue {
                        member_epoch: get_i32(&mut v)?,
                        previous_member_epoch: get_i32(&mut v)?,
                        state: get_i8(&mut v)?,
                        assigned_partitions: get_assignment(&mut v)?,
                    }),
                };
                ShareRecord::CurrentMemberAssignment { group, member, value }
            }
            _ => {
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        let initializing = get_topic_infos(&mut v)?;
                        let initialized = get_topic_infos(&mut v)?;
                        // uuid + empty name + no tagged fields.
                        let n = get_array_len(&mut v, 18)?;
                        let mut deleting = BTreeMap::new();
                        for _ in 0..n {
                            let id = get_uuid(&mut v)?;
                            deleting.insert(id, get_compact_str(&mut v)?);
                            get_tagged_fields(&mut v, None)?;
                        }
                        Some(StatePartitionMetadataValue { initializing, initialized, deleting })
                    }
                };
                ShareRecord::StatePartitionMetadata { group, value }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::coordinator_records::OffsetsRecord;

    fn partitions(topic: u128, ps: &[i32]) -> TopicPartitions {
        let mut a = TopicPartitions::new();
        a.insert(Uuid::from_u128(topic), ps.iter().copied().collect());
        a
    }

    fn samples() -> Vec<ShareRecord> {
        let g = || "g".to_string();
        let mut two = partitions(1, &[0, 3, 70_000]);
        two.extend(partitions(2, &[1]));
        let info = |t: u128, name: &str, ps: &[i32]| (Uuid::from_u128(t), (name.to_string(), ps.iter().copied().collect::<BTreeSet<i32>>()));
        vec![
            ShareRecord::MemberMetadata {
                group: g(),
                member: "m1".into(),
                value: Some(MemberMetadataValue {
                    rack_id: Some("r1".into()),
                    client_id: "consumer-g-1".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["a".into(), "b".repeat(249)],
                }),
            },
            ShareRecord::MemberMetadata { group: g(), member: "m1".into(), value: None },
            ShareRecord::GroupEpoch { group: g(), epoch: Some(7), metadata_hash: -77 },
            ShareRecord::GroupEpoch { group: g(), epoch: None, metadata_hash: 0 },
            ShareRecord::TargetAssignmentMetadata { group: g(), assignment_epoch: Some((7, 0)) },
            ShareRecord::TargetAssignmentMetadata { group: g(), assignment_epoch: Some((8, 1_765_000_000_000)) },
            ShareRecord::TargetAssignmentMetadata { group: g(), assignment_epoch: None },
            ShareRecord::TargetAssignmentMember { group: g(), member: "m1".into(), partitions: Some(two.clone()) },
            ShareRecord::TargetAssignmentMember { group: g(), member: "m1".into(), partitions: None },
            ShareRecord::CurrentMemberAssignment {
                group: g(),
                member: "m1".into(),
                value: Some(CurrentAssignmentValue { member_epoch: 7, previous_member_epoch: 6, state: MEMBER_STATE_STABLE, assigned_partitions: two }),
            },
            ShareRecord::CurrentMemberAssignment { group: g(), member: "m1".into(), value: None },
            ShareRecord::StatePartitionMetadata {
                group: g(),
                value: Some(StatePartitionMetadataValue {
                    initializing: [info(1, "a", &[2])].into_iter().collect(),
                    initialized: [info(1, "a", &[0, 1]), info(3, "c", &[0])].into_iter().collect(),
                    deleting: [(Uuid::from_u128(4), "d".to_string())].into_iter().collect(),
                }),
            },
            ShareRecord::StatePartitionMetadata { group: g(), value: None },
        ]
    }

    #[test]
    fn round_trip_through_offsets_record() {
        for r in samples() {
            let rec = OffsetsRecord::Share(r.clone());
            assert_eq!(OffsetsRecord::parse(Some(rec.key()), rec.value()).unwrap(), rec);
        }
        // Member keys are per (group, member): compaction supersedes per member.
        let a = ShareRecord::CurrentMemberAssignment { group: "g".into(), member: "a".into(), value: None };
        let b = ShareRecord::CurrentMemberAssignment { group: "g".into(), member: "b".into(), value: None };
        assert_ne!(a.key(), b.key());
        // Kafka's bytes for ShareGroupMetadataValue{Epoch 5, MetadataHash 1}: version, i32, i64, no tags.
        let v = ShareRecord::GroupEpoch { group: "g".into(), epoch: Some(5), metadata_hash: 1 }.value().unwrap();
        assert_eq!(&v[..], &[0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn garbage_never_panics() {
        let samples: Vec<(Bytes, Bytes)> = samples().iter().map(|r| (r.key(), r.value().unwrap_or_default())).collect();
        crate::group::flexible_records::assert_parse_never_panics(&samples, 10..=15, |kv, k, v| {
            let _ = ShareRecord::parse(kv, k, v);
        });
        // A count far beyond the bytes left is refused before anything is reserved.
        let mut v = BytesMut::new();
        v.put_i16(0);
        put_uvarint(&mut v, u32::MAX);
        assert_eq!(ShareRecord::parse(15, Bytes::from_static(&[0, 1, b'g']), Some(v.freeze())), Err(RecordError::Truncated));
        assert_eq!(ShareRecord::parse(9, Bytes::from_static(&[0, 1, b'g']), None), Err(RecordError::UnknownVersion(9)));
    }
}
