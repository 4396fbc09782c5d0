//! Streams-group (KIP-1071) records in `__consumer_offsets`, in Kafka 4.4's layout, so a
//! restarted coordinator brings a group back with its topology, members, epochs and tasks.
//!
//! | record (Kafka's name) | key | value (flexible v0) |
//! |---|---|---|
//! | StreamsGroupMetadata | `i16 17, str group` | `i32 epoch, i64 metadata_hash, tagged {0: i32 validated_topology_epoch (-1), 1: carray<KeyValue> last_assignment_configs (null), 2: i32 stored (-1), 3: i32 failed description topology epoch (-1)}` |
//! | StreamsGroupMemberMetadata | `i16 19, str group, str member` | `cnstr instance_id, cnstr rack_id, cstr client_id, cstr client_host, i32 rebalance_timeout_ms, i32 topology_epoch, cstr process_id, Endpoint? user_endpoint, carray<KeyValue> client_tags, tagged` |
//! | StreamsGroupTargetAssignmentMetadata | `i16 20, str group` | `i32 assignment_epoch, tagged {0: i64 assignment_timestamp (0)}` |
//! | StreamsGroupTargetAssignmentMember | `i16 21, str group, str member` | `carray<TaskIds> active, standby, warmup, tagged` |
//! | StreamsGroupCurrentMemberAssignment | `i16 22, str group, str member` | `i32 member_epoch, i32 previous_member_epoch, i8 state, carray<TaskIds> active, standby, warmup, active / standby / warmup pending revocation, tagged` |
//! | StreamsGroupTopology | `i16 23, str group` | `i32 epoch, carray<Subtopology>, tagged` |
//!
//! `TaskIds` = `cstr subtopology, carray<i32> partitions, tagged {0: carray<i32> assignment_epochs}`
//! (the epochs only for the current assignment's active tasks). `KeyValue` = `cstr, cstr,
//! tagged`; `Endpoint` = `i8` -1 (null) or 1, then `cstr host, u16 port, tagged`. Keys use
//! classic strings; a null value is a tombstone. Key 18 (Kafka's removed partition metadata)
//! and 16 are read as `Ignored`, as Kafka skips record types it no longer has.
//!
//! Everything read back is bounded: every length and count is checked against the bytes
//! that remain before anything is allocated.
use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::tasks::{TaskEpochs, TaskSet, TasksTuple, TasksWithEpochs};
use super::topology::{CopartitionGroup, StreamsTopology, Subtopology, TopicInfo};
use crate::group::coordinator_records::{get_i16, get_i32, get_i64, get_str, put_str, RecordError};
use crate::group::flexible_records::{
    get_array_len, get_compact_nullable_str, get_compact_str, get_i32s, get_i8, get_tagged_fields, put_compact_nullable_str, put_compact_str, put_i32s,
    put_len, put_uvarint,
};

pub const GROUP_METADATA_KEY: i16 = 17;
pub const MEMBER_METADATA_KEY: i16 = 19;
pub const TARGET_ASSIGNMENT_METADATA_KEY: i16 = 20;
pub const TARGET_ASSIGNMENT_MEMBER_KEY: i16 = 21;
pub const CURRENT_MEMBER_ASSIGNMENT_KEY: i16 = 22;
pub const TOPOLOGY_KEY: i16 = 23;
const VALUE_VERSION: i16 = 0;

/// StreamsGroupMetadataValue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub epoch: i32,
    pub metadata_hash: i64,
    /// -1: the topology was never validated against the metadata.
    pub validated_topology_epoch: i32,
    /// `num.standby.replicas` (and rack tags) the last target assignment was computed with.
    pub last_assignment_configs: Option<Vec<(String, String)>>,
}

/// A member's `application.server` endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// StreamsGroupMemberMetadataValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Vec<(String, String)>,
}

/// StreamsGroupCurrentMemberAssignmentValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's streams MemberState value (1 stable, 2 unrevoked, 3 unreleased tasks).
    pub state: i8,
    pub assigned: TasksWithEpochs,
    pub pending_revocation: TasksWithEpochs,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamsRecord {
    /// The group epoch and what its target was computed from; None = tombstone.
    GroupMetadata {
        group: String,
        value: Option<GroupMetadataValue>,
    },
    MemberMetadata {
        group: String,
        member: String,
        value: Option<MemberMetadataValue>,
    },
    /// (assignment epoch, assignment timestamp ms); None = tombstone.
    TargetAssignmentMetadata {
        group: String,
        value: Option<(i32, i64)>,
    },
    TargetAssignmentMember {
        group: String,
        member: String,
        tasks: Option<TasksTuple>,
    },
    CurrentMemberAssignment {
        group: String,
        member: String,
        value: Option<CurrentAssignmentValue>,
    },
    Topology {
        group: String,
        topology: Option<StreamsTopology>,
    },
    /// A streams record type Kafka 4.4 no longer writes (16, 18).
    Ignored {
        key_version: i16,
    },
}

fn put_key_values(b: &mut BytesMut, kvs: &[(String, String)]) {
    put_len(b, kvs.len());
    for (k, v) in kvs {
        put_compact_str(b, k);
        put_compact_str(b, v);
        put_uvarint(b, 0);
    }
}

fn get_key_values(b: &mut Bytes) -> Result<Vec<(String, String)>, RecordError> {
    // Two empty strings and no tagged fields.
    let n = get_array_len(b, 3)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = get_compact_str(b)?;
        let v = get_compact_str(b)?;
        get_tagged_fields(b, None)?;
        out.push((k, v));
    }
    Ok(out)
}

fn put_strings(b: &mut BytesMut, items: &[String]) {
    put_len(b, items.len());
    for s in items {
        put_compact_str(b, s);
    }
}

fn get_strings(b: &mut Bytes) -> Result<Vec<String>, RecordError> {
    let n = get_array_len(b, 1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(get_compact_str(b)?);
    }
    Ok(out)
}

/// `carray<TaskIds>` of a task set (no epochs).
fn put_tasks(b: &mut BytesMut, set: &TaskSet) {
    let subtopologies: Vec<_> = set.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_len(b, subtopologies.len());
    for (s, ps) in subtopologies {
        put_compact_str(b, s);
        put_i32s(b, ps.iter().copied());
        put_uvarint(b, 0);
    }
}

/// `carray<TaskIds>` of active tasks with their assignment epochs (tag 0).
fn put_tasks_with_epochs(b: &mut BytesMut, set: &TaskEpochs) {
    let subtopologies: Vec<_> = set.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_len(b, subtopologies.len());
    for (s, ps) in subtopologies {
        put_compact_str(b, s);
        put_i32s(b, ps.keys().copied());
        let mut epochs = BytesMut::new();
        put_i32s(&mut epochs, ps.values().copied());
        put_uvarint(b, 1);
        put_uvarint(b, 0);
        put_uvarint(b, epochs.len() as u32);
        b.put_slice(&epochs);
    }
}

/// Reads `carray<TaskIds>`: partitions with their assignment epochs when the record has
/// them, else `default_epoch` (Kafka: the member epoch).
fn get_tasks_with_epochs(b: &mut Bytes, default_epoch: i32) -> Result<TaskEpochs, RecordError> {
    // Empty subtopology id, empty partitions, no tagged fields.
    let n = get_array_len(b, 3)?;
    let mut out = TaskEpochs::new();
    for _ in 0..n {
        let s = get_compact_str(b)?;
        let partitions = get_i32s(b)?;
        let epochs = match get_tagged_fields(b, Some(0))? {
            Some(mut e) => Some(get_i32s(&mut e)?),
            None => None,
        };
        if epochs.as_ref().is_some_and(|e| e.len() != partitions.len()) {
            return Err(RecordError::Invalid("assignment epochs do not match the partitions".into()));
        }
        let slot: &mut BTreeMap<i32, i32> = out.entry(s).or_default();
        for (i, p) in partitions.into_iter().enumerate() {
            slot.insert(p, epochs.as_ref().map_or(default_epoch, |e| e[i]));
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    Ok(out)
}

fn get_tasks(b: &mut Bytes) -> Result<TaskSet, RecordError> {
    Ok(get_tasks_with_epochs(b, 0)?.into_iter().map(|(s, ps)| (s, ps.into_keys().collect::<BTreeSet<i32>>())).collect())
}

fn put_topic_infos(b: &mut BytesMut, topics: &[TopicInfo]) {
    put_len(b, topics.len());
    for t in topics {
        put_compact_str(b, &t.name);
        b.put_i32(t.partitions);
        b.put_i16(t.replication_factor);
        put_key_values(b, &t.configs);
        put_uvarint(b, 0);
    }
}

fn get_topic_infos(b: &mut Bytes) -> Result<Vec<TopicInfo>, RecordError> {
    // Empty name, i32, i16, empty configs, no tagged fields.
    let n = get_array_len(b, 9)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = get_compact_str(b)?;
        let partitions = get_i32(b)?;
        let replication_factor = get_i16(b)?;
        let configs = get_key_values(b)?;
        get_tagged_fields(b, None)?;
        out.push(TopicInfo { name, partitions, replication_factor, configs });
    }
    Ok(out)
}

fn put_i16s(b: &mut BytesMut, items: &[i16]) {
    put_len(b, items.len());
    for i in items {
        b.put_i16(*i);
    }
}

fn get_i16s(b: &mut Bytes) -> Result<Vec<i16>, RecordError> {
    let n = get_array_len(b, 2)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(get_i16(b)?);
    }
    Ok(out)
}

fn put_topology(b: &mut BytesMut, t: &StreamsTopology) {
    b.put_i32(t.epoch);
    put_len(b, t.subtopologies.len());
    for s in &t.subtopologies {
        put_compact_str(b, &s.id);
        put_strings(b, &s.source_topics);
        put_strings(b, &s.source_topic_regex);
        put_topic_infos(b, &s.state_changelog_topics);
        put_strings(b, &s.repartition_sink_topics);
        put_topic_infos(b, &s.repartition_source_topics);
        put_len(b, s.copartition_groups.len());
        for g in &s.copartition_groups {
            put_i16s(b, &g.source_topics);
            put_i16s(b, &g.source_topic_regex);
            put_i16s(b, &g.repartition_source_topics);
            put_uvarint(b, 0);
        }
        put_uvarint(b, 0);
    }
    put_uvarint(b, 0);
}

fn get_topology(b: &mut Bytes) -> Result<StreamsTopology, RecordError> {
    let epoch = get_i32(b)?;
    // Id and seven empty arrays, no tagged fields.
    let n = get_array_len(b, 8)?;
    let mut subtopologies = Vec::with_capacity(n);
    for _ in 0..n {
        let id = get_compact_str(b)?;
        let source_topics = get_strings(b)?;
        let source_topic_regex = get_strings(b)?;
        let state_changelog_topics = get_topic_infos(b)?;
        let repartition_sink_topics = get_strings(b)?;
        let repartition_source_topics = get_topic_infos(b)?;
        let groups = get_array_len(b, 4)?;
        let mut copartition_groups = Vec::with_capacity(groups);
        for _ in 0..groups {
            let source_topics = get_i16s(b)?;
            let source_topic_regex = get_i16s(b)?;
            let repartition_source_topics = get_i16s(b)?;
            get_tagged_fields(b, None)?;
            copartition_groups.push(CopartitionGroup { source_topics, source_topic_regex, repartition_source_topics });
        }
        get_tagged_fields(b, None)?;
        subtopologies.push(Subtopology {
            id,
            source_topics,
            source_topic_regex,
            state_changelog_topics,
            repartition_sink_topics,
            repartition_source_topics,
            copartition_groups,
        });
    }
    get_tagged_fields(b, None)?;
    Ok(StreamsTopology { epoch, subtopologies })
}

/// Appends one tagged field (tag, its bytes) to `fields`.
fn tagged(fields: &mut Vec<(u32, BytesMut)>, tag: u32, write: impl FnOnce(&mut BytesMut)) {
    let mut b = BytesMut::new();
    write(&mut b);
    fields.push((tag, b));
}

fn put_tagged(b: &mut BytesMut, fields: &[(u32, BytesMut)]) {
    put_uvarint(b, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(b, *tag);
        put_uvarint(b, data.len() as u32);
        b.put_slice(data);
    }
}

/// Reads every tagged field of a value (tag → bytes), bounded by what remains.
fn get_all_tagged(b: &mut Bytes) -> Result<BTreeMap<u32, Bytes>, RecordError> {
    let count = crate::group::flexible_records::get_uvarint(b)?;
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let tag = crate::group::flexible_records::get_uvarint(b)?;
        let size = crate::group::flexible_records::get_uvarint(b)? as usize;
        if b.remaining() < size {
            return Err(RecordError::Truncated);
        }
        out.insert(tag, b.split_to(size));
    }
    Ok(out)
}

impl StreamsRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        let (version, group, member) = match self {
            StreamsRecord::GroupMetadata { group, .. } => (GROUP_METADATA_KEY, group, None),
            StreamsRecord::MemberMetadata { group, member, .. } => (MEMBER_METADATA_KEY, group, Some(member)),
            StreamsRecord::TargetAssignmentMetadata { group, .. } => (TARGET_ASSIGNMENT_METADATA_KEY, group, None),
            StreamsRecord::TargetAssignmentMember { group, member, .. } => (TARGET_ASSIGNMENT_MEMBER_KEY, group, Some(member)),
            StreamsRecord::CurrentMemberAssignment { group, member, .. } => (CURRENT_MEMBER_ASSIGNMENT_KEY, group, Some(member)),
            StreamsRecord::Topology { group, .. } => (TOPOLOGY_KEY, group, None),
            StreamsRecord::Ignored { key_version } => {
                b.put_i16(*key_version);
                return b.freeze();
            }
        };
        b.put_i16(version);
        put_str(&mut b, group);
        if let Some(m) = member {
            put_str(&mut b, m);
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut b = BytesMut::new();
        b.put_i16(VALUE_VERSION);
        match self {
            StreamsRecord::GroupMetadata { value: Some(v), .. } => {
                b.put_i32(v.epoch);
                b.put_i64(v.metadata_hash);
                // Tagged fields are written only when not their defaults, as Kafka.
                let mut fields = Vec::new();
                if v.validated_topology_epoch != -1 {
                    tagged(&mut fields, 0, |t| t.put_i32(v.validated_topology_epoch));
                }
                if let Some(configs) = &v.last_assignment_configs {
                    tagged(&mut fields, 1, |t| put_key_values(t, configs));
                }
                put_tagged(&mut b, &fields);
            }
            StreamsRecord::MemberMetadata { value: Some(v), .. } => {
                put_compact_nullable_str(&mut b, v.instance_id.as_deref());
                put_compact_nullable_str(&mut b, v.rack_id.as_deref());
                put_compact_str(&mut b, &v.client_id);
                put_compact_str(&mut b, &v.client_host);
                b.put_i32(v.rebalance_timeout_ms);
                b.put_i32(v.topology_epoch);
                put_compact_str(&mut b, &v.process_id);
                match &v.user_endpoint {
                    None => b.put_i8(-1),
                    Some(e) => {
                        b.put_i8(1);
                        put_compact_str(&mut b, &e.host);
                        b.put_u16(e.port);
                        put_uvarint(&mut b, 0);
                    }
                }
                put_key_values(&mut b, &v.client_tags);
                put_uvarint(&mut b, 0);
            }
            StreamsRecord::TargetAssignmentMetadata { value: Some((epoch, timestamp)), .. } => {
                b.put_i32(*epoch);
                let mut fields = Vec::new();
                if *timestamp != 0 {
                    tagged(&mut fields, 0, |t| t.put_i64(*timestamp));
                }
                put_tagged(&mut b, &fields);
            }
            StreamsRecord::TargetAssignmentMember { tasks: Some(t), .. } => {
                put_tasks(&mut b, &t.active);
                put_tasks(&mut b, &t.standby);
                put_tasks(&mut b, &t.warmup);
                put_uvarint(&mut b, 0);
            }
            StreamsRecord::CurrentMemberAssignment { value: Some(v), .. } => {
                b.put_i32(v.member_epoch);
                b.put_i32(v.previous_member_epoch);
                b.put_i8(v.state);
                put_tasks_with_epochs(&mut b, &v.assigned.active);
                put_tasks(&mut b, &v.assigned.standby);
                put_tasks(&mut b, &v.assigned.warmup);
                put_tasks_with_epochs(&mut b, &v.pending_revocation.active);
                put_tasks(&mut b, &v.pending_revocation.standby);
                put_tasks(&mut b, &v.pending_revocation.warmup);
                put_uvarint(&mut b, 0);
            }
            StreamsRecord::Topology { topology: Some(t), .. } => put_topology(&mut b, t),
            _ => return None,
        }
        Some(b.freeze())
    }

    /// Parses a record whose key version (already read from `key`) is 16-23.
    pub fn parse(key_version: i16, mut key: Bytes, value: Option<Bytes>) -> Result<StreamsRecord, RecordError> {
        if !matches!(key_version, GROUP_METADATA_KEY | MEMBER_METADATA_KEY..=TOPOLOGY_KEY) {
            return Ok(StreamsRecord::Ignored { key_version });
        }
        let group = get_str(&mut key)?;
        let member = match key_version {
            MEMBER_METADATA_KEY | TARGET_ASSIGNMENT_MEMBER_KEY | CURRENT_MEMBER_ASSIGNMENT_KEY => Some(get_str(&mut key)?),
            _ => None,
        };
        let mut value = value;
        if let Some(v) = value.as_mut() {
            match get_i16(v)? {
                VALUE_VERSION => {}
                version => return Err(RecordError::UnknownVersion(version)),
            }
        }
        let member = || member.clone().unwrap_or_default();
        Ok(match key_version {
            GROUP_METADATA_KEY => StreamsRecord::GroupMetadata {
                group,
                value: match value {
                    None => None,
                    Some(mut v) => {
                        let epoch = get_i32(&mut v)?;
                        let metadata_hash = get_i64(&mut v)?;
                        let mut tags = get_all_tagged(&mut v)?;
                        let validated_topology_epoch = match tags.remove(&0) {
                            Some(mut t) => get_i32(&mut t)?,
                            None => -1,
                        };
                        let last_assignment_configs = match tags.remove(&1) {
                            // A null array is a length of 0 (uvarint count + 1).
                            Some(t) if t.first() == Some(&0) => None,
                            Some(mut t) => Some(get_key_values(&mut t)?),
                            None => None,
                        };
                        Some(GroupMetadataValue { epoch, metadata_hash, validated_topology_epoch, last_assignment_configs })
                    }
                },
            },
            MEMBER_METADATA_KEY => StreamsRecord::MemberMetadata {
                group,
                member: member(),
                value: match value {
                    None => None,
                    Some(mut v) => {
                        let instance_id = get_compact_nullable_str(&mut v)?;
                        let rack_id = get_compact_nullable_str(&mut v)?;
                        let client_id = get_compact_str(&mut v)?;
                        let client_host = get_compact_str(&mut v)?;
                        let rebalance_timeout_ms = get_i32(&mut v)?;
                        let topology_epoch = get_i32(&mut v)?;
                        let process_id = get_compact_str(&mut v)?;
                        let user_endpoint = match get_i8(&mut v)? {
                            -1 => None,
                            _ => {
                                let host = get_compact_str(&mut v)?;
                                let port = get_i16(&mut v)? as u16;
                                get_tagged_fields(&mut v, None)?;
                                Some(Endpoint { host, port })
                            }
                        };
                        let client_tags = get_key_values(&mut v)?;
                        Some(MemberMetadataValue {
                            instance_id,
                            rack_id,
                            client_id,
                            client_host,
                            rebalance_timeout_ms,
                            topology_epoch,
                            process_id,
                            user_endpoint,
                            client_tags,
                        })
                    }
                },
            },
            TARGET_ASSIGNMENT_METADATA_KEY => StreamsRecord::TargetAssignmentMetadata {
                group,
                value: match value {
                    None => None,
                    Some(mut v) => {
                        let epoch = get_i32(&mut v)?;
                        let timestamp = match get_all_tagged(&mut v)?.remove(&0) {
                            Some(mut t) => get_i64(&mut t)?,
                            None => 0,
                        };
                        Some((epoch, timestamp))
                    }
                },
            },
            TARGET_ASSIGNMENT_MEMBER_KEY => StreamsRecord::TargetAssignmentMember {
                group,
                member: member(),
                tasks: match value {
                    None => None,
                    Some(mut v) => Some(TasksTuple { active: get_tasks(&mut v)?, standby: get_tasks(&mut v)?, warmup: get_tasks(&mut v)? }),
                },
            },
            CURRENT_MEMBER_ASSIGNMENT_KEY => StreamsRecord::CurrentMemberAssignment {
                group,
                member: member(),
                value: match value {
                    None => None,
                    Some(mut v) => {
                        let member_epoch = get_i32(&mut v)?;
                        let previous_member_epoch = get_i32(&mut v)?;
                        let state = get_i8(&mut v)?;
                        let assigned =
                            TasksWithEpochs { active: get_tasks_with_epochs(&mut v, member_epoch)?, standby: get_tasks(&mut v)?, warmup: get_tasks(&mut v)? };
                        let pending_revocation =
                            TasksWithEpochs { active: get_tasks_with_epochs(&mut v, member_epoch)?, standby: get_tasks(&mut v)?, warmup: get_tasks(&mut v)? };
                        Some(CurrentAssignmentValue { member_epoch, previous_member_epoch, state, assigned, pending_revocation })
                    }
                },
            },
            _ => StreamsRecord::Topology {
                group,
                topology: match value {
                    None => None,
                    Some(mut v) => Some(get_topology(&mut v)?),
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::coordinator_records::OffsetsRecord;
    use crate::group::streams::tasks::task_set;

    fn epochs(pairs: &[(&str, &[(i32, i32)])]) -> TaskEpochs {
        pairs.iter().map(|(s, ps)| (s.to_string(), ps.iter().copied().collect())).collect()
    }

    fn topology() -> StreamsTopology {
        let info = |name: &str, partitions: i32, configs: &[(&str, &str)]| TopicInfo {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        StreamsTopology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["streams-plaintext-input".into()],
                    repartition_sink_topics: vec!["wc-counts-repartition".into()],
                    ..Default::default()
                },
                Subtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![info("wc-counts-repartition", 0, &[("cleanup.policy", "delete"), ("retention.ms", "-1")])],
                    state_changelog_topics: vec![info("wc-counts-changelog", 0, &[("cleanup.policy", "compact")])],
                    copartition_groups: vec![CopartitionGroup { source_topics: vec![], source_topic_regex: vec![], repartition_source_topics: vec![0] }],
                    ..Default::default()
                },
            ],
        }
    }

    fn samples() -> Vec<StreamsRecord> {
        let tasks = TasksTuple { active: task_set([("0", &[0, 2][..]), ("1", &[1][..])]), standby: task_set([("1", &[0][..])]), warmup: TaskSet::new() };
        vec![
            StreamsRecord::GroupMetadata {
                group: "app".into(),
                value: Some(GroupMetadataValue { epoch: 2, metadata_hash: -5, validated_topology_epoch: -1, last_assignment_configs: None }),
            },
            StreamsRecord::GroupMetadata {
                group: "app".into(),
                value: Some(GroupMetadataValue {
                    epoch: 3,
                    metadata_hash: 77,
                    validated_topology_epoch: 0,
                    last_assignment_configs: Some(vec![("num.standby.replicas".into(), "0".into())]),
                }),
            },
            StreamsRecord::GroupMetadata { group: "app".into(), value: None },
            StreamsRecord::MemberMetadata {
                group: "app".into(),
                member: "m1".into(),
                value: Some(MemberMetadataValue {
                    instance_id: None,
                    rack_id: Some("r1".into()),
                    client_id: "app-1-StreamThread-1".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    topology_epoch: 0,
                    process_id: "5f0c4a2e-0000-4000-8000-000000000001".into(),
                    user_endpoint: Some(Endpoint { host: "localhost".into(), port: 65_000 }),
                    client_tags: vec![("zone".into(), "a".into())],
                }),
            },
            StreamsRecord::MemberMetadata { group: "app".into(), member: "m1".into(), value: None },
            StreamsRecord::TargetAssignmentMetadata { group: "app".into(), value: Some((2, 0)) },
            StreamsRecord::TargetAssignmentMetadata { group: "app".into(), value: Some((3, 1_796_000_000_000)) },
            StreamsRecord::TargetAssignmentMetadata { group: "app".into(), value: None },
            StreamsRecord::TargetAssignmentMember { group: "app".into(), member: "m1".into(), tasks: Some(tasks.clone()) },
            StreamsRecord::TargetAssignmentMember { group: "app".into(), member: "m1".into(), tasks: None },
            StreamsRecord::CurrentMemberAssignment {
                group: "app".into(),
                member: "m1".into(),
                value: Some(CurrentAssignmentValue {
                    member_epoch: 3,
                    previous_member_epoch: 2,
                    state: 2,
                    assigned: TasksWithEpochs { active: epochs(&[("0", &[(0, 2), (2, 3)])]), standby: tasks.standby.clone(), warmup: TaskSet::new() },
                    pending_revocation: TasksWithEpochs { active: epochs(&[("1", &[(1, 2)])]), ..Default::default() },
                }),
            },
            StreamsRecord::CurrentMemberAssignment { group: "app".into(), member: "m1".into(), value: None },
            StreamsRecord::Topology { group: "app".into(), topology: Some(topology()) },
            StreamsRecord::Topology { group: "app".into(), topology: None },
        ]
    }

    #[test]
    fn round_trip_through_offsets_record() {
        for r in samples() {
            let rec = OffsetsRecord::Streams(r.clone());
            assert_eq!(OffsetsRecord::parse(Some(rec.key()), rec.value()).unwrap(), rec, "{r:?}");
        }
        // Kafka's removed record types are skipped, not errors.
        let k = Bytes::from_static(&[0, 18, 0, 3, b'a', b'p', b'p']);
        assert_eq!(OffsetsRecord::parse(Some(k), None).unwrap(), OffsetsRecord::Streams(StreamsRecord::Ignored { key_version: 18 }));
        // Without the epochs tag, active tasks take the member epoch (Kafka's default).
        let mut v = BytesMut::new();
        v.put_i16(0);
        v.put_i32(7);
        v.put_i32(6);
        v.put_i8(1);
        put_len(&mut v, 1);
        put_compact_str(&mut v, "0");
        put_i32s(&mut v, [4].into_iter());
        put_uvarint(&mut v, 0);
        for _ in 0..5 {
            put_len(&mut v, 0);
        }
        put_uvarint(&mut v, 0);
        let k = StreamsRecord::CurrentMemberAssignment { group: "g".into(), member: "m".into(), value: None }.key();
        let OffsetsRecord::Streams(StreamsRecord::CurrentMemberAssignment { value: Some(c), .. }) = OffsetsRecord::parse(Some(k), Some(v.freeze())).unwrap()
        else {
            panic!("not a current assignment")
        };
        assert_eq!(c.assigned.active, epochs(&[("0", &[(4, 7)])]));
    }

    #[test]
    fn garbage_never_panics() {
        let samples: Vec<(Bytes, Bytes)> = samples().iter().map(|r| (r.key(), r.value().unwrap_or_default())).collect();
        crate::group::flexible_records::assert_parse_never_panics(&samples, 16..=23, |kv, k, v| {
            let _ = StreamsRecord::parse(kv, k, v);
        });
        // Epochs that do not match the partitions are refused.
        let mut v = BytesMut::new();
        v.put_i16(0);
        v.put_i32(1);
        v.put_i32(0);
        v.put_i8(1);
        put_len(&mut v, 1);
        put_compact_str(&mut v, "0");
        put_i32s(&mut v, [1, 2].into_iter());
        let mut e = BytesMut::new();
        put_i32s(&mut e, [1].into_iter());
        put_tagged(&mut v, &[(0, e)]);
        let k = Bytes::from_static(&[0, 1, b'g', 0, 1, b'm']);
        assert!(StreamsRecord::parse(22, k, Some(v.freeze())).is_err());
    }
}
