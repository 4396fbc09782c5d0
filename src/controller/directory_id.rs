//! KIP-853's replica directory id of this node's metadata log dir: a random uuid made with
//! the controller's files (`<metadata dir>/controller/directory.id`) and kept for the dir's
//! life, so a node whose dir was wiped comes back as a different replica of the metadata
//! log. It is part of the node's quorum membership entry (`ControllerNode::directory_id`),
//! DescribeQuorum reports it, AddRaftVoter / RemoveRaftVoter must name it, and the dir's
//! `meta.properties` carries it as `directory.id`, where Kafka's `kafka-metadata-quorum.sh
//! add-controller` reads it.
use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::files::{read_if_exists, sync_dir, write_atomic};

const FILE: &str = "directory.id";

/// Kafka's text form of a uuid (URL-safe base64, no padding: 22 characters).
pub fn to_text(id: &[u8; 16]) -> String {
    URL_SAFE_NO_PAD.encode(id)
}

/// A uuid in Kafka's text form, or None.
pub fn from_text(s: &str) -> Option<[u8; 16]> {
    URL_SAFE_NO_PAD.decode(s.trim()).ok()?.try_into().ok()
}

/// This node's directory id: the one `controller_dir` holds, else `inherited` (the
/// dir's `meta.properties` already names one), else a new random one; written durably
/// before it is used. Blocking: call at start-up.
pub fn load_or_create(controller_dir: &Path, inherited: Option<[u8; 16]>) -> Result<[u8; 16], String> {
    let path = controller_dir.join(FILE);
    let show = || path.display().to_string();
    if let Some(bytes) = read_if_exists(&path).map_err(|e| format!("cannot read {}: {e}", show()))? {
        let text = String::from_utf8_lossy(&bytes);
        return from_text(&text).ok_or_else(|| format!("{} does not hold a directory id ('{}')", show(), text.trim()));
    }
    let id = inherited.filter(|id| *id != [0; 16]).unwrap_or_else(|| {
        // Kafka never hands out its reserved ids (the zero uuid and the small ones).
        loop {
            let id: [u8; 16] = rand::random();
            if id[..15] != [0; 15] {
                break id;
            }
        }
    });
    std::fs::create_dir_all(controller_dir).map_err(|e| format!("cannot create {}: {e}", controller_dir.display()))?;
    write_atomic(&path, to_text(&id).as_bytes()).map_err(|e| format!("cannot write {}: {e}", show()))?;
    sync_dir(&path).map_err(|e| format!("cannot sync the directory of {}: {e}", show()))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ctl = dir.path().join("controller");
        let a = load_or_create(&ctl, None).unwrap();
        assert_ne!(a, [0; 16]);
        assert_eq!(load_or_create(&ctl, Some([7; 16])).unwrap(), a, "the stored id wins");
        let other = tempfile::tempdir().unwrap();
        assert_eq!(load_or_create(other.path(), Some([7; 16])).unwrap(), [7; 16], "a meta.properties id is kept");
        let third = tempfile::tempdir().unwrap();
        assert_ne!(load_or_create(third.path(), None).unwrap(), a, "a new dir is a new replica");
    }

    #[test]
    fn kafkas_text_form() {
        let id = from_text("V1eFpz4xQ2eyfnz1TUhvEg").unwrap();
        assert_eq!(to_text(&id), "V1eFpz4xQ2eyfnz1TUhvEg");
        assert_eq!(from_text("AAAAAAAAAAAAAAAAAAAAAA"), Some([0; 16]));
        assert_eq!(from_text("not a uuid"), None);
        assert_eq!(from_text("AAAA"), None);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_new_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "garbage!").unwrap();
        assert!(load_or_create(dir.path(), None).unwrap_err().contains("does not hold a directory id"));
    }
}
