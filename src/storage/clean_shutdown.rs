//! The clean-shutdown marker of one log (Kafka keeps one per log dir,
//! `.kafka_cleanshutdown`; one per partition fits our shard ownership).
//!
//! `LogWriter::close_cleanly` writes everything appended, fdatasyncs every file and the
//! directory, saves the sealed segments' indexes, then writes the marker (a checked file
//! holding the log end offset). `Log::open` takes it away (durably) before anything
//! else: a log opened without it was not closed cleanly (a crash, kill -9, a failed
//! sync), so with `LogConfig::verify_sealed_after_unclean_shutdown` its sealed segments are
//! read and checked batch by batch (`recovery::open_sealed`), the first bad batch cutting
//! the log (`truncate::cut_damaged_sealed`). With the marker, sealed segments open from
//! their indexes unread.
use std::path::Path;
use std::rc::Rc;

use super::dir_survey::DirSurvey;
use super::dma::{
    checked_file_bytes, overwrite_in_place_blocking, parse_checked_file, read_checked_file, remove_file, sync_dir, write_atomic_blocking, write_checked_file,
};
use super::log_writer::LogWriter;
use super::{Result, StorageError};

pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
const MARKER_MAGIC: u32 = 0x534c_4353; // "SLCS"
const MARKER_VERSION: u16 = 1;
/// The marker as a surveyed open leaves it (`dir_survey`): taken, so not clean, written
/// in place over the clean one. A removal would free the file's block, and on a
/// filesystem mounted with `discard` each free is a synchronous discard: removing 100k
/// markers was most of a 100k-partition restart here. An older shardlog reads this
/// version as unreadable: unclean, as it should.
const TAKEN_VERSION: u16 = 2;

/// Writes the marker (the log end offset it was closed at), durably. Over a taken
/// marker it is written in place (a torn write fails its CRC: unclean, the safe side) and
/// synced: replacing the file would free the old one's block (a synchronous discard each
/// where the filesystem is mounted with `discard`). Through the page cache, so the next
/// start reads it from there rather than from the disk once per partition. With a
/// storage fault injector (tests) it goes through `write_checked_file`, which it watches.
pub async fn write_marker(dir: &Path, log_end_offset: i64) -> Result<()> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    if super::file::fault_injector_for(&path).is_some() {
        return write_checked_file(&path, MARKER_MAGIC, MARKER_VERSION, &log_end_offset.to_be_bytes()).await;
    }
    let data = checked_file_bytes(MARKER_MAGIC, MARKER_VERSION, &log_end_offset.to_be_bytes());
    let p = path.clone();
    glommio::executor()
        .spawn_blocking(move || match overwrite_in_place_blocking(&p, &data)? {
            Some(f) => f.sync_data(),
            None => write_atomic_blocking(&p, &data),
        })
        .await
        .map_err(|e| StorageError::io(format!("writing {}", path.display()), e))
}

/// At open, for a directory not surveyed (or whose survey left the marker: a storage
/// fault injector is installed): whether the log was closed cleanly (the marker is there
/// and intact). The marker is removed, and the removal synced, before the log is touched,
/// so a crash from here on counts as unclean.
pub async fn take_marker(dir: &Path) -> Result<bool> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    let read = read_checked_file(&path, MARKER_MAGIC, MARKER_VERSION).await;
    if let Ok(None) = read {
        return Ok(false);
    }
    remove_file(&path).await?;
    sync_dir(dir).await?;
    Ok(judge(&path, read.map(|payload| payload.is_some_and(|p| p.len() == 8))))
}

/// `take_marker` for a surveyed directory: the survey has read the marker and written
/// the taken form over a clean one (not synced: `Log::marker_taken_unsynced`), unless it
/// was told not to.
pub async fn take_surveyed_marker(survey: &mut DirSurvey) -> Result<bool> {
    if !survey.listing.contains(CLEAN_SHUTDOWN_FILE) {
        return Ok(false);
    }
    let path = survey.dir().join(CLEAN_SHUTDOWN_FILE);
    let clean = match survey.take_marker() {
        None => return take_marker(survey.dir()).await,
        Some(Ok(bytes)) => is_clean(&path, &bytes),
        Some(Err(e)) => Err(StorageError::io(format!("reading {}", path.display()), e)),
    };
    Ok(judge(&path, clean))
}

/// What a marker's bytes say: clean (a marker written by `write_marker`), or not (taken).
fn is_clean(path: &Path, bytes: &[u8]) -> Result<bool> {
    if bytes.len() >= 6
        && u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == MARKER_MAGIC
        && u16::from_be_bytes([bytes[4], bytes[5]]) == TAKEN_VERSION
    {
        return Ok(false);
    }
    parse_checked_file(path, bytes, MARKER_MAGIC, MARKER_VERSION).map(|payload| payload.len() == 8)
}

/// Whether the marker in `dir` reads as clean now (tests).
#[cfg(test)]
pub fn reads_clean(dir: &Path) -> bool {
    std::fs::read(dir.join(CLEAN_SHUTDOWN_FILE)).is_ok_and(|bytes| is_clean(dir, &bytes).unwrap_or(false))
}

/// For a marker's bytes: the taken form to write over them in place if they are a clean
/// marker (`TAKEN_VERSION`; no longer than they are, so nothing is freed or allocated).
pub fn taken_form(bytes: &[u8]) -> Option<Vec<u8>> {
    let payload = parse_checked_file(Path::new(CLEAN_SHUTDOWN_FILE), bytes, MARKER_MAGIC, MARKER_VERSION).ok().filter(|p| p.len() == 8)?;
    let taken = checked_file_bytes(MARKER_MAGIC, TAKEN_VERSION, &payload);
    debug_assert!(taken.len() <= bytes.len());
    Some(taken)
}

/// Makes the taken form the survey wrote durable (the file existed: its data is enough).
pub async fn sync_taken_marker(dir: &Path) -> Result<()> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    let p = path.clone();
    glommio::executor()
        .spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(&p)?.sync_data())
        .await
        .map_err(|e| StorageError::io(format!("syncing {}", path.display()), e))
}

/// Logs an unreadable marker; either way, only a readable clean one counts.
fn judge(path: &Path, clean: Result<bool>) -> bool {
    match clean {
        Ok(clean) => clean,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "unreadable clean-shutdown marker; treating the shutdown as unclean");
            false
        }
    }
}

impl LogWriter {
    /// Closes the log cleanly (broker shutdown, or a replica no longer hosted here whose
    /// files stay): waits until everything appended is written, fdatasyncs it (and the
    /// directory), saves the sealed segments' indexes, then writes the clean-shutdown
    /// marker. From then on nothing is written: kicks are ignored and `durable` fails with
    /// `StorageError::Closed`, as do waiters not yet durable. Call with the partition's
    /// append lock held (or after the partition stopped taking appends). An offline log
    /// (or a failed sync) writes no marker: its next open verifies.
    pub async fn close_cleanly(self: &Rc<Self>) -> Result<()> {
        let paused = self.pause().await?;
        self.mark_closed();
        let log = self.log().clone();
        let res = async {
            log.borrow().check_online()?;
            let written = log.borrow().written_offset();
            if let Err(e) = self.sync(written).await {
                // Invariant 8: a failed fdatasync is sticky.
                self.go_offline(e.duplicate());
                return Err(e);
            }
            self.wake(written);
            self.save_sealed().await;
            let (dir, end) = (log.borrow().dir().to_path_buf(), log.borrow().next_offset());
            write_marker(&dir, end).await
        }
        .await;
        self.fail_all(&StorageError::Closed);
        drop(paused);
        res
    }
}
