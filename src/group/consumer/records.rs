//! Consumer-group (KIP-848) records in `__consumer_offsets`, in Kafka's layout. Only the
//! group epoch is stored, so epochs stay monotonic across a restart; members are not
//! (after a restart they get UNKNOWN_MEMBER_ID on their next heartbeat and rejoin with
//! epoch 0, which the Java client does on its own).
//!
//! | record | key | value |
//! |---|---|---|
//! | ConsumerGroupMetadata | v3: `i16 3, str group` | v0 (flexible): `i16 0, i32 epoch, tagged fields` |
//!
//! A null value is a tombstone (group deleted). Kafka's other consumer-group keys (4-8:
//! subscription metadata, member metadata, target and current assignments) are read as
//! `Ignored`, so a log holding them still loads.
use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::group::records::RecordError;

pub const GROUP_METADATA_KEY_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// The group epoch; None = tombstone.
    GroupEpoch { group: String, epoch: Option<i32> },
    /// A consumer-group record kind this broker does not use (key version 4-8).
    Ignored { key_version: i16 },
}

impl ConsumerRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        match self {
            ConsumerRecord::GroupEpoch { group, .. } => {
                b.put_i16(GROUP_METADATA_KEY_VERSION);
                // Capped to what an i16 length can say, as records.rs does.
                let len = group.len().min(i16::MAX as usize);
                b.put_i16(len as i16);
                b.put_slice(&group.as_bytes()[..len]);
            }
            ConsumerRecord::Ignored { key_version } => b.put_i16(*key_version),
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        match self {
            ConsumerRecord::GroupEpoch { epoch: Some(e), .. } => {
                let mut b = BytesMut::with_capacity(7);
                b.put_i16(GROUP_METADATA_VALUE_VERSION);
                b.put_i32(*e);
                b.put_u8(0); // no tagged fields
                Some(b.freeze())
            }
            _ => None,
        }
    }

    /// Parses a record whose key version (already read from `key`) is 3-8.
    pub fn parse(key_version: i16, mut key: Bytes, value: Option<Bytes>) -> Result<ConsumerRecord, RecordError> {
        if key_version != GROUP_METADATA_KEY_VERSION {
            return Ok(ConsumerRecord::Ignored { key_version });
        }
        if key.remaining() < 2 {
            return Err(RecordError::Truncated);
        }
        let len = key.get_i16();
        let len = usize::try_from(len).map_err(|_| RecordError::Truncated)?;
        if key.remaining() < len {
            return Err(RecordError::Truncated);
        }
        let group = String::from_utf8(key.split_to(len).to_vec()).map_err(|_| RecordError::Utf8)?;
        let epoch = match value {
            None => None,
            Some(mut v) => {
                if v.remaining() < 6 {
                    return Err(RecordError::Truncated);
                }
                let version = v.get_i16();
                if version != GROUP_METADATA_VALUE_VERSION {
                    return Err(RecordError::UnknownVersion(version));
                }
                // Tagged fields after the epoch (Kafka 4.1's metadata hash) are not needed.
                Some(v.get_i32())
            }
        };
        Ok(ConsumerRecord::GroupEpoch { group, epoch })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::OffsetsRecord;

    #[test]
    fn round_trip_through_offsets_record() {
        for r in [
            ConsumerRecord::GroupEpoch { group: "g".into(), epoch: Some(42) },
            ConsumerRecord::GroupEpoch { group: "g".into(), epoch: None },
        ] {
            let rec = OffsetsRecord::Consumer(r.clone());
            assert_eq!(OffsetsRecord::parse(Some(rec.key()), rec.value()).unwrap(), rec);
        }
        // Kafka's member metadata key (5) is skipped, not an error.
        let k = Bytes::from_static(&[0, 5, 0, 1, b'g', 0, 1, b'm']);
        assert_eq!(OffsetsRecord::parse(Some(k), None).unwrap(), OffsetsRecord::Consumer(ConsumerRecord::Ignored { key_version: 5 }));
    }

    #[test]
    fn garbage_never_panics() {
        for n in 0..12 {
            let mut k = vec![0u8, 3];
            k.extend(std::iter::repeat_n(0xffu8, n));
            let _ = ConsumerRecord::parse(3, Bytes::from(k[2..].to_vec()), Some(Bytes::from(vec![0xff; n])));
        }
    }
}
