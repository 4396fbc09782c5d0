//! The broker's log dirs (Kafka's `log.dirs`, JBOD): which directory each partition's log
//! lives in.
//!
//! - Start-up (`LogDirs::open`, on the start-up thread, before any shard runs): every dir
//!   is created and scanned; each `<topic>-<partition>` directory is found in whichever dir
//!   holds it. The same partition in two dirs is a start-up error: which copy is current
//!   cannot be told (Kafka's LogManager refuses to start the same way).
//! - A partition with no directory yet goes to the dir holding the fewest partitions
//!   (ties: the one listed first), as Kafka's `LogManager.nextLogDirs`; internal topics
//!   (`__consumer_offsets`) are placed like any other.
//! - Deleting a partition forgets its place once its directory is renamed away.
//!
//! The metadata (controller files) stays in the first dir, as Kafka's `metadata.log.dir`
//! defaults to the first of `log.dirs`; it is not a partition and is not counted.
//!
//! Shared by every shard (`Arc`). The placement table sits behind a mutex taken only when
//! a partition is opened, created or deleted and by the log-dir admin APIs — never on the
//! produce or fetch path. Which shard owns a partition does not depend on its dir.
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum LogDirsError {
    #[error("no log dir configured (set log_dirs or data_dir)")]
    NoDirs,
    #[error("cannot read log dir {dir}: {source}")]
    Io { dir: PathBuf, source: io::Error },
    #[error(
        "partition {partition} has a directory in two log dirs, {first} and {second}: delete the copy that is not current \
         (the one in a dir that failed or was restored recently), then restart"
    )]
    Duplicate { partition: String, first: PathBuf, second: PathBuf },
}

/// The directory name of a partition's log inside a log dir, as Kafka names it.
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// Whether `name` is a live partition directory (`<topic>-<n>`): not the controller's
/// dir, nor a deleted partition being removed (`<topic>-<n>.<ms>-delete`), nor a file.
fn is_partition_dir_name(name: &str) -> bool {
    match name.rsplit_once('-') {
        Some((topic, n)) => !topic.is_empty() && n.parse::<u32>().is_ok_and(|p| p <= i32::MAX as u32),
        None => false,
    }
}

/// The index of the dir with the fewest partitions; the first such on ties.
fn fewest(counts: &[usize]) -> usize {
    debug_assert!(!counts.is_empty());
    // min_by_key returns the first minimum.
    counts.iter().enumerate().min_by_key(|(_, c)| **c).map(|(i, _)| i).unwrap_or(0)
}

struct Placement {
    /// Partition directory name -> index of the dir holding it.
    dir_of: HashMap<String, usize>,
    /// Partitions per dir; always the count of `dir_of` entries with that index.
    counts: Vec<usize>,
}

pub struct LogDirs {
    /// Absolute paths (as clients see them in DescribeLogDirs), in configured order.
    dirs: Vec<PathBuf>,
    table: Mutex<Placement>,
}

impl LogDirs {
    /// Creates and scans `dirs`. Blocking (std::fs): call before the shards start.
    pub fn open(dirs: &[PathBuf]) -> Result<LogDirs, LogDirsError> {
        if dirs.is_empty() {
            return Err(LogDirsError::NoDirs);
        }
        let dirs: Vec<PathBuf> = dirs.iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())).collect();
        let mut dir_of: HashMap<String, usize> = HashMap::new();
        let mut counts = vec![0; dirs.len()];
        for (i, dir) in dirs.iter().enumerate() {
            let io_err = |source| LogDirsError::Io { dir: dir.clone(), source };
            std::fs::create_dir_all(dir).map_err(io_err)?;
            for entry in std::fs::read_dir(dir).map_err(io_err)? {
                let entry = entry.map_err(io_err)?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
                if !is_partition_dir_name(&name) || !entry.file_type().map_err(io_err)?.is_dir() {
                    continue;
                }
                if let Some(&first) = dir_of.get(&name) {
                    return Err(LogDirsError::Duplicate { partition: name, first: dirs[first].clone(), second: dir.clone() });
                }
                dir_of.insert(name, i);
                counts[i] += 1;
            }
        }
        Ok(LogDirs { dirs, table: Mutex::new(Placement { dir_of, counts }) })
    }

    /// The log dirs, absolute, in configured order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The index of `path` among the log dirs, compared as absolute paths.
    pub fn index_of(&self, path: &Path) -> Option<usize> {
        let path = std::path::absolute(path).ok()?;
        self.dirs.iter().position(|d| *d == path)
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Placement> {
        // Poisoning needs a panic while the lock is held, and any panic aborts the broker
        // (server/broker.rs), so a poisoned table is never seen by a live broker.
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The directory of partition `topic`-`partition`: where it already is, or (a new
    /// partition) in the dir with the fewest partitions, which it is then counted in.
    pub fn place(&self, topic: &str, partition: i32) -> PathBuf {
        let name = partition_dir_name(topic, partition);
        let mut t = self.table();
        let index = match t.dir_of.get(&name) {
            Some(&i) => i,
            None => {
                let i = fewest(&t.counts);
                t.counts[i] += 1;
                t.dir_of.insert(name.clone(), i);
                i
            }
        };
        debug_assert_eq!(t.counts.iter().sum::<usize>(), t.dir_of.len());
        self.dirs[index].join(name)
    }

    /// The index of the dir holding `topic`-`partition`, if it has been placed.
    pub fn dir_index_of(&self, topic: &str, partition: i32) -> Option<usize> {
        self.table().dir_of.get(&partition_dir_name(topic, partition)).copied()
    }

    /// Forgets a deleted partition (its directory was renamed away): a partition created
    /// under the same name later is placed afresh.
    pub fn forget(&self, topic: &str, partition: i32) {
        let mut t = self.table();
        if let Some(i) = t.dir_of.remove(&partition_dir_name(topic, partition)) {
            t.counts[i] -= 1;
        }
        debug_assert_eq!(t.counts.iter().sum::<usize>(), t.dir_of.len());
    }

    /// Partitions placed in each dir, in configured order.
    pub fn partition_counts(&self) -> Vec<usize> {
        self.table().counts.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdirs(root: &Path, names: &[&str]) {
        for n in names {
            std::fs::create_dir_all(root.join(n)).unwrap();
        }
    }

    #[test]
    fn a_new_partition_goes_to_the_dir_with_fewest_partitions() {
        assert_eq!(fewest(&[3, 1, 1]), 1, "ties go to the dir listed first");
        assert_eq!(fewest(&[0, 0]), 0);
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        mkdirs(&a, &["x-0", "x-1", "x-2"]);
        mkdirs(&b, &["y-0"]);
        let dirs = LogDirs::open(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(dirs.partition_counts(), vec![3, 1]);
        // b fills up to a, then they alternate (a first on each tie).
        let placed: Vec<PathBuf> = (0..4).map(|p| dirs.place("new", p)).collect();
        assert_eq!(placed, vec![b.join("new-0"), b.join("new-1"), a.join("new-2"), b.join("new-3")]);
        assert_eq!(dirs.partition_counts(), vec![4, 4]);
        // Placing again is stable; nothing is counted twice.
        assert_eq!(dirs.place("new", 0), b.join("new-0"));
        assert_eq!(dirs.partition_counts(), vec![4, 4]);
        dirs.forget("new", 0);
        assert_eq!(dirs.dir_index_of("new", 0), None);
        assert_eq!(dirs.partition_counts(), vec![4, 3]);
    }

    #[test]
    fn the_scan_finds_each_partition_in_its_dir() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        mkdirs(&a, &["orders-0", "__consumer_offsets-7", "controller", "gone-1.1700000000000-delete"]);
        mkdirs(&b, &["orders-1", "my-topic-12"]);
        std::fs::write(a.join(".iopoll-probe"), [0u8; 16]).unwrap();
        std::fs::write(b.join("stray-3"), b"a file, not a partition").unwrap();
        let dirs = LogDirs::open(&[a.clone(), b.clone(), root.path().join("c-not-yet-created")]).unwrap();
        assert!(root.path().join("c-not-yet-created").is_dir(), "missing log dirs are created");
        assert_eq!(dirs.partition_counts(), vec![2, 2, 0]);
        assert_eq!(dirs.dir_index_of("orders", 0), Some(0));
        assert_eq!(dirs.dir_index_of("orders", 1), Some(1));
        assert_eq!(dirs.dir_index_of("my-topic", 12), Some(1));
        assert_eq!(dirs.dir_index_of("__consumer_offsets", 7), Some(0));
        assert_eq!(dirs.dir_index_of("gone", 1), None, "a partition being deleted is not live");
        assert_eq!(dirs.place("orders", 1), b.join("orders-1"), "an existing partition stays where it is");
    }

    #[test]
    fn the_same_partition_in_two_dirs_is_a_startup_error() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        mkdirs(&a, &["t-0"]);
        mkdirs(&b, &["t-0"]);
        match LogDirs::open(&[a.clone(), b.clone()]) {
            Err(LogDirsError::Duplicate { partition, first, second }) => {
                assert_eq!((partition.as_str(), first, second), ("t-0", a, b));
            }
            other => panic!("expected a duplicate error, got {:?}", other.map(|d| d.partition_counts())),
        }
        assert!(matches!(LogDirs::open(&[]), Err(LogDirsError::NoDirs)));
    }

    #[test]
    fn partition_dir_names() {
        for ok in ["t-0", "a-b-c-2147483647", "__consumer_offsets-49"] {
            assert!(is_partition_dir_name(ok), "{ok}");
        }
        for not in ["controller", "-1", "t-", "t-x", "t-2147483648", "t-0.17-delete", ".iopoll-probe"] {
            assert!(!is_partition_dir_name(not), "{not}");
        }
    }

    #[test]
    fn index_of_compares_absolute_paths() {
        let root = tempfile::tempdir().unwrap();
        let dirs = LogDirs::open(&[root.path().join("a"), root.path().join("b")]).unwrap();
        assert_eq!(dirs.index_of(&root.path().join("b")), Some(1));
        assert_eq!(dirs.index_of(Path::new("/nonexistent/dir")), None);
        assert!(dirs.dirs().iter().all(|d| d.is_absolute()));
    }
}
