//! The small files a partition directory holds, read back at start: their payloads (past
//! the checked-file frame) decode or are refused, never panic, and what decodes answers
//! its lookups and encodes back to itself.
use crate::storage::index::{OffsetIndex, TimeIndex};
use crate::storage::{leader_epoch_cache, partition_metadata};

pub fn check(data: &[u8]) {
    // The first byte picks where the rest goes, so one corpus feeds every reader.
    let Some((&which, rest)) = data.split_first() else { return };
    match which % 4 {
        0 => offset_index(rest),
        1 => time_index(rest),
        2 => leader_epoch_checkpoint(rest),
        _ => partition_metadata_file(rest),
    }
}

fn probes(data: &[u8]) -> impl Iterator<Item = u32> + '_ {
    data.chunks(4).take(8).map(|c| c.iter().fold(0u32, |a, b| a.rotate_left(8) ^ u32::from(*b)))
}

fn offset_index(payload: &[u8]) {
    let Ok((_, mut idx)) = OffsetIndex::from_payload(payload) else { return };
    for p in probes(payload) {
        let at = idx.lookup(p);
        assert!(idx.position_of(p).is_none_or(|pos| pos == at), "an indexed offset is found where lookup says");
        let _ = (idx.batch_start_in(p / 2, p), idx.entry_before_floor(p));
    }
    if let Some(p) = probes(payload).next() {
        idx.truncate_to_position(p);
        assert!(idx.last_position().is_none_or(|last| last < p), "truncation keeps only entries before the position");
    }
}

fn time_index(payload: &[u8]) {
    let Ok(mut idx) = TimeIndex::from_payload(payload) else { return };
    for p in probes(payload) {
        let _ = (idx.lookup(i64::from(p) - (1 << 31)), idx.last_before(p));
    }
    if let Some(p) = probes(payload).next() {
        idx.truncate_to_offset(p);
    }
}

fn leader_epoch_checkpoint(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    let Some(entries) = leader_epoch_cache::decode(text) else { return };
    assert_eq!(leader_epoch_cache::decode(&leader_epoch_cache::encode(&entries)), Some(entries), "checkpoint round trip");
}

fn partition_metadata_file(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    let Some(id) = partition_metadata::decode(text) else { return };
    assert_eq!(partition_metadata::decode(&partition_metadata::encode(&id)), Some(id), "partition.metadata round trip");
}
