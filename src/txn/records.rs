//! Records stored in `__transaction_state`, in Kafka's layout (TransactionLogKey v0 /
//! TransactionLogValue v0), one per state change, the latest per transactional id wins
//! (the topic is compacted):
//!
//! | key | value |
//! |---|---|
//! | `i16 0, str transactional_id` | `i16 0, i64 producer_id, i16 producer_epoch, i32 timeout_ms, i8 state, partitions, i64 last_update_ms, i64 start_ms` |
//!
//! `partitions` is an i32 count (-1 = null) of `str topic, i32 count, i32 partition...`;
//! `str` an i16 length then UTF-8. A null value is a tombstone (the id expired).
//! Not kept (Kafka's v1 tagged fields): the previous epoch, so a producer retrying
//! InitProducerId after a coordinator failover is fenced rather than answered.
use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnState};
use crate::record::{encode_batch, NewRecord};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// Partitions a stored transaction may name (a bound on what a damaged record allocates).
const MAX_STORED_PARTITIONS: usize = 1 << 20;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TxnRecordError {
    #[error("record key missing")]
    NoKey,
    #[error("record truncated")]
    Truncated,
    #[error("unknown record version {0}")]
    UnknownVersion(i16),
    #[error("unknown transaction state {0}")]
    UnknownState(i8),
    #[error("invalid string")]
    BadString,
}

fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

fn get_str(b: &mut Bytes) -> Result<String, TxnRecordError> {
    if b.remaining() < 2 {
        return Err(TxnRecordError::Truncated);
    }
    let n = usize::try_from(b.get_i16()).map_err(|_| TxnRecordError::BadString)?;
    if b.remaining() < n {
        return Err(TxnRecordError::Truncated);
    }
    String::from_utf8(b.split_to(n).to_vec()).map_err(|_| TxnRecordError::BadString)
}

fn need(b: &Bytes, n: usize) -> Result<(), TxnRecordError> {
    if b.remaining() < n {
        Err(TxnRecordError::Truncated)
    } else {
        Ok(())
    }
}

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(KEY_VERSION);
    put_str(&mut b, transactional_id);
    b.freeze()
}

pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut b = BytesMut::with_capacity(64 + m.partitions.len() * 24);
    b.put_i16(VALUE_VERSION);
    b.put_i64(m.producer_id);
    b.put_i16(m.producer_epoch);
    b.put_i32(m.timeout_ms);
    b.put_i8(m.state.id());
    // Topics with their partitions, grouped (the set is sorted by topic).
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (t, p) in &m.partitions {
        match topics.last_mut() {
            Some((last, ps)) if *last == t.as_str() => ps.push(*p),
            _ => topics.push((t.as_str(), vec![*p])),
        }
    }
    b.put_i32(topics.len() as i32);
    for (t, ps) in topics {
        put_str(&mut b, t);
        b.put_i32(ps.len() as i32);
        for p in ps {
            b.put_i32(p);
        }
    }
    b.put_i64(m.update_ms);
    b.put_i64(m.start_ms);
    b.freeze()
}

/// A stored record: the transactional id and its state (None: a tombstone).
pub fn decode(key: Option<Bytes>, value: Option<Bytes>, partition: i32) -> Result<(String, Option<TxnMetadata>), TxnRecordError> {
    let mut k = key.ok_or(TxnRecordError::NoKey)?;
    need(&k, 2)?;
    let kv = k.get_i16();
    if kv != KEY_VERSION {
        return Err(TxnRecordError::UnknownVersion(kv));
    }
    let id = get_str(&mut k)?;
    let Some(mut v) = value else { return Ok((id, None)) };
    need(&v, 2 + 8 + 2 + 4 + 1 + 4)?;
    let vv = v.get_i16();
    if vv != VALUE_VERSION {
        return Err(TxnRecordError::UnknownVersion(vv));
    }
    let producer_id = v.get_i64();
    let producer_epoch = v.get_i16();
    let timeout_ms = v.get_i32();
    let raw_state = v.get_i8();
    let state = TxnState::from_id(raw_state).ok_or(TxnRecordError::UnknownState(raw_state))?;
    let topics = v.get_i32();
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..topics.max(0) {
        let topic = get_str(&mut v)?;
        need(&v, 4)?;
        let n = usize::try_from(v.get_i32()).map_err(|_| TxnRecordError::Truncated)?;
        if n > v.remaining() / 4 || partitions.len() + n > MAX_STORED_PARTITIONS {
            return Err(TxnRecordError::Truncated);
        }
        for _ in 0..n {
            partitions.insert((topic.clone(), v.get_i32()));
        }
    }
    need(&v, 16)?;
    let update_ms = v.get_i64();
    let start_ms = v.get_i64();
    Ok((
        id.clone(),
        Some(TxnMetadata {
            transactional_id: id,
            producer_id,
            producer_epoch,
            last_producer_epoch: -1,
            timeout_ms,
            state,
            partitions,
            start_ms,
            update_ms,
            partition,
        }),
    ))
}

/// One batch holding the state of `m` (or a tombstone for `id` when `m` is None).
pub fn build_batch(id: &str, m: Option<&TxnMetadata>, now_ms: i64) -> Option<Bytes> {
    let rec = NewRecord { key: Some(encode_key(id)), value: m.map(encode_value), timestamp_ms: now_ms };
    encode_batch([rec], kafka_protocol::records::Compression::None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut m = TxnMetadata::new("app-1".into(), 42, 30_000, 7, 5).initialized(30_000, 6, || 0);
        m = m.with_partitions([("orders".to_string(), 0), ("orders".to_string(), 3), ("__consumer_offsets".to_string(), 12)], 9).unwrap();
        let (id, back) = decode(Some(encode_key("app-1")), Some(encode_value(&m)), 7).unwrap();
        assert_eq!(id, "app-1");
        let back = back.unwrap();
        assert_eq!(TxnMetadata { last_producer_epoch: m.last_producer_epoch, ..back }, m);
        assert_eq!(decode(Some(encode_key("x")), None, 0).unwrap(), ("x".to_string(), None));
        let v = encode_value(&m);
        for cut in 0..v.len() {
            assert!(decode(Some(encode_key("app-1")), Some(v.slice(..cut)), 7).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(None, None, 0), Err(TxnRecordError::NoKey));
    }
}
