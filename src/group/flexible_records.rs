//! Kafka's flexible-version encoding as coordinator records use it (values of the
//! consumer-group and share-group-state records): unsigned varints, compact strings and
//! arrays (length + 1), tagged fields. Every read is bounded: a length or count is checked
//! against the bytes that remain before anything is allocated.
use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::group::coordinator_records::RecordError;

/// Longest string read back (Kafka strings have an i16 length).
pub const MAX_STR_BYTES: usize = i16::MAX as usize;

pub fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// Lengths written here come from bounded requests; capped so the +1 cannot overflow.
pub fn put_len(b: &mut BytesMut, len: usize) {
    put_uvarint(b, u32::try_from(len).unwrap_or(u32::MAX - 1).min(u32::MAX - 1) + 1);
}

pub fn put_compact_str(b: &mut BytesMut, s: &str) {
    let len = s.len().min(MAX_STR_BYTES);
    put_len(b, len);
    b.put_slice(&s.as_bytes()[..len]);
}

pub fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(b, s),
        None => put_uvarint(b, 0),
    }
}

pub fn get_uvarint(b: &mut Bytes) -> Result<u32, RecordError> {
    let mut v: u32 = 0;
    for i in 0..5 {
        if !b.has_remaining() {
            return Err(RecordError::Truncated);
        }
        let byte = b.get_u8();
        v |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    // More than 5 bytes: not a u32 varint.
    Err(RecordError::Truncated)
}

pub fn get_compact_nullable_str(b: &mut Bytes) -> Result<Option<String>, RecordError> {
    let n = get_uvarint(b)? as usize;
    if n == 0 {
        return Ok(None);
    }
    let len = n - 1;
    if len > MAX_STR_BYTES || b.remaining() < len {
        return Err(RecordError::Truncated);
    }
    String::from_utf8(b.split_to(len).to_vec()).map(Some).map_err(|_| RecordError::Utf8)
}

pub fn get_compact_str(b: &mut Bytes) -> Result<String, RecordError> {
    get_compact_nullable_str(b)?.ok_or(RecordError::Truncated)
}

/// A compact array's element count, checked against what is left (each element takes at
/// least `min_element_bytes`), so a garbage count never reserves memory.
pub fn get_array_len(b: &mut Bytes, min_element_bytes: usize) -> Result<usize, RecordError> {
    let n = get_uvarint(b)? as usize;
    // Null arrays are not written for these fields; read as empty.
    let len = n.saturating_sub(1);
    if len > b.remaining() / min_element_bytes.max(1) {
        return Err(RecordError::Truncated);
    }
    Ok(len)
}

pub fn get_i8(b: &mut Bytes) -> Result<i8, RecordError> {
    if !b.has_remaining() {
        return Err(RecordError::Truncated);
    }
    Ok(b.get_i8())
}

pub fn get_uuid(b: &mut Bytes) -> Result<Uuid, RecordError> {
    if b.remaining() < 16 {
        return Err(RecordError::Truncated);
    }
    let mut id = [0u8; 16];
    b.copy_to_slice(&mut id);
    Ok(Uuid::from_bytes(id))
}

/// Reads tagged fields, returning the value of `wanted` if present.
pub fn get_tagged_fields(b: &mut Bytes, wanted: Option<u32>) -> Result<Option<Bytes>, RecordError> {
    let count = get_uvarint(b)?;
    let mut found = None;
    for _ in 0..count {
        let tag = get_uvarint(b)?;
        let size = get_uvarint(b)? as usize;
        if b.remaining() < size {
            return Err(RecordError::Truncated);
        }
        let data = b.split_to(size);
        if Some(tag) == wanted {
            found = Some(data);
        }
    }
    Ok(found)
}

/// Partitions by topic id, as the group records store them (`TopicPartitions`).
pub type TopicPartitions = std::collections::BTreeMap<Uuid, std::collections::BTreeSet<i32>>;

/// `carray<i32>`.
pub fn put_i32s(b: &mut BytesMut, items: impl ExactSizeIterator<Item = i32>) {
    put_len(b, items.len());
    for i in items {
        b.put_i32(i);
    }
}

pub fn get_i32s(b: &mut Bytes) -> Result<Vec<i32>, RecordError> {
    let n = get_array_len(b, 4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(crate::group::coordinator_records::get_i32(b)?);
    }
    Ok(out)
}

/// The epoch at which each partition of a member's current assignment was given to it
/// (KIP-848: a commit at an older member epoch is taken for the partitions held since
/// then): (topic id, partition) -> assignment epoch.
pub type AssignmentEpochs = std::collections::BTreeMap<(Uuid, i32), i32>;

/// `carray<TopicPartitions>`: `uuid topic_id, carray<i32> partitions, tagged` each.
pub fn put_assignment(b: &mut BytesMut, a: &TopicPartitions) {
    put_assignment_with_epochs(b, a, None);
}

/// `carray<TopicPartitions>` with, when `epochs` is given, each topic's assignment epochs
/// in tag 0 (`AssignmentEpochs`, as long as its partitions; one missing from the map is
/// written as the default given with it).
pub fn put_assignment_with_epochs(b: &mut BytesMut, a: &TopicPartitions, epochs: Option<(&AssignmentEpochs, i32)>) {
    put_len(b, a.len());
    for (topic, partitions) in a {
        b.put_slice(topic.as_bytes());
        put_i32s(b, partitions.iter().copied());
        match epochs {
            None => put_uvarint(b, 0), // no tagged fields
            Some((epochs, default)) => {
                let mut field = BytesMut::new();
                put_i32s(&mut field, partitions.iter().map(|p| epochs.get(&(*topic, *p)).copied().unwrap_or(default)));
                put_uvarint(b, 1);
                put_uvarint(b, 0);
                put_uvarint(b, field.len() as u32);
                b.put_slice(&field);
            }
        }
    }
}

pub fn get_assignment(b: &mut Bytes) -> Result<TopicPartitions, RecordError> {
    Ok(get_assignment_with_epochs(b, 0)?.0)
}

/// Reads `carray<TopicPartitions>` with the assignment epochs of tag 0; a topic without
/// them, or with a count that does not match its partitions, gets `default_epoch` (Kafka
/// logs the mismatch and does the same: stored data, not a request).
pub fn get_assignment_with_epochs(b: &mut Bytes, default_epoch: i32) -> Result<(TopicPartitions, AssignmentEpochs), RecordError> {
    // uuid + empty partition array + no tagged fields.
    let topics = get_array_len(b, 18)?;
    let mut a = TopicPartitions::new();
    let mut epochs = AssignmentEpochs::new();
    for _ in 0..topics {
        let topic = get_uuid(b)?;
        let partitions = get_i32s(b)?;
        let given = match get_tagged_fields(b, Some(0))? {
            Some(mut e) => Some(get_i32s(&mut e)?).filter(|e| e.len() == partitions.len()),
            None => None,
        };
        for (i, p) in partitions.iter().enumerate() {
            epochs.insert((topic, *p), given.as_ref().map_or(default_epoch, |e| e[i]));
        }
        if !partitions.is_empty() {
            a.entry(topic).or_default().extend(partitions);
        }
    }
    Ok((a, epochs))
}

/// The tests' check that a record parser never panics: every prefix and byte-flipped
/// variant of each sample (key, value), plus runs of 0xff / 0x80 / 0x00 / 0x7f (huge
/// varints and counts) under every key version in `key_versions`, must parse to Ok or
/// Err. `parse` takes (key version, key after it, value).
#[cfg(test)]
pub fn assert_parse_never_panics(samples: &[(Bytes, Bytes)], key_versions: std::ops::RangeInclusive<i16>, parse: impl Fn(i16, Bytes, Option<Bytes>)) {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (key, value) in samples {
        let kv = i16::from_be_bytes([key[0], key[1]]);
        for cut in 0..=value.len() {
            parse(kv, key.slice(2..), Some(value.slice(..cut)));
        }
        for cut in 2..key.len() {
            parse(kv, key.slice(2..cut), Some(value.clone()));
        }
        for _ in 0..200 {
            let mut v = value.to_vec();
            if v.is_empty() {
                break;
            }
            let i = (rnd() as usize) % v.len();
            v[i] = rnd() as u8;
            parse(kv, key.slice(2..), Some(Bytes::from(v)));
        }
    }
    for kv in key_versions {
        for n in 0..24 {
            for fill in [0xffu8, 0x80, 0x00, 0x7f] {
                let b = Bytes::from(vec![fill; n]);
                parse(kv, b.clone(), Some(b));
                let mut v = vec![0u8, 0];
                v.extend(std::iter::repeat_n(fill, n));
                parse(kv, Bytes::from_static(&[0, 1, b'g', 0, 1, b'm']), Some(Bytes::from(v)));
            }
        }
    }
}
