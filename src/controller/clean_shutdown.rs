//! The broker's clean-shutdown record (Kafka's PreviousBrokerEpoch, KIP-966): a clean
//! shutdown (every shard closed its replicas) writes this process's incarnation to
//! `<metadata dir>/broker-clean-shutdown`; the next start reads it and registers with it,
//! so the controller can tell a clean restart from a crash (`apply.rs`: after a crash the
//! broker leaves every eligible leader replica set: its log may have lost records).
//!
//! A file left over never misleads: it names the incarnation that shut down cleanly, and
//! the controller compares it with the incarnation it had registered, which a crashed
//! later process replaced. It is removed when read anyway.
use std::io;
use std::path::Path;

use super::files::{read_if_exists, write_atomic};
use super::frame;

const FILE: &str = "broker-clean-shutdown";
const MAGIC: u32 = u32::from_le_bytes(*b"SLCS");
const VERSION: u16 = 1;

/// Records that `incarnation` shut down cleanly.
pub fn record(metadata_dir: &Path, incarnation: [u8; 16]) -> io::Result<()> {
    write_atomic(&metadata_dir.join(FILE), &frame::encode(MAGIC, VERSION, &incarnation))
}

/// The incarnation whose clean shutdown is recorded, if any, and removes the record. An
/// unreadable or corrupt record counts as none (an unclean shutdown: the safe side).
pub fn take(metadata_dir: &Path) -> Option<[u8; 16]> {
    let path = metadata_dir.join(FILE);
    let bytes = match read_if_exists(&path) {
        Ok(b) => b?,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the clean-shutdown record; the last shutdown counts as unclean");
            return None;
        }
    };
    let _ = std::fs::remove_file(&path);
    match frame::decode(&bytes, MAGIC, VERSION, 64).ok().and_then(|(payload, _)| <[u8; 16]>::try_from(payload).ok()) {
        Some(incarnation) => Some(incarnation),
        None => {
            tracing::warn!(path = %path.display(), "corrupt clean-shutdown record; the last shutdown counts as unclean");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_once_and_a_corrupt_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()), None);
        record(dir.path(), [7; 16]).unwrap();
        assert_eq!(take(dir.path()), Some([7; 16]));
        assert_eq!(take(dir.path()), None, "removed when read");
        std::fs::write(dir.path().join(FILE), b"not a record").unwrap();
        assert_eq!(take(dir.path()), None);
    }
}
