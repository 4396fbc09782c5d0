//! Records stored in `__consumer_offsets`, in Kafka's layout (so the log reads the same
//! way Kafka's does):
//!
//! | record | key | value |
//! |---|---|---|
//! | offset commit | v1: `i16 1, str group, str topic, i32 partition` | v3: `i16 3, i64 offset, i32 leader_epoch, str metadata, i64 commit_timestamp` |
//! | group metadata | v2: `i16 2, str group` | v3: `i16 3, str protocol_type, i32 generation, nullable str protocol, nullable str leader, i64 state_timestamp, i32 member_count` |
//!
//! `str` is an i16 length then UTF-8 bytes (-1 = null). A null value is a tombstone
//! (offset deleted / group deleted). Members are not persisted (member_count is 0): after a
//! restart a group comes back Empty with its generation, and members rejoin, as they do
//! after a coordinator move. Records go in a plain RecordBatch v2 (producer id -1).
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::records::Compression;

use crate::protocol::batch_builder::{encode_batch, NewRecord};

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsRecord {
    Offset { group: String, topic: String, partition: i32, value: Option<OffsetValue> },
    Group { group: String, value: Option<GroupValue> },
    /// KIP-848 consumer-group records (key versions 3-8), see consumer/records.rs.
    Consumer(super::consumer::records::ConsumerRecord),
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
}

fn put_str(b: &mut BytesMut, s: &str) {
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

fn get_i16(b: &mut Bytes) -> Result<i16, RecordError> {
    if b.remaining() < 2 { return Err(RecordError::Truncated) }
    Ok(b.get_i16())
}
fn get_i32(b: &mut Bytes) -> Result<i32, RecordError> {
    if b.remaining() < 4 { return Err(RecordError::Truncated) }
    Ok(b.get_i32())
}
fn get_i64(b: &mut Bytes) -> Result<i64, RecordError> {
    if b.remaining() < 8 { return Err(RecordError::Truncated) }
    Ok(b.get_i64())
}
fn get_nullable_str(b: &mut Bytes) -> Result<Option<String>, RecordError> {
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
fn get_str(b: &mut Bytes) -> Result<String, RecordError> {
    Ok(get_nullable_str(b)?.unwrap_or_default())
}

impl OffsetsRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        match self {
            OffsetsRecord::Consumer(r) => return r.key(),
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
            OffsetsRecord::Offset { value: Some(v), .. } => {
                b.put_i16(OFFSET_VALUE_VERSION);
                b.put_i64(v.offset);
                b.put_i32(v.leader_epoch);
                put_str(&mut b, &v.metadata);
                b.put_i64(v.commit_timestamp_ms);
            }
            OffsetsRecord::Group { value: Some(v), .. } => {
                b.put_i16(GROUP_VALUE_VERSION);
                put_str(&mut b, &v.protocol_type);
                b.put_i32(v.generation);
                put_nullable_str(&mut b, v.protocol.as_deref());
                put_nullable_str(&mut b, v.leader.as_deref());
                b.put_i64(v.state_timestamp_ms);
                b.put_i32(0);
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
                        let version = get_i16(&mut v)?;
                        if version != OFFSET_VALUE_VERSION {
                            return Err(RecordError::UnknownVersion(version));
                        }
                        Some(OffsetValue {
                            offset: get_i64(&mut v)?,
                            leader_epoch: get_i32(&mut v)?,
                            metadata: get_str(&mut v)?,
                            commit_timestamp_ms: get_i64(&mut v)?,
                        })
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
                        Some(GroupValue {
                            protocol_type: get_str(&mut v)?,
                            generation: get_i32(&mut v)?,
                            protocol: get_nullable_str(&mut v)?,
                            leader: get_nullable_str(&mut v)?,
                            state_timestamp_ms: get_i64(&mut v)?,
                        })
                    }
                };
                Ok(OffsetsRecord::Group { group, value })
            }
            v @ 3..=8 => super::consumer::records::ConsumerRecord::parse(v, k, value).map(OffsetsRecord::Consumer),
            v => Err(RecordError::UnknownVersion(v)),
        }
    }
}

/// One RecordBatch v2 holding `records` (non-idempotent, uncompressed), ready for
/// `Partition::append`. None if `records` is empty or the encoder fails.
pub fn build_batch(records: &[OffsetsRecord], timestamp_ms: i64) -> Option<Bytes> {
    if records.is_empty() {
        return None;
    }
    let recs = records.iter().map(|r| NewRecord { key: Some(r.key()), value: r.value(), timestamp_ms });
    match encode_batch(recs, Compression::None) {
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
                value: Some(OffsetValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp_ms: 7 }),
            },
            OffsetsRecord::Offset { group: "g".into(), topic: "t".into(), partition: 4, value: None },
            OffsetsRecord::Group {
                group: "g".into(),
                value: Some(GroupValue { protocol_type: "consumer".into(), generation: 5, protocol: Some("range".into()), leader: None, state_timestamp_ms: 9 }),
            },
            OffsetsRecord::Group { group: "g".into(), value: None },
        ];
        for r in &recs {
            assert_eq!(&OffsetsRecord::parse(Some(r.key()), r.value()).unwrap(), r);
        }
        let batch = build_batch(&recs, 1).unwrap();
        let h = crate::protocol::record_batch::validate_produce_records(&batch, 1 << 20).unwrap();
        assert_eq!(h[0].records_count, 4);
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
