//! The classic rebalance protocol, as Kafka 4.1's classic GroupCoordinator runs it:
//!
//! Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
//! --leader's SyncGroup stored--> Stable; a join with new protocols, a new member, a leave
//! or an expired session sends Stable/CompletingRebalance back to PreparingRebalance; the
//! last member leaving ends in Empty (generation bumped and stored).
//!
//! The pure transitions are free functions on `Group`; the request entry points are
//! `Coordinator` methods that register a waiter and await it outside the borrow.
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::consumer::classic_member::{self, ClassicJoin};
use super::context::CoordinatorContext;
use super::coordinator::{append, Coordinator};
use super::coordinator_records::{GroupValue, MemberValue, OffsetsRecord};
use super::state::{Group, GroupState, Member};
use crate::partition::Partition;
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Protocols one JoinGroup may list (clients send 1-3).
const MAX_PROTOCOLS: usize = 64;
/// Longest member id / instance id / client id kept (they are echoed to every member).
const MAX_ID_BYTES: usize = 1024;

pub(super) fn join_error(code: ErrorCode, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code.code())
        .with_generation_id(-1)
        .with_protocol_name(Some(StrBytes::default()))
        .with_member_id(str_bytes(member_id))
}

pub(super) fn sync_error(code: ErrorCode) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code.code())
}

/// The group metadata record stored on each generation change: the generation, the
/// chosen protocol and every member with its subscription and assignment (`assignments`
/// overrides the members' current ones: the leader's SyncGroup is stored before it is
/// applied).
pub(super) fn group_record(g: &Group, assignments: Option<&HashMap<String, Bytes>>) -> OffsetsRecord {
    let protocol = g.protocol.as_deref().unwrap_or("");
    let members = g
        .members
        .values()
        .map(|m| MemberValue {
            member_id: m.id.clone(),
            instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            subscription: m.metadata_for(protocol),
            assignment: match assignments {
                Some(a) => a.get(&m.id).cloned().unwrap_or_default(),
                None => m.assignment.clone(),
            },
        })
        .collect();
    OffsetsRecord::Group {
        group: g.id.clone(),
        value: Some(GroupValue {
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            generation: g.generation,
            protocol: g.protocol.clone(),
            leader: g.leader.clone(),
            state_timestamp_ms: g.state_timestamp_ms,
            members,
        }),
    }
}

/// The JoinGroup response of `member_id` for the current generation (the leader gets the
/// member list with each member's metadata for the chosen protocol).
fn join_response(g: &Group, member_id: &str) -> JoinGroupResponse {
    let protocol = g.protocol.clone().unwrap_or_default();
    let leader = g.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        g.members
            .values()
            .map(|m| {
                JoinGroupResponseMember::default()
                    .with_member_id(str_bytes(&m.id))
                    .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                    .with_metadata(m.metadata_for(&protocol))
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinGroupResponse::default()
        .with_generation_id(g.generation)
        .with_protocol_type(g.protocol_type.as_deref().map(str_bytes))
        .with_protocol_name(Some(str_bytes(&protocol)))
        .with_leader(str_bytes(&leader))
        .with_member_id(str_bytes(member_id))
        .with_members(members)
}

/// Checks the (member id, instance id) pair: Kafka's validateMember.
pub(super) fn validate_member(g: &Group, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
    match instance_id {
        Some(iid) => match g.static_members.get(iid) {
            None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
            Some(m) if m != member_id => Err(ErrorCode::FENCED_INSTANCE_ID),
            Some(_) => Ok(()),
        },
        None if g.members.contains_key(member_id) => Ok(()),
        None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
    }
}

/// Removes a member, answering whatever it is waiting for with `code`.
fn remove_member(g: &mut Group, member_id: &str, code: ErrorCode) {
    let Some(mut m) = g.members.remove(member_id) else { return };
    if let Some(iid) = &m.instance_id {
        if g.static_members.get(iid).map(String::as_str) == Some(member_id) {
            g.static_members.remove(iid);
        }
    }
    if let Some(tx) = m.join_waiter.take() {
        let _ = tx.send(join_error(code, member_id));
    }
    if let Some(tx) = m.sync_waiter.take() {
        let _ = tx.send(sync_error(code));
    }
    g.pending_sync.remove(member_id);
    if g.leader.as_deref() == Some(member_id) {
        g.leader = None;
    }
}

/// Ends the classic form of `g` (its protocol moves to KIP-848, or back): every member is
/// removed, whatever it waits for answered with `code`, and the classic state reset.
/// Committed offsets stay.
pub(super) fn dissolve(g: &mut Group, code: ErrorCode) {
    let ids: Vec<String> = g.members.keys().cloned().collect();
    for id in ids {
        remove_member(g, &id, code);
    }
    g.static_members.clear();
    g.pending_members.clear();
    g.pending_sync.clear();
    g.rebalance_deadline = None;
    g.initial_delay_until = None;
    g.protocol = None;
    g.leader = None;
    g.generation = 0;
    g.store_pending = false;
    g.set_state(GroupState::Empty);
}

pub(super) fn prepare_rebalance(g: &mut Group, now: Instant, initial_delay_ms: u64) {
    if g.state == GroupState::CompletingRebalance {
        // The generation being assigned is void: members waiting in SyncGroup rejoin.
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(tx) = m.sync_waiter.take() {
                let _ = tx.send(sync_error(ErrorCode::REBALANCE_IN_PROGRESS));
            }
        }
        g.pending_sync.clear();
    }
    let rebalance = Duration::from_millis(g.max_rebalance_timeout_ms().max(0) as u64);
    g.initial_delay_until =
        if g.state == GroupState::Empty && initial_delay_ms > 0 { Some(now + Duration::from_millis(initial_delay_ms).min(rebalance)) } else { None };
    g.rebalance_deadline = Some(now + rebalance);
    g.set_state(GroupState::PreparingRebalance);
}

fn maybe_prepare_rebalance(g: &mut Group, now: Instant, initial_delay_ms: u64) {
    if matches!(g.state, GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty) {
        prepare_rebalance(g, now, initial_delay_ms);
    }
}

/// Completes the join phase when every member has rejoined (and the initial delay of a
/// new group has passed), or when the rebalance timeout expired. Returns a record to
/// store when the group became Empty.
fn try_complete_join(g: &mut Group, now: Instant) -> Option<OffsetsRecord> {
    if g.state != GroupState::PreparingRebalance {
        return None;
    }
    let timed_out = g.rebalance_deadline.is_some_and(|d| now >= d);
    let delay_over = g.initial_delay_until.is_none_or(|d| now >= d);
    if !(timed_out || (g.all_members_joined() && delay_over)) {
        return None;
    }
    let missing: Vec<String> = g.members.values().filter(|m| m.join_waiter.is_none()).map(|m| m.id.clone()).collect();
    for id in missing {
        remove_member(g, &id, ErrorCode::UNKNOWN_MEMBER_ID);
    }
    g.rebalance_deadline = None;
    g.initial_delay_until = None;
    g.generation = g.generation.wrapping_add(1).max(1);
    if g.members.is_empty() {
        g.protocol = None;
        g.leader = None;
        g.set_state(GroupState::Empty);
        return Some(group_record(g, None));
    }
    g.protocol = g.select_protocol().or_else(|| g.members.values().next().and_then(|m| m.protocols.first()).map(|(n, _)| n.clone()));
    if !g.leader.as_ref().is_some_and(|l| g.members.contains_key(l)) {
        g.leader = g.members.keys().next().cloned();
    }
    g.set_state(GroupState::CompletingRebalance);
    g.rebalance_deadline = Some(now + Duration::from_millis(g.max_rebalance_timeout_ms().max(0) as u64));
    g.pending_sync = g.members.keys().cloned().collect();
    let ids: Vec<String> = g.members.keys().cloned().collect();
    for id in ids {
        let resp = join_response(g, &id);
        if let Some(m) = g.members.get_mut(&id) {
            m.is_new = false;
            m.last_heartbeat = now;
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(resp);
            }
        }
    }
    tracing::info!(group = %g.id, generation = g.generation, members = g.members.len(),
        protocol = g.protocol.as_deref().unwrap_or(""), "group rebalanced");
    None
}

/// After members left or expired: rebalance (or finish the current join phase).
fn on_members_gone(g: &mut Group, now: Instant, initial_delay_ms: u64) -> Option<OffsetsRecord> {
    match g.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            prepare_rebalance(g, now, initial_delay_ms);
            try_complete_join(g, now)
        }
        GroupState::PreparingRebalance => try_complete_join(g, now),
        GroupState::Empty | GroupState::Dead => None,
    }
}

/// Timer work for one group: expired sessions, pending members that never rejoined,
/// rebalance and sync deadlines.
pub(super) fn expire(g: &mut Group, now: Instant, initial_delay_ms: u64) -> Option<OffsetsRecord> {
    let before = g.size();
    g.pending_members.retain(|_, deadline| *deadline > now);
    // Members waiting in JoinGroup or SyncGroup are kept alive (Kafka's shouldKeepAlive).
    let expired: Vec<String> =
        g.members.values().filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none() && m.session_expired(now)).map(|m| m.id.clone()).collect();
    for id in &expired {
        tracing::info!(group = %g.id, member = %id, "member session expired");
        remove_member(g, id, ErrorCode::UNKNOWN_MEMBER_ID);
    }
    if g.state == GroupState::CompletingRebalance && g.rebalance_deadline.is_some_and(|d| now >= d) {
        // Members that never sent SyncGroup are dropped, as Kafka's pending-sync timeout does.
        let lagging: Vec<String> = g.pending_sync.iter().cloned().collect();
        for id in lagging {
            tracing::info!(group = %g.id, member = %id, "member did not sync in time");
            remove_member(g, &id, ErrorCode::UNKNOWN_MEMBER_ID);
        }
        g.rebalance_deadline = None;
        return on_members_gone(g, now, initial_delay_ms);
    }
    if g.size() != before {
        return on_members_gone(g, now, initial_delay_ms);
    }
    try_complete_join(g, now)
}

/// Trims an id from the network to a bounded length (on a char boundary).
fn bounded(s: &str) -> String {
    if s.len() <= MAX_ID_BYTES {
        return s.to_string();
    }
    let mut end = MAX_ID_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

impl Coordinator {
    pub(super) async fn join(
        &self,
        ctx: &Rc<CoordinatorContext>,
        _p: &Rc<Partition>,
        req: JoinGroupRequest,
        version: i16,
        client_id: String,
        client_host: String,
    ) -> JoinGroupResponse {
        let cfg = &ctx.config;
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let instance_id = req.group_instance_id.as_ref().map(|s| s.to_string());
        let protocol_type = req.protocol_type.to_string();
        let session_timeout_ms = req.session_timeout_ms;
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        let rebalance_timeout_ms = if version == 0 { session_timeout_ms } else { req.rebalance_timeout_ms };
        if group_id.is_empty() {
            return join_error(ErrorCode::INVALID_GROUP_ID, &member_id);
        }
        if session_timeout_ms < cfg.group_min_session_timeout_ms || session_timeout_ms > cfg.group_max_session_timeout_ms {
            return join_error(ErrorCode::INVALID_SESSION_TIMEOUT, &member_id);
        }
        if req.protocols.len() > MAX_PROTOCOLS || member_id.len() > MAX_ID_BYTES || instance_id.as_ref().is_some_and(|i| i.len() > MAX_ID_BYTES) {
            return join_error(ErrorCode::INVALID_REQUEST, &member_id);
        }
        let protocols: Vec<(String, Bytes)> = req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect();
        let initial_delay = cfg.group_initial_rebalance_delay_ms;
        let now = Instant::now();
        // A consumer group with members takes a classic member in (KIP-848 online
        // migration); the answer waits for its records.
        let classic = {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(&group_id) {
                Some(g) if g.consumer.as_ref().is_some_and(|c| !c.is_empty()) => {
                    let join = ClassicJoin {
                        member_id: member_id.clone(),
                        instance_id: instance_id.clone(),
                        client_id: bounded(&client_id),
                        client_host: client_host.clone(),
                        protocol_type: protocol_type.clone(),
                        protocols: protocols.clone(),
                        session_timeout_ms,
                        rebalance_timeout_ms,
                        version,
                    };
                    Some(classic_member::join(g, join, &ctx.image(), ctx.migration(), now))
                }
                _ => None,
            }
        };
        if let Some((resp, records)) = classic {
            return store_then(_p, &records, resp, |code| join_error(code, &member_id)).await;
        }
        let mut pending_store = None;
        let rx = {
            let mut groups = self.groups.borrow_mut();
            if !groups.contains_key(&group_id) {
                if !member_id.is_empty() {
                    return join_error(ErrorCode::UNKNOWN_MEMBER_ID, &member_id);
                }
                if groups.len() >= cfg.max_groups_per_shard {
                    tracing::warn!(shard = ctx.shard, limit = cfg.max_groups_per_shard, "group limit per shard reached (raise max_groups_per_shard)");
                    return join_error(ErrorCode::COORDINATOR_NOT_AVAILABLE, &member_id);
                }
                groups.insert(group_id.clone(), Group::new(group_id.clone(), _p.index));
            }
            // Present: inserted just above if it was missing.
            let g = groups.get_mut(&group_id).expect("group present");
            // A share or streams group id is never a classic one.
            if g.share.is_some() || g.streams.is_some() {
                return join_error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, &member_id);
            }
            // An empty consumer group becomes classic again (its offsets stay).
            g.consumer = None;
            let outcome = join_locked(
                g,
                JoinArgs {
                    member_id: &member_id,
                    instance_id: instance_id.as_deref(),
                    client_id: &client_id,
                    client_host: &client_host,
                    protocol_type: &protocol_type,
                    protocols,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    version,
                    max_size: cfg.group_max_size,
                    initial_delay,
                    now,
                },
            );
            let store = std::mem::take(&mut g.store_pending).then(|| group_record(g, None));
            if g.is_disposable() {
                groups.remove(&group_id);
            }
            match outcome {
                Ok(JoinOutcome::Wait(rx)) => rx,
                Ok(JoinOutcome::Now(resp)) => match store {
                    None => return resp,
                    Some(rec) => {
                        // Stored before the member sees its new id (after the borrow ends).
                        let (tx, rx) = oneshot::channel();
                        let _ = tx.send(resp);
                        pending_store = Some(rec);
                        rx
                    }
                },
                Err((code, id)) => return join_error(code, &id),
            }
        };
        if let Some(rec) = pending_store {
            if let Err(code) = append(_p, &[rec]).await {
                let code = if code == ErrorCode::MESSAGE_TOO_LARGE { ErrorCode::UNKNOWN_SERVER_ERROR } else { code };
                return join_error(code, &member_id);
            }
        }
        rx.await.unwrap_or_else(|_| join_error(ErrorCode::UNKNOWN_MEMBER_ID, &member_id))
    }

    pub(super) async fn sync(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, req: SyncGroupRequest) -> SyncGroupResponse {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let instance_id = req.group_instance_id.as_ref().map(|s| s.to_string());
        let now = Instant::now();
        let (rx, leader_work) = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(&group_id) else { return sync_error(ErrorCode::UNKNOWN_MEMBER_ID) };
            if g.consumer.is_some() {
                return classic_member::sync(g, &req, &ctx.image(), now);
            }
            if g.state == GroupState::Dead {
                return sync_error(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            if let Err(e) = validate_member(g, &member_id, instance_id.as_deref()) {
                return sync_error(e);
            }
            if req.generation_id != g.generation {
                return sync_error(ErrorCode::ILLEGAL_GENERATION);
            }
            if req.protocol_type.as_ref().is_some_and(|t| Some(t.as_str()) != g.protocol_type.as_deref())
                || req.protocol_name.as_ref().is_some_and(|n| Some(n.as_str()) != g.protocol.as_deref())
            {
                return sync_error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            }
            let ok = |g: &Group, assignment: Bytes| {
                SyncGroupResponse::default()
                    .with_protocol_type(g.protocol_type.as_deref().map(str_bytes))
                    .with_protocol_name(g.protocol.as_deref().map(str_bytes))
                    .with_assignment(assignment)
            };
            match g.state {
                GroupState::Empty | GroupState::Dead => return sync_error(ErrorCode::UNKNOWN_MEMBER_ID),
                GroupState::PreparingRebalance => return sync_error(ErrorCode::REBALANCE_IN_PROGRESS),
                GroupState::Stable => {
                    let Some(m) = g.members.get_mut(&member_id) else { return sync_error(ErrorCode::UNKNOWN_MEMBER_ID) };
                    m.last_heartbeat = now;
                    let a = m.assignment.clone();
                    return ok(g, a);
                }
                GroupState::CompletingRebalance => {}
            }
            let (tx, rx) = oneshot::channel();
            let Some(m) = g.members.get_mut(&member_id) else { return sync_error(ErrorCode::UNKNOWN_MEMBER_ID) };
            m.last_heartbeat = now;
            if let Some(old) = m.sync_waiter.replace(tx) {
                let _ = old.send(sync_error(ErrorCode::REBALANCE_IN_PROGRESS));
            }
            g.pending_sync.remove(&member_id);
            let leader_work = if g.leader.as_deref() == Some(member_id.as_str()) {
                // Assignments only for members of this generation (the rest is ignored).
                let assignments: HashMap<String, Bytes> =
                    req.assignments.into_iter().map(|a| (a.member_id.to_string(), a.assignment)).filter(|(id, _)| g.members.contains_key(id)).collect();
                Some((group_record(g, Some(&assignments)), assignments, g.generation))
            } else {
                None
            };
            (rx, leader_work)
        };
        if let Some((record, mut assignments, generation)) = leader_work {
            let stored = append(p, &[record]).await;
            let mut groups = self.groups.borrow_mut();
            if let Some(g) = groups.get_mut(&group_id) {
                if g.generation == generation && g.state == GroupState::CompletingRebalance {
                    match stored {
                        Ok(_) => {
                            let (ptype, proto) = (g.protocol_type.clone(), g.protocol.clone());
                            for m in g.members.values_mut() {
                                m.assignment = assignments.remove(&m.id).unwrap_or_default();
                                if let Some(tx) = m.sync_waiter.take() {
                                    let _ = tx.send(
                                        SyncGroupResponse::default()
                                            .with_protocol_type(ptype.as_deref().map(str_bytes))
                                            .with_protocol_name(proto.as_deref().map(str_bytes))
                                            .with_assignment(m.assignment.clone()),
                                    );
                                }
                            }
                            g.rebalance_deadline = None;
                            g.set_state(GroupState::Stable);
                        }
                        Err(code) => {
                            // An assignment too large for the offsets topic's
                            // max.message.bytes: Kafka answers UNKNOWN_SERVER_ERROR and
                            // rebalances.
                            let code = if code == ErrorCode::MESSAGE_TOO_LARGE { ErrorCode::UNKNOWN_SERVER_ERROR } else { code };
                            tracing::warn!(group = %g.id, error = ?code, "could not store the group's assignment; rebalancing");
                            for m in g.members.values_mut() {
                                if let Some(tx) = m.sync_waiter.take() {
                                    let _ = tx.send(sync_error(code));
                                }
                            }
                            prepare_rebalance(g, Instant::now(), 0);
                        }
                    }
                }
            }
        }
        rx.await.unwrap_or_else(|_| sync_error(ErrorCode::REBALANCE_IN_PROGRESS))
    }

    pub(super) fn heartbeat(&self, req: HeartbeatRequest) -> ErrorCode {
        let mut groups = self.groups.borrow_mut();
        let Some(g) = groups.get_mut(req.group_id.0.as_str()) else { return ErrorCode::UNKNOWN_MEMBER_ID };
        let member_id = req.member_id.as_str();
        if g.consumer.is_some() {
            return classic_member::heartbeat(g, member_id, req.group_instance_id.as_deref(), req.generation_id, Instant::now());
        }
        if g.state == GroupState::Dead {
            return ErrorCode::COORDINATOR_NOT_AVAILABLE;
        }
        if let Err(e) = validate_member(g, member_id, req.group_instance_id.as_deref()) {
            return e;
        }
        if req.generation_id != g.generation {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        let state = g.state;
        if let Some(m) = g.members.get_mut(member_id) {
            m.last_heartbeat = Instant::now();
        }
        match state {
            GroupState::Empty | GroupState::Dead => ErrorCode::UNKNOWN_MEMBER_ID,
            GroupState::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::NONE,
        }
    }

    /// LeaveGroup: (group-level error, per-member results).
    pub(super) fn leave(&self, ctx: &Rc<CoordinatorContext>, group_id: &str, members: Vec<MemberIdentity>) -> (ErrorCode, Vec<MemberResponse>) {
        let now = Instant::now();
        let mut groups = self.groups.borrow_mut();
        let Some(g) = groups.get_mut(group_id) else { return (ErrorCode::UNKNOWN_MEMBER_ID, Vec::new()) };
        if g.consumer.is_some() {
            let (code, results, records) = classic_member::leave(g, members, ctx.migration(), &ctx.image(), now);
            let partition = g.partition;
            drop(groups);
            store_in_background(ctx, partition, records);
            return (code, results);
        }
        if g.state == GroupState::Dead {
            return (ErrorCode::COORDINATOR_NOT_AVAILABLE, Vec::new());
        }
        let mut results = Vec::with_capacity(members.len());
        let mut removed = false;
        for ident in members {
            let mid = ident.member_id.to_string();
            let iid = ident.group_instance_id.as_ref().map(|s| s.to_string());
            let code = match &iid {
                Some(iid) => match g.static_members.get(iid).cloned() {
                    None => ErrorCode::UNKNOWN_MEMBER_ID,
                    // An empty member id removes the instance whatever member holds it.
                    Some(holder) if mid.is_empty() || holder == mid => {
                        remove_member(g, &holder, ErrorCode::UNKNOWN_MEMBER_ID);
                        removed = true;
                        ErrorCode::NONE
                    }
                    Some(_) => ErrorCode::FENCED_INSTANCE_ID,
                },
                None => {
                    if g.pending_members.remove(&mid).is_some() {
                        removed = true;
                        ErrorCode::NONE
                    } else if g.members.contains_key(&mid) {
                        remove_member(g, &mid, ErrorCode::UNKNOWN_MEMBER_ID);
                        removed = true;
                        ErrorCode::NONE
                    } else {
                        ErrorCode::UNKNOWN_MEMBER_ID
                    }
                }
            };
            if code == ErrorCode::NONE {
                tracing::info!(group = %g.id, member = %mid, "member left");
            }
            results
                .push(MemberResponse::default().with_member_id(ident.member_id).with_group_instance_id(ident.group_instance_id).with_error_code(code.code()));
        }
        let record = if removed { on_members_gone(g, now, ctx.config.group_initial_rebalance_delay_ms) } else { None };
        let partition = g.partition;
        drop(groups);
        store_in_background(ctx, partition, record.into_iter().collect());
        (ErrorCode::NONE, results)
    }
}

/// Stores `records` after the answer went out (members left), as Kafka's coordinator
/// does; a failed store is logged, never dropped silently.
fn store_in_background(ctx: &Rc<CoordinatorContext>, partition: i32, records: Vec<OffsetsRecord>) {
    if records.is_empty() {
        return;
    }
    if let Some(p) = ctx.partition(super::OFFSETS_TOPIC, partition) {
        glommio::spawn_local(async move {
            if let Err(e) = append(&p, &records).await {
                tracing::warn!(partition = p.index, error = %e, "could not store group metadata after members left");
            }
        })
        .detach();
    }
}

/// Answers `resp` once `records` are stored (nothing to store: at once); a failed store
/// is answered with `error` (MESSAGE_TOO_LARGE as UNKNOWN_SERVER_ERROR, as Kafka).
async fn store_then<R>(p: &Rc<Partition>, records: &[OffsetsRecord], resp: R, error: impl FnOnce(ErrorCode) -> R) -> R {
    if records.is_empty() {
        return resp;
    }
    match append(p, records).await {
        Ok(_) => resp,
        Err(ErrorCode::MESSAGE_TOO_LARGE) => error(ErrorCode::UNKNOWN_SERVER_ERROR),
        Err(code) => error(code),
    }
}

struct JoinArgs<'a> {
    member_id: &'a str,
    instance_id: Option<&'a str>,
    client_id: &'a str,
    client_host: &'a str,
    protocol_type: &'a str,
    protocols: Vec<(String, Bytes)>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    version: i16,
    max_size: usize,
    initial_delay: u64,
    now: Instant,
}

enum JoinOutcome {
    Wait(oneshot::Receiver<JoinGroupResponse>),
    Now(JoinGroupResponse),
}

type JoinResult = Result<JoinOutcome, (ErrorCode, String)>;

/// The join logic under the group borrow (Kafka's doNewMemberJoinGroup /
/// doStaticMemberJoinGroup / doExistingMemberJoinGroup).
fn join_locked(g: &mut Group, a: JoinArgs<'_>) -> JoinResult {
    let fail = |code: ErrorCode| Err((code, a.member_id.to_string()));
    if g.state == GroupState::Dead {
        return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    }
    if !g.supports_protocols(a.protocol_type, &a.protocols) {
        return fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    if a.member_id.is_empty() {
        // A new member (or a static member coming back under a new member id).
        let new_id = format!("{}-{}", bounded(a.client_id), uuid::Uuid::new_v4());
        if let Some(iid) = a.instance_id {
            if let Some(old_id) = g.static_members.get(iid).cloned() {
                return replace_static_member(g, &old_id, new_id, a);
            }
        }
        if g.size() >= a.max_size {
            return fail(ErrorCode::GROUP_MAX_SIZE_REACHED);
        }
        if a.instance_id.is_none() && a.version >= 4 {
            // KIP-394: the member must come back with this id within its session timeout.
            let deadline = a.now + Duration::from_millis(a.session_timeout_ms.max(0) as u64);
            g.pending_members.insert(new_id.clone(), deadline);
            return Err((ErrorCode::MEMBER_ID_REQUIRED, new_id));
        }
        return Ok(add_member_and_rebalance(g, new_id, a));
    }
    if g.pending_members.remove(a.member_id).is_some() {
        return Ok(add_member_and_rebalance(g, a.member_id.to_string(), a));
    }
    if let Err(e) = validate_member(g, a.member_id, a.instance_id) {
        return fail(e);
    }
    let Some(m) = g.members.get(a.member_id) else { return fail(ErrorCode::UNKNOWN_MEMBER_ID) };
    let same = m.matches(&a.protocols);
    let is_leader = g.leader.as_deref() == Some(a.member_id);
    match g.state {
        GroupState::PreparingRebalance => Ok(update_member_and_rebalance(g, a)),
        // A retried JoinGroup of this generation: answer it again.
        GroupState::CompletingRebalance if same => Ok(JoinOutcome::Now(join_response(g, a.member_id))),
        GroupState::CompletingRebalance => Ok(update_member_and_rebalance(g, a)),
        GroupState::Stable if same && !is_leader => {
            if let Some(m) = g.members.get_mut(a.member_id) {
                m.last_heartbeat = a.now;
            }
            Ok(JoinOutcome::Now(join_response(g, a.member_id)))
        }
        GroupState::Stable => Ok(update_member_and_rebalance(g, a)),
        GroupState::Empty | GroupState::Dead => fail(ErrorCode::UNKNOWN_MEMBER_ID),
    }
}

fn add_member_and_rebalance(g: &mut Group, member_id: String, a: JoinArgs<'_>) -> JoinOutcome {
    let (tx, rx) = oneshot::channel();
    if g.members.is_empty() {
        g.protocol_type = Some(a.protocol_type.to_string());
    }
    if let Some(iid) = a.instance_id {
        g.static_members.insert(iid.to_string(), member_id.clone());
    }
    g.members.insert(
        member_id.clone(),
        Member {
            id: member_id,
            instance_id: a.instance_id.map(str::to_string),
            client_id: bounded(a.client_id),
            client_host: a.client_host.to_string(),
            session_timeout_ms: a.session_timeout_ms,
            rebalance_timeout_ms: a.rebalance_timeout_ms,
            protocols: a.protocols,
            assignment: Bytes::new(),
            last_heartbeat: a.now,
            join_waiter: Some(tx),
            sync_waiter: None,
            is_new: true,
        },
    );
    maybe_prepare_rebalance(g, a.now, a.initial_delay);
    // A join never makes the group Empty, so there is no record to store here.
    let _ = try_complete_join(g, a.now);
    JoinOutcome::Wait(rx)
}

fn update_member_and_rebalance(g: &mut Group, a: JoinArgs<'_>) -> JoinOutcome {
    let (tx, rx) = oneshot::channel();
    if let Some(m) = g.members.get_mut(a.member_id) {
        m.protocols = a.protocols;
        m.session_timeout_ms = a.session_timeout_ms;
        m.rebalance_timeout_ms = a.rebalance_timeout_ms;
        m.last_heartbeat = a.now;
        if let Some(old) = m.join_waiter.replace(tx) {
            let _ = old.send(join_error(ErrorCode::REBALANCE_IN_PROGRESS, a.member_id));
        }
    }
    maybe_prepare_rebalance(g, a.now, a.initial_delay);
    let _ = try_complete_join(g, a.now);
    JoinOutcome::Wait(rx)
}

/// A static member rejoining with an empty member id: the new member id takes over the
/// instance (the old one is fenced). In a Stable group with unchanged protocols and a
/// follower, it keeps its assignment without a rebalance, as in Kafka.
fn replace_static_member(g: &mut Group, old_id: &str, new_id: String, a: JoinArgs<'_>) -> JoinResult {
    let Some(mut m) = g.members.remove(old_id) else { return Err((ErrorCode::UNKNOWN_MEMBER_ID, String::new())) };
    if let Some(tx) = m.join_waiter.take() {
        let _ = tx.send(join_error(ErrorCode::FENCED_INSTANCE_ID, old_id));
    }
    if let Some(tx) = m.sync_waiter.take() {
        let _ = tx.send(sync_error(ErrorCode::FENCED_INSTANCE_ID));
    }
    let was_leader = g.leader.as_deref() == Some(old_id);
    let same = m.matches(&a.protocols);
    m.id = new_id.clone();
    m.client_id = bounded(a.client_id);
    m.client_host = a.client_host.to_string();
    m.last_heartbeat = a.now;
    if g.pending_sync.remove(old_id) {
        g.pending_sync.insert(new_id.clone());
    }
    if was_leader {
        g.leader = Some(new_id.clone());
    }
    if let Some(iid) = a.instance_id {
        g.static_members.insert(iid.to_string(), new_id.clone());
    }
    g.members.insert(new_id.clone(), m);
    if g.state == GroupState::Stable && same && !was_leader {
        // The new member id must be stored, or a restarted coordinator would fence it.
        g.store_pending = true;
        return Ok(JoinOutcome::Now(join_response(g, &new_id)));
    }
    let args = JoinArgs { member_id: &new_id, ..a };
    Ok(update_member_and_rebalance(g, args))
}
