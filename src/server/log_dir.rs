//! The broker's log dirs as the log-dir admin APIs (DescribeLogDirs, AlterReplicaLogDirs)
//! see them: each dir's absolute path, its file system's total and usable bytes, and the
//! bytes of each partition's segments on disk.
//!
//! The log dirs are `log_dirs` (Kafka's `log.dirs`), or `data_dir` alone; which dir holds
//! which partition is `storage::log_dirs::LogDirs`.
//!
//! Sizes are read from the disk, off the shard (`spawn_blocking`, invariant 6): the
//! partitions live on every shard and this answer is for an operator, not the data path.
//! A partition's size is the sum of its `.log` segment files, as Kafka's `Log.size`
//! (indexes and snapshots not counted). With `flush = always` the last segment's file is
//! padded to the device block, so it may read up to one block more than the records.
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Partitions one answer measures at most (each is one directory listing).
pub const MAX_PARTITIONS_MEASURED: usize = 100_000;

/// The log dir path clients see and must name in AlterReplicaLogDirs: the dir made
/// absolute without resolving links, as Kafka's `File.getAbsolutePath`.
pub fn log_dir_path(dir: &Path) -> String {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()).to_string_lossy().into_owned()
}

/// What DescribeLogDirs reports about one log dir.
#[derive(Debug, Default)]
pub struct LogDirUsage {
    /// Size of the file system holding the log dir (statvfs f_blocks * f_frsize).
    pub total_bytes: u64,
    /// Bytes an unprivileged writer may still use (f_bavail * f_frsize), as Java's
    /// `FileStore.getUsableSpace`.
    pub usable_bytes: u64,
    /// Bytes of `.log` segments per partition directory name (`<topic>-<partition>`);
    /// a partition whose directory does not exist (yet) is absent.
    pub partition_bytes: HashMap<String, u64>,
}

/// Measures the log dir and the partitions named `partition_dirs`, on a blocking thread.
pub async fn measure(dir: PathBuf, partition_dirs: Vec<String>) -> io::Result<LogDirUsage> {
    debug_assert!(partition_dirs.len() <= MAX_PARTITIONS_MEASURED);
    glommio::executor().spawn_blocking(move || measure_blocking(&dir, &partition_dirs)).await
}

fn measure_blocking(dir: &Path, partition_dirs: &[String]) -> io::Result<LogDirUsage> {
    let (total_bytes, usable_bytes) = file_system_bytes(dir)?;
    let mut partition_bytes = HashMap::with_capacity(partition_dirs.len());
    for name in partition_dirs {
        if let Some(bytes) = segment_bytes(&dir.join(name))? {
            partition_bytes.insert(name.clone(), bytes);
        }
    }
    Ok(LogDirUsage { total_bytes, usable_bytes, partition_bytes })
}

/// Sum of the `.log` files in `dir`; `None` if `dir` does not exist.
fn segment_bytes(dir: &Path) -> io::Result<Option<u64>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry?;
        if entry.path().extension().is_some_and(|x| x == "log") {
            // A segment deleted between listing and stat (retention) no longer counts.
            match entry.metadata() {
                Ok(m) => total += m.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(Some(total))
}

/// (total, usable) bytes of the file system holding `dir`.
pub fn file_system_bytes(dir: &Path) -> io::Result<(u64, u64)> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs only writes the struct it is given; an all-zero statvfs is a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and outlives the call; `s` is a valid out-pointer.
    if unsafe { libc::statvfs(path.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = s.f_frsize as u64;
    Ok((s.f_blocks as u64 * frsize, s.f_bavail as u64 * frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_log_segments_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t-0");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("00000000000000000000.log"), vec![0u8; 1000]).unwrap();
        std::fs::write(p.join("00000000000000000042.log"), vec![0u8; 24]).unwrap();
        std::fs::write(p.join("00000000000000000000.index"), vec![0u8; 4096]).unwrap();
        let u = measure_blocking(d.path(), &["t-0".into(), "t-1".into()]).unwrap();
        assert_eq!(u.partition_bytes.get("t-0"), Some(&1024));
        assert!(!u.partition_bytes.contains_key("t-1"), "a missing partition dir is not reported");
        assert!(u.total_bytes > 0 && u.usable_bytes <= u.total_bytes);
    }

    #[test]
    fn path_is_absolute() {
        assert!(Path::new(&log_dir_path(Path::new("./data"))).is_absolute());
        assert_eq!(log_dir_path(Path::new("/var/lib/shardlog")), "/var/lib/shardlog");
    }
}
