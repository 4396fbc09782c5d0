//! Crash safety of a replica's restart at the tiered offset (`Partition::start_from_tiered`).
//! The restart truncates the whole log, then writes the state the remote log had at that
//! offset (producer snapshot, leader epochs). A crash in between would leave an empty log
//! at the tiered offset without that state: as leader, such a replica would not know the
//! producers whose last batches are remote, nor answer OffsetForLeaderEpoch for the
//! epochs below it.
//!
//! So the restart is bracketed by a marker file, written (synced) before the truncation
//! and removed once the state is saved. A replica that opens with the marker present
//! throws its log away and starts empty at offset 0: its next fetch is refused below the
//! leader's log (OFFSET_MOVED_TO_TIERED_STORAGE or OFFSET_OUT_OF_RANGE) and the restart
//! runs again from the start. Only the topic-id file stays.
use std::path::Path;

use crate::storage::dir_survey::{self, DirSurvey};
use crate::storage::dma::{remove_file, sync_dir, write_atomic_blocking};
use crate::storage::partition_metadata::PARTITION_METADATA_FILE;
use crate::storage::{Result, StorageError};

/// Present while a restart at the tiered offset is under way in this directory.
pub const TIERED_RESTART_FILE: &str = "tiered-restart.pending";

/// Marks the restart as begun (durably, before anything of the log is removed).
pub async fn begin(dir: &Path, offset: i64) -> Result<()> {
    let path = dir.join(TIERED_RESTART_FILE);
    let p = path.clone();
    glommio::executor()
        .spawn_blocking(move || write_atomic_blocking(&p, offset.to_string().as_bytes()))
        .await
        .map_err(|e| StorageError::io(format!("writing {}", path.display()), e))
}

/// Marks the restart as finished (its state is saved). Not synced: a crash that brings
/// the marker back only makes the replica restart again.
pub async fn finish(dir: &Path) -> Result<()> {
    remove_file(&dir.join(TIERED_RESTART_FILE)).await
}

/// At open: when the survey found the marker, the directory is emptied but for the
/// topic-id file (then the marker goes, synced) and surveyed again; otherwise the survey
/// as it was.
pub async fn discard_unfinished(survey: DirSurvey, topic: &str, partition: i32) -> Result<DirSurvey> {
    if !survey.listing.contains(TIERED_RESTART_FILE) {
        return Ok(survey);
    }
    let dir = survey.dir().to_path_buf();
    tracing::warn!(topic, partition, dir = %dir.display(),
        "a restart at the tiered offset did not finish before the broker stopped: the log starts over empty and is fetched again");
    let d = dir.clone();
    glommio::executor()
        .spawn_blocking(move || -> std::io::Result<()> {
            for e in std::fs::read_dir(&d)? {
                let e = e?;
                let name = e.file_name();
                if name != PARTITION_METADATA_FILE && name != TIERED_RESTART_FILE {
                    std::fs::remove_file(e.path())?;
                }
            }
            Ok(())
        })
        .await
        .map_err(|e| StorageError::io(format!("emptying {}", dir.display()), e))?;
    // The log's files are gone for good before the marker is.
    sync_dir(&dir).await?;
    remove_file(&dir.join(TIERED_RESTART_FILE)).await?;
    sync_dir(&dir).await?;
    dir_survey::survey(&dir).await
}
