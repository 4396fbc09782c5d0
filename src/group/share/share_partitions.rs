//! The share-partitions of one shard: every `(group, topic-partition)` whose partition
//! this shard leads has its `SharePartition` here, so ShareFetch and ShareAcknowledge
//! touch shard-local state only (they reach it through the router, as partition reads
//! do). A share-partition starts where `share.auto.offset.reset` says (latest: the high
//! watermark; earliest: the log start) the first time a member fetches it.
//!
//! Not durable yet: the state is in memory; a restart or a leader change starts the
//! share-partition again from `share.auto.offset.reset` (the durable state in
//! `__share_group_state` is the next step, `mod.rs`).
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;

use super::share_partition::{AcknowledgeError, AcknowledgementBatch, AcquiredRecords, MemberId, ShareLimits, SharePartition};
use crate::partition::{Partition, PartitionError, ReadLimit};
use crate::record::parse_header;

/// Share-partitions one shard keeps at most (a bound on what members can make it hold).
pub const MAX_SHARE_PARTITIONS_PER_SHARD: usize = 100_000;

/// One partition's part of a ShareFetch or ShareAcknowledge.
pub struct SharePartitionOp {
    pub group_id: String,
    pub member_id: String,
    pub acknowledgements: Vec<AcknowledgementBatch>,
    pub renew_allowed: bool,
    /// Records to acquire (None: acknowledge only).
    pub fetch: Option<FetchLimits>,
    /// The member's session closed or it left: release what it holds (after the acks).
    pub release: bool,
    pub earliest: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct FetchLimits {
    pub max_records: i64,
    pub max_bytes: i64,
}

/// What a partition answers.
#[derive(Debug, Default)]
pub struct SharePartitionReply {
    /// The acknowledgements' refusal (none of them applied).
    pub acknowledge_error: Option<AcknowledgeError>,
    /// Whole batches holding the acquired records.
    pub records: Vec<Bytes>,
    pub acquired: Vec<AcquiredRecords>,
}

#[derive(Debug, thiserror::Error)]
pub enum SharePartitionError {
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// `MAX_SHARE_PARTITIONS_PER_SHARD` reached.
    #[error("too many share-partitions on this shard")]
    Full,
}

#[derive(Default)]
pub struct SharePartitions {
    states: RefCell<HashMap<(String, [u8; 16], i32), SharePartition>>,
}

impl SharePartitions {
    pub fn new() -> Rc<SharePartitions> {
        Rc::new(SharePartitions::default())
    }

    /// Runs `op` on partition `p` (this shard leads it).
    pub async fn run(&self, p: &Rc<Partition>, op: SharePartitionOp, now_ms: i64) -> Result<SharePartitionReply, SharePartitionError> {
        let key = (op.group_id.clone(), p.topic_id, p.index);
        let member: MemberId = Rc::from(op.member_id.as_str());
        let mut reply = SharePartitionReply::default();
        let offset = {
            let mut states = self.states.borrow_mut();
            if !states.contains_key(&key) {
                if states.len() >= MAX_SHARE_PARTITIONS_PER_SHARD {
                    tracing::warn!(limit = MAX_SHARE_PARTITIONS_PER_SHARD, "share-partition limit of this shard reached");
                    return Err(SharePartitionError::Full);
                }
                let start = if op.earliest { p.log_start_offset() } else { p.high_watermark() };
                states.insert(key.clone(), SharePartition::new(start, ShareLimits::default()));
            }
            let sp = states.get_mut(&key).expect("inserted above");
            sp.expire_locks(now_ms);
            sp.move_start_to(p.log_start_offset());
            if !op.acknowledgements.is_empty() {
                reply.acknowledge_error = sp.acknowledge(&op.member_id, &op.acknowledgements, op.renew_allowed, now_ms).err();
            }
            if op.release {
                sp.release_member(&op.member_id);
            }
            let next = sp.next_fetch_offset();
            match op.fetch {
                Some(limits) if sp.can_acquire() && next < p.high_watermark() => Some((next, limits)),
                _ => None,
            }
        };
        let Some((offset, limits)) = offset else { return Ok(reply) };
        // The shard's state is not borrowed across the read (another request may run).
        let limit = ReadLimit { max_bytes: limits.max_bytes.max(1), min_one_batch: true, file_slice: false };
        let data = p.read_isolated(offset, limit, false).await?;
        let mut batches: Vec<(i64, i64, Bytes)> = Vec::new();
        for chunk in &data.records {
            let mut at = 0usize;
            while at < chunk.len() {
                let Ok(h) = parse_header(&chunk[at..]) else { break };
                let len = h.total_len();
                if len == 0 || at + len > chunk.len() {
                    break;
                }
                batches.push((h.base_offset, h.last_offset(), chunk.slice(at..at + len)));
                at += len;
            }
        }
        let bounds: Vec<(i64, i64)> = batches.iter().map(|(b, l, _)| (*b, *l)).collect();
        let mut states = self.states.borrow_mut();
        let Some(sp) = states.get_mut(&key) else { return Ok(reply) };
        reply.acquired = sp.acquire(&member, &bounds, limits.max_records, now_ms);
        // Only the batches that hold acquired records go back.
        reply.records = batches
            .into_iter()
            .filter(|(b, l, _)| reply.acquired.iter().any(|a| a.first_offset <= *l && a.last_offset >= *b))
            .map(|(_, _, bytes)| bytes)
            .collect();
        Ok(reply)
    }
}
