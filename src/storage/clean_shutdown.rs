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

use super::dma::{read_checked_file, remove_file, sync_dir, write_checked_file};
use super::log_writer::LogWriter;
use super::{Result, StorageError};

pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
const MARKER_MAGIC: u32 = 0x534c_4353; // "SLCS"
const MARKER_VERSION: u16 = 1;

/// Writes the marker (the log end offset it was closed at), durably.
pub async fn write_marker(dir: &Path, log_end_offset: i64) -> Result<()> {
    write_checked_file(&dir.join(CLEAN_SHUTDOWN_FILE), MARKER_MAGIC, MARKER_VERSION, &log_end_offset.to_be_bytes()).await
}

/// At open: whether the log was closed cleanly (the marker is there and intact). The
/// marker is removed, and the removal synced, before the log is touched, so a crash
/// from here on counts as unclean.
pub async fn take_marker(dir: &Path) -> Result<bool> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    let clean = match read_checked_file(&path, MARKER_MAGIC, MARKER_VERSION).await {
        Ok(None) => return Ok(false),
        Ok(Some(payload)) => payload.len() == 8,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "unreadable clean-shutdown marker; treating the shutdown as unclean");
            false
        }
    };
    remove_file(&path).await?;
    sync_dir(dir).await?;
    Ok(clean)
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
