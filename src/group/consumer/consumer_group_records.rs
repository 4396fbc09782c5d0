//! Consumer-group (KIP-848) records in `__consumer_offsets`, in Kafka 4.1's layout, so a
//! restarted coordinator brings a group back with its members, their epochs and their
//! partitions, and the members keep heartbeating without a rebalance.
//!
//! | record (Kafka's name) | key | value (flexible v0) |
//! |---|---|---|
//! | ConsumerGroupMetadata | v3: `i16 3, str group` | `i16 0, i32 epoch, tagged {0: i64 metadata_hash}` |
//! | ConsumerGroupMemberMetadata | v5: `i16 5, str group, str member` | `i16 0, cnstr instance_id, cnstr rack_id, cstr client_id, cstr client_host, carray<cstr> subscribed_topic_names, cnstr subscribed_topic_regex, i32 rebalance_timeout_ms, cnstr server_assignor, tagged {0: ClassicMemberMetadata}` |
//!
//! `ClassicMemberMetadata` = `i32 session_timeout_ms, carray<{cstr name, cbytes metadata, tagged}> supported_protocols, tagged` (a classic member inside the group).
//! | ConsumerGroupTargetAssignmentMetadata | v6: `i16 6, str group` | `i16 0, i32 assignment_epoch, tagged` |
//! | ConsumerGroupTargetAssignmentMember | v7: `i16 7, str group, str member` | `i16 0, carray<TopicPartitions> topic_partitions, tagged` |
//! | ConsumerGroupCurrentMemberAssignment | v8: `i16 8, str group, str member` | `i16 0, i32 member_epoch, i32 previous_member_epoch, i8 state, carray<TopicPartitions> assigned_partitions, carray<TopicPartitions> partitions_pending_revocation, tagged` |
//!
//! `TopicPartitions` = `uuid topic_id, carray<i32> partitions, tagged {0: carray<i32>
//! assignment_epochs}` (the epochs only in the current assignment). Keys use classic
//! strings (`i16` length); values are flexible (`cstr` = uvarint length+1, `cnstr` the
//! nullable form, `carray` = uvarint count+1, `tagged` = tagged fields). A null value is a
//! tombstone. Member keys are per (group, member), so compaction keeps each member's latest
//! record. Key 4 (subscription metadata, no longer written by Kafka 4.1) is read as
//! `Ignored`; as in 4.1, the subscribed topics' metadata is summarised by the metadata
//! hash in the group epoch record instead.
//!
//! Everything read back is bounded: every length and count is checked against the bytes
//! that remain before anything is allocated.
use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::group::Assignment;
use crate::group::coordinator_records::{get_i16, get_i32, get_i64, get_str, put_str, RecordError};
use crate::group::flexible_records::{
    get_array_len, get_assignment, get_assignment_with_epochs, get_compact_nullable_str, get_compact_str, get_i8, get_tagged_fields, get_uvarint,
    put_assignment, put_assignment_with_epochs, put_compact_nullable_str, put_compact_str, put_len, put_uvarint, AssignmentEpochs,
};

pub const GROUP_METADATA_KEY_VERSION: i16 = 3;
pub const MEMBER_METADATA_KEY_VERSION: i16 = 5;
pub const TARGET_ASSIGNMENT_METADATA_KEY_VERSION: i16 = 6;
pub const TARGET_ASSIGNMENT_MEMBER_KEY_VERSION: i16 = 7;
pub const CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION: i16 = 8;
/// Every consumer-group value is version 0 (flexible).
const VALUE_VERSION: i16 = 0;
/// Tag of ConsumerGroupMetadataValue.MetadataHash.
const METADATA_HASH_TAG: u32 = 0;

/// ConsumerGroupMemberMetadataValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// The member's regex subscription (KIP-848), if any.
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set for a member speaking the classic protocol inside the consumer group (KIP-848
    /// online migration): tagged field 0.
    pub classic: Option<ClassicMemberMetadata>,
}

/// ConsumerGroupMemberMetadataValue.ClassicMemberMetadata: what a classic member sent in
/// its JoinGroup, kept to answer it and to turn the group back into a classic one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

/// Tag of ConsumerGroupMemberMetadataValue.ClassicMemberMetadata.
const CLASSIC_MEMBER_METADATA_TAG: u32 = 0;
/// Longest protocol metadata read back (a JoinGroup's metadata is bounded by the request).
const MAX_PROTOCOL_METADATA_BYTES: usize = 1 << 20;

fn put_classic_member_metadata(b: &mut BytesMut, c: &ClassicMemberMetadata) {
    let mut f = BytesMut::new();
    f.put_i32(c.session_timeout_ms);
    put_len(&mut f, c.protocols.len());
    for (name, metadata) in &c.protocols {
        put_compact_str(&mut f, name);
        put_len(&mut f, metadata.len());
        f.put_slice(metadata);
        put_uvarint(&mut f, 0);
    }
    put_uvarint(&mut f, 0);
    put_uvarint(b, 1);
    put_uvarint(b, CLASSIC_MEMBER_METADATA_TAG);
    // A tagged field's size is its plain byte count (no +1).
    put_uvarint(b, u32::try_from(f.len()).unwrap_or(u32::MAX));
    b.put_slice(&f);
}

fn get_classic_member_metadata(mut f: Bytes) -> Result<ClassicMemberMetadata, RecordError> {
    let session_timeout_ms = get_i32(&mut f)?;
    // Each protocol takes at least 3 bytes (name length, metadata length, tagged fields).
    let n = get_array_len(&mut f, 3)?;
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = get_compact_str(&mut f)?;
        let len = (get_uvarint(&mut f)? as usize).checked_sub(1).ok_or(RecordError::Truncated)?;
        if len > MAX_PROTOCOL_METADATA_BYTES || f.remaining() < len {
            return Err(RecordError::Truncated);
        }
        let metadata = f.split_to(len);
        get_tagged_fields(&mut f, None)?;
        protocols.push((name, metadata));
    }
    Ok(ClassicMemberMetadata { session_timeout_ms, protocols })
}

/// ConsumerGroupCurrentMemberAssignmentValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState value (0 stable, 1 unrevoked, 2 unreleased partitions).
    pub state: i8,
    pub assigned_partitions: Assignment,
    pub partitions_pending_revocation: Assignment,
    /// Each partition's assignment epoch, of both sets (tag 0 of each `TopicPartitions`;
    /// a record without them reads as the member epoch, as Kafka reads it).
    pub assignment_epochs: AssignmentEpochs,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// The group epoch and the subscribed topics' metadata hash; None = tombstone.
    GroupEpoch { group: String, epoch: Option<i32>, metadata_hash: i64 },
    /// One member's subscription and client; None = the member left.
    MemberMetadata { group: String, member: String, value: Option<MemberMetadataValue> },
    /// The target assignment's epoch; None = tombstone (group deleted).
    TargetAssignmentMetadata { group: String, assignment_epoch: Option<i32> },
    /// One member's target assignment; None = tombstone.
    TargetAssignmentMember { group: String, member: String, partitions: Option<Assignment> },
    /// One member's epoch and current partitions; None = tombstone.
    CurrentMemberAssignment { group: String, member: String, value: Option<CurrentAssignmentValue> },
    /// A consumer-group record kind this broker does not use (key version 4).
    Ignored { key_version: i16 },
}

fn get_value_version(v: &mut Bytes) -> Result<(), RecordError> {
    match get_i16(v)? {
        VALUE_VERSION => Ok(()),
        version => Err(RecordError::UnknownVersion(version)),
    }
}

impl ConsumerRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        match self {
            ConsumerRecord::GroupEpoch { group, .. } => {
                b.put_i16(GROUP_METADATA_KEY_VERSION);
                put_str(&mut b, group);
            }
            ConsumerRecord::TargetAssignmentMetadata { group, .. } => {
                b.put_i16(TARGET_ASSIGNMENT_METADATA_KEY_VERSION);
                put_str(&mut b, group);
            }
            ConsumerRecord::MemberMetadata { group, member, .. } => {
                b.put_i16(MEMBER_METADATA_KEY_VERSION);
                put_str(&mut b, group);
                put_str(&mut b, member);
            }
            ConsumerRecord::TargetAssignmentMember { group, member, .. } => {
                b.put_i16(TARGET_ASSIGNMENT_MEMBER_KEY_VERSION);
                put_str(&mut b, group);
                put_str(&mut b, member);
            }
            ConsumerRecord::CurrentMemberAssignment { group, member, .. } => {
                b.put_i16(CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION);
                put_str(&mut b, group);
                put_str(&mut b, member);
            }
            ConsumerRecord::Ignored { key_version } => b.put_i16(*key_version),
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut b = BytesMut::new();
        b.put_i16(VALUE_VERSION);
        match self {
            ConsumerRecord::GroupEpoch { epoch: Some(e), metadata_hash, .. } => {
                b.put_i32(*e);
                // A tagged field is written only when it is not its default (0), as Kafka.
                if *metadata_hash != 0 {
                    put_uvarint(&mut b, 1);
                    put_uvarint(&mut b, METADATA_HASH_TAG);
                    put_uvarint(&mut b, 8);
                    b.put_i64(*metadata_hash);
                } else {
                    put_uvarint(&mut b, 0);
                }
            }
            ConsumerRecord::MemberMetadata { value: Some(v), .. } => {
                put_compact_nullable_str(&mut b, v.instance_id.as_deref());
                put_compact_nullable_str(&mut b, v.rack_id.as_deref());
                put_compact_str(&mut b, &v.client_id);
                put_compact_str(&mut b, &v.client_host);
                put_len(&mut b, v.subscribed_topic_names.len());
                for n in &v.subscribed_topic_names {
                    put_compact_str(&mut b, n);
                }
                put_compact_nullable_str(&mut b, v.subscribed_topic_regex.as_deref());
                b.put_i32(v.rebalance_timeout_ms);
                put_compact_nullable_str(&mut b, v.server_assignor.as_deref());
                match &v.classic {
                    Some(c) => put_classic_member_metadata(&mut b, c),
                    None => put_uvarint(&mut b, 0),
                }
            }
            ConsumerRecord::TargetAssignmentMetadata { assignment_epoch: Some(e), .. } => {
                b.put_i32(*e);
                put_uvarint(&mut b, 0);
            }
            ConsumerRecord::TargetAssignmentMember { partitions: Some(a), .. } => {
                put_assignment(&mut b, a);
                put_uvarint(&mut b, 0);
            }
            ConsumerRecord::CurrentMemberAssignment { value: Some(v), .. } => {
                b.put_i32(v.member_epoch);
                b.put_i32(v.previous_member_epoch);
                b.put_i8(v.state);
                let epochs = Some((&v.assignment_epochs, v.member_epoch.max(0)));
                put_assignment_with_epochs(&mut b, &v.assigned_partitions, epochs);
                put_assignment_with_epochs(&mut b, &v.partitions_pending_revocation, epochs);
                put_uvarint(&mut b, 0);
            }
            _ => return None,
        }
        Some(b.freeze())
    }

    /// Parses a record whose key version (already read from `key`) is 3-8.
    pub fn parse(key_version: i16, mut key: Bytes, value: Option<Bytes>) -> Result<ConsumerRecord, RecordError> {
        let group = match key_version {
            GROUP_METADATA_KEY_VERSION
            | MEMBER_METADATA_KEY_VERSION
            | TARGET_ASSIGNMENT_METADATA_KEY_VERSION
            | TARGET_ASSIGNMENT_MEMBER_KEY_VERSION
            | CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION => get_str(&mut key)?,
            _ => return Ok(ConsumerRecord::Ignored { key_version }),
        };
        let mut value = value;
        if let Some(v) = value.as_mut() {
            get_value_version(v)?;
        }
        Ok(match key_version {
            GROUP_METADATA_KEY_VERSION => match value {
                None => ConsumerRecord::GroupEpoch { group, epoch: None, metadata_hash: 0 },
                Some(mut v) => {
                    let epoch = get_i32(&mut v)?;
                    // Records written before the hash was stored may end right here.
                    let hash = if v.has_remaining() { get_tagged_fields(&mut v, Some(METADATA_HASH_TAG))? } else { None };
                    let metadata_hash = match hash {
                        Some(mut h) => get_i64(&mut h)?,
                        None => 0,
                    };
                    ConsumerRecord::GroupEpoch { group, epoch: Some(epoch), metadata_hash }
                }
            },
            TARGET_ASSIGNMENT_METADATA_KEY_VERSION => match value {
                None => ConsumerRecord::TargetAssignmentMetadata { group, assignment_epoch: None },
                Some(mut v) => ConsumerRecord::TargetAssignmentMetadata { group, assignment_epoch: Some(get_i32(&mut v)?) },
            },
            MEMBER_METADATA_KEY_VERSION => {
                let member = get_str(&mut key)?;
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        let instance_id = get_compact_nullable_str(&mut v)?;
                        let rack_id = get_compact_nullable_str(&mut v)?;
                        let client_id = get_compact_str(&mut v)?;
                        let client_host = get_compact_str(&mut v)?;
                        let n = get_array_len(&mut v, 1)?;
                        let mut subscribed_topic_names = Vec::with_capacity(n);
                        for _ in 0..n {
                            subscribed_topic_names.push(get_compact_str(&mut v)?);
                        }
                        let subscribed_topic_regex = get_compact_nullable_str(&mut v)?;
                        let rebalance_timeout_ms = get_i32(&mut v)?;
                        let server_assignor = get_compact_nullable_str(&mut v)?;
                        let classic = match get_tagged_fields(&mut v, Some(CLASSIC_MEMBER_METADATA_TAG))? {
                            Some(f) => Some(get_classic_member_metadata(f)?),
                            None => None,
                        };
                        Some(MemberMetadataValue {
                            instance_id,
                            rack_id,
                            client_id,
                            client_host,
                            subscribed_topic_names,
                            subscribed_topic_regex,
                            rebalance_timeout_ms,
                            server_assignor,
                            classic,
                        })
                    }
                };
                ConsumerRecord::MemberMetadata { group, member, value }
            }
            TARGET_ASSIGNMENT_MEMBER_KEY_VERSION => {
                let member = get_str(&mut key)?;
                let partitions = match value {
                    None => None,
                    Some(mut v) => Some(get_assignment(&mut v)?),
                };
                ConsumerRecord::TargetAssignmentMember { group, member, partitions }
            }
            _ => {
                let member = get_str(&mut key)?;
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        let (member_epoch, previous_member_epoch, state) = (get_i32(&mut v)?, get_i32(&mut v)?, get_i8(&mut v)?);
                        // Kafka's default for a partition without an epoch (a static
                        // member's -2 read as 0).
                        let default_epoch = member_epoch.max(0);
                        let (assigned_partitions, mut assignment_epochs) = get_assignment_with_epochs(&mut v, default_epoch)?;
                        let (partitions_pending_revocation, pending_epochs) = get_assignment_with_epochs(&mut v, default_epoch)?;
                        assignment_epochs.extend(pending_epochs);
                        Some(CurrentAssignmentValue {
                            member_epoch,
                            previous_member_epoch,
                            state,
                            assigned_partitions,
                            partitions_pending_revocation,
                            assignment_epochs,
                        })
                    }
                };
                ConsumerRecord::CurrentMemberAssignment { group, member, value }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::coordinator_records::OffsetsRecord;
    use uuid::Uuid;

    fn assignment(topic: u128, ps: &[i32]) -> Assignment {
        let mut a = Assignment::new();
        a.insert(Uuid::from_u128(topic), ps.iter().copied().collect());
        a
    }

    fn samples() -> Vec<ConsumerRecord> {
        let mut two = assignment(1, &[0, 3, 70_000]);
        two.extend(assignment(2, &[1]));
        vec![
            ConsumerRecord::GroupEpoch { group: "g".into(), epoch: Some(42), metadata_hash: 0 },
            ConsumerRecord::GroupEpoch { group: "g".into(), epoch: Some(43), metadata_hash: -77 },
            ConsumerRecord::GroupEpoch { group: "g".into(), epoch: None, metadata_hash: 0 },
            ConsumerRecord::MemberMetadata {
                group: "g".into(),
                member: "m1".into(),
                value: Some(MemberMetadataValue {
                    instance_id: Some("i1".into()),
                    rack_id: None,
                    client_id: "consumer-g-1".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["a".into(), "b".repeat(249)],
                    subscribed_topic_regex: None,
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                    classic: None,
                }),
            },
            ConsumerRecord::MemberMetadata {
                group: "g".into(),
                member: "m2".into(),
                value: Some(MemberMetadataValue {
                    instance_id: None,
                    rack_id: Some("r".into()),
                    client_id: "classic".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["a".into()],
                    subscribed_topic_regex: None,
                    rebalance_timeout_ms: 300_000,
                    server_assignor: None,
                    classic: Some(ClassicMemberMetadata {
                        session_timeout_ms: 45_000,
                        protocols: vec![("range".into(), Bytes::from_static(&[0, 3, 0, 0, 0, 1])), ("cooperative-sticky".into(), Bytes::new())],
                    }),
                }),
            },
            ConsumerRecord::MemberMetadata { group: "g".into(), member: "m1".into(), value: None },
            ConsumerRecord::TargetAssignmentMetadata { group: "g".into(), assignment_epoch: Some(42) },
            ConsumerRecord::TargetAssignmentMetadata { group: "g".into(), assignment_epoch: None },
            ConsumerRecord::TargetAssignmentMember { group: "g".into(), member: "m1".into(), partitions: Some(two.clone()) },
            ConsumerRecord::TargetAssignmentMember { group: "g".into(), member: "m1".into(), partitions: Some(Assignment::new()) },
            ConsumerRecord::TargetAssignmentMember { group: "g".into(), member: "m1".into(), partitions: None },
            ConsumerRecord::CurrentMemberAssignment {
                group: "g".into(),
                member: "m1".into(),
                value: Some(CurrentAssignmentValue {
                    member_epoch: 42,
                    previous_member_epoch: 41,
                    state: 1,
                    assigned_partitions: two,
                    partitions_pending_revocation: assignment(3, &[5]),
                    // Partitions given at several epochs, the one pending revocation too.
                    assignment_epochs: [((1, 0), 40), ((1, 3), 42), ((1, 70_000), 7), ((2, 1), 0), ((3, 5), 41)]
                        .into_iter()
                        .map(|((t, p), e)| ((Uuid::from_u128(t), p), e))
                        .collect(),
                }),
            },
            ConsumerRecord::CurrentMemberAssignment { group: "g".into(), member: "m1".into(), value: None },
        ]
    }

    #[test]
    fn round_trip_through_offsets_record() {
        for r in samples() {
            let rec = OffsetsRecord::Consumer(r.clone());
            assert_eq!(OffsetsRecord::parse(Some(rec.key()), rec.value()).unwrap(), rec);
        }
        // Kafka's subscription metadata key (4) is skipped, not an error.
        let k = Bytes::from_static(&[0, 4, 0, 1, b'g']);
        assert_eq!(OffsetsRecord::parse(Some(k), None).unwrap(), OffsetsRecord::Consumer(ConsumerRecord::Ignored { key_version: 4 }));
        // A group epoch value as written before the hash was stored (and without tagged fields).
        let k = ConsumerRecord::GroupEpoch { group: "g".into(), epoch: None, metadata_hash: 0 }.key();
        for v in [&[0u8, 0, 0, 0, 0, 9, 0][..], &[0, 0, 0, 0, 0, 9]] {
            let r = OffsetsRecord::parse(Some(k.clone()), Some(Bytes::copy_from_slice(v))).unwrap();
            assert_eq!(r, OffsetsRecord::Consumer(ConsumerRecord::GroupEpoch { group: "g".into(), epoch: Some(9), metadata_hash: 0 }));
        }
        // Member keys are per (group, member): compaction supersedes per member.
        // A current assignment written without epochs (before Kafka 4.4, or by shardlog
        // before it kept them): each partition reads as given at the member epoch.
        let mut without = CurrentAssignmentValue {
            member_epoch: 42,
            previous_member_epoch: 41,
            state: 0,
            assigned_partitions: assignment(1, &[0, 3]),
            partitions_pending_revocation: assignment(3, &[5]),
            assignment_epochs: AssignmentEpochs::new(),
        };
        let mut v = BytesMut::new();
        v.put_i16(0);
        v.put_i32(42);
        v.put_i32(41);
        v.put_i8(0);
        put_assignment(&mut v, &without.assigned_partitions);
        put_assignment(&mut v, &without.partitions_pending_revocation);
        put_uvarint(&mut v, 0);
        let k = ConsumerRecord::CurrentMemberAssignment { group: "g".into(), member: "m".into(), value: None }.key();
        without.assignment_epochs = [((1, 0), 42), ((1, 3), 42), ((3, 5), 42)].into_iter().map(|((t, p), e)| ((Uuid::from_u128(t), p), e)).collect();
        assert_eq!(
            OffsetsRecord::parse(Some(k), Some(v.freeze())).unwrap(),
            OffsetsRecord::Consumer(ConsumerRecord::CurrentMemberAssignment { group: "g".into(), member: "m".into(), value: Some(without) })
        );
        let a = ConsumerRecord::CurrentMemberAssignment { group: "g".into(), member: "a".into(), value: None };
        let b = ConsumerRecord::CurrentMemberAssignment { group: "g".into(), member: "b".into(), value: None };
        assert_ne!(a.key(), b.key());
    }

    #[test]
    fn garbage_never_panics() {
        let samples: Vec<(Bytes, Bytes)> = samples().iter().map(|r| (r.key(), r.value().unwrap_or_default())).collect();
        crate::group::flexible_records::assert_parse_never_panics(&samples, 3..=8, |kv, k, v| {
            let _ = ConsumerRecord::parse(kv, k, v);
        });
        // A count far beyond the bytes left is refused before anything is reserved.
        let mut v = BytesMut::new();
        v.put_i16(0);
        put_uvarint(&mut v, u32::MAX);
        let k = Bytes::from_static(&[0, 1, b'g', 0, 1, b'm']);
        assert_eq!(ConsumerRecord::parse(7, k, Some(v.freeze())), Err(RecordError::Truncated));
    }
}
