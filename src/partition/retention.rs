//! DeleteRecords and retention: moving the log start offset and deleting the segments
//! wholly below it (with their index and producer-snapshot files).
use super::error::PartitionError;
use super::state::Partition;
use crate::storage::dma::remove_file;
use crate::storage::log::Log;
use crate::storage::segment::{index_path, log_file_name, snapshot_path, time_index_path};
use crate::storage::segment_deletion::delete_log_file;

impl Partition {
    /// DeleteRecords: moves the log start offset to `offset` (-1 = high watermark) and
    /// deletes whole segments below it. Returns the new low watermark.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, PartitionError> {
        self.check_leader()?;
        self.check_online()?;
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        let start = self.log_start_offset();
        if target < 0 || target > hw {
            return Err(PartitionError::OffsetOutOfRange { offset, log_start_offset: start, log_end_offset: hw });
        }
        self.advance_log_start(target).await?;
        Ok(self.log_start_offset())
    }

    async fn advance_log_start(&self, target: i64) -> Result<(), PartitionError> {
        let (removed, dir, start) = {
            let mut log = self.log.borrow_mut();
            let removed = log.advance_log_start(target);
            (removed, log.dir().to_path_buf(), log.log_start_offset())
        };
        Log::save_log_start_offset(&dir, start).await?;
        for seg in removed {
            let (base, file) = (seg.base_offset, seg.file.clone());
            drop(seg);
            // Shrunk in steps once no reader holds it (segment_deletion.rs): unlinking it
            // whole stalled the shards' writes on a `discard` filesystem.
            delete_log_file(file, &dir.join(log_file_name(base))).await?;
            remove_file(&index_path(&dir, base)).await?;
            remove_file(&time_index_path(&dir, base)).await?;
            remove_file(&snapshot_path(&dir, base)).await?;
        }
        Ok(())
    }

    /// Applies retention.ms / retention.bytes: deletes old sealed segments. A tiered log
    /// (`PartitionSettings::tiered`) applies local.retention.* and deletes nothing past
    /// `uploaded`, the last offset in remote storage (Kafka's rule: a local segment goes
    /// only once it is copied); its log start offset is then the local one, and the
    /// partition's history starts in remote storage.
    pub async fn apply_retention(&self, now: i64, uploaded: i64) -> Result<(), PartitionError> {
        let target = self.log.borrow().retention_target(now);
        if let Some(t) = target {
            let t = if self.settings.borrow().tiered { t.min(uploaded + 1) } else { t };
            let t = t.min(self.high_watermark());
            if t <= self.log_start_offset() {
                return Ok(());
            }
            tracing::info!(topic = %self.topic, partition = self.index, log_start_offset = t, "retention");
            self.advance_log_start(t).await?;
        }
        Ok(())
    }
}
