//! Committed offsets (OffsetCommit / OffsetFetch / OffsetDelete) and the group-level
//! admin operations (DescribeGroups, ListGroups, DeleteGroups). A commit is validated
//! against the group as Kafka 4.1 does, appended to the group's `__consumer_offsets`
//! partition (acks=all), and only then made visible.
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse};

use super::context::CoordinatorContext;
use super::coordinator::{append, Coordinator};
use super::coordinator_records::{OffsetValue, OffsetsRecord};
use super::membership::validate_member;
use super::ops::PartitionOffset;
use super::state::{CommittedOffset, Group, GroupState};
use crate::cluster::image::MetadataImage;
use crate::partition::Partition;
use crate::protocol::strings::{str_bytes, topic_name};
use crate::protocol::ErrorCode;
use crate::runtime::now_ms;

/// Kafka's ClassicGroup.validateOffsetCommit.
pub(super) fn validate_commit(g: &Group, member_id: &str, instance_id: Option<&str>, generation: i32) -> Result<(), ErrorCode> {
    if g.state == GroupState::Dead {
        return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    }
    if generation < 0 && g.state == GroupState::Empty {
        // Admin clients and consumers without group management (generation -1) may
        // commit while the group has no members.
        return Ok(());
    }
    if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
        validate_member(g, member_id, instance_id)?;
        if generation != g.generation {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
    } else if g.state != GroupState::Empty {
        return Err(ErrorCode::UNKNOWN_MEMBER_ID);
    }
    if g.state == GroupState::CompletingRebalance {
        return Err(ErrorCode::REBALANCE_IN_PROGRESS);
    }
    Ok(())
}

/// The (topic, partition) pairs an OffsetCommit names (a streams group checks each).
fn committed_partitions(topics: &[kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic]) -> impl Iterator<Item = (&str, i32)> {
    topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.as_str(), p.partition_index)))
}

/// The (topic id, partition) of each committed (name, partition); None for a topic the
/// image does not have.
pub(super) fn committed_ids<'a>(
    image: &'a MetadataImage,
    partitions: impl Iterator<Item = (&'a str, i32)> + 'a,
) -> impl Iterator<Item = Option<(uuid::Uuid, i32)>> + 'a {
    partitions.map(|(name, p)| image.topic(name).map(|t| (uuid::Uuid::from_bytes(t.topic_id), p)))
}

impl Coordinator {
    pub(super) async fn commit(&self, ctx: &Rc<CoordinatorContext>, p: &Rc<Partition>, req: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let instance_id = req.group_instance_id.as_ref().map(|s| s.to_string());
        let generation = req.generation_id_or_member_epoch;
        // Before the group is looked at (no group state is held across this wait).
        let image = ctx.image_with_topics(req.topics.iter().map(|t| t.name.0.as_str())).await;
        let group_error: Option<ErrorCode> = if group_id.is_empty() {
            Some(ErrorCode::INVALID_GROUP_ID)
        } else {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(&group_id) {
                None if generation < 0 => {
                    // A "simple" group (offsets only) is created by its first commit.
                    if groups.len() >= ctx.config.max_groups_per_shard {
                        Some(ErrorCode::COORDINATOR_NOT_AVAILABLE)
                    } else {
                        groups.insert(group_id.clone(), Group::new(group_id.clone(), p.index));
                        None
                    }
                }
                // Kafka 4.1: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
                None if version >= 9 => Some(ErrorCode::GROUP_ID_NOT_FOUND),
                None => Some(ErrorCode::ILLEGAL_GENERATION),
                // A KIP-848 group validates the member epoch instead (consumer/group.rs).
                Some(g) => match match (g.consumer.as_deref(), g.streams.as_deref()) {
                    (Some(c), _) => c.validate_offset_commit(&member_id, generation, version, committed_ids(&image, committed_partitions(&req.topics))),
                    (None, Some(s)) => s.validate_offset_commit(&member_id, generation, version, committed_partitions(&req.topics)),
                    (None, None) => validate_commit(g, &member_id, instance_id.as_deref(), generation),
                } {
                    Ok(()) => {
                        if let Some(m) = g.members.get_mut(&member_id) {
                            m.last_heartbeat = Instant::now();
                        }
                        None
                    }
                    Err(e) => Some(e),
                },
            }
        };
        let now = now_ms();
        // v2-v4 carry a retention time (-1 = the broker's offsets.retention.minutes); Kafka
        // still honours it, storing an explicit expire timestamp.
        let expire_timestamp_ms = (2..=4).contains(&version).then_some(req.retention_time_ms).filter(|r| *r >= 0).map(|r| now.saturating_add(r));
        // (topic index, partition index, error) for every partition, and the records.
        let mut codes: Vec<Vec<ErrorCode>> = Vec::with_capacity(req.topics.len());
        let mut records = Vec::new();
        let mut keys = Vec::new();
        for t in &req.topics {
            let name = t.name.0.as_str();
            let known = image.topic(name);
            let mut tc = Vec::with_capacity(t.partitions.len());
            for part in &t.partitions {
                let code = if let Some(e) = group_error {
                    e
                } else if !known.is_some_and(|k| k.partitions.iter().any(|x| x.partition == part.partition_index)) {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else if part.committed_metadata.as_ref().is_some_and(|m| m.len() > ctx.config.offset_metadata_max_bytes) {
                    ErrorCode::OFFSET_METADATA_TOO_LARGE
                } else {
                    let value = OffsetValue {
                        offset: part.committed_offset,
                        leader_epoch: part.committed_leader_epoch,
                        metadata: part.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                        commit_timestamp_ms: now,
                        expire_timestamp_ms,
                    };
                    keys.push((name.to_string(), part.partition_index, value.clone()));
                    records.push(OffsetsRecord::Offset {
                        group: group_id.clone(),
                        topic: name.to_string(),
                        partition: part.partition_index,
                        value: Some(value),
                    });
                    ErrorCode::NONE
                };
                tc.push(code);
            }
            codes.push(tc);
        }
        let mut write_error = None;
        if !records.is_empty() {
            match append(p, &records).await {
                Ok(base) => {
                    // The group may be gone from the map: a simple group created by this
                    // commit has no offsets yet while the append runs, and the coordinator's
                    // tick forgets such groups as disposable. The records are in the log, so
                    // the group is what replaying them would make (replay creates a group
                    // on its first offset record too); a DeleteGroups meanwhile tombstoned
                    // only the offsets it saw, exactly as a replay would leave them.
                    let mut groups = self.groups.borrow_mut();
                    let g = groups.entry(group_id.clone()).or_insert_with(|| Group::new(group_id.clone(), p.index));
                    for (i, (topic, partition, v)) in keys.into_iter().enumerate() {
                        let record_offset = base + i as i64;
                        let slot = g.offsets.entry(topic).or_default();
                        if slot.get(&partition).is_none_or(|old| old.record_offset < record_offset) {
                            slot.insert(partition, CommittedOffset::new(v, record_offset));
                        }
                    }
                }
                Err(ErrorCode::MESSAGE_TOO_LARGE) => write_error = Some(ErrorCode::INVALID_COMMIT_OFFSET_SIZE),
                Err(e) => write_error = Some(e),
            }
        }
        let topics = req
            .topics
            .into_iter()
            .zip(codes)
            .map(|(t, tc)| {
                let partitions = t
                    .partitions
                    .iter()
                    .zip(tc)
                    .map(|(part, c)| {
                        let c = if c == ErrorCode::NONE { write_error.unwrap_or(c) } else { c };
                        OffsetCommitResponsePartition::default().with_partition_index(part.partition_index).with_error_code(c.code())
                    })
                    .collect();
                OffsetCommitResponseTopic::default().with_name(t.name).with_partitions(partitions)
            })
            .collect();
        OffsetCommitResponse::default().with_topics(topics)
    }

    /// Committed offsets of a group: for `topics` (None = every committed partition).
    pub(super) fn fetch_offsets(&self, group_id: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> (ErrorCode, Vec<(String, Vec<PartitionOffset>)>) {
        let groups = self.groups.borrow();
        let g = groups.get(group_id);
        let lookup = |topic: &str, partition: i32| -> PartitionOffset {
            match g.and_then(|g| g.offsets.get(topic)).and_then(|t| t.get(&partition)) {
                Some(c) => {
                    PartitionOffset { partition, offset: c.offset, leader_epoch: c.leader_epoch, metadata: Some(c.metadata.clone()), error: ErrorCode::NONE }
                }
                None => PartitionOffset { partition, offset: -1, leader_epoch: -1, metadata: Some(String::new()), error: ErrorCode::NONE },
            }
        };
        let out = match topics {
            Some(list) => list
                .into_iter()
                .map(|(t, parts)| {
                    let offsets = parts.into_iter().map(|p| lookup(&t, p)).collect();
                    (t, offsets)
                })
                .collect(),
            None => {
                let mut all: Vec<(String, Vec<PartitionOffset>)> = g
                    .map(|g| {
                        g.offsets
                            .iter()
                            .map(|(t, parts)| {
                                let mut ps: Vec<i32> = parts.keys().copied().collect();
                                ps.sort_unstable();
                                (t.clone(), ps.into_iter().map(|p| lookup(t, p)).collect())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                all.sort_by(|a, b| a.0.cmp(&b.0));
                all
            }
        };
        (ErrorCode::NONE, out)
    }

    pub(super) fn describe(&self, group_id: &str, version: i16) -> DescribedGroup {
        let groups = self.groups.borrow();
        let base = DescribedGroup::default().with_group_id(GroupId(str_bytes(group_id)));
        if groups.get(group_id).is_some_and(|g| g.consumer.is_some() || g.share.is_some() || g.streams.is_some()) {
            return super::consumer::describe::classic_describe(group_id, version);
        }
        let Some(g) = groups.get(group_id).filter(|g| g.state != GroupState::Dead) else {
            let d = base.with_group_state(str_bytes("Dead"));
            // Kafka 4.1 answers GROUP_ID_NOT_FOUND from v6, an empty Dead group before.
            return if version >= 6 {
                d.with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code()).with_error_message(Some(str_bytes(&format!("Group {group_id} not found."))))
            } else {
                d
            };
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        let stable = g.state == GroupState::Stable;
        let members = g
            .members
            .values()
            .map(|m| {
                let d = DescribedGroupMember::default()
                    .with_member_id(str_bytes(&m.id))
                    .with_group_instance_id(if version >= 4 { m.instance_id.as_deref().map(str_bytes) } else { None })
                    .with_client_id(str_bytes(&m.client_id))
                    .with_client_host(str_bytes(&m.client_host));
                if stable {
                    d.with_member_metadata(m.metadata_for(&protocol)).with_member_assignment(m.assignment.clone())
                } else {
                    d
                }
            })
            .collect();
        base.with_group_state(str_bytes(g.state.name()))
            .with_protocol_type(str_bytes(g.protocol_type.as_deref().unwrap_or("")))
            .with_protocol_data(str_bytes(&protocol))
            .with_members(members)
    }

    /// Groups on this shard matching the (case-insensitive) state and type filters.
    pub(super) fn list(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        let groups = self.groups.borrow();
        let mut out: Vec<ListedGroup> = groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| (g, super::consumer::describe::listed_type_and_state(g)))
            .filter(|(_, (_, state))| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state)))
            .filter(|(_, (kind, _))| types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(kind)))
            .map(|(g, (kind, state))| {
                ListedGroup::default()
                    .with_group_id(GroupId(str_bytes(&g.id)))
                    .with_protocol_type(str_bytes(g.protocol_type.as_deref().unwrap_or("")))
                    .with_group_state(str_bytes(state))
                    .with_group_type(str_bytes(kind))
            })
            .collect();
        out.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
        out
    }

    pub(super) async fn delete_group(&self, ctx: &Rc<super::context::CoordinatorContext>, p: &Rc<Partition>, group_id: &str) -> ErrorCode {
        // A share group's state in the share coordinator goes first, as Kafka's.
        let empty_share = self.groups.borrow().get(group_id).and_then(|g| g.share.as_deref()).is_some_and(|s| s.is_empty());
        if empty_share {
            if let Err(e) = self.delete_share_group_state(ctx, p, group_id).await {
                return e;
            }
        }
        let records = {
            let groups = self.groups.borrow();
            let Some(g) = groups.get(group_id).filter(|g| g.state != GroupState::Dead) else { return ErrorCode::GROUP_ID_NOT_FOUND };
            if g.state != GroupState::Empty
                || g.consumer.as_ref().is_some_and(|c| !c.is_empty())
                || g.share.as_ref().is_some_and(|s| !s.is_empty())
                || g.streams.as_ref().is_some_and(|s| !s.is_empty())
            {
                return ErrorCode::NON_EMPTY_GROUP;
            }
            let mut recs: Vec<OffsetsRecord> = g
                .offsets
                .iter()
                .flat_map(|(t, parts)| {
                    parts.keys().map(move |&partition| OffsetsRecord::Offset { group: group_id.to_string(), topic: t.clone(), partition, value: None })
                })
                .collect();
            recs.push(OffsetsRecord::Group { group: group_id.to_string(), value: None });
            if g.consumer.is_some() {
                recs.extend(super::consumer::heartbeat::group_tombstones(group_id));
            }
            if g.share.is_some() {
                recs.extend(super::share::coordinator::group_tombstones(group_id));
            }
            if g.streams.is_some() {
                recs.extend(super::streams::coordinator::group_tombstones(group_id));
            }
            recs
        };
        if let Err(e) = append(p, &records).await {
            return e;
        }
        let mut groups = self.groups.borrow_mut();
        // Only if nobody joined meanwhile (a join makes it non-Empty).
        if groups
            .get(group_id)
            .is_some_and(|g| g.state == GroupState::Empty && g.consumer.as_ref().is_none_or(|c| c.is_empty()) && g.share.as_ref().is_none_or(|s| s.is_empty()))
        {
            groups.remove(group_id);
        }
        tracing::info!(group = group_id, "group deleted");
        ErrorCode::NONE
    }

    pub(super) async fn delete_offsets(&self, p: &Rc<Partition>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
        let group_id = req.group_id.0.to_string();
        let err = |e: ErrorCode| OffsetDeleteResponse::default().with_error_code(e.code());
        let (results, records) = {
            let groups = self.groups.borrow();
            let Some(g) = groups.get(&group_id).filter(|g| g.state != GroupState::Dead) else { return err(ErrorCode::GROUP_ID_NOT_FOUND) };
            let subscribed = if let Some(c) = g.consumer.as_ref().filter(|c| !c.is_empty()) {
                Some(c.subscribed_names.iter().cloned().collect())
            } else if g.state == GroupState::Empty {
                Some(Default::default())
            } else if g.protocol_type.as_deref() == Some("consumer") {
                g.subscribed_topics()
            } else {
                return err(ErrorCode::NON_EMPTY_GROUP);
            };
            let mut records = Vec::new();
            let results: Vec<(String, Vec<(i32, ErrorCode)>)> = req
                .topics
                .iter()
                .map(|t| {
                    let name = t.name.0.to_string();
                    // Unparsable subscriptions count as subscribed to everything.
                    let is_subscribed = subscribed.as_ref().is_none_or(|s| s.contains(&name));
                    let parts = t
                        .partitions
                        .iter()
                        .map(|part| {
                            if is_subscribed {
                                return (part.partition_index, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC);
                            }
                            if g.offsets.get(&name).is_some_and(|m| m.contains_key(&part.partition_index)) {
                                records.push(OffsetsRecord::Offset {
                                    group: group_id.clone(),
                                    topic: name.clone(),
                                    partition: part.partition_index,
                                    value: None,
                                });
                            }
                            (part.partition_index, ErrorCode::NONE)
                        })
                        .collect();
                    (name, parts)
                })
                .collect();
            (results, records)
        };
        if !records.is_empty() {
            if let Err(e) = append(p, &records).await {
                return err(e);
            }
            let mut groups = self.groups.borrow_mut();
            if let Some(g) = groups.get_mut(&group_id) {
                for r in &records {
                    if let OffsetsRecord::Offset { topic, partition, .. } = r {
                        if let Some(m) = g.offsets.get_mut(topic) {
                            m.remove(partition);
                            if m.is_empty() {
                                g.offsets.remove(topic);
                            }
                        }
                    }
                }
            }
        }
        let topics = results
            .into_iter()
            .map(|(name, parts)| {
                OffsetDeleteResponseTopic::default().with_name(topic_name(&name)).with_partitions(
                    parts.into_iter().map(|(i, e)| OffsetDeleteResponsePartition::default().with_partition_index(i).with_error_code(e.code())).collect(),
                )
            })
            .collect();
        OffsetDeleteResponse::default().with_topics(topics)
    }
}
