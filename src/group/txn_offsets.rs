//! Offsets committed inside transactions (KIP-447): TxnOffsetCommit writes them to the
//! group's `__consumer_offsets` partition as a transactional batch of the producer, where
//! they stay pending (`Group::pending_txn_offsets`) until the transaction's marker reaches
//! that partition: a commit makes them the group's committed offsets, an abort drops
//! them. Replay does the same from the log (`coordinator.rs`). OffsetFetch with
//! require_stable asks `has_pending_offsets` and answers UNSTABLE_OFFSET_COMMIT meanwhile.
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::context::CoordinatorContext;
use super::coordinator::Coordinator;
use super::coordinator_records::{build_batch_for, OffsetValue, OffsetsRecord};
use super::offsets::{committed_ids, validate_commit};
use super::state::{CommittedOffset, Group};
use crate::partition::Partition;
use crate::protocol::ErrorCode;
use crate::runtime::now_ms;

/// The (topic name, partition) pairs a TxnOffsetCommit commits.
fn committed(req: &TxnOffsetCommitRequest) -> impl Iterator<Item = (&str, i32)> {
    req.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.as_str(), p.partition_index)))
}

impl Coordinator {
    pub(super) async fn txn_commit(
        &self,
        ctx: &Rc<CoordinatorContext>,
        p: &Rc<Partition>,
        req: TxnOffsetCommitRequest,
        version: i16,
    ) -> TxnOffsetCommitResponse {
        let group_id = req.group_id.0.to_string();
        let producer_id = req.producer_id.0;
        let image = ctx.image_with_topics(req.topics.iter().map(|t| t.name.0.as_str())).await;
        // v3+ (KIP-447) names the member: a zombie from an older generation is refused.
        let group_error = if group_id.is_empty() {
            Some(ErrorCode::INVALID_GROUP_ID)
        } else {
            let mut groups = self.groups.borrow_mut();
            let full = groups.len() >= ctx.config.max_groups_per_shard;
            let epoch = req.generation_id_or_member_epoch;
            match groups.get(&group_id) {
                None if full => Some(ErrorCode::COORDINATOR_NOT_AVAILABLE),
                // A "simple" group is created by a commit without a generation (Kafka 4.4:
                // GROUP_ID_NOT_FOUND from v6 (KIP-1319) for one with, ILLEGAL_GENERATION before).
                None if version >= 3 && epoch >= 0 => Some(if version >= 6 { ErrorCode::GROUP_ID_NOT_FOUND } else { ErrorCode::ILLEGAL_GENERATION }),
                None => {
                    groups.insert(group_id.clone(), Group::new(group_id.clone(), p.index));
                    None
                }
                // Before v3, or without a member: no generation to check.
                Some(_) if version < 3 || (epoch < 0 && req.member_id.is_empty()) => None,
                Some(g) => match (g.consumer.as_deref(), g.streams.as_deref()) {
                    (Some(c), _) => c.validate_offset_commit(&req.member_id, epoch, 9, committed_ids(&image, committed(&req))).err(),
                    (None, Some(s)) => s.validate_offset_commit(&req.member_id, epoch, 9, committed(&req)).err(),
                    (None, None) => validate_commit(g, &req.member_id, req.group_instance_id.as_deref(), epoch).err(),
                }
                // Kafka 4.4 answers STALE_MEMBER_EPOCH from v6 (KIP-1319), ILLEGAL_GENERATION before.
                .map(|e| if e == ErrorCode::STALE_MEMBER_EPOCH && version < 6 { ErrorCode::ILLEGAL_GENERATION } else { e }),
            }
        };
        let now = now_ms();
        let mut codes: Vec<Vec<ErrorCode>> = Vec::with_capacity(req.topics.len());
        let mut records = Vec::new();
        let mut keys = Vec::new();
        for t in &req.topics {
            let name = t.name.0.as_str();
            let known = image.topic(name);
            let tc = t
                .partitions
                .iter()
                .map(|part| {
                    if let Some(e) = group_error {
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
                            expire_timestamp_ms: None,
                        };
                        keys.push((name.to_string(), part.partition_index, value.clone()));
                        records.push(OffsetsRecord::Offset {
                            group: group_id.clone(),
                            topic: name.to_string(),
                            partition: part.partition_index,
                            value: Some(value),
                        });
                        ErrorCode::NONE
                    }
                })
                .collect();
            codes.push(tc);
        }
        let mut write_error = None;
        if !records.is_empty() {
            let written = match build_batch_for(&records, now, Some((producer_id, req.producer_epoch))) {
                Some(batch) => p.append_from_coordinator(batch).await.map_err(|e| {
                    tracing::warn!(partition = p.index, error = %e, "transactional offset commit not stored");
                    match ErrorCode::from(&e) {
                        ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => ErrorCode::NOT_COORDINATOR,
                        ErrorCode::INVALID_PRODUCER_EPOCH => ErrorCode::PRODUCER_FENCED,
                        ErrorCode::MESSAGE_TOO_LARGE => ErrorCode::INVALID_COMMIT_OFFSET_SIZE,
                        _ => ErrorCode::COORDINATOR_NOT_AVAILABLE,
                    }
                }),
                None => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
            };
            match written {
                Ok(out) => {
                    // As a plain commit (offsets.rs): a group this commit created may have
                    // been forgotten as disposable while the append ran; the records are in
                    // the log, so the group is what a replay would make.
                    let mut groups = self.groups.borrow_mut();
                    let g = groups.entry(group_id.clone()).or_insert_with(|| Group::new(group_id.clone(), p.index));
                    let pending = g.pending_txn_offsets.entry(producer_id).or_default();
                    for (i, (topic, partition, v)) in keys.into_iter().enumerate() {
                        pending.insert((topic, partition), CommittedOffset::new(v, out.base_offset + i as i64));
                    }
                    if let Some(m) = g.members.get_mut(req.member_id.as_str()) {
                        m.last_heartbeat = Instant::now();
                    }
                }
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
                        TxnOffsetCommitResponsePartition::default().with_partition_index(part.partition_index).with_error_code(c.code())
                    })
                    .collect();
                TxnOffsetCommitResponseTopic::default().with_name(t.name).with_partitions(partitions)
            })
            .collect();
        TxnOffsetCommitResponse::default().with_topics(topics)
    }

    /// The marker of `producer_id`'s transaction reached offsets partition `partition`:
    /// its pending offsets there are committed or dropped.
    pub(super) fn complete_txn(&self, partition: i32, producer_id: i64, commit: bool) {
        let mut groups = self.groups.borrow_mut();
        for g in groups.values_mut().filter(|g| g.partition == partition) {
            let Some(pending) = g.pending_txn_offsets.remove(&producer_id) else { continue };
            if !commit {
                continue;
            }
            for ((topic, tp), committed) in pending {
                let slot = g.offsets.entry(topic).or_default();
                if slot.get(&tp).is_none_or(|old| old.record_offset < committed.record_offset) {
                    slot.insert(tp, committed);
                }
            }
        }
    }

    /// Whether group `group_id` has offsets pending in an open transaction for any of
    /// `topics` (None: any partition).
    pub(super) fn has_pending_offsets(&self, group_id: &str, topics: Option<&[(String, Vec<i32>)]>) -> bool {
        let groups = self.groups.borrow();
        let Some(g) = groups.get(group_id) else { return false };
        g.pending_txn_offsets.values().flat_map(|m| m.keys()).any(|(t, p)| match topics {
            None => true,
            Some(ts) => ts.iter().any(|(name, ps)| name == t && ps.contains(p)),
        })
    }
}
