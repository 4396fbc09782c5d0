//! The per-shard group coordinator: the groups whose `__consumer_offsets` partition this
//! shard owns, loaded lazily by replaying that partition the first time it is used, and
//! the timer that expires sessions and rebalances.
//!
//! Every method runs on the owning shard (requests arrive through the router, `cluster/router.rs`), and
//! the group map is never borrowed across an await.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::sync::Semaphore;

use super::context::CoordinatorContext;
use super::coordinator_records::{build_batch, GroupValue, OffsetsRecord};
use super::membership;
use super::ops::{GroupOp, GroupReply};
use super::state::{CommittedOffset, Group, GroupState, Member};
use super::OFFSETS_TOPIC;
use crate::partition::Partition;
use crate::partition::Replayed;
use crate::protocol::ErrorCode;
use crate::record::ControlType;
use crate::runtime::now_ms;

/// How often sessions, pending members and rebalance deadlines are checked.
const TICK: Duration = Duration::from_millis(100);
/// Bytes read per step while replaying an offsets partition.
const LOAD_READ_BYTES: usize = 1 << 20;

pub struct Coordinator {
    pub(super) groups: RefCell<HashMap<String, Group>>,
    /// Offsets partitions already replayed into `groups`, with the leader epoch they were
    /// replayed in: leadership that left and came back (a new epoch) may have brought
    /// commits made on another broker meanwhile, so the partition is replayed again.
    loaded: RefCell<HashMap<i32, i32>>,
    load_lock: Semaphore,
}

impl Default for Coordinator {
    fn default() -> Self {
        Coordinator { groups: RefCell::new(HashMap::new()), loaded: RefCell::new(HashMap::new()), load_lock: Semaphore::new(1) }
    }
}

impl Coordinator {
    /// Runs one group operation; `p` is the offsets partition the caller routed by.
    pub async fn execute(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, op: GroupOp) -> Result<GroupReply, ErrorCode> {
        // Invariant 1: group state is touched only on the shard owning its partition.
        debug_assert_eq!(crate::runtime::current_shard(), Some(ctx.shard), "group op off its shard");
        self.ensure_loaded(ctx, p).await?;
        Ok(match op {
            GroupOp::Join { req, version, client_id, client_host } => GroupReply::Join(self.join(ctx, p, req, version, client_id, client_host).await),
            GroupOp::Sync { req, version: _ } => GroupReply::Sync(self.sync(ctx, p, req).await),
            GroupOp::Heartbeat { req } => GroupReply::Heartbeat(self.heartbeat(req)),
            GroupOp::Leave { group_id, members } => {
                let (top, members) = self.leave(ctx, &group_id, members);
                GroupReply::Leave(top, members)
            }
            GroupOp::Commit { req, version } => GroupReply::Commit(self.commit(ctx, p, req, version).await),
            GroupOp::FetchOffsets { group_id, topics } => {
                let (e, topics) = self.fetch_offsets(&group_id, topics);
                GroupReply::Offsets(e, topics)
            }
            GroupOp::Describe { group_id, version } => GroupReply::Describe(self.describe(&group_id, version)),
            GroupOp::List { states, types } => {
                self.ensure_all_loaded(ctx).await?;
                GroupReply::List(self.list(&states, &types))
            }
            GroupOp::Delete { group_id } => GroupReply::Delete(self.delete_group(ctx, p, &group_id).await),
            GroupOp::DeleteOffsets { req } => GroupReply::DeleteOffsets(self.delete_offsets(p, req).await),
            GroupOp::Consumer(op) => self.execute_consumer(ctx, p, op).await,
            GroupOp::Share(op) => self.execute_share(ctx, p, op).await,
            GroupOp::Streams(op) => self.execute_streams(ctx, p, op).await,
            GroupOp::TxnCommit { req, version } => GroupReply::TxnCommit(self.txn_commit(ctx, p, req, version).await),
            GroupOp::CompleteTxn { producer_id, commit } => {
                self.complete_txn(p.index, producer_id, commit);
                GroupReply::Done
            }
            GroupOp::HasPendingOffsets { group_id, topics } => GroupReply::Pending(self.has_pending_offsets(&group_id, topics.as_deref())),
        })
    }

    pub(super) async fn ensure_all_loaded(&self, ctx: &Rc<CoordinatorContext>) -> Result<(), ErrorCode> {
        for p in ctx.local_partitions() {
            if p.topic == OFFSETS_TOPIC {
                self.ensure_loaded(ctx, &p).await?;
            }
        }
        Ok(())
    }

    /// Replays offsets partition `p` into the group map once per leader epoch (Kafka's
    /// coordinator loads a partition's groups when elected its leader).
    async fn ensure_loaded(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>) -> Result<(), ErrorCode> {
        let epoch = p.leader_epoch();
        if self.loaded.borrow().get(&p.index) == Some(&epoch) {
            return Ok(());
        }
        let _permit = self.load_lock.acquire_permit(1).await.map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
        if self.loaded.borrow().get(&p.index) == Some(&epoch) {
            return Ok(());
        }
        if self.loaded.borrow_mut().remove(&p.index).is_some() {
            // Loaded in an earlier epoch: what this broker held may be stale.
            self.groups.borrow_mut().retain(|_, g| g.partition != p.index);
            tracing::info!(partition = p.index, leader_epoch = epoch, "leading this __consumer_offsets partition again: reloading its groups");
        }
        let started = Instant::now();
        let mut applied = 0usize;
        // To the log end, as Kafka loads it: commits and markers its predecessor wrote with
        // acks=all are in this leader's log even while its high watermark trails them.
        p.replay(LOAD_READ_BYTES, true, |item| match item {
            // A transaction's marker: its offsets here take effect or are dropped.
            Replayed::Marker { producer_id, marker, .. } => self.complete_txn(p.index, producer_id, marker.control == ControlType::Commit),
            Replayed::Record { offset, key, value, txn_producer } => match OffsetsRecord::parse(key, value) {
                Ok(rec) => {
                    self.replay(p.index, rec, offset, txn_producer);
                    applied += 1;
                }
                Err(e) => tracing::warn!(partition = p.index, offset, error = %e, "skipping unreadable __consumer_offsets record"),
            },
        })
        .await
        .map_err(|e| {
            tracing::error!(partition = p.index, error = %e, "cannot read __consumer_offsets while loading groups");
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        })?;
        self.finish_load(ctx, p.index);
        self.groups.borrow_mut().retain(|_, g| !g.is_disposable());
        self.loaded.borrow_mut().insert(p.index, epoch);
        if applied > 0 {
            tracing::info!(partition = p.index, records = applied, ms = started.elapsed().as_millis() as u64, "loaded groups from __consumer_offsets");
        }
        Ok(())
    }

    /// Completes the consumer groups replayed from offsets partition `partition` (their
    /// session timers start now).
    fn finish_load(&self, ctx: &CoordinatorContext, partition: i32) {
        let now = Instant::now();
        let image = ctx.image();
        for g in self.groups.borrow_mut().values_mut().filter(|g| g.partition == partition) {
            if let Some(c) = g.consumer.as_deref_mut() {
                super::consumer::finish_load(c, now);
            }
            super::share::coordinator::finish_load(g, now);
            if g.streams.is_some() {
                let session = super::streams::coordinator::session_timeout(ctx, &image, &g.id);
                super::streams::coordinator::finish_load(g, now, session);
            }
        }
    }

    pub(super) fn replay(&self, partition: i32, rec: OffsetsRecord, record_offset: i64, txn_producer: Option<i64>) {
        let mut groups = self.groups.borrow_mut();
        match rec {
            OffsetsRecord::Offset { group, topic, partition: tp, value } => {
                let g = groups.entry(group.clone()).or_insert_with(|| Group::new(group, partition));
                if let (Some(pid), Some(v)) = (txn_producer, &value) {
                    // Written inside a transaction: pending until its marker.
                    g.pending_txn_offsets.entry(pid).or_default().insert((topic, tp), CommittedOffset::new(v.clone(), record_offset));
                    return;
                }
                match value {
                    Some(v) => {
                        g.offsets.entry(topic).or_default().insert(tp, CommittedOffset::new(v, record_offset));
                    }
                    None => {
                        if let Some(t) = g.offsets.get_mut(&topic) {
                            t.remove(&tp);
                            if t.is_empty() {
                                g.offsets.remove(&topic);
                            }
                        }
                    }
                }
            }
            OffsetsRecord::Group { group, value: Some(v) } => {
                let g = groups.entry(group.clone()).or_insert_with(|| Group::new(group, partition));
                load_group_value(g, v);
                // The protocol written last wins (a consumer group turned classic again).
                g.consumer = None;
            }
            OffsetsRecord::Group { group, value: None } => {
                // The classic form ends: the group was deleted (its offsets have their own
                // tombstones, written before) or upgraded to a consumer group (its offsets
                // stay).
                if let Some(g) = groups.get_mut(&group) {
                    super::membership::dissolve(g, ErrorCode::UNKNOWN_MEMBER_ID);
                    if g.is_disposable() {
                        groups.remove(&group);
                    }
                }
            }
            OffsetsRecord::Consumer(rec) => super::consumer::replay(&mut groups, partition, rec),
            OffsetsRecord::Share(rec) => super::share::coordinator::replay(&mut groups, partition, rec, Instant::now()),
            OffsetsRecord::Streams(rec) => super::streams::coordinator::replay(&mut groups, partition, rec, Instant::now()),
        }
    }

    /// Expires sessions, pending members and rebalance deadlines (called every TICK).
    fn tick(&self, ctx: &Rc<CoordinatorContext>) {
        let now = Instant::now();
        // One append per group and tick, so a group's records land together and in order.
        let mut to_persist: Vec<(i32, Vec<OffsetsRecord>)> = Vec::new();
        {
            // Offsets partitions this shard no longer leads (leadership moved): their groups
            // are unloaded, as Kafka's onResignation; their new leader replays them.
            let led = |partition: i32| ctx.partition(OFFSETS_TOPIC, partition).is_some();
            self.loaded.borrow_mut().retain(|partition, _| led(*partition));
            let image = ctx.image();
            let mut groups = self.groups.borrow_mut();
            groups.retain(|_, g| led(g.partition));
            for g in groups.values_mut() {
                if let Some(rec) = membership::expire(g, now, ctx.config.group_initial_rebalance_delay_ms) {
                    to_persist.push((g.partition, vec![rec]));
                }
                let (session_timeout_ms, _) = ctx.consumer_timeouts(&image, &g.id);
                let recs = super::consumer::expire(g, now, session_timeout_ms, ctx.migration(), &image);
                if !recs.is_empty() {
                    to_persist.push((g.partition, recs));
                }
                let (gone, recs) = super::share::coordinator::expire(g, &image, now);
                for member in gone {
                    tracing::info!(group = %g.id, member = %member, "share group member removed (session timeout)");
                }
                if !recs.is_empty() {
                    to_persist.push((g.partition, recs));
                }
                let (gone, recs) = super::streams::coordinator::expire(g, now);
                for member in gone {
                    tracing::info!(group = %g.id, member = %member, "streams group member removed (session or rebalance timeout)");
                }
                if !recs.is_empty() {
                    to_persist.push((g.partition, recs));
                }
            }
            // Groups that never got a generation nor offsets (e.g. a MEMBER_ID_REQUIRED
            // join that never came back) are forgotten.
            groups.retain(|_, g| !g.is_disposable());
        }
        for (partition, recs) in to_persist {
            if let Some(p) = ctx.partition(OFFSETS_TOPIC, partition) {
                glommio::spawn_local(async move {
                    if let Err(e) = append(&p, &recs).await {
                        tracing::warn!(partition = p.index, error = %e, "could not store group metadata");
                    }
                })
                .detach();
            }
        }
    }
}

/// Applies a stored group metadata value (the latest one wins): a group with members comes
/// back Stable with their assignments and fresh session timers, as Kafka's loadGroup does;
/// members keep heartbeating into it without a rebalance.
fn load_group_value(g: &mut Group, v: GroupValue) {
    let now = Instant::now();
    g.generation = v.generation;
    g.protocol_type = Some(v.protocol_type);
    g.protocol = v.protocol;
    g.leader = v.leader;
    g.state_timestamp_ms = v.state_timestamp_ms;
    g.members.clear();
    g.static_members.clear();
    let protocol = g.protocol.clone().unwrap_or_default();
    for m in v.members {
        if let Some(iid) = &m.instance_id {
            g.static_members.insert(iid.clone(), m.member_id.clone());
        }
        g.members.insert(
            m.member_id.clone(),
            Member {
                id: m.member_id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                last_heartbeat: now,
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
            },
        );
    }
    g.state = if g.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
}

/// Drives the coordinator's timers on this shard.
pub async fn tick_loop(ctx: Rc<CoordinatorContext>) {
    loop {
        glommio::timer::sleep(TICK).await;
        ctx.groups.tick(&ctx);
    }
}

/// Appends `records` to offsets partition `p` (acks=all); returns the first record's
/// offset. Errors are mapped as Kafka's coordinator maps log append errors.
pub(super) async fn append(p: &Rc<Partition>, records: &[OffsetsRecord]) -> Result<i64, ErrorCode> {
    let Some(batch) = build_batch(records, now_ms()) else { return Err(ErrorCode::UNKNOWN_SERVER_ERROR) };
    match p.append(batch, -1).await {
        Ok(out) => Ok(out.base_offset),
        Err(e) => {
            let code = ErrorCode::from(&e);
            tracing::warn!(partition = p.index, error = %e, "append to __consumer_offsets failed");
            Err(match code {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::NOT_ENOUGH_REPLICAS | ErrorCode::REQUEST_TIMED_OUT => ErrorCode::COORDINATOR_NOT_AVAILABLE,
                ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => ErrorCode::NOT_COORDINATOR,
                // Left for the caller: a commit answers INVALID_COMMIT_OFFSET_SIZE, a group
                // metadata write UNKNOWN_SERVER_ERROR (Kafka's mapping for each).
                ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE | ErrorCode::INVALID_FETCH_SIZE => ErrorCode::MESSAGE_TOO_LARGE,
                _ => ErrorCode::UNKNOWN_SERVER_ERROR,
            })
        }
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
