//! Control batches: the transaction markers (Kafka's EndTransactionMarker) a transaction
//! coordinator has every partition leader write when a transaction commits or aborts.
//! A marker is a batch of one record with the transactional and control attributes set,
//! base sequence -1, the producer's id and epoch, key `i16 version 0, i16 type`
//! (0 = abort, 1 = commit) and value `i16 version 0, i32 coordinator epoch`. Written by
//! the broker only (clients may not produce control batches, `validate.rs`); read by the
//! producer-state replay, the cleaner and consumers (which skip them).
use bytes::{BufMut, Bytes, BytesMut};

use super::header::{compute_crc, BatchError, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use super::records::{read_field, read_varint, read_varlong};

/// What a marker ends a transaction with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlType {
    Abort,
    Commit,
}

impl ControlType {
    pub fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// A marker as stored: its type and the coordinator epoch that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub control: ControlType,
    pub coordinator_epoch: i32,
}

/// Builds the marker batch (base offset 0, patched at append like any batch).
pub fn build_marker(producer_id: i64, producer_epoch: i16, marker: Marker, timestamp_ms: i64) -> Bytes {
    // The record: attributes, timestamp delta, offset delta, key, value, no headers.
    let mut record = BytesMut::with_capacity(24);
    record.put_u8(0); // attributes
    record.put_u8(0); // timestamp delta 0 (zigzag)
    record.put_u8(0); // offset delta 0
    record.put_u8(8); // key length 4 (zigzag)
    record.put_i16(0); // key version
    record.put_i16(marker.control.code());
    record.put_u8(12); // value length 6 (zigzag)
    record.put_i16(0); // value version
    record.put_i32(marker.coordinator_epoch);
    record.put_u8(0); // header count
    let record_len = record.len() as u8; // < 64: one zigzag byte
    let total = BATCH_HEADER_LEN + 1 + record.len();
    let mut b = BytesMut::with_capacity(total);
    b.put_i64(0); // base offset
    b.put_i32((total - LOG_OVERHEAD) as i32); // batch length
    b.put_i32(-1); // partition leader epoch (patched at append)
    b.put_i8(MAGIC_V2);
    b.put_u32(0); // crc, below
    b.put_i16(ATTR_TRANSACTIONAL | ATTR_CONTROL);
    b.put_i32(0); // last offset delta
    b.put_i64(timestamp_ms);
    b.put_i64(timestamp_ms);
    b.put_i64(producer_id);
    b.put_i16(producer_epoch);
    b.put_i32(-1); // base sequence
    b.put_i32(1); // records count
    b.put_u8(record_len << 1);
    b.put_slice(&record);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// Reads the marker of a stored control batch (`batch` whole, header `h`). Control
/// batches are never compressed; an unknown type or a damaged record is an error.
pub fn parse_marker(batch: &[u8], h: &BatchHeader) -> Result<Marker, BatchError> {
    let bad = |what: &str| BatchError::InvalidRecord(format!("control batch: {what}"));
    if !h.is_control() {
        return Err(bad("not a control batch"));
    }
    let section = batch.get(BATCH_HEADER_LEN..h.total_len().min(batch.len())).ok_or_else(|| bad("truncated"))?;
    let mut at = 0usize;
    let len = read_varint(section, &mut at)?;
    let end = at
        .checked_add(usize::try_from(len).map_err(|_| bad("negative record length"))?)
        .filter(|&e| e <= section.len())
        .ok_or_else(|| bad("record past the batch"))?;
    at += 1; // attributes
    read_varlong(section, &mut at)?; // timestamp delta
    read_varint(section, &mut at)?; // offset delta
    let key = read_field(section, &mut at, end)?.ok_or_else(|| bad("null key"))?;
    let value = read_field(section, &mut at, end)?;
    let key = &section[key];
    if key.len() < 4 {
        return Err(bad("short key"));
    }
    let control = match i16::from_be_bytes([key[2], key[3]]) {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        t => return Err(bad(&format!("unknown control type {t}"))),
    };
    let coordinator_epoch = match value.map(|v| &section[v]) {
        Some(v) if v.len() >= 6 => i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
        _ => -1,
    };
    Ok(Marker { control, coordinator_epoch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{iter_batches, parse_header, parse_records};

    #[test]
    fn markers_round_trip_and_are_valid_batches() {
        for control in [ControlType::Abort, ControlType::Commit] {
            let m = Marker { control, coordinator_epoch: 7 };
            let b = build_marker(42, 3, m, 1_700_000_000_000);
            let h = parse_header(&b).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.records_count), (42, 3, -1, 1));
            assert_eq!(h.total_len(), b.len());
            assert_eq!(h.crc, compute_crc(&b));
            // The generic iterator accepts it (CRC, framing) and the record walker reads one record.
            let mut it = iter_batches(&b);
            assert!(it.next().is_some() && it.next().is_none());
            assert_eq!(it.stop(), Some(&crate::record::IterStop::End));
            let recs = parse_records(&b.slice(BATCH_HEADER_LEN..), &h).unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!(parse_marker(&b, &h).unwrap(), m);
        }
    }

    #[test]
    fn damaged_markers_are_errors_not_panics() {
        let b = build_marker(1, 0, Marker { control: ControlType::Commit, coordinator_epoch: 0 }, 0);
        let h = parse_header(&b).unwrap();
        for cut in 0..b.len() {
            let _ = parse_marker(&b[..cut], &h);
        }
        let mut bad = b.to_vec();
        bad[BATCH_HEADER_LEN + 8] = 9; // type 9
        assert!(parse_marker(&bad, &h).is_err());
    }
}
