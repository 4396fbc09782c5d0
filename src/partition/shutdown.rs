//! A partition's part of a clean broker shutdown (SIGTERM, `server/shutdown.rs`): stop
//! taking appends, let the one in progress finish, make everything appended durable and
//! write the clean-shutdown marker (`LogWriter::close_cleanly`), save the high
//! watermark, then close as `close` does. The next start opens the sealed segments
//! unread (no CRC pass, `storage/clean_shutdown.rs`) and starts from the saved high
//! watermark, as Kafka after a clean shutdown.
use super::state::Partition;

impl Partition {
    /// Closes this replica cleanly. Errors are logged, not returned: a log that cannot be
    /// synced (offline, disk full) writes no marker, and its next open verifies it.
    pub async fn close_cleanly(&self) {
        self.assert_on_shard();
        // Appends check `closed` again under the append lock: none starts after this.
        self.closed.set(true);
        let permit = self.append_lock.acquire_permit(1).await;
        if let Err(e) = self.writer.close_cleanly().await {
            tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "log not closed cleanly; its next open verifies it");
        }
        drop(permit);
        // The last save (`closed` already stops the periodic one).
        if let Err(e) = self.checkpoint_high_watermark().await {
            tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "cannot save the high-watermark checkpoint at shutdown");
        }
        self.close();
    }
}
