//! What the fuzz targets (`src/fuzzing/`) reach of the controller's private file formats:
//! the metadata log scan (`log_store.rs`) and the snapshot decoder (`snapshot.rs`), both
//! fed from disk at start and, for snapshots, from the quorum leader (InstallSnapshot).
//! Compiled for tests and the `fuzzing` feature only.
use std::path::Path;

use super::{frame, log_store, snapshot};

/// Scans `bytes` as a `raft.log` file: the valid prefix it keeps never exceeds the input,
/// and scanning that prefix again keeps all of it (recovery is idempotent). Returns the
/// entries kept (0 when refused).
pub fn scan_metadata_log(bytes: &[u8]) -> usize {
    let path = Path::new("fuzz/raft.log");
    let Ok((entries, valid)) = log_store::scan_log(bytes, path) else { return 0 };
    assert!(valid as usize <= bytes.len(), "valid prefix {valid} beyond {} bytes", bytes.len());
    let (again, valid_again) = log_store::scan_log(&bytes[..valid as usize], path).expect("a kept prefix scans again");
    assert_eq!((again.len(), valid_again), (entries.len(), valid), "recovery keeps what it kept");
    entries.len()
}

/// `payload` framed as a log record (CRC right, so the entry decoder is reached).
pub fn framed_log_record(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_into(&mut out, log_store::LOG_MAGIC, log_store::LOG_VERSION, payload);
    out
}

/// Decodes `bytes` as a snapshot file; a snapshot that decodes encodes and decodes again
/// to the same image. Returns whether it decoded.
pub fn decode_snapshot(bytes: &[u8]) -> bool {
    let Ok((meta, image)) = snapshot::decode(bytes) else { return false };
    let encoded = snapshot::encode(&meta, &image).expect("a decoded snapshot encodes");
    let (_, again) = snapshot::decode(&encoded).expect("an encoded snapshot decodes");
    assert_eq!(again, image, "snapshot round trip");
    true
}

/// `payload` framed as a snapshot file of the current version (CRC right, so the archive
/// validation is reached).
pub fn framed_snapshot(payload: &[u8]) -> Vec<u8> {
    frame::encode(snapshot::MAGIC, snapshot::VERSION, payload)
}

/// Seed inputs for the metadata files target (`fuzzing::metadata_files`, first byte 0: a
/// log, 1: a snapshot): a log of real entries and a snapshot of `image`.
#[cfg(test)]
pub fn seeds(image: &crate::cluster::image::MetadataImage) -> Vec<Vec<u8>> {
    use openraft::entry::RaftEntry;
    use openraft::vote::leader_id_std::CommittedLeaderId;

    use super::types::{Command, Entry, SnapshotMeta};

    let mut log = vec![0u8];
    for index in 1..=3 {
        let entry = Entry::new_normal(super::types::LogId::new(CommittedLeaderId::new(1), index), Command::AllocateProducerIds { count: 10 });
        log_store::encode_entry(&mut log, &entry).expect("a log entry encodes");
    }
    let mut snap = vec![1u8];
    snap.extend(snapshot::encode(&SnapshotMeta::default(), image).expect("a snapshot encodes"));
    vec![log, snap]
}
