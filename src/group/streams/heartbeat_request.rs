//! What a StreamsGroupHeartbeat carries, checked as Kafka 4.4 checks it before the group is
//! looked at (KafkaApis' topic checks, then GroupMetadataManager's
//! throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures and
//! throwIfStreamsGroupHeartbeatRequestIsInvalid, with Kafka's codes and words), and
//! converted to the group's own types. Also bounds what a request may make the group keep.
use std::collections::BTreeMap;

use kafka_protocol::messages::streams_group_heartbeat_request::{TaskIds, TaskOffset, TopicInfo as WireTopicInfo, Topology};
use kafka_protocol::messages::StreamsGroupHeartbeatRequest;

use super::tasks::{TaskSet, TasksTuple};
use super::topology::{CopartitionGroup, StreamsTopology, Subtopology, TopicInfo};
use crate::protocol::ErrorCode;

/// Member epoch of a join, a leave and a static member's temporary leave.
pub const JOIN_GROUP_MEMBER_EPOCH: i32 = 0;
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Longest member / instance / rack / process / subtopology id kept.
const MAX_ID_BYTES: usize = 1024;
/// Subtopologies one topology may declare, and topics or configs one subtopology may name.
const MAX_SUBTOPOLOGIES: usize = 10_000;
const MAX_TOPICS_PER_SUBTOPOLOGY: usize = 10_000;
/// Tasks (or task offsets) one heartbeat may report.
const MAX_TASKS: usize = 1_000_000;
/// Client tags one member may declare.
const MAX_CLIENT_TAGS: usize = 1_000;

/// Kafka's internal topics, which a topology may not use.
const INTERNAL_TOPICS: [&str; 3] = ["__consumer_offsets", "__transaction_state", "__share_group_state"];

/// An error answered to the member: code and message.
pub type HeartbeatError = (ErrorCode, String);

fn invalid(msg: impl Into<String>) -> HeartbeatError {
    (ErrorCode::INVALID_REQUEST, msg.into())
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Kafka's topic name rule (Topic.validate): 1-249 characters of `[a-zA-Z0-9._-]`, not "."
/// or "..".
fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// KafkaApis' checks of the topology's topics (before ACLs): no Kafka internal topic, no
/// invalid name. STREAMS_INVALID_TOPOLOGY with Kafka's words.
pub fn check_topology_topics(topology: &Topology) -> Result<(), HeartbeatError> {
    let mut names: Vec<&str> = Vec::new();
    for s in &topology.subtopologies {
        names.extend(s.source_topics.iter().map(|t| t.0.as_str()));
        names.extend(s.repartition_sink_topics.iter().map(|t| t.0.as_str()));
        names.extend(s.repartition_source_topics.iter().map(|t| t.name.0.as_str()));
        names.extend(s.state_changelog_topics.iter().map(|t| t.name.0.as_str()));
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(*n));
    let internal: Vec<&str> = names.iter().copied().filter(|n| INTERNAL_TOPICS.contains(n)).collect();
    if !internal.is_empty() {
        return Err((
            ErrorCode::STREAMS_INVALID_TOPOLOGY,
            format!("Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.", internal.join(",")),
        ));
    }
    let bad: Vec<&str> = names.iter().copied().filter(|n| !valid_topic_name(n)).collect();
    if !bad.is_empty() {
        return Err((ErrorCode::STREAMS_INVALID_TOPOLOGY, format!("Topic names {} are not valid topic names.", bad.join(","))));
    }
    Ok(())
}

/// Kafka's checks of the request itself, in its order; plus this broker's bounds.
pub fn validate(req: &StreamsGroupHeartbeatRequest) -> Result<(), HeartbeatError> {
    if let Some(t) = &req.topology {
        if t.subtopologies.iter().any(|s| !s.source_topic_regex.is_empty()) {
            return Err(invalid("Regular expressions for source topics are not supported yet."));
        }
    }
    if blank(&req.member_id) {
        return Err(invalid("MemberId can't be empty."));
    }
    if blank(&req.group_id.0) {
        return Err(invalid("GroupId can't be empty."));
    }
    if req.instance_id.as_ref().is_some_and(|s| blank(s)) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if req.rack_id.as_ref().is_some_and(|s| blank(s)) {
        return Err(invalid("RackId can't be empty."));
    }
    check_bounds(req)?;
    let tasks = [("ActiveTasks", &req.active_tasks), ("StandbyTasks", &req.standby_tasks), ("WarmupTasks", &req.warmup_tasks)];
    match req.member_epoch {
        JOIN_GROUP_MEMBER_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return Err(invalid("RebalanceTimeoutMs must be provided in first request."));
            }
            // Null fails too (Kafka's throwIfNotEmptyCollection).
            for (name, t) in tasks {
                if t.as_ref().is_none_or(|t| !t.is_empty()) {
                    return Err(invalid(format!("{name} must be empty when (re-)joining.")));
                }
            }
            let Some(topology) = &req.topology else { return Err(invalid("Topology must be non-null when (re-)joining.")) };
            for s in &topology.subtopologies {
                if let Some(c) = s.state_changelog_topics.iter().find(|c| c.partitions != 0) {
                    return Err((
                        ErrorCode::STREAMS_INVALID_TOPOLOGY,
                        format!("Changelog topic {} must have an undefined partition count, but it is set to {}.", c.name.0, c.partitions),
                    ));
                }
            }
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH if req.instance_id.is_none() => return Err(invalid("InstanceId can't be null.")),
        e if e < LEAVE_GROUP_STATIC_MEMBER_EPOCH => return Err(invalid(format!("MemberEpoch is {e}, but must be greater than or equal to -2."))),
        _ => {}
    }
    let given = tasks.iter().filter(|(_, t)| t.is_some()).count();
    if given != 0 && given != 3 {
        return Err(invalid("If one task-type is non-null, all must be non-null."));
    }
    if req.member_epoch != JOIN_GROUP_MEMBER_EPOCH && req.topology.is_some() {
        return Err(invalid("Topology can only be provided when (re-)joining."));
    }
    Ok(())
}

/// What this broker keeps from one request is bounded (the request's bytes are bounded
/// already; these bound what the group retains across heartbeats).
fn check_bounds(req: &StreamsGroupHeartbeatRequest) -> Result<(), HeartbeatError> {
    let too_long = |s: Option<&str>| s.is_some_and(|s| s.len() > MAX_ID_BYTES);
    if too_long(Some(&req.member_id)) || too_long(req.instance_id.as_deref()) || too_long(req.rack_id.as_deref()) || too_long(req.process_id.as_deref()) {
        return Err(invalid("An id is longer than this broker accepts."));
    }
    if let Some(t) = &req.topology {
        if t.subtopologies.len() > MAX_SUBTOPOLOGIES {
            return Err(invalid("The topology has more subtopologies than this broker accepts."));
        }
        let wide = |s: &kafka_protocol::messages::streams_group_heartbeat_request::Subtopology| {
            s.subtopology_id.len() > MAX_ID_BYTES
                || s.source_topics.len()
                    + s.repartition_sink_topics.len()
                    + s.repartition_source_topics.len()
                    + s.state_changelog_topics.len()
                    + s.copartition_groups.len()
                    > MAX_TOPICS_PER_SUBTOPOLOGY
        };
        if t.subtopologies.iter().any(wide) {
            return Err(invalid("A subtopology names more topics than this broker accepts."));
        }
    }
    let count = |t: &Option<Vec<TaskIds>>| t.iter().flatten().map(|x| x.partitions.len()).sum::<usize>();
    let offsets = |t: &Option<Vec<TaskOffset>>| t.as_ref().map_or(0, Vec::len);
    if count(&req.active_tasks) + count(&req.standby_tasks) + count(&req.warmup_tasks) > MAX_TASKS
        || offsets(&req.task_offsets) + offsets(&req.task_end_offsets) > MAX_TASKS
    {
        return Err(invalid("The heartbeat reports more tasks than this broker accepts."));
    }
    if req.client_tags.as_ref().is_some_and(|t| t.len() > MAX_CLIENT_TAGS || t.iter().any(|kv| kv.key.len() + kv.value.len() > MAX_ID_BYTES)) {
        return Err(invalid("The heartbeat carries more client tags than this broker accepts."));
    }
    Ok(())
}

fn topic_info(t: &WireTopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.0.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t.topic_configs.iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect(),
    }
}

/// The topology as the group stores it (the StreamsGroupTopology record, converted one to one).
pub fn topology(t: &Topology) -> StreamsTopology {
    StreamsTopology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.to_string(),
                source_topics: s.source_topics.iter().map(|t| t.0.to_string()).collect(),
                source_topic_regex: s.source_topic_regex.iter().map(|r| r.to_string()).collect(),
                state_changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
                repartition_sink_topics: s.repartition_sink_topics.iter().map(|t| t.0.to_string()).collect(),
                repartition_source_topics: s.repartition_source_topics.iter().map(topic_info).collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|g| CopartitionGroup {
                        source_topics: g.source_topics.clone(),
                        source_topic_regex: g.source_topic_regex.clone(),
                        repartition_source_topics: g.repartition_source_topics.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn task_set(tasks: &[TaskIds]) -> TaskSet {
    let mut out = TaskSet::new();
    for t in tasks.iter().filter(|t| !t.partitions.is_empty()) {
        out.entry(t.subtopology_id.to_string()).or_default().extend(t.partitions.iter().copied());
    }
    out
}

/// The tasks the member reports owning: None unless all three lists are given.
pub fn owned_tasks(req: &StreamsGroupHeartbeatRequest) -> Option<TasksTuple> {
    match (&req.active_tasks, &req.standby_tasks, &req.warmup_tasks) {
        (Some(a), Some(s), Some(w)) => Some(TasksTuple { active: task_set(a), standby: task_set(s), warmup: task_set(w) }),
        _ => None,
    }
}

/// Task offsets by (subtopology, partition); a duplicate entry is INVALID_REQUEST with
/// Kafka's words (MemberTaskOffsets).
pub fn task_offsets(offsets: &[TaskOffset]) -> Result<BTreeMap<(String, i32), i64>, HeartbeatError> {
    let mut out = BTreeMap::new();
    for o in offsets {
        if out.insert((o.subtopology_id.to_string(), o.partition), o.offset).is_some() {
            return Err(invalid(format!("Task offsets contain a duplicate entry for subtopology {} and partition {}.", o.subtopology_id, o.partition)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::streams_group_heartbeat_request::Subtopology as WireSubtopology;
    use kafka_protocol::messages::{GroupId, TopicName};

    use crate::protocol::strings::str_bytes;

    fn join() -> StreamsGroupHeartbeatRequest {
        let sub = WireSubtopology::default()
            .with_subtopology_id(str_bytes("0"))
            .with_source_topics(vec![TopicName(str_bytes("in"))])
            .with_state_changelog_topics(vec![WireTopicInfo::default().with_name(TopicName(str_bytes("app-store-changelog")))]);
        StreamsGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("app")))
            .with_member_id(str_bytes("m1"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(300_000)
            .with_topology(Some(Topology::default().with_subtopologies(vec![sub])))
            .with_active_tasks(Some(vec![]))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![]))
            .with_process_id(Some(str_bytes("p1")))
    }

    fn err(req: &StreamsGroupHeartbeatRequest) -> (i16, String) {
        let (code, msg) = validate(req).unwrap_err();
        (code.code(), msg)
    }

    #[test]
    fn kafkas_checks_in_kafkas_order_and_words() {
        assert!(validate(&join()).is_ok());
        let invalid = ErrorCode::INVALID_REQUEST.code();
        assert_eq!(err(&join().with_member_id(str_bytes(" "))), (invalid, "MemberId can't be empty.".into()));
        assert_eq!(err(&join().with_group_id(GroupId(str_bytes("")))), (invalid, "GroupId can't be empty.".into()));
        assert_eq!(err(&join().with_instance_id(Some(str_bytes("")))), (invalid, "InstanceId can't be empty.".into()));
        assert_eq!(err(&join().with_rebalance_timeout_ms(-1)), (invalid, "RebalanceTimeoutMs must be provided in first request.".into()));
        assert_eq!(err(&join().with_active_tasks(None)), (invalid, "ActiveTasks must be empty when (re-)joining.".into()));
        let one = vec![TaskIds::default().with_subtopology_id(str_bytes("0")).with_partitions(vec![0])];
        assert_eq!(err(&join().with_standby_tasks(Some(one.clone()))), (invalid, "StandbyTasks must be empty when (re-)joining.".into()));
        assert_eq!(err(&join().with_topology(None)), (invalid, "Topology must be non-null when (re-)joining.".into()));
        let mut t = join().topology.unwrap();
        t.subtopologies[0].state_changelog_topics[0].partitions = 3;
        assert_eq!(
            err(&join().with_topology(Some(t))),
            (
                ErrorCode::STREAMS_INVALID_TOPOLOGY.code(),
                "Changelog topic app-store-changelog must have an undefined partition count, but it is set to 3.".into()
            )
        );
        let mut t = join().topology.unwrap();
        t.subtopologies[0].source_topic_regex = vec![str_bytes("in.*")];
        assert_eq!(err(&join().with_topology(Some(t))), (invalid, "Regular expressions for source topics are not supported yet.".into()));
        let beat = join().with_member_epoch(5).with_topology(None);
        assert!(validate(&beat).is_ok());
        assert_eq!(err(&beat.clone().with_active_tasks(None)), (invalid, "If one task-type is non-null, all must be non-null.".into()));
        assert_eq!(err(&join().with_member_epoch(5)), (invalid, "Topology can only be provided when (re-)joining.".into()));
        assert_eq!(err(&beat.clone().with_member_epoch(-2)), (invalid, "InstanceId can't be null.".into()));
        assert_eq!(err(&beat.clone().with_member_epoch(-3)), (invalid, "MemberEpoch is -3, but must be greater than or equal to -2.".into()));
        assert!(validate(&beat.with_member_epoch(-1)).is_ok());
    }

    #[test]
    fn topics_kafka_refuses() {
        let mut t = join().topology.unwrap();
        assert!(check_topology_topics(&t).is_ok());
        t.subtopologies[0].repartition_sink_topics = vec![TopicName(str_bytes("__consumer_offsets")), TopicName(str_bytes("__share_group_state"))];
        assert_eq!(
            check_topology_topics(&t).unwrap_err(),
            (
                ErrorCode::STREAMS_INVALID_TOPOLOGY,
                "Use of Kafka internal topics __consumer_offsets,__share_group_state in a Kafka Streams topology is prohibited.".into()
            )
        );
        t.subtopologies[0].repartition_sink_topics = vec![TopicName(str_bytes("a b")), TopicName(str_bytes(".."))];
        assert_eq!(check_topology_topics(&t).unwrap_err(), (ErrorCode::STREAMS_INVALID_TOPOLOGY, "Topic names a b,.. are not valid topic names.".into()));
    }

    #[test]
    fn conversions() {
        let req = join().with_member_epoch(3).with_topology(None).with_active_tasks(Some(vec![
            TaskIds::default().with_subtopology_id(str_bytes("1")).with_partitions(vec![2, 0]),
            TaskIds::default().with_subtopology_id(str_bytes("0")).with_partitions(vec![]),
        ]));
        let owned = owned_tasks(&req).unwrap();
        assert_eq!(owned.active, crate::group::streams::tasks::task_set([("1", &[0, 2][..])]));
        assert!(owned_tasks(&req.with_warmup_tasks(None)).is_none());
        let t = topology(join().topology.as_ref().unwrap());
        assert_eq!(t.subtopologies[0].state_changelog_topics[0].name, "app-store-changelog");
        let o = |s: &str, p: i32| TaskOffset::default().with_subtopology_id(str_bytes(s)).with_partition(p).with_offset(7);
        assert_eq!(task_offsets(&[o("0", 1), o("1", 1)]).unwrap().len(), 2);
        assert_eq!(task_offsets(&[o("0", 1), o("0", 1)]).unwrap_err().1, "Task offsets contain a duplicate entry for subtopology 0 and partition 1.");
    }
}
