//! StreamsGroupHeartbeat as Kafka 4.4's GroupMetadataManager runs it, after the checks of
//! `heartbeat_request.rs`: join (member epoch 0, with the topology), heartbeat, leave (-1)
//! and a static member's temporary leave (-2); the epoch checks; the topology stored on
//! the first join and configured against the metadata at every heartbeat (`configure.rs`);
//! the group epoch bumped when members, the metadata of the topology's topics, its
//! validation or the assignment configs change; the target assignment (`assignor/sticky.rs`),
//! delayed by `streams.initial.rebalance.delay.ms` for a new group and by
//! `streams.assignment.interval.ms` between two computations; the member's reconciliation
//! (`reconcile.rs`); its statuses and the endpoint → partitions map.
//!
//! Pure: the caller gives the time and the topics' partition counts, and stores the
//! returned records. Every change is made by replaying the record that says it
//! (`StreamsGroup::replay`), on a copy of the group that replaces it only when the
//! heartbeat succeeds, so the group is always what its records rebuild, and a refused
//! heartbeat changes nothing (Kafka applies records only after they are written).
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use kafka_protocol::messages::streams_group_heartbeat_response::{
    Endpoint as WireEndpoint, EndpointToPartitions, Status, TaskIds, TopicPartition as WireTopicPartition,
};
use kafka_protocol::messages::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName};

use super::assignor::sticky::{self, AssignmentMemberSpec, SubtopologyTasks};
use super::configure::{configure, ConfigureError, ConfiguredInternalTopic, ConfiguredTopology};
use super::group::{StreamsGroup, StreamsMember};
use super::heartbeat_request::{self as request, HeartbeatError, JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::reconcile::{reconcile, MemberAssignment, MemberState};
use super::streams_group_records::{Endpoint, GroupMetadataValue, MemberMetadataValue, StreamsRecord};
use super::tasks::{TaskSet, TasksTuple};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Status codes of the response (Kafka's StreamsGroupHeartbeatResponse.Status).
pub const STALE_TOPOLOGY: i8 = 0;
pub const SHUTDOWN_APPLICATION: i8 = 4;
pub const ASSIGNMENT_DELAYED: i8 = 5;
/// A warning only (v1+): the member lacks client tags the group's rack-aware assignment
/// tags name; it is assigned all the same.
pub const MISSING_CLIENT_TAGS: i8 = 6;

/// The group settings a heartbeat uses (`group.streams.*` / the group's `streams.*`).
#[derive(Clone, Debug)]
pub struct Settings {
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    pub num_standby_replicas: u32,
    pub initial_rebalance_delay_ms: u64,
    pub assignment_interval_ms: i64,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    /// The client tag keys members should send (rack.aware.assignment.tags).
    pub rack_aware_assignment_tags: Vec<String>,
}

impl Default for Settings {
    /// Kafka 4.4's broker defaults.
    fn default() -> Self {
        Settings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: i32::MAX as usize,
            num_standby_replicas: 0,
            initial_rebalance_delay_ms: 3_000,
            assignment_interval_ms: 1_000,
            task_offset_interval_ms: 60_000,
            acceptable_recovery_lag: 10_000,
            rack_aware_assignment_tags: Vec::new(),
        }
    }
}

/// What the heartbeat is about besides the request.
pub struct Beat<'a> {
    pub group_id: &'a str,
    /// The request's version (statuses and fields differ between 0 and 1).
    pub version: i16,
    pub client_id: &'a str,
    pub client_host: &'a str,
    pub now: Instant,
    pub now_ms: i64,
    /// The partition count of a topic in the metadata image (None: no such topic).
    pub partitions_of: &'a dyn Fn(&str) -> Option<i32>,
    pub settings: Settings,
}

/// A heartbeat's result: the answer, the records to store first, and the internal topics
/// the broker should create (the coordinator only says which are missing).
#[derive(Debug)]
pub struct Outcome {
    pub response: StreamsGroupHeartbeatResponse,
    pub records: Vec<StreamsRecord>,
    pub internal_topics_to_create: Vec<ConfiguredInternalTopic>,
}

fn error(code: ErrorCode, message: impl Into<String>) -> HeartbeatError {
    (code, message.into())
}

/// Applies `rec` to the group and keeps it for storing.
fn emit(g: &mut StreamsGroup, records: &mut Vec<StreamsRecord>, rec: StreamsRecord, now: Instant) {
    g.replay(&rec, now);
    records.push(rec);
}

/// Runs one heartbeat on `group` (a new, default group when `existed` is false). On
/// success the group holds the new state; on error it is unchanged.
pub fn heartbeat(group: &mut StreamsGroup, existed: bool, req: &StreamsGroupHeartbeatRequest, beat: &Beat<'_>) -> Result<Outcome, HeartbeatError> {
    let mut g = group.clone();
    let out = if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        leave(&mut g, existed, req, beat)?
    } else {
        join_or_beat(&mut g, existed, req, beat)?
    };
    *group = g;
    Ok(out)
}

fn not_a_member(group_id: &str, member_id: &str) -> HeartbeatError {
    error(ErrorCode::UNKNOWN_MEMBER_ID, format!("Member {member_id} is not a member of group {group_id}."))
}

fn leave(g: &mut StreamsGroup, existed: bool, req: &StreamsGroupHeartbeatRequest, beat: &Beat<'_>) -> Result<Outcome, HeartbeatError> {
    if !existed {
        return Err(error(ErrorCode::GROUP_ID_NOT_FOUND, format!("Group {} not found.", beat.group_id)));
    }
    let member_id = req.member_id.to_string();
    if req.shutdown_application && g.shutdown_requested_by.is_none() {
        g.shutdown_requested_by = Some(member_id.clone());
    }
    let mut records = Vec::new();
    match req.instance_id.as_deref() {
        None => {
            if !g.members.contains_key(&member_id) {
                return Err(not_a_member(beat.group_id, &member_id));
            }
            fence(g, beat.group_id, &member_id, &mut records, beat.now);
        }
        Some(instance) => {
            let Some(holder) = g.static_member(instance).map(str::to_string) else {
                return Err(error(ErrorCode::UNKNOWN_MEMBER_ID, format!("Instance id {instance} is unknown.")));
            };
            if holder != member_id {
                return Err(error(
                    ErrorCode::FENCED_INSTANCE_ID,
                    format!("Static member {member_id} with instance id {instance} was fenced by member {holder}."),
                ));
            }
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                // The member stays (its session keeps running): epoch -2, nothing pending,
                // its active tasks' epochs reset, so it rejoins with its tasks.
                let mut a = g.members[&member_id].assignment.clone();
                a.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                a.pending_revocation = Default::default();
                for ps in a.assigned.active.values_mut() {
                    for e in ps.values_mut() {
                        *e = 0;
                    }
                }
                g.set_assignment(&member_id, a);
                if let Some(rec) = g.current_assignment_record(beat.group_id, &member_id) {
                    records.push(rec);
                }
            } else {
                fence(g, beat.group_id, &member_id, &mut records, beat.now);
            }
        }
    }
    let response = StreamsGroupHeartbeatResponse::default()
        .with_member_id(str_bytes(&member_id))
        .with_member_epoch(req.member_epoch)
        .with_heartbeat_interval_ms(beat.settings.heartbeat_interval_ms)
        .with_status(Some(Vec::new()));
    Ok(Outcome { response, records, internal_topics_to_create: Vec::new() })
}

/// Removes `member_id` (left, or its session or revocation timed out): its records'
/// tombstones in Kafka's order, then a new group epoch; the last member also resets the
/// target's epoch.
pub fn fence(g: &mut StreamsGroup, group_id: &str, member_id: &str, records: &mut Vec<StreamsRecord>, now: Instant) {
    let (group, member) = (group_id.to_string(), member_id.to_string());
    emit(g, records, StreamsRecord::CurrentMemberAssignment { group: group.clone(), member: member.clone(), value: None }, now);
    emit(g, records, StreamsRecord::TargetAssignmentMember { group: group.clone(), member: member.clone(), tasks: None }, now);
    emit(g, records, StreamsRecord::MemberMetadata { group: group.clone(), member, value: None }, now);
    bump_epoch(g, group_id, records, now);
    if g.members.is_empty() {
        let epoch = g.group_epoch;
        emit(g, records, StreamsRecord::TargetAssignmentMetadata { group, value: Some((epoch, 0)) }, now);
        g.shutdown_requested_by = None;
    }
}

fn bump_epoch(g: &mut StreamsGroup, group_id: &str, records: &mut Vec<StreamsRecord>, now: Instant) {
    let value = GroupMetadataValue {
        epoch: g.group_epoch.wrapping_add(1),
        metadata_hash: g.metadata_hash,
        validated_topology_epoch: g.validated_topology_epoch,
        last_assignment_configs: g.last_assignment_configs.clone(),
    };
    emit(g, records, StreamsRecord::GroupMetadata { group: group_id.to_string(), value: Some(value) }, now);
}

/// Kafka's member epoch check of a heartbeat (not a join).
fn check_epoch(m: &StreamsMember, received: i32, owned: Option<&TasksTuple>) -> Result<(), HeartbeatError> {
    let a = &m.assignment;
    if received > a.member_epoch {
        return Err(error(
            ErrorCode::FENCED_MEMBER_EPOCH,
            format!("The streams group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", a.member_epoch),
        ));
    }
    if received < a.member_epoch {
        let current = a.assigned.tasks();
        let within = |owned: &TaskSet, assigned: &TaskSet| super::tasks::iter(owned).all(|(s, p)| super::tasks::contains(assigned, s, p));
        let ok = received == a.previous_member_epoch
            && owned.is_some_and(|o| within(&o.active, &current.active) && within(&o.standby, &current.standby) && within(&o.warmup, &current.warmup));
        if !ok {
            return Err(error(
                ErrorCode::FENCED_MEMBER_EPOCH,
                format!("The streams group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", a.member_epoch),
            ));
        }
    }
    Ok(())
}

/// A stable hash of the topology's topics that exist, with their partition counts (Kafka
/// hashes ids, names, counts and racks; any hash compared only with itself will do).
fn metadata_hash(g: &StreamsGroup, partitions_of: &dyn Fn(&str) -> Option<i32>) -> i64 {
    let Some(t) = &g.topology else { return 0 };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut any = false;
    for name in t.required_topics() {
        if let Some(n) = partitions_of(name) {
            (name, n).hash(&mut h);
            any = true;
        }
    }
    if any {
        h.finish() as i64
    } else {
        0
    }
}

/// The assignment configs stored with the group (Kafka's LastAssignmentConfigs, in key
/// order): a change bumps the group epoch. The tags only when there are some, as Kafka.
fn assignment_configs(settings: &Settings) -> Vec<(String, String)> {
    let mut configs = vec![("num.standby.replicas".to_string(), settings.num_standby_replicas.to_string())];
    if !settings.rack_aware_assignment_tags.is_empty() {
        configs.push(("rack.aware.assignment.tags".to_string(), settings.rack_aware_assignment_tags.join(",")));
    }
    configs
}

fn status(code: i8, detail: impl AsRef<str>) -> Status {
    Status::default().with_status_code(code).with_status_detail(str_bytes(detail.as_ref()))
}

fn join_or_beat(g: &mut StreamsGroup, existed: bool, req: &StreamsGroupHeartbeatRequest, beat: &Beat<'_>) -> Result<Outcome, HeartbeatError> {
    let joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH;
    let (group_id, now) = (beat.group_id, beat.now);
    if !joining && !existed {
        return Err(error(ErrorCode::GROUP_ID_NOT_FOUND, format!("Streams group {group_id} not found.")));
    }
    let was_empty = g.is_empty();
    let member_id = req.member_id.to_string();
    let owned = request::owned_tasks(req);
    let mut records = Vec::new();
    let mut bump = false;

    // (b) The member: a new one, a static member taking its instance id back, or one
    // checked against its epoch.
    let static_holder = req.instance_id.as_deref().and_then(|i| g.static_member(i)).map(str::to_string);
    let is_new = !g.members.contains_key(&member_id) && static_holder.is_none();
    if joining && is_new && g.members.len() >= beat.settings.max_size {
        return Err(error(
            ErrorCode::GROUP_MAX_SIZE_REACHED,
            format!("The streams group has reached its maximum capacity of {} members.", beat.settings.max_size),
        ));
    }
    match (&static_holder, joining) {
        (Some(holder), true) if *holder != member_id => {
            let old = &g.members[holder];
            if old.assignment.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                return Err(error(
                    ErrorCode::UNRELEASED_INSTANCE_ID,
                    format!(
                        "Static member {member_id} with instance id {} cannot join the group because the instance id is owned by {holder} member.",
                        req.instance_id.as_deref().unwrap_or_default()
                    ),
                ));
            }
            replace_static_member(g, group_id, holder, &member_id, &mut records, now);
        }
        (Some(holder), false) if *holder != member_id => {
            return Err(error(
                ErrorCode::FENCED_INSTANCE_ID,
                format!("Static member {member_id} with instance id {} was fenced by member {holder}.", req.instance_id.as_deref().unwrap_or_default()),
            ));
        }
        _ => {}
    }
    if !joining {
        let m = g.members.get(&member_id).ok_or_else(|| not_a_member(group_id, &member_id))?;
        check_epoch(m, req.member_epoch, owned.as_ref())?;
    }
    if !g.members.contains_key(&member_id) {
        g.members.insert(member_id.clone(), StreamsMember::new(now));
    }

    // (c) The member's metadata: what the request carries replaces what it knew.
    let old = g.members[&member_id].metadata.clone();
    let mut meta = old.clone();
    if let Some(i) = &req.instance_id {
        meta.instance_id = Some(i.to_string());
    }
    if let Some(r) = &req.rack_id {
        meta.rack_id = Some(r.to_string());
    }
    if req.rebalance_timeout_ms != -1 {
        meta.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(t) = &req.topology {
        meta.topology_epoch = t.epoch;
    }
    if let Some(p) = &req.process_id {
        meta.process_id = p.to_string();
    }
    if let Some(tags) = &req.client_tags {
        let mut tags: Vec<(String, String)> = tags.iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect();
        tags.sort();
        tags.dedup_by(|a, b| a.0 == b.0);
        meta.client_tags = tags;
    }
    meta.client_id = beat.client_id.to_string();
    meta.client_host = beat.client_host.to_string();
    let endpoint = req.user_endpoint.as_ref().map(|e| Endpoint { host: e.host.to_string(), port: e.port });
    if joining || endpoint.is_some() {
        meta.user_endpoint = endpoint;
    }
    let endpoint_changed = meta.user_endpoint != old.user_endpoint;
    if meta != old || is_new {
        let relevant = meta.topology_epoch != old.topology_epoch
            || meta.rack_id != old.rack_id
            || meta.client_tags != old.client_tags
            || meta.process_id != old.process_id;
        if meta.instance_id.is_none() || relevant || is_new {
            bump = true;
        }
        emit(g, &mut records, StreamsRecord::MemberMetadata { group: group_id.to_string(), member: member_id.clone(), value: Some(meta.clone()) }, now);
    }

    // (d) The topology: stored by the first join; a different one is refused.
    let mut statuses = Vec::new();
    if let Some(t) = &req.topology {
        let declared = request::topology(t);
        match &g.topology {
            None => emit(g, &mut records, StreamsRecord::Topology { group: group_id.to_string(), topology: Some(declared) }, now),
            Some(stored) if stored.epoch > declared.epoch => {}
            Some(stored) if *stored != declared => return Err(error(ErrorCode::INVALID_REQUEST, "Topology updates are not supported yet.")),
            Some(_) => {}
        }
    }
    if let Some(t) = &g.topology {
        if meta.topology_epoch < t.epoch {
            statuses
                .push(status(STALE_TOPOLOGY, format!("The member's topology epoch {} is behind the group's topology epoch {}.", meta.topology_epoch, t.epoch)));
        }
    }

    // (e) The topology configured against the metadata of its topics.
    let hash = metadata_hash(g, beat.partitions_of);
    if hash != g.metadata_hash {
        g.metadata_hash = hash;
        bump = true;
    }
    let configured: Option<ConfiguredTopology> = match &g.topology {
        None => None,
        Some(t) => Some(configure(t, beat.partitions_of).map_err(|e| match e {
            ConfigureError::InvalidTopology(m) => error(ErrorCode::STREAMS_INVALID_TOPOLOGY, m),
            ConfigureError::Malformed(m) => error(ErrorCode::UNKNOWN_SERVER_ERROR, m),
        })?),
    };

    // (f) Validation against the configured topology.
    let ready = configured.as_ref().filter(|c| c.is_ready());
    let validated = ready.map_or(-1, |c| c.topology_epoch);
    if let (Some(c), Some(o)) = (ready, owned.as_ref()) {
        for set in [&o.active, &o.standby, &o.warmup] {
            for (s, ps) in set {
                let Some(sub) = c.subtopology(s) else {
                    return Err(error(ErrorCode::INVALID_REQUEST, format!("Subtopology {s} does not exist in the topology.")));
                };
                if let Some(p) = ps.iter().find(|p| **p < 0 || **p >= sub.number_of_tasks) {
                    return Err(error(
                        ErrorCode::INVALID_REQUEST,
                        format!("Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: {}", sub.number_of_tasks),
                    ));
                }
            }
        }
    }
    let offsets = req.task_offsets.as_deref().map(request::task_offsets).transpose()?;
    let end_offsets = req.task_end_offsets.as_deref().map(request::task_offsets).transpose()?;
    {
        let m = g.members.get_mut(&member_id).expect("inserted above");
        if let Some(o) = offsets {
            m.task_offsets = o;
        }
        if let Some(o) = end_offsets {
            m.task_end_offsets = o;
        }
    }
    if validated != g.validated_topology_epoch {
        g.validated_topology_epoch = validated;
        bump = true;
    }
    let configs = assignment_configs(&beat.settings);
    if g.last_assignment_configs.as_ref() != Some(&configs) {
        g.last_assignment_configs = Some(configs);
        bump = true;
    }

    // (g) A new group epoch.
    if bump {
        bump_epoch(g, group_id, &mut records, now);
    }

    // (h) A new group's first target waits for more members.
    if was_empty && beat.settings.initial_rebalance_delay_ms > 0 && g.initial_delay_until.is_none() {
        g.initial_delay_until = Some(now + Duration::from_millis(beat.settings.initial_rebalance_delay_ms));
    }
    if g.initial_delay_until.is_some_and(|until| now >= until) {
        g.initial_delay_until = None;
    }

    // (i) The target assignment.
    let (target_epoch, target) = if g.initial_delay_until.is_some() {
        statuses.push(status(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."));
        (g.assignment_epoch, TasksTuple::default())
    } else if g.assignment_epoch >= g.group_epoch {
        (g.assignment_epoch, g.targets.get(&member_id).cloned().unwrap_or_default())
    } else if g.assignment_timestamp_ms != 0
        && beat.settings.assignment_interval_ms != 0
        && beat.now_ms < g.assignment_timestamp_ms.saturating_add(beat.settings.assignment_interval_ms)
    {
        statuses.push(status(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."));
        (g.assignment_epoch, g.targets.get(&member_id).cloned().unwrap_or_default())
    } else {
        compute_target(g, group_id, ready, beat, &mut records)?;
        (g.assignment_epoch, g.targets.get(&member_id).cloned().unwrap_or_default())
    };

    // (j) This member towards its target.
    let before = g.members[&member_id].assignment.clone();
    if !before.is_reconciled_to(target_epoch) {
        let process = g.members[&member_id].metadata.process_id.clone();
        let next = reconcile(&before, &process, target_epoch, &target, owned.as_ref(), &g.processes).map_err(|e| error(e.error_code(), e.message))?;
        if next != before {
            let value = current_value(&next);
            emit(g, &mut records, StreamsRecord::CurrentMemberAssignment { group: group_id.to_string(), member: member_id.clone(), value: Some(value) }, now);
        }
    }
    let (rebalance_timeout_ms, after) = {
        let m = &g.members[&member_id];
        (m.metadata.rebalance_timeout_ms, m.assignment.clone())
    };
    let tasks_changed = after.assigned != before.assigned;
    {
        let m = g.members.get_mut(&member_id).expect("present");
        m.revocation_deadline = (after.state == MemberState::UnrevokedTasks)
            .then(|| m.revocation_deadline.unwrap_or(now + Duration::from_millis(u64::try_from(rebalance_timeout_ms).unwrap_or(0))));
        // (k) The session.
        m.session_deadline = now + Duration::from_millis(beat.settings.session_timeout_ms);
    }
    if req.shutdown_application && g.shutdown_requested_by.is_none() {
        g.shutdown_requested_by = Some(member_id.clone());
    }

    // (l) The answer.
    if endpoint_changed || (tasks_changed && g.members[&member_id].endpoint().is_some()) {
        g.endpoint_information_epoch = g.endpoint_information_epoch.wrapping_add(1);
    }
    let mut internal_topics_to_create = Vec::new();
    if let Some(e) = configured.as_ref().and_then(|c| c.topic_configuration_exception.as_ref()) {
        statuses.push(status(e.status.code(), &e.message));
        internal_topics_to_create = configured.as_ref().map(|c| c.internal_topics_to_be_created.values().cloned().collect()).unwrap_or_default();
    }
    if let Some(by) = &g.shutdown_requested_by {
        statuses.push(status(
            SHUTDOWN_APPLICATION,
            format!("Streams group member {by} encountered a fatal error and requested a shutdown for the entire application."),
        ));
    }
    // v0 clients fail on a status code they do not know: only v1+ hears of missing tags.
    if beat.version >= 1 && !beat.settings.rack_aware_assignment_tags.is_empty() {
        let tags = &g.members[&member_id].metadata.client_tags;
        let missing: Vec<&str> = beat.settings.rack_aware_assignment_tags.iter().filter(|k| !tags.iter().any(|(t, _)| t == *k)).map(String::as_str).collect();
        if !missing.is_empty() {
            statuses.push(status(
                MISSING_CLIENT_TAGS,
                format!(
                    "Missing required client tags for rack-aware standby assignment: [{}]. Configure them via 'client.tag.<tagKey>' in your Streams config.",
                    missing.join(", ")
                ),
            ));
        }
    }
    let mut response = StreamsGroupHeartbeatResponse::default()
        .with_member_id(str_bytes(&member_id))
        .with_member_epoch(after.member_epoch)
        .with_heartbeat_interval_ms(beat.settings.heartbeat_interval_ms)
        .with_task_offset_interval_ms(beat.settings.task_offset_interval_ms)
        .with_status(Some(statuses))
        .with_endpoint_information_epoch(if existed { g.endpoint_information_epoch } else { 0 });
    if beat.version >= 1 {
        response.acceptable_recovery_lag = beat.settings.acceptable_recovery_lag;
    }
    if joining || tasks_changed {
        let tasks = after.assigned.tasks();
        response.active_tasks = Some(task_ids(&tasks.active));
        response.standby_tasks = Some(task_ids(&tasks.standby));
        response.warmup_tasks = Some(task_ids(&tasks.warmup));
    }
    if req.endpoint_information_epoch != g.endpoint_information_epoch {
        response.partitions_by_user_endpoint = Some(endpoints(g, &member_id, ready, beat.partitions_of));
    }
    Ok(Outcome { response, records, internal_topics_to_create })
}

fn current_value(a: &MemberAssignment) -> super::streams_group_records::CurrentAssignmentValue {
    super::streams_group_records::CurrentAssignmentValue {
        member_epoch: a.member_epoch,
        previous_member_epoch: a.previous_member_epoch,
        state: a.state.value(),
        assigned: a.assigned.clone(),
        pending_revocation: a.pending_revocation.clone(),
    }
}

/// A static member rejoining under a new member id takes over the old one's tasks.
fn replace_static_member(g: &mut StreamsGroup, group_id: &str, old_id: &str, new_id: &str, records: &mut Vec<StreamsRecord>, now: Instant) {
    let old = g.members[old_id].clone();
    let target = g.targets.get(old_id).cloned();
    let group = group_id.to_string();
    emit(g, records, StreamsRecord::CurrentMemberAssignment { group: group.clone(), member: old_id.to_string(), value: None }, now);
    emit(g, records, StreamsRecord::TargetAssignmentMember { group: group.clone(), member: old_id.to_string(), tasks: None }, now);
    emit(g, records, StreamsRecord::MemberMetadata { group: group.clone(), member: old_id.to_string(), value: None }, now);
    emit(g, records, StreamsRecord::MemberMetadata { group: group.clone(), member: new_id.to_string(), value: Some(old.metadata.clone()) }, now);
    emit(g, records, StreamsRecord::TargetAssignmentMember { group: group.clone(), member: new_id.to_string(), tasks: Some(target.unwrap_or_default()) }, now);
    let mut a = old.assignment.clone();
    a.member_epoch = 0;
    a.previous_member_epoch = 0;
    emit(g, records, StreamsRecord::CurrentMemberAssignment { group, member: new_id.to_string(), value: Some(current_value(&a)) }, now);
}

/// Runs the assignor for the group epoch and stores the new targets (every member gets
/// nothing while the topology is not ready).
fn compute_target(
    g: &mut StreamsGroup,
    group_id: &str,
    ready: Option<&ConfiguredTopology>,
    beat: &Beat<'_>,
    records: &mut Vec<StreamsRecord>,
) -> Result<(), HeartbeatError> {
    let targets: BTreeMap<String, TasksTuple> = match ready.and_then(|c| c.subtopologies.as_ref()) {
        None => g.members.keys().map(|m| (m.clone(), TasksTuple::default())).collect(),
        Some(subs) => {
            let members: BTreeMap<String, AssignmentMemberSpec> = g
                .members
                .iter()
                .map(|(id, m)| {
                    let t = m.assignment.assigned.tasks();
                    let spec = AssignmentMemberSpec {
                        process_id: m.metadata.process_id.clone(),
                        active_tasks: t.active,
                        standby_tasks: t.standby,
                        task_offsets: m.task_offsets.clone(),
                    };
                    (id.clone(), spec)
                })
                .collect();
            let subtopologies: BTreeMap<String, SubtopologyTasks> =
                subs.iter().map(|(id, s)| (id.clone(), SubtopologyTasks { number_of_tasks: s.number_of_tasks, stateful: s.is_stateful() })).collect();
            sticky::assign(&members, &subtopologies, beat.settings.num_standby_replicas).map_err(|e| {
                error(ErrorCode::UNKNOWN_SERVER_ERROR, format!("Failed to compute a new target assignment for epoch {}: {}", g.group_epoch, e.0))
            })?
        }
    };
    for (member, tasks) in targets {
        if g.targets.get(&member) != Some(&tasks) {
            emit(g, records, StreamsRecord::TargetAssignmentMember { group: group_id.to_string(), member, tasks: Some(tasks) }, beat.now);
        }
    }
    let epoch = g.group_epoch;
    emit(g, records, StreamsRecord::TargetAssignmentMetadata { group: group_id.to_string(), value: Some((epoch, beat.now_ms)) }, beat.now);
    Ok(())
}

fn task_ids(set: &TaskSet) -> Vec<TaskIds> {
    set.iter().map(|(s, ps)| TaskIds::default().with_subtopology_id(str_bytes(s)).with_partitions(ps.iter().copied().collect())).collect()
}

/// Kafka's EndpointToPartitionsManager: for each member with an endpoint (this one last),
/// the source and repartition-source partitions of its active tasks, and of its standby
/// and warm-up tasks.
fn endpoints(g: &StreamsGroup, this: &str, ready: Option<&ConfiguredTopology>, partitions_of: &dyn Fn(&str) -> Option<i32>) -> Vec<EndpointToPartitions> {
    let partitions = |set: &TaskSet| -> Vec<WireTopicPartition> {
        let mut by_topic: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for (s, ps) in set {
            let Some(sub) = ready.and_then(|c| c.subtopology(s)) else { continue };
            for topic in sub.source_topics.iter().chain(sub.repartition_source_topics.keys()) {
                let count = partitions_of(topic).unwrap_or(0);
                by_topic.entry(topic.clone()).or_default().extend(ps.iter().copied().filter(|p| *p < count));
            }
        }
        by_topic
            .into_iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| WireTopicPartition::default().with_topic(TopicName(str_bytes(&t))).with_partitions(ps.into_iter().collect()))
            .collect()
    };
    let mut ids: Vec<&String> = g.members.keys().filter(|id| id.as_str() != this).collect();
    if let Some((id, _)) = g.members.get_key_value(this) {
        ids.push(id);
    }
    ids.into_iter()
        .filter_map(|id| {
            let m = &g.members[id];
            let e = m.endpoint()?;
            let tasks = m.assignment.assigned.tasks();
            let mut replicas = tasks.standby.clone();
            for (s, ps) in &tasks.warmup {
                replicas.entry(s.clone()).or_default().extend(ps.iter().copied());
            }
            Some(
                EndpointToPartitions::default()
                    .with_user_endpoint(WireEndpoint::default().with_host(str_bytes(&e.host)).with_port(e.port))
                    .with_active_partitions(partitions(&tasks.active))
                    .with_standby_partitions(partitions(&replicas)),
            )
        })
        .collect()
}

/// Members whose session or revocation deadline passed by `now` are removed; their
/// records, and the ids removed.
pub fn expire(g: &mut StreamsGroup, group_id: &str, now: Instant) -> (Vec<String>, Vec<StreamsRecord>) {
    let gone: Vec<String> =
        g.members.iter().filter(|(_, m)| m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)).map(|(id, _)| id.clone()).collect();
    let mut records = Vec::new();
    for id in &gone {
        fence(g, group_id, id, &mut records, now);
    }
    (gone, records)
}

/// The member metadata record's value of a member (tests and the coordinator's load).
pub fn metadata_value(m: &StreamsMember) -> MemberMetadataValue {
    m.metadata.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::streams_group_heartbeat_request::{
        Subtopology as WireSubtopology, TaskIds as ReqTaskIds, TopicInfo as WireTopicInfo, Topology,
    };
    use kafka_protocol::messages::GroupId;

    const INPUT: &str = "words";
    const REPARTITION: &str = "wc-counts-repartition";
    const CHANGELOG: &str = "wc-counts-changelog";

    fn word_count() -> Topology {
        let s0 = WireSubtopology::default()
            .with_subtopology_id(str_bytes("0"))
            .with_source_topics(vec![TopicName(str_bytes(INPUT))])
            .with_repartition_sink_topics(vec![TopicName(str_bytes(REPARTITION))]);
        let s1 = WireSubtopology::default()
            .with_subtopology_id(str_bytes("1"))
            .with_repartition_source_topics(vec![WireTopicInfo::default().with_name(TopicName(str_bytes(REPARTITION)))])
            .with_state_changelog_topics(vec![WireTopicInfo::default().with_name(TopicName(str_bytes(CHANGELOG)))]);
        Topology::default().with_subtopologies(vec![s0, s1])
    }

    fn join(member: &str, process: &str) -> StreamsGroupHeartbeatRequest {
        StreamsGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("wc")))
            .with_member_id(str_bytes(member))
            .with_member_epoch(0)
            .with_endpoint_information_epoch(-1)
            .with_rebalance_timeout_ms(300_000)
            .with_topology(Some(word_count()))
            .with_active_tasks(Some(vec![]))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![]))
            .with_process_id(Some(str_bytes(process)))
    }

    fn beat(member: &str, epoch: i32, active: &TaskSet) -> StreamsGroupHeartbeatRequest {
        let ids = active.iter().map(|(s, ps)| ReqTaskIds::default().with_subtopology_id(str_bytes(s)).with_partitions(ps.iter().copied().collect())).collect();
        StreamsGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("wc")))
            .with_member_id(str_bytes(member))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(-1)
            .with_active_tasks(Some(ids))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![]))
    }

    fn topics(internal: bool) -> impl Fn(&str) -> Option<i32> {
        move |t: &str| match t {
            INPUT => Some(2),
            REPARTITION | CHANGELOG if internal => Some(2),
            _ => None,
        }
    }

    fn run(
        g: &mut StreamsGroup,
        existed: bool,
        req: &StreamsGroupHeartbeatRequest,
        partitions_of: &dyn Fn(&str) -> Option<i32>,
        settings: &Settings,
        at: Instant,
    ) -> Result<Outcome, HeartbeatError> {
        let b = Beat {
            group_id: "wc",
            version: 1,
            client_id: "c",
            client_host: "/127.0.0.1",
            now: at,
            now_ms: 1_000_000,
            partitions_of,
            settings: settings.clone(),
        };
        request::validate(req)?;
        heartbeat(g, existed, req, &b)
    }

    fn active(o: &Outcome) -> Option<TaskSet> {
        o.response
            .active_tasks
            .as_ref()
            .map(|ts| ts.iter().filter(|t| !t.partitions.is_empty()).map(|t| (t.subtopology_id.to_string(), t.partitions.iter().copied().collect())).collect())
    }

    fn codes(o: &Outcome) -> Vec<i8> {
        o.response.status.iter().flatten().map(|s| s.status_code).collect()
    }

    /// Replays `records` into a new group: the group the heartbeats left, but for what is
    /// only in memory.
    fn rebuilt(records: &[StreamsRecord], at: Instant) -> StreamsGroup {
        let mut g = StreamsGroup::default();
        for r in records {
            g.replay(r, at);
        }
        g
    }

    fn same_stored_state(a: &StreamsGroup, b: &StreamsGroup) {
        assert_eq!(
            (a.group_epoch, a.assignment_epoch, a.validated_topology_epoch, a.metadata_hash),
            (b.group_epoch, b.assignment_epoch, b.validated_topology_epoch, b.metadata_hash)
        );
        assert_eq!((&a.topology, &a.targets, &a.processes), (&b.topology, &b.targets, &b.processes));
        let members = |g: &StreamsGroup| g.members.iter().map(|(id, m)| (id.clone(), m.metadata.clone(), m.assignment.clone())).collect::<Vec<_>>();
        assert_eq!(members(a), members(b));
    }

    #[test]
    fn a_task_moves_to_a_new_member_only_after_its_owner_revoked_it() {
        let at = Instant::now();
        let settings = Settings { initial_rebalance_delay_ms: 0, assignment_interval_ms: 0, ..Settings::default() };
        let p = topics(true);
        let mut g = StreamsGroup::default();
        let mut stored = Vec::new();
        let a1 = run(&mut g, false, &join("a", "pa"), &p, &settings, at).unwrap();
        stored.extend(a1.records.iter().cloned());
        // Everything to the only member, at the first computed epoch (2).
        assert_eq!(a1.response.member_epoch, 2);
        let all = active(&a1).unwrap();
        assert_eq!(super::super::tasks::iter(&all).count(), 4, "{all:?}");
        assert!(codes(&a1).is_empty(), "{:?}", a1.response.status);
        assert_eq!(g.state(), super::super::group::StreamsGroupState::Stable);

        let b1 = run(&mut g, true, &join("b", "pb"), &p, &settings, at).unwrap();
        stored.extend(b1.records.iter().cloned());
        assert_eq!(g.group_epoch, 3);
        // b waits: a still holds what b's target names.
        assert!(active(&b1).unwrap_or_default().is_empty());
        // a is told to give up half, keeping its epoch until it acknowledges.
        let a2 = run(&mut g, true, &beat("a", 2, &all), &p, &settings, at).unwrap();
        stored.extend(a2.records.iter().cloned());
        let kept = active(&a2).unwrap();
        assert_eq!(super::super::tasks::iter(&kept).count(), 2);
        assert_eq!(a2.response.member_epoch, 2);
        // b still gets nothing until a acknowledges.
        let b2 = run(&mut g, true, &beat("b", b1.response.member_epoch, &TaskSet::new()), &p, &settings, at).unwrap();
        stored.extend(b2.records.iter().cloned());
        assert!(active(&b2).unwrap_or_default().is_empty());
        let a3 = run(&mut g, true, &beat("a", 2, &kept), &p, &settings, at).unwrap();
        stored.extend(a3.records.iter().cloned());
        assert_eq!(a3.response.member_epoch, 3);
        let b3 = run(&mut g, true, &beat("b", b2.response.member_epoch, &TaskSet::new()), &p, &settings, at).unwrap();
        stored.extend(b3.records.iter().cloned());
        let got = active(&b3).unwrap();
        assert_eq!(super::super::tasks::iter(&got).count(), 2);
        assert!(super::super::tasks::iter(&got).all(|(s, p)| !super::super::tasks::contains(&kept, s, p)), "no task held twice");
        assert_eq!(b3.response.member_epoch, 3);
        assert_eq!(g.state(), super::super::group::StreamsGroupState::Stable);
        same_stored_state(&g, &rebuilt(&stored, at));

        // a leaves: b is given everything once it heartbeats.
        let left =
            run(&mut g, true, &beat("a", -1, &kept).with_active_tasks(None).with_standby_tasks(None).with_warmup_tasks(None), &p, &settings, at).unwrap();
        stored.extend(left.records.iter().cloned());
        assert_eq!(left.response.member_epoch, -1);
        let b4 = run(&mut g, true, &beat("b", 3, &got), &p, &settings, at).unwrap();
        stored.extend(b4.records.iter().cloned());
        assert_eq!(super::super::tasks::iter(&active(&b4).unwrap()).count(), 4);
        same_stored_state(&g, &rebuilt(&stored, at));
    }

    #[test]
    fn missing_internal_topics_and_the_initial_delay_are_statuses() {
        let at = Instant::now();
        let settings = Settings::default();
        let mut g = StreamsGroup::default();
        let o = run(&mut g, false, &join("a", "pa"), &topics(false), &settings, at).unwrap();
        assert_eq!(codes(&o), vec![ASSIGNMENT_DELAYED, 3], "{:?}", o.response.status);
        let names: Vec<&str> = o.internal_topics_to_create.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec![CHANGELOG, REPARTITION]);
        assert!(o.internal_topics_to_create.iter().all(|t| t.number_of_partitions == 2));
        assert_eq!(g.state(), super::super::group::StreamsGroupState::NotReady);
        // Once the topics exist and the delay passed, the member gets its tasks.
        let later = at + Duration::from_millis(settings.initial_rebalance_delay_ms + 1);
        let o = run(&mut g, true, &beat("a", o.response.member_epoch, &TaskSet::new()), &topics(true), &settings, later).unwrap();
        assert!(codes(&o).is_empty(), "{:?}", o.response.status);
        assert_eq!(super::super::tasks::iter(&active(&o).unwrap()).count(), 4);
    }

    #[test]
    fn missing_client_tags_are_a_warning_to_v1_and_the_tags_bump_the_epoch() {
        use kafka_protocol::messages::streams_group_heartbeat_request::KeyValue;
        let at = Instant::now();
        let p = topics(true);
        let tags = |t: &[&str]| Settings {
            initial_rebalance_delay_ms: 0,
            rack_aware_assignment_tags: t.iter().map(|s| s.to_string()).collect(),
            ..Settings::default()
        };
        let detail = |o: &Outcome| o.response.status.iter().flatten().find(|s| s.status_code == MISSING_CLIENT_TAGS).map(|s| s.status_detail.to_string());
        let mut g = StreamsGroup::default();
        // Tags named but none sent: the member is assigned all the same, and warned.
        let o = run(&mut g, false, &join("a", "pa"), &p, &tags(&["zone", "cluster"]), at).unwrap();
        assert_eq!(
            detail(&o).as_deref(),
            Some("Missing required client tags for rack-aware standby assignment: [zone, cluster]. Configure them via 'client.tag.<tagKey>' in your Streams config.")
        );
        assert_eq!(super::super::tasks::iter(&active(&o).unwrap()).count(), 4);
        let epoch = g.group_epoch;
        assert_eq!(
            g.last_assignment_configs.as_deref(),
            Some(&[("num.standby.replicas".to_string(), "0".to_string()), ("rack.aware.assignment.tags".to_string(), "zone,cluster".to_string())][..])
        );
        // Only the missing keys are named; an empty value counts as present.
        let kv = |k: &str, v: &str| KeyValue::default().with_key(str_bytes(k)).with_value(str_bytes(v));
        let o = run(&mut g, false, &join("b", "pb").with_client_tags(Some(vec![kv("cluster", "")])), &p, &tags(&["zone", "cluster"]), at).unwrap();
        assert!(detail(&o).is_some_and(|d| d.contains("[zone]") && !d.contains("cluster")), "{:?}", detail(&o));
        // A v0 client never hears of it (it fails on a status code it does not know).
        let b =
            Beat { group_id: "wc", version: 0, client_id: "c", client_host: "/h", now: at, now_ms: 1_000_000, partitions_of: &p, settings: tags(&["zone"]) };
        let o = heartbeat(&mut g, true, &beat("b", o.response.member_epoch, &TaskSet::new()), &b).unwrap();
        assert_eq!(detail(&o), None);
        // The tags changed (the group's config): the epoch is bumped, as any assignment config change.
        let before = g.group_epoch;
        assert!(before > epoch);
        run(&mut g, true, &beat("b", o.response.member_epoch, &TaskSet::new()), &p, &tags(&[]), at).unwrap();
        assert_eq!(g.group_epoch, before + 1);
        assert_eq!(g.last_assignment_configs.as_deref(), Some(&[("num.standby.replicas".to_string(), "0".to_string())][..]));
    }

    #[test]
    fn kafkas_errors_leave_the_group_unchanged() {
        let at = Instant::now();
        let settings = Settings { initial_rebalance_delay_ms: 0, ..Settings::default() };
        let p = topics(true);
        let mut g = StreamsGroup::default();
        let first = run(&mut g, false, &join("a", "pa"), &p, &settings, at).unwrap();
        let before = g.clone();
        let e = run(&mut g, true, &beat("a", 9, &TaskSet::new()), &p, &settings, at).unwrap_err();
        assert_eq!(e.0, ErrorCode::FENCED_MEMBER_EPOCH);
        assert!(e.1.starts_with("The streams group member has a greater member epoch (9)"), "{}", e.1);
        assert_eq!(
            run(&mut g, true, &beat("x", 1, &TaskSet::new()), &p, &settings, at).unwrap_err(),
            (ErrorCode::UNKNOWN_MEMBER_ID, "Member x is not a member of group wc.".into())
        );
        let mut other = word_count();
        other.subtopologies.pop();
        let e = run(&mut g, true, &join("b", "pb").with_topology(Some(other)), &p, &settings, at).unwrap_err();
        assert_eq!(e, (ErrorCode::INVALID_REQUEST, "Topology updates are not supported yet.".into()));
        let bad = beat("a", first.response.member_epoch, &[("7".to_string(), [0].into())].into());
        assert_eq!(
            run(&mut g, true, &bad, &p, &settings, at).unwrap_err(),
            (ErrorCode::INVALID_REQUEST, "Subtopology 7 does not exist in the topology.".into())
        );
        assert_eq!(g, before, "a refused heartbeat changes nothing");
        let mut full = Settings { max_size: 1, ..settings };
        full.initial_rebalance_delay_ms = 0;
        assert_eq!(run(&mut g, true, &join("b", "pb"), &p, &full, at).unwrap_err().0, ErrorCode::GROUP_MAX_SIZE_REACHED);
        // Sessions end.
        let (gone, recs) = expire(&mut g, "wc", at + Duration::from_millis(settings.session_timeout_ms + 1));
        assert_eq!(gone, vec!["a".to_string()]);
        assert!(g.members.is_empty() && !recs.is_empty());
    }
}
