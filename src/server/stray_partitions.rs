//! Start-up removal of stray partition directories, as Kafka's KRaft brokers do
//! (KAFKA-14616): a directory is stray when the committed metadata no longer gives this
//! broker that partition. That happens when a topic was deleted while the broker was down
//! (its shards never saw the deletion, so nothing else would remove the files), when a
//! topic lost partitions' worth of directories to a deletion interrupted by a crash
//! (`<dir>.<ms>-delete` left behind), or when the directory belongs to an older topic of
//! the same name (its `partition.metadata` names another topic id). That last check is
//! made here only for partitions this broker no longer holds (their directories go for
//! that reason anyway); a partition it holds is checked when its shard opens it
//! (`partition_metadata::claim`, reading the file with the rest of the directory), so a
//! start with 100k partitions reads each file once, not twice.
//!
//! Only in log dirs whose `meta.properties` names this cluster and node
//! (`check_log_dirs_and_remove_strays`): lost or replaced metadata stops the broker
//! instead of making every directory look stray.
//!
//! Runs on the start-up thread after the controller has recovered (its image holds every
//! change committed before this process started: `controller::start` returns only once
//! the committed log is applied) and before any shard opens a partition, so no directory
//! it looks at is in use and none can be created under it meanwhile. A directory is
//! renamed to `<dir>.<ms>-stray` (durably) before its files go, so a crash midway never
//! brings it back under its name; leftover `-stray` and `-delete` directories are removed.
//! The removed partitions of deleted topic incarnations are returned: a tiered one's
//! remote objects are deleted once the store is up (`server/shard/remote_orphans.rs`).
use std::path::{Path, PathBuf};

use crate::cluster::image::{BrokerId, MetadataImage};
use crate::storage::log_dirs::LogDirs;
use crate::storage::meta_properties::{check_or_claim, DirIdentity};
use crate::storage::partition_metadata::{self, PARTITION_METADATA_FILE};

/// Why a partition directory is stray.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stray {
    /// Its topic is not in the metadata (deleted while this broker was down).
    UnknownTopic,
    /// The topic has no partition with this index.
    UnknownPartition,
    /// `partition.metadata` names another topic (an older topic of the same name).
    OtherTopicId,
    /// The partition's replicas do not include this broker.
    NotAReplica,
}

/// One stray partition directory removed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RemovedStray {
    pub path: PathBuf,
    pub why: Stray,
    pub topic: String,
    pub partition: i32,
    /// The topic id its `partition.metadata` named (None: no readable file).
    pub recorded_topic_id: Option<[u8; 16]>,
}

impl RemovedStray {
    /// The deleted topic incarnation this directory was a partition of, when it is known
    /// to be gone (its topic deleted, or replaced by a newer one of the same name): its
    /// remote objects, if it was tiered, are orphans nobody else deletes.
    pub fn deleted_incarnation(&self) -> Option<(&str, i32, [u8; 16])> {
        match self.why {
            Stray::UnknownTopic | Stray::OtherTopicId => self.recorded_topic_id.map(|id| (self.topic.as_str(), self.partition, id)),
            Stray::UnknownPartition | Stray::NotAReplica => None,
        }
    }
}

/// Splits `<topic>-<n>` (the `LogDirs` naming) into topic and partition.
fn parse_partition_dir(name: &str) -> Option<(&str, i32)> {
    let (topic, n) = name.rsplit_once('-')?;
    let n: i32 = n.parse().ok().filter(|n| *n >= 0)?;
    (!topic.is_empty()).then_some((topic, n))
}

/// Whether the partition directory `dir` (named `name`) is stray for broker `me`.
pub fn classify(image: &MetadataImage, me: BrokerId, dir: &Path, name: &str) -> Option<Stray> {
    let (topic, index) = parse_partition_dir(name)?;
    let Some(t) = image.topic(topic) else { return Some(Stray::UnknownTopic) };
    let Some(p) = t.partition(index) else { return Some(Stray::UnknownPartition) };
    // Empty replicas: metadata from before brokers existed, adopted by this broker later.
    let held_here = p.replicas.is_empty() || p.replica_on(me).is_some();
    if held_here {
        // Its shard checks the topic id when it opens it (`partition_metadata::claim`).
        return None;
    }
    // No file (written by an older shardlog) or an unreadable one: not a replica here.
    let recorded = std::fs::read_to_string(dir.join(PARTITION_METADATA_FILE)).ok().and_then(|s| partition_metadata::decode(&s));
    Some(if recorded.is_some_and(|id| id != t.topic_id) { Stray::OtherTopicId } else { Stray::NotAReplica })
}

/// Checks every log dir's `meta.properties` against the recovered metadata (Kafka's
/// start-up check: another cluster's or node's dir stops the broker, so lost metadata
/// never makes its data look stray), and removes stray partitions in the dirs that were
/// this cluster's already. A dir seen for the first time with partitions in it (written
/// before shardlog kept `meta.properties`) is claimed and left as it is this once.
/// `metadata_directory_id`: the controller's directory id (KIP-853), which the first dir's
/// file (the metadata dir's) carries.
pub fn check_log_dirs_and_remove_strays(
    image: &MetadataImage,
    me: BrokerId,
    log_dirs: &LogDirs,
    metadata_directory_id: &str,
) -> Result<Vec<RemovedStray>, String> {
    let mut scan = Vec::new();
    for (i, dir) in log_dirs.dirs().iter().enumerate() {
        match check_or_claim(dir, &image.cluster_id, me, (i == 0).then_some(metadata_directory_id))? {
            DirIdentity::Matches | DirIdentity::Claimed { held_partitions: false } => scan.push(dir.clone()),
            DirIdentity::Claimed { held_partitions: true } => {
                tracing::info!(dir = %dir.display(), "log dir claimed for this cluster (meta.properties written); stray partitions are looked for from the next start");
            }
        }
    }
    Ok(remove_stray_partitions(image, me, log_dirs, &scan))
}

/// Whether `name` is a directory already on its way out (`.<ms>-delete` / `.<ms>-stray`).
fn is_doomed(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, tail)| tail.ends_with("-delete") || tail.ends_with("-stray"))
}

/// Removes the stray partition directories of the log dirs `scan` (see the module
/// header) and the leftovers of interrupted removals. Returns the stray partitions
/// removed. Blocking (std::fs): call before the shards start.
pub fn remove_stray_partitions(image: &MetadataImage, me: BrokerId, log_dirs: &LogDirs, scan: &[PathBuf]) -> Vec<RemovedStray> {
    let mut removed = Vec::new();
    for dir in log_dirs.dirs().iter().filter(|d| scan.contains(d)) {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if is_doomed(&name) {
                if let Err(e) = std::fs::remove_dir_all(&path) {
                    tracing::warn!(dir = %path.display(), error = %e, "cannot remove a deleted partition's leftover directory");
                }
                continue;
            }
            let Some(why) = classify(image, me, &path, &name) else { continue };
            let Some((topic, index)) = parse_partition_dir(&name) else { continue };
            let recorded_topic_id = std::fs::read_to_string(path.join(PARTITION_METADATA_FILE)).ok().and_then(|s| partition_metadata::decode(&s));
            let mut doomed = path.clone().into_os_string();
            doomed.push(format!(".{}-stray", crate::runtime::now_ms()));
            let renamed = std::fs::rename(&path, &doomed).and_then(|()| crate::storage::dma::sync_dir_blocking(dir));
            match renamed {
                Ok(()) => {
                    log_dirs.forget(topic, index);
                    tracing::warn!(dir = %path.display(), reason = ?why, "removing a stray partition directory (the committed metadata does not give this broker that partition)");
                    if let Err(e) = std::fs::remove_dir_all(&doomed) {
                        tracing::warn!(dir = ?doomed, error = %e, "cannot remove a stray partition directory; it is removed at the next start");
                    }
                    removed.push(RemovedStray { path, why, topic: topic.to_string(), partition: index, recorded_topic_id });
                }
                Err(e) => tracing::warn!(dir = %path.display(), error = %e, "cannot rename a stray partition directory; it is kept"),
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{PartitionMeta, ReplicaMeta, TopicMeta};

    fn topic(name: &str, id: u8, replicas_per_partition: &[&[BrokerId]]) -> TopicMeta {
        TopicMeta {
            name: name.into(),
            topic_id: [id; 16],
            partitions: replicas_per_partition
                .iter()
                .enumerate()
                .map(|(i, rs)| PartitionMeta {
                    partition: i as i32,
                    shard: 0,
                    replicas: rs.iter().map(|&broker| ReplicaMeta { broker, shard: 0 }).collect(),
                    leader: rs.first().copied().unwrap_or(-1),
                    isr: rs.to_vec(),
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                })
                .collect(),
            configs: Default::default(),
        }
    }

    fn mkdir(root: &Path, name: &str, topic_id: Option<u8>) {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("00000000000000000000.log"), b"data").unwrap();
        if let Some(id) = topic_id {
            std::fs::write(d.join(PARTITION_METADATA_FILE), partition_metadata::encode(&[id; 16])).unwrap();
        }
    }

    #[test]
    fn only_what_the_metadata_does_not_give_this_broker_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let mut image = MetadataImage::default();
        for t in [topic("kept", 1, &[&[1], &[1, 2]]), topic("moved", 2, &[&[2]]), topic("re-made", 3, &[&[1], &[2]]), topic("old", 4, &[&[]])] {
            image.topics.insert(t.name.clone(), t);
        }
        mkdir(&a, "kept-0", Some(1));
        mkdir(&b, "kept-1", None); // no partition.metadata: adopted, kept
        mkdir(&a, "kept-2", Some(1)); // no such partition
        mkdir(&a, "gone-0", Some(9)); // topic deleted while down
        mkdir(&b, "moved-0", Some(2)); // not a replica here
        mkdir(&a, "re-made-0", Some(8)); // an older topic of the same name, held here: its open checks
        mkdir(&b, "re-made-1", Some(8)); // an older topic of the same name, not held here
        mkdir(&b, "old-0", None); // replicas from before brokers existed
        mkdir(&a, "gone-1.1700000000000-delete", None); // an interrupted deletion
        mkdir(&b, "gone-2.1700000000000-stray", None);
        std::fs::create_dir_all(a.join("controller")).unwrap();
        let log_dirs = LogDirs::open(&[a.clone(), b.clone()]).unwrap();
        let mut removed = remove_stray_partitions(&image, 1, &log_dirs, log_dirs.dirs());
        removed.sort();
        let orphans: Vec<_> = removed.iter().filter_map(|r| r.deleted_incarnation()).collect();
        assert_eq!(orphans, vec![("gone", 0, [9; 16]), ("re-made", 1, [8; 16])], "deleted incarnations, by their recorded ids");
        let mut want = [
            (a.join("gone-0"), Stray::UnknownTopic),
            (a.join("kept-2"), Stray::UnknownPartition),
            (b.join("re-made-1"), Stray::OtherTopicId),
            (b.join("moved-0"), Stray::NotAReplica),
        ];
        want.sort();
        assert_eq!(
            removed.iter().map(|r| (std::path::absolute(&r.path).unwrap(), r.why.clone())).collect::<Vec<_>>(),
            want.iter().map(|(p, w)| (std::path::absolute(p).unwrap(), w.clone())).collect::<Vec<_>>()
        );
        let left = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            v.sort();
            v
        };
        assert_eq!(left(&a), vec!["controller", "kept-0", "re-made-0"]);
        assert_eq!(left(&b), vec!["kept-1", "old-0"]);
        assert_eq!(log_dirs.partition_counts(), vec![2, 2], "removed partitions are forgotten by the placement table");
    }

    #[test]
    fn strays_go_only_from_dirs_this_cluster_claimed_before() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let mut image = MetadataImage { cluster_id: "c1".into(), ..MetadataImage::default() };
        image.topics.insert("kept".into(), topic("kept", 1, &[&[1]]));
        mkdir(&a, "gone-0", Some(9));
        std::fs::create_dir_all(&b).unwrap();
        let log_dirs = LogDirs::open(&[a.clone(), b.clone()]).unwrap();
        // First start with meta.properties: `a` held partitions already, so it is only
        // claimed; `b` was empty and is scanned (nothing to remove).
        assert_eq!(check_log_dirs_and_remove_strays(&image, 1, &log_dirs, "V1eFpz4xQ2eyfnz1TUhvEg"), Ok(vec![]));
        assert!(a.join("gone-0").is_dir());
        // Next start: `a` is this cluster's, its stray goes.
        let removed = check_log_dirs_and_remove_strays(&image, 1, &log_dirs, "V1eFpz4xQ2eyfnz1TUhvEg").unwrap();
        assert_eq!(removed.len(), 1);
        assert!(!a.join("gone-0").exists());
        // Metadata of another cluster (a wiped controller dir): refused, nothing touched.
        mkdir(&a, "kept-0", Some(1));
        let other = MetadataImage { cluster_id: "c2".into(), ..MetadataImage::default() };
        let err = check_log_dirs_and_remove_strays(&other, 1, &log_dirs, "V1eFpz4xQ2eyfnz1TUhvEg").unwrap_err();
        assert!(err.contains("Invalid cluster.id"), "{err}");
        assert!(a.join("kept-0").is_dir());
    }

    #[test]
    fn partition_dir_names_parse_as_log_dirs_names_them() {
        assert_eq!(parse_partition_dir("a-b-3"), Some(("a-b", 3)));
        for not in ["controller", "-1", "t-", "t-x", "t-2147483648"] {
            assert_eq!(parse_partition_dir(not), None, "{not}");
        }
        assert!(is_doomed("t-0.1700000000000-delete") && is_doomed("t-0.17-stray") && !is_doomed("t-0") && !is_doomed("a.b-0"));
    }
}
