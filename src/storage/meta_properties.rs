//! `meta.properties` in every log dir: which cluster and node the directory belongs to, in
//! Kafka's file and format (`version=1`, `cluster.id=`, `node.id=`, `directory.id=`, Java
//! properties text). The metadata dir's `directory.id` is the controller's (KIP-853,
//! `controller/directory_id.rs`), which `kafka-metadata-quorum.sh add-controller` reads.
//!
//! Why: a broker whose metadata was lost or replaced (a wiped or restored controller dir,
//! a data dir moved to another node id, a new cluster) would otherwise take every
//! partition directory for stray and remove it (`server/stray_partitions.rs`). Kafka
//! refuses to start when a log dir's `meta.properties` names another cluster or node;
//! shardlog does the same, before any partition is opened or removed.
use std::path::Path;

use super::dma::write_atomic_blocking;

pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// What a log dir's `meta.properties` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirIdentity {
    /// The file names this cluster and node.
    Matches,
    /// There was no file (a new dir, or one from before shardlog wrote it): it is written
    /// now. `held_partitions` says whether the dir already had partition directories.
    Claimed { held_partitions: bool },
}

/// The `key=value` pairs of a Java properties text (comments and blank lines skipped).
fn parse(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// Kafka's KRaft `meta.properties` text for `cluster_id`, `node_id` and the dir's
/// `directory_id` (Kafka's uuid text form).
pub fn encode(cluster_id: &str, node_id: i32, directory_id: &str) -> String {
    format!("#\n#Written by shardlog\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\ncluster.id={cluster_id}\n")
}

/// The `directory.id` a dir's `meta.properties` names, if the file has one.
pub fn directory_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(META_PROPERTIES_FILE)).ok()?;
    parse(&text).into_iter().find(|(k, _)| *k == "directory.id").map(|(_, v)| v.to_string())
}

/// Checks `dir`'s `meta.properties` against `cluster_id` / `node_id`, or writes it when
/// absent. Refuses (with Kafka's wording) a file naming another cluster or node, or one
/// that cannot be read. `directory_id`: the id the file must carry (the metadata dir's is
/// the controller's); a file without it, or with another, is rewritten with it. None: the
/// file's own, or a new random one when it has none. Blocking (std::fs): call before the
/// shards start.
pub fn check_or_claim(dir: &Path, cluster_id: &str, node_id: i32, directory_id: Option<&str>) -> Result<DirIdentity, String> {
    let path = dir.join(META_PROPERTIES_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let pairs = parse(&text);
            let get = |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
            match get("cluster.id") {
                Some(c) if c == cluster_id => {}
                Some(c) => {
                    return Err(format!(
                        "Invalid cluster.id in: {}. Expected {cluster_id}, but read {c}. The metadata is not this log dir's \
                         cluster's (a wiped or replaced controller dir?): restore it, or move the log dir away",
                        path.display()
                    ))
                }
                None => return Err(format!("{} has no cluster.id", path.display())),
            }
            match get("node.id").map(str::parse::<i32>) {
                Some(Ok(n)) if n == node_id => {
                    let id = match (directory_id, get("directory.id")) {
                        (Some(want), Some(have)) if want == have => return Ok(DirIdentity::Matches),
                        (None, Some(_)) => return Ok(DirIdentity::Matches),
                        (Some(want), _) => want.to_string(),
                        (None, None) => new_directory_id(),
                    };
                    write_atomic_blocking(&path, encode(cluster_id, node_id, &id).as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    Ok(DirIdentity::Matches)
                }
                Some(Ok(n)) => Err(format!(
                    "Stored node id {n} doesn't match previous node id {node_id} in {}. If you moved your data, make sure your \
                     configured node id matches",
                    path.display()
                )),
                _ => Err(format!("{} has no valid node.id", path.display())),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let held_partitions = std::fs::read_dir(dir)
                .map(|entries| entries.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != "controller"))
                .unwrap_or(false);
            let id = directory_id.map_or_else(new_directory_id, str::to_string);
            write_atomic_blocking(&path, encode(cluster_id, node_id, &id).as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(DirIdentity::Claimed { held_partitions })
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// A random directory id in Kafka's text form (URL-safe base64 of 16 bytes).
fn new_directory_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_is_claimed_once_then_must_match() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_or_claim(dir.path(), "c1", 3, None), Ok(DirIdentity::Claimed { held_partitions: false }));
        assert_eq!(check_or_claim(dir.path(), "c1", 3, None), Ok(DirIdentity::Matches));
        let other_cluster = check_or_claim(dir.path(), "c2", 3, None).unwrap_err();
        assert!(other_cluster.starts_with("Invalid cluster.id in: "), "{other_cluster}");
        let other_node = check_or_claim(dir.path(), "c1", 4, None).unwrap_err();
        assert!(other_node.starts_with("Stored node id 3 doesn't match previous node id 4"), "{other_node}");
    }

    #[test]
    fn a_dir_from_before_the_file_is_claimed_and_says_it_held_partitions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("controller")).unwrap();
        assert_eq!(check_or_claim(dir.path(), "c", 1, None), Ok(DirIdentity::Claimed { held_partitions: false }));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("orders-0")).unwrap();
        assert_eq!(check_or_claim(dir.path(), "c", 1, None), Ok(DirIdentity::Claimed { held_partitions: true }));
    }

    #[test]
    fn kafkas_own_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let kafka = "#\n#Tue Dec 01 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=V1eFpz4xQ2eyfnz1TUhvEg\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        std::fs::write(dir.path().join(META_PROPERTIES_FILE), kafka).unwrap();
        assert_eq!(check_or_claim(dir.path(), "MkU3OEVBNTcwNTJENDM2Qk", 1, None), Ok(DirIdentity::Matches));
    }

    #[test]
    fn the_directory_id_is_written_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        check_or_claim(dir.path(), "c", 1, None).unwrap();
        let first = directory_id(dir.path()).expect("a new file has a directory.id");
        assert_eq!(first.len(), 22);
        check_or_claim(dir.path(), "c", 1, None).unwrap();
        assert_eq!(directory_id(dir.path()), Some(first.clone()), "kept across starts");
        // The metadata dir takes the controller's id, once.
        check_or_claim(dir.path(), "c", 1, Some("V1eFpz4xQ2eyfnz1TUhvEg")).unwrap();
        assert_eq!(directory_id(dir.path()).as_deref(), Some("V1eFpz4xQ2eyfnz1TUhvEg"));
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        assert!(text.contains("cluster.id=c\n") && text.contains("node.id=1\n") && text.contains("version=1\n"), "{text}");
    }
}
