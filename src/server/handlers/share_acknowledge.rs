//! ShareAcknowledge 1-2 (KIP-932): acknowledgements without a fetch; the member's share
//! session moves by one epoch (it cannot open one), -1 closes it and releases what the
//! member still holds. UNSUPPORTED_VERSION while share.version is below 1.
use std::rc::Rc;

use kafka_protocol::messages::share_acknowledge_response::{LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use uuid::Uuid;

use super::share_common::{acknowledge_error, admit, batches, release_work, run, session_error, PartitionWork};
use super::str_bytes;
use crate::group::share::share_partitions::SharePartitionOp;
use crate::group::share::share_session::ShareRequestKind;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

fn top_error(code: ErrorCode, message: Option<String>) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default().with_error_code(code.code()).with_error_message(message.as_deref().map(str_bytes))
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ShareAcknowledgeRequest) -> Response {
    let (group_id, member_id) = match admit(ctx, &meta, req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((code, message)) => return meta.respond(&top_error(code, message)),
    };
    let access = ctx.access(&meta);
    let named: Vec<(Uuid, i32)> = req.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index))).collect();
    let (step, closed) = match ctx.share_sessions.step(&group_id, &member_id, req.share_session_epoch, ShareRequestKind::Acknowledge, &named, &[], meta.peer) {
        Ok(s) => s,
        Err(e) => return meta.respond(&top_error(session_error(&e), Some(e.to_string()))),
    };
    let image = ctx.image();
    let topic_allowed = |id: &Uuid| image.topic_by_id(id.as_bytes()).is_none_or(|t| access.allows_topic(Operation::Read, &t.name));
    let (limits, reset, dead_letter) = super::share_common::group_settings(ctx, &group_id);
    let mut parts: Vec<(Uuid, i32, PartitionData)> = Vec::new();
    let mut work: Vec<PartitionWork> = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let pd = PartitionData::default().with_partition_index(p.partition_index);
            match batches(p.acknowledgement_batches.iter().map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))) {
                Err(e) => parts.push((
                    t.topic_id,
                    p.partition_index,
                    pd.with_error_code(acknowledge_error(&e).code()).with_error_message(Some(str_bytes(&e.to_string()))),
                )),
                Ok(_) if !topic_allowed(&t.topic_id) => {
                    parts.push((t.topic_id, p.partition_index, pd.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code())))
                }
                Ok(acknowledgements) => work.push(PartitionWork {
                    topic_id: t.topic_id,
                    partition: p.partition_index,
                    op: SharePartitionOp {
                        group_id: group_id.clone(),
                        member_id: member_id.clone(),
                        acknowledgements,
                        renew_allowed: req.is_renew_ack,
                        fetch: None,
                        release: step.closing,
                        reset,
                        limits,
                        dead_letter: dead_letter.clone(),
                    },
                }),
            }
        }
    }
    if step.closing {
        // The session's other partitions: release what the member holds there too.
        for &(topic_id, partition) in closed.iter().filter(|k| !named.contains(k)) {
            work.push(release_work(ctx, &group_id, &member_id, topic_id, partition));
        }
    }
    for (topic_id, partition, r) in run(ctx, work).await {
        if !named.contains(&(topic_id, partition)) {
            continue;
        }
        let mut pd = PartitionData::default().with_partition_index(partition);
        match r {
            Err(code) => pd.error_code = code.code(),
            Ok(reply) => {
                if let Some(e) = &reply.acknowledge_error {
                    pd.error_code = acknowledge_error(e).code();
                    pd.error_message = Some(str_bytes(&e.to_string()));
                }
            }
        }
        parts.push((topic_id, partition, pd));
    }
    let mut responses: Vec<ShareAcknowledgeTopicResponse> = Vec::new();
    for (t, p, pd) in parts {
        let leader = image.topic_by_id(t.as_bytes()).and_then(|m| m.partition(p)).map(|m| (m.leader, m.leader_epoch)).unwrap_or((-1, -1));
        let pd = pd.with_current_leader(LeaderIdAndEpoch::default().with_leader_id(leader.0).with_leader_epoch(leader.1));
        match responses.iter_mut().find(|r| r.topic_id == t) {
            Some(r) => r.partitions.push(pd),
            None => responses.push(ShareAcknowledgeTopicResponse::default().with_topic_id(t).with_partitions(vec![pd])),
        }
    }
    let resp = ShareAcknowledgeResponse::default()
        .with_error_message(None)
        .with_acquisition_lock_timeout_ms(i32::try_from(limits.lock_duration_ms).unwrap_or(i32::MAX))
        .with_responses(responses);
    meta.respond(&resp)
}
