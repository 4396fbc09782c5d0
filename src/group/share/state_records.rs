//! Records of `__share_group_state` (KIP-932), in Kafka 4.4's layout, so the share
//! coordinator's log reads the same way Kafka's does:
//!
//! | record (Kafka's name) | key | value (flexible v0) |
//! |---|---|---|
//! | ShareSnapshot | `i16 0, str group, uuid topic_id, i32 partition` | `i16 0, i32 snapshot_epoch, i32 state_epoch, i32 leader_epoch, i64 start_offset, i64 create_timestamp, i64 write_timestamp, carray<StateBatch>, tagged {0: i32 delivery_complete_count}` |
//! | ShareUpdate | `i16 1, str group, uuid topic_id, i32 partition` | `i16 0, i32 snapshot_epoch, i32 leader_epoch, i64 start_offset, carray<StateBatch>, tagged {0: i32 delivery_complete_count}` |
//!
//! `StateBatch` = `i64 first_offset, i64 last_offset, i8 delivery_state, i16 delivery_count,
//! tagged`. Keys are not flexible (`str` = i16 length, `uuid` = 16 bytes); values are.
//! The key's first i16 is the record type, not a version. DeliveryCompleteCount (KIP-1226)
//! is written only when it is not -1 (its default). A share-partition's state is deleted by a
//! null value on its snapshot key (a tombstone); an update is never null.
//!
//! Delivery states are Kafka's numbers: 0 AVAILABLE, 2 ACKNOWLEDGED, 3 ARCHIVING (4.4's
//! dead-letter flow), 4 ARCHIVED; 1 (ACQUIRED) is never persisted. They are kept as read
//! here: the coordinator stores and combines them, the share-partition's leader
//! interprets them.
//!
//! Everything read back is bounded: lengths and counts are checked against the bytes that
//! remain before anything is allocated.
use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::group::coordinator_records::{get_i16, get_i32, get_i64, get_str, put_str, RecordError};
use crate::group::flexible_records::{get_array_len, get_i8, get_tagged_fields, get_uuid, put_len, put_uvarint};
use crate::record::{encode_batch, NewRecord};

/// Record type of ShareSnapshotKey.
const SNAPSHOT_TYPE: i16 = 0;
/// Record type of ShareUpdateKey.
const UPDATE_TYPE: i16 = 1;
/// Both values are version 0 (flexible).
const VALUE_VERSION: i16 = 0;
/// Tag of DeliveryCompleteCount in both values.
const DELIVERY_COMPLETE_COUNT_TAG: u32 = 0;
/// A StateBatch's bytes: two i64, an i8, an i16, an empty tagged-field section.
const STATE_BATCH_BYTES: usize = 8 + 8 + 1 + 2 + 1;

/// Which share-partition a state is about: (group, topic id, partition).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharePartitionKey {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl SharePartitionKey {
    /// The share coordinator's key, as FindCoordinator (key type SHARE) carries it and as its
    /// `__share_group_state` partition is chosen (`coordinator_placement::partition_for`):
    /// `group:topic_id:partition`, the topic id in Kafka's text form (URL-safe base64
    /// without padding).
    pub fn coordinator_key(&self) -> String {
        use base64::Engine;
        format!("{}:{}:{}", self.group_id, base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.topic_id.as_bytes()), self.partition)
    }

    /// The key back from its text: the last two `:`-separated parts are the topic id and
    /// the partition, everything before them the group (which may hold `:`). None when it
    /// does not parse (FindCoordinator answers INVALID_REQUEST).
    pub fn parse_coordinator_key(key: &str) -> Option<SharePartitionKey> {
        use base64::Engine;
        let (rest, partition) = key.rsplit_once(':')?;
        let (group_id, topic_id) = rest.rsplit_once(':')?;
        let id: [u8; 16] = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(topic_id).ok()?.try_into().ok()?;
        Some(SharePartitionKey { group_id: group_id.to_string(), topic_id: Uuid::from_bytes(id), partition: partition.parse().ok()? })
    }
}

/// One persisted range of offsets with one delivery state and count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistedBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

/// ShareSnapshotValue: a share-partition's whole state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSnapshot {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1: not initialized to an offset yet (the leader takes `share.auto.offset.reset`).
    pub start_offset: i64,
    pub create_timestamp_ms: i64,
    pub write_timestamp_ms: i64,
    pub batches: Vec<PersistedBatch>,
    /// KIP-1226; -1 when unknown.
    pub delivery_complete_count: i32,
}

/// ShareUpdateValue: a change on top of the snapshot of `snapshot_epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareUpdate {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    /// -1: not changed.
    pub start_offset: i64,
    pub batches: Vec<PersistedBatch>,
    pub delivery_complete_count: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareStateRecord {
    /// None: the share-partition's state is deleted (tombstone).
    Snapshot {
        key: SharePartitionKey,
        value: Option<ShareSnapshot>,
    },
    Update {
        key: SharePartitionKey,
        value: ShareUpdate,
    },
    /// A record type this broker does not know (a later Kafka's): skipped, as Kafka's
    /// coordinator skips it on replay.
    Unknown {
        record_type: i16,
    },
}

impl ShareStateRecord {
    pub fn key(&self) -> Option<&SharePartitionKey> {
        match self {
            ShareStateRecord::Snapshot { key, .. } | ShareStateRecord::Update { key, .. } => Some(key),
            ShareStateRecord::Unknown { .. } => None,
        }
    }

    /// The record's key and value bytes.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        match self {
            ShareStateRecord::Snapshot { key, value } => (encode_key(SNAPSHOT_TYPE, key), value.as_ref().map(encode_snapshot)),
            ShareStateRecord::Update { key, value } => (encode_key(UPDATE_TYPE, key), Some(encode_update(value))),
            ShareStateRecord::Unknown { record_type } => (Bytes::copy_from_slice(&record_type.to_be_bytes()), None),
        }
    }

    pub fn decode(key: Option<Bytes>, value: Option<Bytes>) -> Result<ShareStateRecord, RecordError> {
        let mut k = key.ok_or(RecordError::NoKey)?;
        let record_type = get_i16(&mut k)?;
        if record_type != SNAPSHOT_TYPE && record_type != UPDATE_TYPE {
            return Ok(ShareStateRecord::Unknown { record_type });
        }
        let key = SharePartitionKey { group_id: get_str(&mut k)?, topic_id: get_uuid(&mut k)?, partition: get_i32(&mut k)? };
        match (record_type, value) {
            (SNAPSHOT_TYPE, None) => Ok(ShareStateRecord::Snapshot { key, value: None }),
            (SNAPSHOT_TYPE, Some(mut v)) => Ok(ShareStateRecord::Snapshot { key, value: Some(decode_snapshot(&mut v)?) }),
            // Kafka never writes an update tombstone; one would delete nothing.
            (_, None) => Ok(ShareStateRecord::Unknown { record_type }),
            (_, Some(mut v)) => Ok(ShareStateRecord::Update { key, value: decode_update(&mut v)? }),
        }
    }

    /// One plain RecordBatch (producer id -1) holding `records`, as the coordinator appends them.
    pub fn batch(records: &[ShareStateRecord], now_ms: i64) -> Option<Bytes> {
        let records = records.iter().map(|r| {
            let (key, value) = r.encode();
            NewRecord { key: Some(key), value, timestamp_ms: now_ms }
        });
        encode_batch(records, kafka_protocol::records::Compression::None).ok()
    }
}

fn encode_key(record_type: i16, key: &SharePartitionKey) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 2 + key.group_id.len() + 16 + 4);
    b.put_i16(record_type);
    put_str(&mut b, &key.group_id);
    b.put_slice(key.topic_id.as_bytes());
    b.put_i32(key.partition);
    b.freeze()
}

fn put_batches(b: &mut BytesMut, batches: &[PersistedBatch]) {
    put_len(b, batches.len());
    for s in batches {
        b.put_i64(s.first_offset);
        b.put_i64(s.last_offset);
        b.put_i8(s.delivery_state);
        b.put_i16(s.delivery_count);
        put_uvarint(b, 0); // no tagged fields
    }
}

fn put_delivery_complete_count(b: &mut BytesMut, count: i32) {
    if count == -1 {
        put_uvarint(b, 0);
    } else {
        put_uvarint(b, 1);
        put_uvarint(b, DELIVERY_COMPLETE_COUNT_TAG);
        put_uvarint(b, 4);
        b.put_i32(count);
    }
}

fn encode_snapshot(s: &ShareSnapshot) -> Bytes {
    let mut b = BytesMut::with_capacity(48 + s.batches.len() * STATE_BATCH_BYTES);
    b.put_i16(VALUE_VERSION);
    b.put_i32(s.snapshot_epoch);
    b.put_i32(s.state_epoch);
    b.put_i32(s.leader_epoch);
    b.put_i64(s.start_offset);
    b.put_i64(s.create_timestamp_ms);
    b.put_i64(s.write_timestamp_ms);
    put_batches(&mut b, &s.batches);
    put_delivery_complete_count(&mut b, s.delivery_complete_count);
    b.freeze()
}

fn encode_update(u: &ShareUpdate) -> Bytes {
    let mut b = BytesMut::with_capacity(32 + u.batches.len() * STATE_BATCH_BYTES);
    b.put_i16(VALUE_VERSION);
    b.put_i32(u.snapshot_epoch);
    b.put_i32(u.leader_epoch);
    b.put_i64(u.start_offset);
    put_batches(&mut b, &u.batches);
    put_delivery_complete_count(&mut b, u.delivery_complete_count);
    b.freeze()
}

fn get_value_version(v: &mut Bytes) -> Result<(), RecordError> {
    match get_i16(v)? {
        VALUE_VERSION => Ok(()),
        version => Err(RecordError::UnknownVersion(version)),
    }
}

fn get_batches(v: &mut Bytes) -> Result<Vec<PersistedBatch>, RecordError> {
    let n = get_array_len(v, STATE_BATCH_BYTES)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(PersistedBatch { first_offset: get_i64(v)?, last_offset: get_i64(v)?, delivery_state: get_i8(v)?, delivery_count: get_i16(v)? });
        get_tagged_fields(v, None)?;
    }
    Ok(out)
}

fn get_delivery_complete_count(v: &mut Bytes) -> Result<i32, RecordError> {
    match get_tagged_fields(v, Some(DELIVERY_COMPLETE_COUNT_TAG))? {
        Some(mut tag) => get_i32(&mut tag),
        None => Ok(-1),
    }
}

fn decode_snapshot(v: &mut Bytes) -> Result<ShareSnapshot, RecordError> {
    get_value_version(v)?;
    let (snapshot_epoch, state_epoch, leader_epoch) = (get_i32(v)?, get_i32(v)?, get_i32(v)?);
    let (start_offset, create_timestamp_ms, write_timestamp_ms) = (get_i64(v)?, get_i64(v)?, get_i64(v)?);
    let batches = get_batches(v)?;
    let delivery_complete_count = get_delivery_complete_count(v)?;
    Ok(ShareSnapshot { snapshot_epoch, state_epoch, leader_epoch, start_offset, create_timestamp_ms, write_timestamp_ms, batches, delivery_complete_count })
}

fn decode_update(v: &mut Bytes) -> Result<ShareUpdate, RecordError> {
    get_value_version(v)?;
    let (snapshot_epoch, leader_epoch, start_offset) = (get_i32(v)?, get_i32(v)?, get_i64(v)?);
    let batches = get_batches(v)?;
    let delivery_complete_count = get_delivery_complete_count(v)?;
    Ok(ShareUpdate { snapshot_epoch, leader_epoch, start_offset, batches, delivery_complete_count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SharePartitionKey {
        SharePartitionKey { group_id: "g1".into(), topic_id: Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10), partition: 3 }
    }

    fn batches() -> Vec<PersistedBatch> {
        vec![
            PersistedBatch { first_offset: 10, last_offset: 14, delivery_state: 2, delivery_count: 1 },
            PersistedBatch { first_offset: 15, last_offset: 15, delivery_state: 4, delivery_count: 5 },
        ]
    }

    fn snapshot(dcc: i32) -> ShareSnapshot {
        ShareSnapshot {
            snapshot_epoch: 7,
            state_epoch: 2,
            leader_epoch: 4,
            start_offset: 10,
            create_timestamp_ms: 1_700_000_000_000,
            write_timestamp_ms: 1_700_000_000_500,
            batches: batches(),
            delivery_complete_count: dcc,
        }
    }

    fn round_trip(r: &ShareStateRecord) -> ShareStateRecord {
        let (k, v) = r.encode();
        ShareStateRecord::decode(Some(k), v).unwrap()
    }

    #[test]
    fn records_round_trip() {
        for dcc in [-1, 0, 6] {
            let s = ShareStateRecord::Snapshot { key: key(), value: Some(snapshot(dcc)) };
            assert_eq!(round_trip(&s), s);
            let u = ShareStateRecord::Update {
                key: key(),
                value: ShareUpdate { snapshot_epoch: 7, leader_epoch: 4, start_offset: -1, batches: batches(), delivery_complete_count: dcc },
            };
            assert_eq!(round_trip(&u), u);
        }
        let tombstone = ShareStateRecord::Snapshot { key: key(), value: None };
        assert_eq!(round_trip(&tombstone), tombstone);
        assert_eq!(ShareStateRecord::decode(Some(Bytes::from_static(&[0, 9, 1])), None).unwrap(), ShareStateRecord::Unknown { record_type: 9 });
    }

    /// The bytes Kafka 4.4's generated code writes for these fields (by its schemas: the
    /// key's record type, a classic string, the uuid's 16 bytes; the value's flexible
    /// arrays and the DeliveryCompleteCount tag after every positional field).
    #[test]
    fn bytes_are_kafkas_layout() {
        let (k, v) = ShareStateRecord::Snapshot { key: key(), value: Some(snapshot(6)) }.encode();
        let mut want_key = vec![0, 0, 0, 2, b'g', b'1'];
        want_key.extend(1u8..=16);
        want_key.extend([0, 0, 0, 3]);
        assert_eq!(&k[..], &want_key[..]);
        let v = v.unwrap();
        assert_eq!(&v[..2], &[0, 0], "value version 0");
        // 2 + 3*4 + 3*8 = 38 bytes of fixed fields, then the batch count (2 batches: 3).
        assert_eq!(v[38], 3);
        let first = &v[39..39 + STATE_BATCH_BYTES];
        assert_eq!(first, &[0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 14, 2, 0, 1, 0]);
        // The tagged section: one field, tag 0, 4 bytes, 6.
        assert_eq!(&v[v.len() - 7..], &[1, 0, 4, 0, 0, 0, 6]);
        let (_, v) = ShareStateRecord::Snapshot { key: key(), value: Some(snapshot(-1)) }.encode();
        assert_eq!(v.unwrap().last(), Some(&0), "-1 is not written");
    }

    #[test]
    fn coordinator_keys_as_kafka_writes_them() {
        let k = SharePartitionKey { group_id: "a:b".into(), topic_id: Uuid::from_bytes([0; 16]), partition: 12 };
        assert_eq!(k.coordinator_key(), "a:b:AAAAAAAAAAAAAAAAAAAAAA:12");
        assert_eq!(SharePartitionKey::parse_coordinator_key(&k.coordinator_key()), Some(k));
        for bad in ["", "g", "g:AAAAAAAAAAAAAAAAAAAAAA", "g:AAAA:1", "g:AAAAAAAAAAAAAAAAAAAAAA:x", "g:!!!!!!!!!!!!!!!!!!!!!!:1"] {
            assert_eq!(SharePartitionKey::parse_coordinator_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn damaged_records_are_refused_not_read() {
        let (k, v) = ShareStateRecord::Snapshot { key: key(), value: Some(snapshot(6)) }.encode();
        let v = v.unwrap();
        for cut in 0..v.len() {
            assert!(ShareStateRecord::decode(Some(k.clone()), Some(v.slice(..cut))).is_err(), "value cut at {cut}");
        }
        for cut in 2..k.len() {
            assert!(ShareStateRecord::decode(Some(k.slice(..cut)), Some(v.clone())).is_err(), "key cut at {cut}");
        }
        assert_eq!(ShareStateRecord::decode(None, Some(v.clone())), Err(RecordError::NoKey));
        let mut other_version = v.to_vec();
        other_version[1] = 1;
        assert_eq!(ShareStateRecord::decode(Some(k.clone()), Some(Bytes::from(other_version))), Err(RecordError::UnknownVersion(1)));
        // A batch count far beyond the bytes left is refused before any allocation.
        let mut huge = v[..38].to_vec();
        huge.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(ShareStateRecord::decode(Some(k), Some(Bytes::from(huge))), Err(RecordError::Truncated));
    }
}
