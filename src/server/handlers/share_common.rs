//! What ShareFetch and ShareAcknowledge share: the share.version gate, session errors as
//! Kafka codes, acknowledgement batches decoded, and one router batch running each
//! partition's part on the shard that leads it (`group/share/share_partitions.rs`).
use std::rc::Rc;

use uuid::Uuid;

use crate::cluster::config_defs::{self, ShareAutoOffsetReset};
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::group::share::dead_letter::DeadLetterQueue;
use crate::group::share::share_partition::{AcknowledgeError, AcknowledgeType, AcknowledgementBatch, ShareLimits};
use crate::group::share::share_partitions::{SharePartitionError, SharePartitionOp, SharePartitionReply};
use crate::group::share::share_session::ShareSessionError;
use crate::protocol::ErrorCode;
use crate::server::shard::{ShardContext, ShardOp, ShardResult};

/// Acknowledgement batches one partition may carry.
const MAX_ACK_BATCHES: usize = 10_000;

/// The checks both requests start with, as Kafka makes them: share groups on
/// (share.version >= 1), a group id and member id, READ on the group. Ok: the two ids.
pub fn admit(
    ctx: &ShardContext,
    meta: &crate::server::dispatch::RequestMeta,
    group_id: Option<&kafka_protocol::messages::GroupId>,
    member_id: Option<&kafka_protocol::protocol::StrBytes>,
) -> Result<(String, String), (ErrorCode, Option<String>)> {
    if !ctx.image().features.share_groups_enabled() {
        return Err((ErrorCode::UNSUPPORTED_VERSION, None));
    }
    let group_id = group_id.map(|g| g.0.to_string()).unwrap_or_default();
    let member_id = member_id.map(|m| m.to_string()).unwrap_or_default();
    if group_id.is_empty() || member_id.is_empty() {
        return Err((ErrorCode::INVALID_REQUEST, Some("GroupId and MemberId must be set.".into())));
    }
    if !ctx.access(meta).allows_group(crate::security::acl::Operation::Read, &group_id) {
        return Err((ErrorCode::GROUP_AUTHORIZATION_FAILED, None));
    }
    Ok((group_id, member_id))
}

pub fn session_error(e: &ShareSessionError) -> ErrorCode {
    use kafka_protocol::ResponseError as R;
    match e {
        ShareSessionError::NotFound => ErrorCode::from(R::ShareSessionNotFound),
        ShareSessionError::InvalidEpoch => ErrorCode::from(R::InvalidShareSessionEpoch),
        ShareSessionError::LimitReached => ErrorCode::from(R::ShareSessionLimitReached),
        ShareSessionError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
    }
}

pub fn acknowledge_error(e: &AcknowledgeError) -> ErrorCode {
    match e {
        AcknowledgeError::InvalidBatch(_) => ErrorCode::INVALID_REQUEST,
        AcknowledgeError::InvalidRecordState(_) => ErrorCode::from(kafka_protocol::ResponseError::InvalidRecordState),
        AcknowledgeError::NotPersisted(code, _) => *code,
    }
}

/// Decodes wire batches; an unknown acknowledge type or too many batches is INVALID_REQUEST.
pub fn batches(wire: impl Iterator<Item = (i64, i64, Vec<i8>)>) -> Result<Vec<AcknowledgementBatch>, AcknowledgeError> {
    let mut out = Vec::new();
    for (first_offset, last_offset, types) in wire {
        if out.len() >= MAX_ACK_BATCHES {
            return Err(AcknowledgeError::InvalidBatch(format!("More than {MAX_ACK_BATCHES} acknowledgement batches for one partition")));
        }
        let types = types
            .iter()
            .map(|&t| AcknowledgeType::from_wire(t).ok_or_else(|| AcknowledgeError::InvalidBatch(format!("Unknown acknowledge type {t}"))))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(AcknowledgementBatch { first_offset, last_offset, types });
    }
    Ok(out)
}

/// One partition's part of a request, addressed by topic id.
pub struct PartitionWork {
    pub topic_id: Uuid,
    pub partition: i32,
    pub op: SharePartitionOp,
}

/// Runs each part on the shard that leads its partition; per part its reply or its error
/// code (unknown topic id, not the leader, ...).
pub async fn run(ctx: &Rc<ShardContext>, work: Vec<PartitionWork>) -> Vec<(Uuid, i32, Result<SharePartitionReply, ErrorCode>)> {
    let image = ctx.image();
    let mut out: Vec<(Uuid, i32, Result<SharePartitionReply, ErrorCode>)> = Vec::with_capacity(work.len());
    let mut routed: Vec<usize> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut ops: Vec<(u16, usize, i32, SharePartitionOp)> = Vec::new();
    for w in work {
        let Some(t) = image.topic_by_id(w.topic_id.as_bytes()) else {
            out.push((w.topic_id, w.partition, Err(ErrorCode::from(kafka_protocol::ResponseError::UnknownTopicId))));
            continue;
        };
        let Some(p) = t.partition(w.partition) else {
            out.push((w.topic_id, w.partition, Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)));
            continue;
        };
        let name_at = names.iter().position(|n| *n == t.name).unwrap_or_else(|| {
            names.push(t.name.clone());
            names.len() - 1
        });
        routed.push(out.len());
        out.push((w.topic_id, w.partition, Err(ErrorCode::UNKNOWN_SERVER_ERROR)));
        ops.push((p.shard, name_at, w.partition, w.op));
    }
    let mut batch = OpBatch::with_capacity(ops.len());
    for (shard, name_at, partition, op) in ops {
        batch.push(shard, &names[name_at], partition, PartitionOp::Extension(ShardOp::Share(op)));
    }
    let results = ctx.router.run(batch).await;
    for (at, r) in routed.into_iter().zip(results) {
        out[at].2 = match r {
            Ok(OpOutput::Extension(ShardResult::Share(Ok(reply)))) => Ok(reply),
            Ok(OpOutput::Extension(ShardResult::Share(Err(SharePartitionError::Partition(e))))) => Err(ErrorCode::from(&e)),
            Ok(OpOutput::Extension(ShardResult::Share(Err(SharePartitionError::State(code))))) => Err(code),
            Ok(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
            Err(e) => Err(ErrorCode::from(&e)),
        };
    }
    out
}

/// A connection closed: the share sessions it opened end, and their members' records on
/// this broker are released at once (delivered again to others) rather than when their
/// locks expire, as Kafka does on a client disconnect.
pub async fn release_sessions_of(ctx: &Rc<ShardContext>, peer: std::net::SocketAddr) {
    for (group_id, member_id, partitions) in ctx.share_sessions.close_connection(peer) {
        let work = partitions.into_iter().map(|(topic_id, partition)| release_work(ctx, &group_id, &member_id, topic_id, partition)).collect();
        for (topic_id, partition, r) in run(ctx, work).await {
            if let Err(code) = r {
                tracing::debug!(group = %group_id, member = %member_id, %topic_id, partition, %code, "records not released on disconnect (their locks expire)");
            }
        }
    }
}

/// A partition's part that only releases what the member holds there.
pub fn release_work(ctx: &ShardContext, group_id: &str, member_id: &str, topic_id: Uuid, partition: i32) -> PartitionWork {
    let (limits, reset, dead_letter) = group_settings(ctx, group_id);
    PartitionWork {
        topic_id,
        partition,
        op: SharePartitionOp {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
            acknowledgements: Vec::new(),
            renew_allowed: false,
            fetch: None,
            release: true,
            reset,
            limits,
            dead_letter,
        },
    }
}

/// A share group's share-partition settings: its share.* group configs (clamped to this
/// broker's group.share.* bounds), else the broker's group.share.* values; its dead-letter
/// queue while share.version is 2 or more (KIP-1191).
pub fn group_settings(ctx: &ShardContext, group_id: &str) -> (ShareLimits, ShareAutoOffsetReset, Option<DeadLetterQueue>) {
    let image = ctx.image();
    let c = &ctx.config;
    let base = ctx.share_partitions.broker_limits();
    let set = |key: &str, min: i32, max: i32| config_defs::group_int(&image, group_id, key).map(|v| v.clamp(min, max.max(min)));
    let limits = ShareLimits {
        max_in_flight_records: set(
            config_defs::SHARE_PARTITION_MAX_RECORD_LOCKS,
            c.group_share_min_partition_max_record_locks,
            c.group_share_max_partition_max_record_locks,
        )
        .map_or(base.max_in_flight_records, i64::from),
        delivery_count_limit: set(config_defs::SHARE_DELIVERY_COUNT_LIMIT, c.group_share_min_delivery_count_limit, c.group_share_max_delivery_count_limit)
            .and_then(|v| u16::try_from(v).ok())
            .unwrap_or(base.delivery_count_limit),
        lock_duration_ms: set(config_defs::SHARE_RECORD_LOCK_DURATION_MS, c.group_share_min_record_lock_duration_ms, c.group_share_max_record_lock_duration_ms)
            .map_or(base.lock_duration_ms, i64::from),
        dead_letter_queue: false,
    };
    let dead_letter = if image.features.share_dead_letter_queue_enabled() {
        config_defs::share_dead_letter_queue(&image, group_id).map(|(topic, copy_record)| DeadLetterQueue { topic, copy_record })
    } else {
        None
    };
    let limits = ShareLimits { dead_letter_queue: dead_letter.is_some(), ..limits };
    (limits, config_defs::share_auto_offset_reset(&image, group_id), dead_letter)
}
