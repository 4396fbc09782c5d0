//! Deleting a segment's log file without stalling the shards (retention, DeleteRecords).
//!
//! Why: unlinking a file frees all its blocks at once, and on a filesystem mounted with
//! `discard` (without a journal to defer it) the kernel discards them synchronously. The
//! unlink runs on the blocking pool, yet a 32 MiB segment's discard stalled the shards'
//! writes: W9 (retention while writing) had a 16-85 ms p99 spike at every retention
//! pass, none without deletion or with `nodiscard` (docs/benchmarks.md). As Kafka renames
//! a segment to `.deleted` before removing it, and as RocksDB frees files by truncating
//! them in chunks, the file is renamed to `<name>.deleted`, shrunk `STEP_BYTES` at a time
//! with a pause between steps, then unlinked. Recovery removes a `.deleted` file a crash
//! left (`dir_survey.rs`): it is below the log start offset, saved before deletion began.
//!
//! A reader must never see the file shrink under it: a fetch or the cleaner may still
//! hold the segment (an `Rc<SegmentFile>`), or a zero-copy send on any shard its lent
//! descriptor. Shrinking starts only once nothing else uses the file; a file still in
//! use after `WAIT_FOR_READERS` is unlinked whole, as before (a reader keeps its data).
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::dma::remove_file;
use super::file::SegmentFile;
use super::{Result, StorageError};

/// What a deleted log file is renamed to before it is shrunk and unlinked.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Bytes freed per step.
const STEP_BYTES: u64 = 8 << 20;
/// Pause between steps: other writes get the device between discards.
const STEP_PAUSE: Duration = Duration::from_millis(2);
/// How long deletion waits for readers before it unlinks the file whole. Short: a
/// DeleteRecords request waits for its deletions (a client's request.timeout.ms is 30 s),
/// and a shard's retention pass deletes one partition's segments after another's.
const WAIT_FOR_READERS: Duration = Duration::from_secs(5);
const READER_POLL: Duration = Duration::from_millis(50);

/// Deletes the log file `path` of a segment removed from its log, `file` its last handle
/// the log had. Missing is fine.
pub async fn delete_log_file(file: Rc<SegmentFile>, path: &Path) -> Result<()> {
    if file.has_fault_injector() {
        // Tests' fault seam fails removals at `remove_file`: keep that one path for them.
        drop(file);
        return remove_file(path).await;
    }
    let deadline = Instant::now() + WAIT_FOR_READERS;
    while file.used_by_others() && Instant::now() < deadline {
        glommio::timer::sleep(READER_POLL).await;
    }
    let shrink = !file.used_by_others();
    drop(file);
    if !shrink {
        return remove_file(path).await;
    }
    let mut trash = path.as_os_str().to_owned();
    trash.push(DELETED_SUFFIX);
    let trash = std::path::PathBuf::from(trash);
    let (from, to) = (path.to_path_buf(), trash.clone());
    match glommio::executor().spawn_blocking(move || std::fs::rename(from, to)).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StorageError::io(format!("renaming {} for deletion", path.display()), e)),
    }
    loop {
        let t = trash.clone();
        let left = glommio::executor()
            .spawn_blocking(move || -> std::io::Result<u64> {
                let f = std::fs::OpenOptions::new().write(true).open(&t)?;
                let len = f.metadata()?.len().saturating_sub(STEP_BYTES);
                f.set_len(len)?;
                Ok(len)
            })
            .await
            .map_err(|e| StorageError::io(format!("shrinking {} for deletion", trash.display()), e))?;
        if left == 0 {
            break;
        }
        glommio::timer::sleep(STEP_PAUSE).await;
    }
    remove_file(&trash).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::dma::open_segment;
    use crate::storage::testing::run;
    use crate::storage::WriteMode;

    #[test]
    fn a_deleted_log_file_leaves_nothing_behind() {
        run(|dir| async move {
            let path = dir.join("00000000000000000000.log");
            std::fs::write(&path, vec![7u8; (STEP_BYTES * 2 + 4096) as usize]).unwrap();
            let file = open_segment(&path, WriteMode::PageCache).await.unwrap();
            delete_log_file(file, &path).await.unwrap();
            let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n.to_string_lossy().contains(".log")).collect();
            assert!(left.is_empty(), "{left:?}");
            // Already gone: fine.
            let again = open_segment(&dir.join("00000000000000000001.log"), WriteMode::PageCache).await.unwrap();
            std::fs::remove_file(dir.join("00000000000000000001.log")).unwrap();
            delete_log_file(again, &dir.join("00000000000000000001.log")).await.unwrap();
        });
    }

    #[test]
    fn a_file_someone_still_reads_is_not_shrunk_under_them() {
        run(|dir| async move {
            let path = dir.join("00000000000000000000.log");
            let data = vec![3u8; 3 << 20];
            std::fs::write(&path, &data).unwrap();
            let file = open_segment(&path, WriteMode::PageCache).await.unwrap();
            let reader = file.clone();
            let p = path.clone();
            let deleting = glommio::spawn_local(async move { delete_log_file(file, &p).await });
            glommio::timer::sleep(READER_POLL * 3).await;
            // Still whole, under its own name, while the reader holds it.
            assert_eq!(std::fs::metadata(&path).unwrap().len(), data.len() as u64);
            let got = crate::storage::dma::read_bytes(&reader, 0, 4096).await.unwrap();
            assert_eq!(&got[..], &data[..4096]);
            drop(reader);
            deleting.await.unwrap();
            assert!(!path.exists());
        });
    }
}
