//! Tiered storage's copy and expiration tasks (Kafka's RLMCopyTask and
//! RLMExpirationTask), one loop per shard: every
//! `remote.log.manager.task.interval.ms`, each tiered partition this shard leads uploads
//! its sealed segments past the highest offset already remote, oldest first, one at a
//! time per partition, up to the shard's share of
//! `remote.log.manager.copier.thread.pool.size` partitions at once (each partition's
//! round on its own task). Each upload is recorded in the metadata log before and after
//! (CopySegmentStarted, then CopySegmentFinished), fenced by the leader epoch: a deposed
//! leader's records are refused, so it never adds a segment to the remote log. Before
//! copying, the leader deletes what `remote::expiration` says has expired.
//!
//! The shard only schedules and records; the bytes move on the remote I/O runtime
//! (`remote::store`), so nothing here blocks the shard.
use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::cluster::topic_config::TopicConfig;
use crate::partition::Partition;
use crate::remote::object_keys::partition_prefix;
use crate::remote::segment_metadata::{RemoteLogSegmentMetadata, RemoteSegmentState};
use crate::remote::store::RemoteStore;
use crate::remote::upload::{next_to_upload, LocalSealedSegment, SegmentUpload};

use super::context::ShardContext;

/// Segments this shard finished copying whose CopySegmentFinished its image may not have
/// applied yet (the controller answered, the update is on its way): (topic id,
/// partition, segment id).
type Finished = RefCell<Vec<([u8; 16], i32, [u8; 16])>>;

/// Every task interval, each tiered partition this shard leads whose previous round is
/// over gets a round of its own (Kafka's per-partition RLMCopyTask), while fewer than the
/// shard's share of remote.log.manager.copier.thread.pool.size run: one partition stuck
/// on the store holds one slot, not the others' uploads. Partitions take the free slots
/// in turn (the scan starts one further each interval), so none waits behind the rest.
pub async fn remote_copy_loop(ctx: Rc<ShardContext>, store: RemoteStore) {
    let every = Duration::from_millis(ctx.config.remote_log_manager_task_interval_ms.max(100));
    let finished = Rc::new(Finished::default());
    let running: Rc<RefCell<HashSet<([u8; 16], i32)>>> = Rc::default();
    let mut turn = 0usize;
    loop {
        glommio::timer::sleep(every).await;
        let leaders: Vec<Rc<Partition>> = ctx.partitions.all().into_iter().filter(|p| p.is_leader()).collect();
        if leaders.is_empty() {
            continue;
        }
        turn = turn.wrapping_add(1);
        let start = turn % leaders.len();
        for p in leaders[start..].iter().chain(&leaders[..start]) {
            let key = (p.topic_id, p.index);
            if running.borrow().len() >= ctx.remote_copiers {
                break;
            }
            if !running.borrow_mut().insert(key) {
                continue; // its previous round still runs
            }
            let (ctx, store, p, finished, running) = (ctx.clone(), store.clone(), p.clone(), finished.clone(), running.clone());
            // Under the loop's name: a slow poll of a round counts as the copy's stall.
            glommio::spawn_local(crate::metrics::stall::watched("remote copy", async move {
                copy_round(&ctx, &store, p, &finished).await;
                running.borrow_mut().remove(&key);
            }))
            .detach();
        }
    }
}

/// One round of the tasks for one partition this shard leads: expiration, then uploads
/// oldest first, until nothing more can go (or an upload fails: next round). A partition
/// has one round at a time (`remote_copy_loop`), so while this runs no other upload of
/// the partition does: a CopySegmentStarted record is dangling unless it is one this
/// shard finished and the image has not applied yet.
async fn copy_round(ctx: &ShardContext, store: &RemoteStore, p: Rc<Partition>, finished: &Finished) {
    ctx.catch_up_with_controller().await;
    let image = ctx.image();
    let remote = image.remote_log.partition(&p.topic_id, p.index);
    let unapplied =
        |id: &[u8; 16]| remote.is_some_and(|r| r.segments().iter().any(|s| &s.segment_id == id && s.state == RemoteSegmentState::CopySegmentStarted));
    let mine: Vec<[u8; 16]> = {
        let mut f = finished.borrow_mut();
        f.retain(|(t, i, id)| (*t, *i) != (p.topic_id, p.index) || unapplied(id));
        f.iter().filter(|(t, i, _)| (*t, *i) == (p.topic_id, p.index)).map(|e| e.2).collect()
    };
    if let Err(e) = expire_segments(ctx, store, &p, &mine).await {
        tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e, "remote expiration failed; retried next round");
    }
    // remote.storage.enable and not remote.log.copy.disable (`PartitionSettings::tiered`).
    if !p.is_tiered() {
        return;
    }
    let mut copied_through = -1;
    loop {
        let image = ctx.image();
        let highest = image.remote_log.highest_offset(&p.topic_id, p.index);
        let sealed = p.sealed_segments_for_upload();
        // The image may not show this round's copies yet: never one twice.
        let highest = highest.max(copied_through);
        let Some(segment) = next_to_upload(&sealed, highest, p.last_stable_offset()).cloned() else { break };
        // remote.log.manager.copy.max.bytes.per.second: wait for this shard's share.
        let wait = ctx.remote_copy_rate.borrow_mut().delay(Instant::now());
        if !wait.is_zero() {
            crate::metrics::with(|m| m.remote.copy_throttle_ms += wait.as_millis() as u64);
            glommio::timer::sleep(wait).await;
        }
        match copy_segment(ctx, store, &p, segment.clone()).await {
            Ok(id) => {
                finished.borrow_mut().push((p.topic_id, p.index, id));
                copied_through = segment.end_offset;
            }
            Err(e) => {
                tracing::warn!(shard = ctx.shard, topic = %p.topic, partition = p.index, error = %e, "remote copy failed; retried next round");
                break;
            }
        }
    }
}

/// `p`'s topic config, if its topic is still the one it belongs to.
fn topic_config(ctx: &ShardContext, p: &Partition) -> Option<TopicConfig> {
    let image = ctx.image();
    let topic = image.topic(&p.topic).filter(|t| t.topic_id == p.topic_id)?;
    TopicConfig::resolve(&ctx.topic_defaults_in(&image), &topic.configs).ok()
}

/// Kafka's RLMExpirationTask for one partition this shard leads (`remote::expiration`):
/// the log start offset moves first, then each doomed segment goes through
/// DeleteSegmentStarted, the deletion of its objects, DeleteSegmentFinished.
async fn expire_segments(ctx: &ShardContext, store: &RemoteStore, p: &Partition, finished: &[[u8; 16]]) -> Result<(), String> {
    let image = ctx.image();
    let Some(remote) = image.remote_log.partition(&p.topic_id, p.index) else { return Ok(()) };
    let Some(tc) = topic_config(ctx, p) else { return Ok(()) };
    let mut plan = if !tc.remote_storage_enable && tc.remote_log_delete_on_disable {
        // Turned off (KIP-950): the remote data goes, the log starts locally again.
        crate::remote::expiration::expire_all(remote, p.log_start_offset())
    } else {
        let local_only = p.local_bytes_above(remote.highest_offset());
        crate::remote::expiration::expire(remote, crate::runtime::now_ms(), tc.retention_ms, tc.retention_bytes, local_only)
    };
    plan.segments.retain(|s| !(s.state == RemoteSegmentState::CopySegmentStarted && finished.contains(&s.segment_id)));
    if plan.segments.is_empty() {
        return Ok(());
    }
    let (node, leader_epoch) = (ctx.config.node_id, p.leader_epoch());
    if let Some(start) = plan.new_log_start {
        ctx.controller.remote_log_start_offset(p.topic_id, p.index, node, leader_epoch, start).await.map_err(|e| format!("moving the log start: {e}"))?;
    }
    let prefix = partition_prefix(&store.settings.key_prefix, &p.topic, &p.topic_id, p.index);
    for mut segment in plan.segments {
        if segment.state != RemoteSegmentState::DeleteSegmentStarted {
            // Only from the state this decision saw: a copy that finished meanwhile stays.
            let seen = segment.state;
            segment.state = RemoteSegmentState::DeleteSegmentStarted;
            segment.event_timestamp_ms = crate::runtime::now_ms();
            ctx.controller
                .remote_log_segment(p.topic_id, p.index, node, leader_epoch, segment.clone(), Some(seen))
                .await
                .map_err(|e| format!("recording a deletion: {e}"))?;
        }
        if let Err(e) = store.delete_segment(prefix.clone(), segment.start_offset, segment.segment_id).await {
            crate::metrics::with(|m| m.remote.delete_errors += 1);
            return Err(e.to_string());
        }
        crate::metrics::with(|m| m.remote.delete_requests += 1);
        segment.state = RemoteSegmentState::DeleteSegmentFinished;
        segment.event_timestamp_ms = crate::runtime::now_ms();
        ctx.controller
            .remote_log_segment(p.topic_id, p.index, node, leader_epoch, segment.clone(), None)
            .await
            .map_err(|e| format!("recording a deletion: {e}"))?;
        tracing::info!(shard = ctx.shard, topic = %p.topic, partition = p.index, start = segment.start_offset, end = segment.end_offset, "remote segment deleted");
    }
    Ok(())
}

/// One segment: CopySegmentStarted, the upload, CopySegmentFinished. A failed upload's
/// record moves to DeleteSegmentStarted then DeleteSegmentFinished (its objects were
/// removed by the upload), so it does not linger.
async fn copy_segment(ctx: &ShardContext, store: &RemoteStore, p: &Partition, segment: LocalSealedSegment) -> Result<[u8; 16], String> {
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
    let propose = |record: RemoteLogSegmentMetadata| ctx.controller.remote_log_segment(p.topic_id, p.index, node, leader_epoch, record, None);
    propose(record.clone()).await.map_err(|e| format!("recording the copy's start: {e}"))?;
    tracing::info!(shard = ctx.shard, topic = %p.topic, partition = p.index, start = segment.start_offset, end = segment.end_offset,
        "uploading a segment to remote storage");
    let upload = SegmentUpload {
        partition_prefix: partition_prefix(&store.settings.key_prefix, &p.topic, &p.topic_id, p.index),
        segment_id: record.segment_id,
        segment: segment.clone(),
    };
    match store.upload(upload).await {
        Ok(done) => {
            crate::metrics::with(|m| (m.remote.copy_requests, m.remote.copy_bytes) = (m.remote.copy_requests + 1, m.remote.copy_bytes + done.size_bytes));
            ctx.remote_copy_rate.borrow_mut().record(done.size_bytes, Instant::now());
            record.size_bytes = done.size_bytes;
            record.max_timestamp_ms = done.max_timestamp;
            record.event_timestamp_ms = crate::runtime::now_ms();
            record.state = RemoteSegmentState::CopySegmentFinished;
            let id = record.segment_id;
            propose(record).await.map_err(|e| format!("recording the finished copy: {e}"))?;
            tracing::info!(shard = ctx.shard, topic = %p.topic, partition = p.index, start = segment.start_offset, end = segment.end_offset,
                bytes = done.size_bytes, batches = done.batches, "segment copied to remote storage");
            Ok(id)
        }
        Err(e) => {
            crate::metrics::with(|m| m.remote.copy_errors += 1);
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
