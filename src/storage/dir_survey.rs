//! One look at a partition directory before its log opens (`Log::open_surveyed`).
//!
//! A single hand-off to the blocking pool creates the directory when it is absent, lists
//! it, reads the small files the open needs (the partition's metadata and checkpoints)
//! and takes the clean-shutdown marker. A restart of a broker with 100k partitions paid
//! about ten hand-offs (each a wake-up of a blocking thread and of the shard) and two
//! io_uring opens per partition for those steps.
//!
//! The marker is not removed but overwritten in place with its taken form
//! (`clean_shutdown::taken_form`: freeing a block per partition was slow), and not synced
//! here: a file sync per partition was most of what remained of a 100k-partition restart.
//! The log opens with `Log::marker_taken_unsynced` set, and its owner makes the change
//! durable before anything writes to the log: one `syncfs` for a whole batch of opens
//! (`dma::sync_filesystem`), or the marker's own sync (`Log::open` does that).
//!
//! Each reader asks the survey for its file (`checked_file`, `text_file`): a file the
//! listing does not show is absent without a syscall; a preloaded one is parsed from
//! memory; one that was not preloaded (larger than `PRELOAD_MAX_BYTES`, or a shard with a
//! storage fault injector) is read from disk as before. With an injector (tests), nothing
//! is preloaded and the marker is left for `clean_shutdown::take_marker`, so every read
//! and removal goes through the seam the injector watches.
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::dma::{overwrite_in_place_blocking, parse_checked_file, read_checked_file, sync_dir_blocking};
use super::{Result, StorageError};

/// The small files a log's open reads, preloaded when the listing shows them.
const PRELOADED: [&str; 4] = [
    super::log::LOG_START_FILE,
    super::partition_metadata::PARTITION_METADATA_FILE,
    super::leader_epoch_cache::LEADER_EPOCH_CHECKPOINT_FILE,
    super::high_watermark_checkpoint::HIGH_WATERMARK_FILE,
];
/// Larger files are read when asked for (a leader-epoch checkpoint of a very long life).
const PRELOAD_MAX_BYTES: u64 = 64 * 1024;

/// One log directory's files as a survey found them (one listing serves every step of
/// the open).
pub struct DirListing {
    /// The segment bases (`<base>.log`), ascending.
    pub bases: Vec<i64>,
    names: HashSet<String>,
    /// Files a crash left, removed: `<base>.log.cleaned` in the middle of a clean (the
    /// rename over `<base>.log` is the commit point, so the original is whole) and
    /// `<base>.log.deleted` in the middle of a deletion (below the saved log start).
    pub leftovers_removed: usize,
}

impl DirListing {
    /// Whether the directory held `name` when listed.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

pub struct DirSurvey {
    dir: PathBuf,
    /// The directory did not exist: it was created (and its parent synced).
    pub created: bool,
    pub listing: DirListing,
    preloaded: HashMap<&'static str, io::Result<Vec<u8>>>,
    /// The clean-shutdown marker as read before it was taken; `None` when the survey left
    /// it alone.
    taken_marker: Option<io::Result<Vec<u8>>>,
    /// A clean marker's taken form was written over it and not synced since.
    pub marker_taken_unsynced: bool,
}

/// Surveys `dir` (see the module comment), creating it if absent.
pub async fn survey(dir: &Path) -> Result<DirSurvey> {
    let d = dir.to_path_buf();
    // A file's injector is its directory's or the shard's: any file name stands for all.
    let preload = super::file::fault_injector_for(&dir.join(super::clean_shutdown::CLEAN_SHUTDOWN_FILE)).is_none();
    glommio::executor()
        .spawn_blocking(move || survey_blocking(d, preload))
        .await
        .map_err(|e| StorageError::io(format!("opening directory {}", dir.display()), e))
}

fn survey_blocking(dir: PathBuf, preload: bool) -> io::Result<DirSurvey> {
    let created = match std::fs::create_dir(&dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(&dir).map(|()| true)?,
        Err(e) => return Err(e),
    };
    if created {
        // A new partition directory survives a crash only once its parent is synced.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir_blocking(parent)?;
        }
    }
    let leftover = format!(".log{}", super::compaction::CLEANED_SUFFIX);
    let deleted = format!(".log{}", super::segment_deletion::DELETED_SUFFIX);
    let (mut names, mut removed) = (HashSet::new(), 0);
    for e in std::fs::read_dir(&dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        // A cleaner's unfinished copy, or a log file a crash left half deleted (it was
        // below the saved log start offset: segment_deletion.rs).
        if name.ends_with(&leftover) || name.ends_with(&deleted) {
            std::fs::remove_file(e.path())?;
            removed += 1;
        } else {
            names.insert(name);
        }
    }
    let mut bases: Vec<i64> = names.iter().filter_map(|n| n.strip_suffix(".log")).filter(|n| n.len() == 20).filter_map(|n| n.parse::<i64>().ok()).collect();
    bases.sort_unstable();
    let mut preloaded = HashMap::new();
    let (mut taken_marker, mut marker_taken_unsynced) = (None, false);
    if preload {
        for name in PRELOADED.into_iter().filter(|n| names.contains(*n)) {
            if let Some(read) = read_small(&dir.join(name)) {
                preloaded.insert(name, read);
            }
        }
        let marker = super::clean_shutdown::CLEAN_SHUTDOWN_FILE;
        if names.contains(marker) {
            let path = dir.join(marker);
            // A marker too large to be one is read as an empty one: unclean.
            let read = read_small(&path).unwrap_or_else(|| Ok(Vec::new()));
            // Taken now: a crash once this is synced counts as unclean.
            if let Some(taken) = read.as_ref().ok().and_then(|bytes| super::clean_shutdown::taken_form(bytes)) {
                marker_taken_unsynced = overwrite_in_place_blocking(&path, &taken)?.is_some();
            }
            taken_marker = Some(read);
        }
    }
    let listing = DirListing { bases, names, leftovers_removed: removed };
    Ok(DirSurvey { dir, created, listing, preloaded, taken_marker, marker_taken_unsynced })
}

/// The whole file, bounded by `PRELOAD_MAX_BYTES`; `None` when it is larger.
fn read_small(path: &Path) -> Option<io::Result<Vec<u8>>> {
    let read = || -> io::Result<Option<Vec<u8>>> {
        let file = open_noatime(path)?;
        let len = file.metadata()?.len();
        if len > PRELOAD_MAX_BYTES {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(PRELOAD_MAX_BYTES + 1).read_to_end(&mut bytes)?;
        Ok((bytes.len() as u64 <= PRELOAD_MAX_BYTES).then_some(bytes))
    };
    read().transpose()
}

/// Opens `path` to read without updating its access time (an inode write each, per file
/// per partition); a file this process does not own falls back to a plain open.
fn open_noatime(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOATIME).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => std::fs::File::open(path),
        opened => opened,
    }
}

impl DirSurvey {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The preloaded bytes of `name`: `Ok(None)` if the listing does not show it (or it
    /// went before it could be read), `Err(None)` if it must be read from disk.
    fn take_preloaded(&mut self, name: &'static str) -> std::result::Result<Option<Vec<u8>>, Option<StorageError>> {
        if !self.listing.contains(name) {
            return Ok(None);
        }
        match self.preloaded.remove(name) {
            Some(Ok(bytes)) => Ok(Some(bytes)),
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Some(Err(e)) => Err(Some(StorageError::io(format!("reading {}", self.dir.join(name).display()), e))),
            None => Err(None),
        }
    }

    /// `dma::read_checked_file` of `name` in the directory, from the survey.
    pub async fn checked_file(&mut self, name: &'static str, magic: u32, version: u16) -> Result<Option<Vec<u8>>> {
        let path = self.dir.join(name);
        match self.take_preloaded(name) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => parse_checked_file(&path, &bytes, magic, version).map(Some),
            Err(Some(e)) => Err(e),
            Err(None) => read_checked_file(&path, magic, version).await,
        }
    }

    /// The text of `name` in the directory, from the survey (`Ok(None)` when absent).
    pub async fn text_file(&mut self, name: &'static str) -> Result<Option<String>> {
        let path = self.dir.join(name);
        let bytes = match self.take_preloaded(name) {
            Ok(bytes) => bytes,
            Err(Some(e)) => return Err(e),
            Err(None) => {
                let p = path.clone();
                glommio::executor()
                    .spawn_blocking(move || match std::fs::read(&p) {
                        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                        read => read.map(Some),
                    })
                    .await
                    .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?
            }
        };
        let not_text = || StorageError::io(format!("reading {}", path.display()), io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"));
        bytes.map(|b| String::from_utf8(b).map_err(|_| not_text())).transpose()
    }

    /// The clean-shutdown marker's bytes as the survey read them (`None`: left alone).
    pub fn take_marker(&mut self) -> Option<io::Result<Vec<u8>>> {
        self.taken_marker.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::run;

    #[test]
    fn survey_lists_preloads_takes_the_marker_and_falls_back_for_large_files() {
        run(|dir| async move {
            let part = dir.join("t-0");
            let s = survey(&part).await.unwrap();
            assert!(s.created && part.is_dir() && s.listing.bases.is_empty());
            std::fs::write(part.join("00000000000000000000.log"), b"").unwrap();
            std::fs::write(part.join("00000000000000000100.log"), b"").unwrap();
            std::fs::write(part.join("00000000000000000100.log.cleaned"), b"x").unwrap();
            std::fs::write(part.join("00000000000000000050.log.deleted"), b"x").unwrap();
            std::fs::write(part.join(crate::storage::partition_metadata::PARTITION_METADATA_FILE), b"version: 0\n").unwrap();
            let big = "x".repeat(PRELOAD_MAX_BYTES as usize + 1);
            std::fs::write(part.join(crate::storage::leader_epoch_cache::LEADER_EPOCH_CHECKPOINT_FILE), &big).unwrap();
            crate::storage::clean_shutdown::write_marker(&part, 7).await.unwrap();
            let mut s = survey(&part).await.unwrap();
            assert!(!s.created);
            assert_eq!(s.listing.bases, vec![0, 100]);
            assert_eq!(s.listing.leftovers_removed, 2);
            assert!(!part.join("00000000000000000100.log.cleaned").exists());
            assert!(!part.join("00000000000000000050.log.deleted").exists());
            assert!(s.marker_taken_unsynced, "taken, not synced: the log's owner does that");
            // A log opened from a survey that took a clean marker waits for its owner's sync.
            let other = dir.join("u-0");
            survey(&other).await.unwrap();
            crate::storage::clean_shutdown::write_marker(&other, 0).await.unwrap();
            let log = crate::storage::log::Log::open_surveyed(survey(&other).await.unwrap(), crate::storage::LogConfig::default()).await.unwrap().log;
            assert!(log.marker_taken_unsynced());
            assert!(crate::storage::clean_shutdown::take_surveyed_marker(&mut s).await.unwrap(), "it was clean");
            let again = survey(&part).await.unwrap();
            assert!(!again.marker_taken_unsynced, "a taken marker is not written again");
            assert!(!crate::storage::clean_shutdown::take_surveyed_marker(&mut { again }).await.unwrap(), "and reads as unclean");
            // Preloaded: the file's later change is not seen.
            std::fs::write(part.join(crate::storage::partition_metadata::PARTITION_METADATA_FILE), b"changed").unwrap();
            assert_eq!(s.text_file(crate::storage::partition_metadata::PARTITION_METADATA_FILE).await.unwrap().as_deref(), Some("version: 0\n"));
            // Too large to preload: read from disk when asked.
            assert_eq!(s.text_file(crate::storage::leader_epoch_cache::LEADER_EPOCH_CHECKPOINT_FILE).await.unwrap(), Some(big));
            // Not listed: absent, whatever the disk holds now.
            std::fs::write(part.join(crate::storage::high_watermark_checkpoint::HIGH_WATERMARK_FILE), b"x").unwrap();
            assert_eq!(s.checked_file(crate::storage::high_watermark_checkpoint::HIGH_WATERMARK_FILE, 1, 1).await.unwrap(), None);
        });
    }
}
