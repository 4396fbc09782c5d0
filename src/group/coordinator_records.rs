//! Records stored in `__consumer_offsets`, in Kafka's layout (so the log reads the same
//! way Kafka's does):
//!
//! | record | key | value |
//! |---|---|---|
//! | offset commit | v1: `i16 1, str group, str topic, i32 partition` | v3: `i16 3, i64 offset, i32 leader_epoch, str metadata, i64 commit_timestamp` |
//! | group metadata | v2: `i16 2, str group` | v3: `i16 3, str protocol_type, i32 generation, nullable str protocol, nullable str leader, i64 state_timestamp, i32 member_count` |
//!
//! | offset commit with expiry | (same key) | v1: `i16 1, i64 offset, str metadata, i64 commit_timestamp, i64 expire_timestamp` |
//!
//! The group value ends with `i32 member_count` then per member: `str member_id, nullable
//! str group_instance_id, str client_id, str client_host, i32 rebalance_timeout,
//! i32 session_timeout, bytes subscription, bytes assignment` (`bytes` = i32 length then
//! the bytes). Members are stored with each generation's assignment, so a restarted
//! coordinator loads a Stable group its members keep heartbeating into, as Kafka's does.
//!
//! `str` is an i16 length then UTF-8 bytes (-1 = null). A null value is a tombstone
//! (offset deleted / group deleted). Records go in a plain RecordBatch v2 (producer id -1).
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::records::Compression;

use crate::record::{encode_batch, NewRecord};

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
/// The offset value version that carries an explicit expire timestamp (OffsetCommit v2-v4
/// with a retention time), as Kafka writes it.
const OFFSET_VALUE_VERSION_WITH_EXPIRY: i16 = 1;
const GROUP_VALUE_VERSION: i16 = 3;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Set by OffsetCommit v2-v4 with a retention time; the offset expires then.
    pub expire_timestamp_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsRecord {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<OffsetValue>,
    },
    Group {
        group: String,
        value: Option<GroupValue>,
    },
    /// KIP-848 consumer-group records (key versions 3-8), see consumer/records.rs.
    Consumer(super::consumer::consumer_group_records::ConsumerRecord),
    /// KIP-932 share-group records (key versions 10-15), see share/share_group_records.rs.
    Share(super::share::share_group_records::ShareRecord),
    /// KIP-1071 streams-group records (key versions 16-23), see streams/streams_group_records.rs.
    Streams(super::streams::streams_group_records::StreamsRecord),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("record key missing")]
    NoKey,
    #[error("record truncated")]
    Truncated,
    #[error("unknown record version {0}")]
    UnknownVersion(i16),
    #[error("string is not UTF-8")]
    Utf8,
    #[error("invalid record: {0}")]
    Invalid(String),
}

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    // Strings written here come from requests already bounded below i16::MAX bytes
    // (group ids, topic names, metadata checked against offset_metadata_max_bytes).
    let len = s.len().min(i16::MAX as usize);
    b.put_i16(len as i16);
    b.put_slice(&s.as_bytes()[..len]);
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

pub(crate) fn get_i16(b: &mut Bytes) -> Result<i16, RecordError> {
    if b.remaining() < 2 {
        return Err(RecordError::Truncated);
    }
    Ok(b.get_i16())
}
pub(crate) fn get_i32(b: &mut Bytes) -> Result<i32, RecordError> {
    if b.remaining() < 4 {
        return Err(RecordError::Truncated);
    }
    Ok(b.get_i32())
}
pub(crate) fn get_i64(b: &mut Bytes) -> Result<i64, RecordError> {
    if b.remaining() < 8 {
        return Err(RecordError::Truncated);
    }
    Ok(b.get_i64())
}
pub(crate) fn get_nullable_str(b: &mut Bytes) -> Result<Option<String>, RecordError> {
    let len = get_i16(b)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    if b.remaining() < len {
        return Err(RecordError::Truncated);
    }
    let s = b.split_to(len);
    String::from_utf8(s.to_vec()).map(Some).map_err(|_| RecordError::Utf8)
}
fn put_bytes(b: &mut BytesMut, v: &Bytes) {
    // Member metadata and assignments are bounded by the request frame limit (< 2 GiB).
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

fn get_bytes(b: &mut Bytes) -> Result<Bytes, RecordError> {
    let n = get_i32(b)?;
    if n < 0 {
        return Ok(Bytes::new());
    }
    let n = n as usize;
    if b.remaining() < n {
        return Err(RecordError::Truncated);
    }
    Ok(b.split_to(n))
}

fn get_member(v: &mut Bytes) -> Result<MemberValue, RecordError> {
    Ok(MemberValue {
        member_id: get_str(v)?,
        instance_id: get_nullable_str(v)?,
        client_id: get_str(v)?,
        client_host: get_str(v)?,
        rebalance_timeout_ms: get_i32(v)?,
        session_timeout_ms: get_i32(v)?,
        subscription: get_bytes(v)?,
        assignment: get_bytes(v)?,
    })
}

pub(crate) fn get_str(b: &mut Bytes) -> Result<String, RecordError> {
    Ok(get_nullable_str(b)?.unwrap_or_default())
}

impl OffsetsRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        match self {
            OffsetsRecord::Consumer(r) => return r.key(),
            OffsetsRecord::Share(r) => return r.key(),
            OffsetsRecord::Streams(r) => return r.key(),
            OffsetsRecord::Offset { group, topic, partition, .. } => {
                b.put_i16(OFFSET_KEY_VERSION);
                put_str(&mut b, group);
                put_str(&mut b, topic);
                b.put_i32(*partition);
            }
            OffsetsRecord::Group { group, .. } => {
                b.put_i16(GROUP_KEY_VERSION);
                put_str(&mut b, group);
            }
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut b = BytesMut::new();
        match self {
            OffsetsRecord::Consumer(r) => return r.value(),
            OffsetsRecord::Share(r) => return r.value(),
            OffsetsRecord::Streams(r) => return r.value(),
            OffsetsRecord::Offset { value: Some(v), .. } => match v.expire_timestamp_ms {
                Some(expire) => {
                    b.put_i16(OFFSET_VALUE_VERSION_WITH_EXPIRY);
                    b.put_i64(v.offset);
                    put_str(&mut b, &v.metadata);
                    b.put_i64(v.commit_timestamp_ms);
                    b.put_i64(expire);
                }
                None => {
                    b.put_i16(OFFSET_VALUE_VERSION);
                    b.put_i64(v.offset);
                    b.put_i32(v.leader_epoch);
                    put_str(&mut b, &v.metadata);
                    b.put_i64(v.commit_timestamp_ms);
                }
            },
            OffsetsRecord::Group { value: Some(v), .. } => {
                b.put_i16(GROUP_VALUE_VERSION);
                put_str(&mut b, &v.protocol_type);
                b.put_i32(v.generation);
                put_nullable_str(&mut b, v.protocol.as_deref());
                put_nullable_str(&mut b, v.leader.as_deref());
                b.put_i64(v.state_timestamp_ms);
                b.put_i32(v.members.len() as i32);
                for m in &v.members {
                    put_str(&mut b, &m.member_id);
                    put_nullable_str(&mut b, m.instance_id.as_deref());
                    put_str(&mut b, &m.client_id);
                    put_str(&mut b, &m.client_host);
                    b.put_i32(m.rebalance_timeout_ms);
                    b.put_i32(m.session_timeout_ms);
                    put_bytes(&mut b, &m.subscription);
                    put_bytes(&mut b, &m.assignment);
                }
            }
            _ => return None,
        }
        Some(b.freeze())
    }

    /// Parses one stored record (key and value as found in the log).
    pub fn parse(key: Option<Bytes>, value: Option<Bytes>) -> Result<OffsetsRecord, RecordError> {
        let mut k = key.ok_or(RecordError::NoKey)?;
        match get_i16(&mut k)? {
            // Kafka's offset keys v0 and v1 have the same layout.
            0 | 1 => {
                let group = get_str(&mut k)?;
                let topic = get_str(&mut k)?;
                let partition = get_i32(&mut k)?;
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        match get_i16(&mut v)? {
                            OFFSET_VALUE_VERSION => Some(OffsetValue {
                                offset: get_i64(&mut v)?,
                                leader_epoch: get_i32(&mut v)?,
                                metadata: get_str(&mut v)?,
                                commit_timestamp_ms: get_i64(&mut v)?,
                                expire_timestamp_ms: None,
                            }),
                            OFFSET_VALUE_VERSION_WITH_EXPIRY => {
                                let offset = get_i64(&mut v)?;
                                let metadata = get_str(&mut v)?;
                                let commit_timestamp_ms = get_i64(&mut v)?;
                                let expire = get_i64(&mut v)?;
                                Some(OffsetValue {
                                    offset,
                                    leader_epoch: -1,
                                    metadata,
                                    commit_timestamp_ms,
                                    // Kafka writes -1 for "no explicit expiry" in v1.
                                    expire_timestamp_ms: (expire >= 0).then_some(expire),
                                })
                            }
                            version => return Err(RecordError::UnknownVersion(version)),
                        }
                    }
                };
                Ok(OffsetsRecord::Offset { group, topic, partition, value })
            }
            2 => {
                let group = get_str(&mut k)?;
                let value = match value {
                    None => None,
                    Some(mut v) => {
                        let version = get_i16(&mut v)?;
                        if version != GROUP_VALUE_VERSION {
                            return Err(RecordError::UnknownVersion(version));
                        }
                        let protocol_type = get_str(&mut v)?;
                        let generation = get_i32(&mut v)?;
                        let protocol = get_nullable_str(&mut v)?;
                        let leader = get_nullable_str(&mut v)?;
                        let state_timestamp_ms = get_i64(&mut v)?;
                        let count = get_i32(&mut v)?.max(0) as usize;
                        // Each member takes at least 24 bytes: bound the count by what is left
                        // before reserving.
                        if count > v.remaining() / 24 {
                            return Err(RecordError::Truncated);
                        }
                        let mut members = Vec::with_capacity(count);
                        for _ in 0..count {
                            members.push(get_member(&mut v)?);
                        }
                        Some(GroupValue { protocol_type, generation, protocol, leader, state_timestamp_ms, members })
                    }
                };
                Ok(OffsetsRecord::Group { group, value })
            }
            v @ 3..=8 => super::consumer::consumer_group_records::ConsumerRecord::parse(v, k, value).map(OffsetsRecord::Consumer),
            v @ 10..=15 => super::share::share_group_records::ShareRecord::parse(v, k, value).map(OffsetsRecord::Share),
            v @ 16..=23 => super::streams::streams_group_records::StreamsRecord::parse(v, k, value).map(OffsetsRecord::Streams),
            v => Err(RecordError::UnknownVersion(v)),
        }
    }
}

/// One RecordBatch v2 holding `records` (non-idempotent, uncompressed), ready for
/// `Partition::append`. None if `records` is empty or the encoder fails.
pub fn build_batch(records: &[OffsetsRecord], timestamp_ms: i64) -> Option<Bytes> {
    build_batch_for(records, timestamp_ms, None)
}

/// `build_batch` as a transactional batch of producer (`id`, `epoch`) (TxnOffsetCommit).
pub fn build_batch_for(records: &[OffsetsRecord], timestamp_ms: i64, producer: Option<(i64, i16)>) -> Option<Bytes> {
    if records.is_empty() {
        return None;
    }
    let recs = records.iter().map(|r| NewRecord { key: Some(r.key()), value: r.value(), timestamp_ms });
    let encoded = match producer {
        Some((id, epoch)) => crate::record::encode_transactional_batch(recs, id, epoch),
        None => encode_batch(recs, Compression::None),
    };
    match encoded {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode __consumer_offsets records");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let recs = vec![
            OffsetsRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                value: Some(OffsetValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp_ms: 7, expire_timestamp_ms: None }),
            },
            OffsetsRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 5,
                value: Some(OffsetValue { offset: 9, leader_epoch: -1, metadata: String::new(), commit_timestamp_ms: 7, expire_timestamp_ms: Some(99) }),
            },
            OffsetsRecord::Offset { group: "g".into(), topic: "t".into(), partition: 4, value: None },
            OffsetsRecord::Group {
                group: "g".into(),
                value: Some(GroupValue {
                    protocol_type: "consumer".into(),
                    generation: 5,
                    protocol: Some("range".into()),
                    leader: Some("m1".into()),
                    state_timestamp_ms: 9,
                    members: vec![MemberValue {
                        member_id: "m1".into(),
                        instance_id: Some("i1".into()),
                        client_id: "c".into(),
                        client_host: "/127.0.0.1".into(),
                        rebalance_timeout_ms: 300_000,
                        session_timeout_ms: 45_000,
                        subscription: Bytes::from_static(b"sub"),
                        assignment: Bytes::from_static(b"assign"),
                    }],
                }),
            },
            OffsetsRecord::Group { group: "g".into(), value: None },
        ];
        for r in &recs {
            assert_eq!(&OffsetsRecord::parse(Some(r.key()), r.value()).unwrap(), r);
        }
        let batch = build_batch(&recs, 1).unwrap();
        let h = crate::record::validate_produce_records(&batch, &crate::record::ProduceChecks::with_max_message_bytes(1 << 20)).unwrap();
        assert_eq!(h[0].records_count, 5);
        let mut b = batch.clone();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut b).unwrap();
        let back: Vec<_> = set.records.into_iter().map(|r| OffsetsRecord::parse(r.key, r.value).unwrap()).collect();
        assert_eq!(back, recs);
    }

    #[test]
    fn garbage_never_panics() {
        for n in 0..20 {
            let k = Bytes::from(vec![0u8; n]);
            let _ = OffsetsRecord::parse(Some(k.clone()), Some(k));
        }
        assert_eq!(OffsetsRecord::parse(None, None), Err(RecordError::NoKey));
        assert_eq!(OffsetsRecord::parse(Some(Bytes::from_static(&[0, 9])), None), Err(RecordError::UnknownVersion(9)));
    }
}
