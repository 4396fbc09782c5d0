//! Saving the high watermark (Kafka's replication-offset-checkpoint, one file per
//! partition directory here: `storage::high_watermark_checkpoint`). Loaded at open (a
//! replica restarts with a high watermark that is never above what the ISR had), saved
//! in the background every `HW_CHECKPOINT_INTERVAL` when it moved, and on request
//! (`checkpoint_high_watermark`, e.g. at shutdown). A lost or stale checkpoint is safe:
//! the high watermark only ever starts lower than it was.
//!
//! The only place the partition layer touches the checkpoint's storage functions.
use std::rc::{Rc, Weak};
use std::time::Duration;

use super::error::PartitionError;
use super::state::Partition;
use crate::storage::dir_survey::DirSurvey;
use crate::storage::high_watermark_checkpoint as checkpoint;

/// Kafka's replica.high.watermark.checkpoint.interval.ms default.
pub const HW_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// The saved high watermark of the surveyed partition directory; None when there is none
/// or it is unreadable (logged: the high watermark then restarts from the log start).
pub(super) async fn load(survey: &mut DirSurvey, topic: &str, index: i32) -> Option<i64> {
    match checkpoint::load_surveyed(survey).await {
        Ok(hw) => hw,
        Err(e) => {
            tracing::warn!(topic, partition = index, error = %e, "high-watermark checkpoint unreadable; starting from the log start");
            None
        }
    }
}

/// Starts the partition's background checkpointing; it ends when the partition closes or
/// is dropped.
pub(super) fn spawn_periodic(partition: &Rc<Partition>) {
    let me: Weak<Partition> = Rc::downgrade(partition);
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(HW_CHECKPOINT_INTERVAL).await;
            let Some(p) = me.upgrade() else { return };
            if p.closed.get() {
                return;
            }
            if let Err(e) = p.checkpoint_high_watermark().await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot save the high-watermark checkpoint");
            }
        }
    })
    .detach();
}

impl Partition {
    /// Saves the high watermark if it moved since the last save (one save at a time).
    pub async fn checkpoint_high_watermark(&self) -> Result<(), PartitionError> {
        let _permit = self.checkpoint_lock.acquire_permit(1).await.map_err(|_| PartitionError::NotLeader)?;
        let hw = self.high_watermark();
        if hw == self.checkpointed_hw.get() {
            return Ok(());
        }
        let dir = self.dir();
        checkpoint::save_job(&dir, hw).await?;
        self.checkpointed_hw.set(hw);
        Ok(())
    }
}
