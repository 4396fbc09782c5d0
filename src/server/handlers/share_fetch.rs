//! ShareFetch 1-2 (KIP-932): the member's share session moves by one epoch
//! (`server/share_sessions.rs`), each partition named applies its acknowledgements, then
//! every partition of the session acquires records for the member on the shard that
//! leads it (`group/share/share_partitions.rs`); the answer carries the batches holding
//! them and the acquired ranges. With nothing acquired the request waits until
//! `max_wait_ms`: in turn on each idle partition's high watermark (a move wakes the share
//! fetch that has waited longest there, see `partition::read::Watchers`), and looking
//! again every `POLL_MS` meanwhile (records released or whose locks expired).
//! UNSUPPORTED_VERSION while share.version is below 1.
//!
//! A partition's acquired batches go out as the one slice they were read into when they
//! are adjacent in one read buffer (a read from disk), else joined into one buffer (batch
//! cache entries are separate; the codec's record field is one `Bytes`); the zero-copy
//! fetch writer (sendfile) is not used here yet.
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::share_fetch_response::{AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};
use uuid::Uuid;

use super::share_common::{acknowledge_error, admit, batches, run, session_error, PartitionWork};
use super::str_bytes;
use crate::cluster::router::{OpBatch, WatchPoint};
use crate::group::share::share_partitions::{FetchLimits, SharePartitionOp};
use crate::group::share::share_session::ShareRequestKind;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// How often a waiting ShareFetch looks again for records to acquire when no high
/// watermark moved (released records, expired locks).
const POLL_MS: u64 = 50;
/// Longest wait honoured.
const MAX_WAIT_MS: i32 = 30_000;

fn top_error(code: ErrorCode, message: Option<String>) -> ShareFetchResponse {
    ShareFetchResponse::default().with_error_code(code.code()).with_error_message(message.as_deref().map(str_bytes))
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ShareFetchRequest) -> Response {
    let (group_id, member_id) = match admit(ctx, &meta, req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((code, message)) => return meta.respond(&top_error(code, message)),
    };
    let access = ctx.access(&meta);
    let named: Vec<(Uuid, i32)> = req.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index))).collect();
    let forgotten: Vec<(Uuid, i32)> = req.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().map(move |&p| (t.topic_id, p))).collect();
    let (step, closed) = match ctx.share_sessions.step(&group_id, &member_id, req.share_session_epoch, ShareRequestKind::Fetch, &named, &forgotten, meta.peer) {
        Ok(s) => s,
        Err(e) => return meta.respond(&top_error(session_error(&e), Some(e.to_string()))),
    };
    let image = ctx.image();
    let topic_allowed = |id: &Uuid| image.topic_by_id(id.as_bytes()).is_none_or(|t| access.allows_topic(Operation::Read, &t.name));
    // The group's share.* configs: where it starts, its locks and delivery limit.
    let (share_limits, reset, dead_letter) = super::share_common::group_settings(ctx, &group_id);
    let limits = FetchLimits {
        max_records: i64::from(req.max_records.max(1)),
        max_bytes: i64::from(req.max_bytes.max(1)),
        read_committed: crate::cluster::config_defs::share_read_committed(&image, &group_id),
    };
    let renew = req.is_renew_ack;
    // First round: acknowledgements of the partitions named, and a fetch of every
    // partition of the session (closing: release instead).
    let mut acks: std::collections::HashMap<(Uuid, i32), Vec<_>> = std::collections::HashMap::new();
    let mut ack_refusals: std::collections::HashMap<(Uuid, i32), ErrorCode> = std::collections::HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            match batches(p.acknowledgement_batches.iter().map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))) {
                Ok(b) if !b.is_empty() => {
                    acks.insert((t.topic_id, p.partition_index), b);
                }
                Ok(_) => {}
                Err(e) => {
                    ack_refusals.insert((t.topic_id, p.partition_index), acknowledge_error(&e));
                }
            }
        }
    }
    let mut targets: Vec<(Uuid, i32)> = if step.closing { closed.clone() } else { step.fetch.clone() };
    for k in acks.keys() {
        if !targets.contains(k) {
            targets.push(*k);
        }
    }
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS) as u64);
    let mut parts: Vec<(Uuid, i32, PartitionData)> = Vec::new();
    let mut first_round = true;
    // The wait in turn, kept across polls: a poll that finds nothing keeps its place in
    // the partitions' queues (re-registering would send it to the back every POLL_MS).
    let mut in_turn: Option<LocalBoxFuture<'_, ()>> = None;
    loop {
        let work: Vec<PartitionWork> = targets
            .iter()
            .filter(|(t, _)| topic_allowed(t))
            .map(|&(topic_id, partition)| PartitionWork {
                topic_id,
                partition,
                op: SharePartitionOp {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    acknowledgements: if first_round { acks.remove(&(topic_id, partition)).unwrap_or_default() } else { Vec::new() },
                    renew_allowed: renew,
                    fetch: (!step.closing && step.fetch.contains(&(topic_id, partition))).then_some(limits),
                    release: step.closing,
                    reset,
                    limits: share_limits,
                    dead_letter: dead_letter.clone(),
                },
            })
            .collect();
        let results = run(ctx, work).await;
        let mut acquired_any = false;
        // (topic id, partition, high watermark) of the partitions that acquired nothing.
        let mut idle: Vec<(Uuid, i32, i64)> = Vec::new();
        for (topic_id, partition, r) in results {
            let at = parts.iter().position(|(t, p, _)| *t == topic_id && *p == partition).unwrap_or_else(|| {
                parts.push((topic_id, partition, PartitionData::default().with_partition_index(partition)));
                parts.len() - 1
            });
            let pd = &mut parts[at].2;
            match r {
                Err(code) => pd.error_code = code.code(),
                Ok(reply) => {
                    if let Some(e) = &reply.acknowledge_error {
                        pd.acknowledge_error_code = acknowledge_error(e).code();
                        pd.acknowledge_error_message = Some(str_bytes(&e.to_string()));
                    }
                    if let (true, Some(hw)) = (reply.acquired.is_empty(), reply.high_watermark) {
                        idle.push((topic_id, partition, hw));
                    }
                    if !reply.acquired.is_empty() {
                        acquired_any = true;
                        // One slice goes out as it is; several are joined (the codec's
                        // records field is one `Bytes`).
                        pd.records = Some(match reply.records.as_slice() {
                            [one] => one.clone(),
                            many => {
                                let mut buf = BytesMut::with_capacity(many.iter().map(|b| b.len()).sum());
                                for b in many {
                                    buf.extend_from_slice(b);
                                }
                                buf.freeze()
                            }
                        });
                        let acquired: i64 = reply.acquired.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
                        crate::metrics::with(|m| m.share_fetch.records_acquired += acquired.max(0) as u64);
                        pd.acquired_records = reply
                            .acquired
                            .iter()
                            .map(|a| {
                                AcquiredRecords::default()
                                    .with_first_offset(a.first_offset)
                                    .with_last_offset(a.last_offset)
                                    .with_delivery_count(a.delivery_count as i16)
                            })
                            .collect();
                    }
                }
            }
        }
        first_round = false;
        let now = Instant::now();
        if acquired_any || step.closing || step.fetch.is_empty() || now >= deadline {
            break;
        }
        let watch = in_turn.get_or_insert_with(|| {
            let mut watches = OpBatch::with_capacity(idle.len());
            for (topic_id, partition, hw) in &idle {
                if let Some((name, shard)) = image.topic_by_id(topic_id.as_bytes()).and_then(|t| Some((t.name.as_str(), t.partition(*partition)?.shard))) {
                    watches.push(shard, name, *partition, WatchPoint::HighWatermarkInTurn(*hw));
                }
            }
            // No partition to watch: only the poll wakes it.
            if watches.is_empty() {
                futures::future::pending().boxed_local()
            } else {
                ctx.router.watch_any(watches).boxed_local()
            }
        });
        let poll = glommio::timer::sleep((deadline - now).min(Duration::from_millis(POLL_MS)));
        let woken = futures::select! {
            _ = watch.fuse() => true,
            _ = poll.fuse() => false,
        };
        crate::metrics::with(|m| if woken { m.share_fetch.woken_in_turn += 1 } else { m.share_fetch.polled += 1 });
        if woken {
            in_turn = None;
        }
    }
    for (k, code) in ack_refusals {
        if let Some((_, _, pd)) = parts.iter_mut().find(|(t, p, _)| (*t, *p) == k) {
            pd.acknowledge_error_code = code.code();
        } else {
            parts.push((k.0, k.1, PartitionData::default().with_partition_index(k.1).with_acknowledge_error_code(code.code())));
        }
    }
    for (t, p, pd) in parts.iter_mut() {
        if !topic_allowed(t) {
            pd.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
        }
        let leader = image.topic_by_id(t.as_bytes()).and_then(|m| m.partition(*p)).map(|m| (m.leader, m.leader_epoch)).unwrap_or((-1, -1));
        pd.current_leader = LeaderIdAndEpoch::default().with_leader_id(leader.0).with_leader_epoch(leader.1);
        if pd.records.is_none() {
            pd.records = Some(Bytes::new());
        }
    }
    let mut responses: Vec<ShareFetchableTopicResponse> = Vec::new();
    for (t, _, pd) in parts {
        match responses.iter_mut().find(|r| r.topic_id == t) {
            Some(r) => r.partitions.push(pd),
            None => responses.push(ShareFetchableTopicResponse::default().with_topic_id(t).with_partitions(vec![pd])),
        }
    }
    let resp = ShareFetchResponse::default()
        .with_error_message(None)
        .with_acquisition_lock_timeout_ms(i32::try_from(share_limits.lock_duration_ms).unwrap_or(i32::MAX))
        .with_responses(responses);
    meta.respond(&resp)
}
