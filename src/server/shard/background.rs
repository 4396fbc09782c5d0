//! A shard's background loops over its own partitions: retention (retention.ms /
//! retention.bytes) and the log cleaner (compacted topics). The group coordinator's
//! timers (sessions, offset expiry) live in group/.
use std::rc::Rc;
use std::time::Duration;

use super::context::ShardContext;

/// Runs retention on this shard's partitions every `log_retention_check_interval_ms`.
pub async fn retention_loop(ctx: Rc<ShardContext>) {
    let every = Duration::from_millis(ctx.config.log_retention_check_interval_ms.max(100));
    loop {
        glommio::timer::sleep(every).await;
        let now = crate::runtime::now_ms();
        let image = ctx.image();
        // Followers too: each replica applies retention to its own log, as Kafka's do
        // (a tiered one only to what is in remote storage).
        for p in ctx.partitions.all().into_iter().chain(ctx.partitions.followers()) {
            let uploaded = image.remote_log.highest_offset(&p.topic_id, p.index);
            if let Err(e) = p.apply_retention(now, uploaded).await {
                tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e, "retention failed");
            }
            // producer.id.expiration.ms, checked as often as retention.
            p.expire_producers(now, ctx.config.producer_id_expiration_ms);
        }
    }
}

/// Runs the log cleaner every `log_cleaner_backoff_ms` on this shard's compacted
/// partitions whose dirty ratio reached min.cleanable.dirty.ratio (Kafka's LogCleaner,
/// one per shard instead of a thread pool). A pass yields between batches.
pub async fn cleaner_loop(ctx: Rc<ShardContext>) {
    let every = Duration::from_millis(ctx.config.log_cleaner_backoff_ms.max(10));
    loop {
        glommio::timer::sleep(every).await;
        for p in ctx.partitions.all().into_iter().chain(ctx.partitions.followers()) {
            if !p.needs_cleaning() {
                continue;
            }
            let max_key_bytes = usize::try_from(ctx.config.log_cleaner_dedupe_buffer_size).unwrap_or(usize::MAX);
            if let Err(e) = p.clean(crate::runtime::now_ms(), max_key_bytes).await {
                tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e,
                    "log clean failed; a partition with damaged data is not cleaned again until restart");
            }
            glommio::yield_if_needed().await;
        }
    }
}
