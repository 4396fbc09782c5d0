//! Tiered storage's copy task (Kafka's RLMCopyTask), one per shard: every
//! `remote.log.manager.task.interval.ms`, each tiered partition this shard leads uploads
//! its sealed segments past the highest offset already remote, oldest first, one at a
//! time per shard. Each upload is recorded in the metadata log before and after
//! (CopySegmentStarted, then CopySegmentFinished), fenced by the leader epoch: a deposed
//! leader's records are refused, so it never adds a segment to the remote log.
//!
//! The shard only schedules and records; the bytes move on the remote I/O runtime
//! (`remote::store`), so nothing here blocks the shard.
use std::rc::Rc;
use std::time::Duration;

use crate::cluster::topic_config::TopicConfig;
use crate::partition::Partition;
use crate::remote::object_keys::partition_prefix;
use crate::remote::segment_metadata::{RemoteLogSegmentMetadata, RemoteSegmentState};
use crate::remote::store::RemoteStore;
use crate::remote::upload::{next_to_upload, LocalSealedSegment, SegmentUpload};

use super::context::ShardContext;

pub async fn remote_copy_loop(ctx: Rc<ShardContext>, store: RemoteStore) {
    let every = Duration::from_millis(ctx.config.remote_log_manager_task_interval_ms.max(100));
    loop {
        glommio::timer::sleep(every).await;
        for p in ctx.partitions.all() {
            if !p.is_leader() || !copies(&ctx, &p) {
                continue;
            }
            // Oldest first, until nothing more can go (or an upload fails: next round).
            loop {
                let image = ctx.image();
                let highest = image.remote_log.highest_offset(&p.topic_id, p.index);
                let sealed = p.sealed_segments_for_upload();
                let Some(segment) = next_to_upload(&sealed, highest, p.last_stable_offset()).cloned() else { break };
                if let Err(e) = copy_segment(&ctx, &store, &p, segment).await {
                    tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e, "remote copy failed; retried next round");
                    break;
                }
            }
        }
    }
}

/// Whether `p`'s topic uploads: remote.storage.enable and not remote.log.copy.disable.
fn copies(ctx: &ShardContext, p: &Partition) -> bool {
    let image = ctx.image();
    let Some(topic) = image.topic(&p.topic).filter(|t| t.topic_id == p.topic_id) else { return false };
    TopicConfig::resolve(&ctx.topic_defaults_in(&image), &topic.configs).is_ok_and(|c| c.remote_storage_enable && !c.remote_log_copy_disable)
}

/// One segment: CopySegmentStarted, the upload, CopySegmentFinished. A failed upload's
/// record moves to DeleteSegmentStarted then DeleteSegmentFinished (its objects were
/// removed by the upload), so it does not linger.
async fn copy_segment(ctx: &ShardContext, store: &RemoteStore, p: &Partition, segment: LocalSealedSegment) -> Result<(), String> {
    let leader_epoch = p.leader_epoch();
    let node = ctx.config.node_id;
    let mut record = RemoteLogSegmentMetadata {
        segment_id: *uuid::Uuid::new_v4().as_bytes(),
        start_offset: segment.start_offset,
        end_offset: segment.end_offset,
        max_timestamp_ms: -1,
        broker_id: node,
        event_timestamp_ms: crate::runtime::now_ms(),
        leader_epochs: segment.segment_leader_epochs(),
        size_bytes: segment.file_bytes,
        state: RemoteSegmentState::CopySegmentStarted,
    };
    let propose = |record: RemoteLogSegmentMetadata| ctx.controller.remote_log_segment(p.topic_id, p.index, node, leader_epoch, record);
    propose(record.clone()).await.map_err(|e| format!("recording the copy's start: {e}"))?;
    let upload = SegmentUpload {
        partition_prefix: partition_prefix(&store.settings.key_prefix, &p.topic, &p.topic_id, p.index),
        segment_id: record.segment_id,
        start_offset: segment.start_offset,
        end_offset: segment.end_offset,
        log_path: segment.log_path.clone(),
        producer_snapshot: segment.producer_snapshot.clone(),
        leader_epochs: segment.leader_epochs.clone(),
    };
    match store.upload(upload).await {
        Ok(done) => {
            record.size_bytes = done.size_bytes;
            record.max_timestamp_ms = done.max_timestamp;
            record.event_timestamp_ms = crate::runtime::now_ms();
            record.state = RemoteSegmentState::CopySegmentFinished;
            propose(record).await.map_err(|e| format!("recording the finished copy: {e}"))?;
            tracing::info!(shard = ctx.shard, topic = %p.topic, partition = p.index, start = segment.start_offset, end = segment.end_offset,
                bytes = done.size_bytes, batches = done.batches, "segment copied to remote storage");
            Ok(())
        }
        Err(e) => {
            for state in [RemoteSegmentState::DeleteSegmentStarted, RemoteSegmentState::DeleteSegmentFinished] {
                record.state = state;
                record.event_timestamp_ms = crate::runtime::now_ms();
                if let Err(e) = propose(record.clone()).await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "the failed copy's record stays (CopySegmentStarted)");
                    break;
                }
            }
            Err(e.to_string())
        }
    }
}
