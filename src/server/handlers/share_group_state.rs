//! The share coordinator's state APIs (KIP-932), as Kafka 4.4 serves them to brokers:
//! InitializeShareGroupState 0, ReadShareGroupState 0, WriteShareGroupState 0-1,
//! DeleteShareGroupState 0, ReadShareGroupStateSummary 0-1. Each share-partition's part
//! runs on the shard leading the `__share_group_state` partition its key hashes to
//! (`group/share/state_coordinator.rs` decides and appends with acks=all before it
//! answers). Needs CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED on every partition);
//! a part this broker does not coordinate gets NOT_COORDINATOR, and every part gets
//! COORDINATOR_NOT_AVAILABLE while `__share_group_state` does not exist (the lookup that
//! creates it is FindCoordinator's). An empty group id or topic list gets an empty answer,
//! as Kafka's.
use std::rc::Rc;

use kafka_protocol::messages::{
    delete_share_group_state_response as delete, initialize_share_group_state_response as initialize, read_share_group_state_response as read,
    read_share_group_state_summary_response as summary, write_share_group_state_response as write, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use uuid::Uuid;

use super::share_state_common::run_here;
use super::str_bytes;
use crate::group::share::state_coordinator::{ShareStateAnswer, ShareStateFailure, ShareStateOpKind, ShareStateResult};
use crate::group::share::state_records::{PersistedBatch, SharePartitionKey};
use crate::group::share::state_store::WriteState;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Runs one share-partition's part where its key is coordinated.
async fn run(ctx: &Rc<ShardContext>, allowed: bool, key: SharePartitionKey, kind: ShareStateOpKind) -> ShareStateResult {
    if !allowed {
        return Err(ShareStateFailure { code: ErrorCode::CLUSTER_AUTHORIZATION_FAILED, message: None });
    }
    run_here(&ctx.router, ctx.config.node_id, key, kind).await
}

fn key(group_id: &str, topic_id: Uuid, partition: i32) -> SharePartitionKey {
    SharePartitionKey { group_id: group_id.to_string(), topic_id, partition }
}

fn allowed(ctx: &Rc<ShardContext>, meta: &RequestMeta) -> bool {
    ctx.access(meta).allows_cluster(Operation::ClusterAction)
}

/// The error code and message of a part's outcome (0 and None when it succeeded).
fn outcome<T>(r: &Result<T, ShareStateFailure>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match r {
        Ok(_) => (0, None),
        Err(f) => (f.code.code(), f.message.as_deref().map(str_bytes)),
    }
}

pub async fn initialize(ctx: &Rc<ShardContext>, meta: RequestMeta, req: InitializeShareGroupStateRequest) -> Response {
    if req.group_id.is_empty() {
        return meta.respond(&InitializeShareGroupStateResponse::default());
    }
    let allowed = allowed(ctx, &meta);
    let mut results = Vec::new();
    for t in &req.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let kind = ShareStateOpKind::Initialize { state_epoch: p.state_epoch, start_offset: p.start_offset };
            let r = run(ctx, allowed, key(&req.group_id, t.topic_id, p.partition), kind).await;
            let (code, message) = outcome(&r);
            partitions.push(initialize::PartitionResult::default().with_partition(p.partition).with_error_code(code).with_error_message(message));
        }
        results.push(initialize::InitializeStateResult::default().with_topic_id(t.topic_id).with_partitions(partitions));
    }
    meta.respond(&InitializeShareGroupStateResponse::default().with_results(results))
}

pub async fn read(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ReadShareGroupStateRequest) -> Response {
    if req.group_id.is_empty() {
        return meta.respond(&ReadShareGroupStateResponse::default());
    }
    let allowed = allowed(ctx, &meta);
    let mut results = Vec::new();
    for t in &req.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let r = run(ctx, allowed, key(&req.group_id, t.topic_id, p.partition), ShareStateOpKind::Read { leader_epoch: p.leader_epoch }).await;
            let (code, message) = outcome(&r);
            let mut out = read::PartitionResult::default().with_partition(p.partition).with_error_code(code).with_error_message(message);
            if let Ok(ShareStateAnswer::Read(s)) = r {
                let batches = s
                    .batches
                    .iter()
                    .map(|b| {
                        read::StateBatch::default()
                            .with_first_offset(b.first_offset)
                            .with_last_offset(b.last_offset)
                            .with_delivery_state(b.delivery_state)
                            .with_delivery_count(b.delivery_count)
                    })
                    .collect();
                out = out.with_state_epoch(s.state_epoch).with_start_offset(s.start_offset).with_state_batches(batches);
            }
            partitions.push(out);
        }
        results.push(read::ReadStateResult::default().with_topic_id(t.topic_id).with_partitions(partitions));
    }
    meta.respond(&ReadShareGroupStateResponse::default().with_results(results))
}

pub async fn write(ctx: &Rc<ShardContext>, meta: RequestMeta, req: WriteShareGroupStateRequest) -> Response {
    if req.group_id.is_empty() {
        return meta.respond(&WriteShareGroupStateResponse::default());
    }
    let allowed = allowed(ctx, &meta);
    let mut results = Vec::new();
    for t in &req.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let batches = p
                .state_batches
                .iter()
                .map(|b| PersistedBatch {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    delivery_state: b.delivery_state,
                    delivery_count: b.delivery_count,
                })
                .collect();
            let w = WriteState {
                state_epoch: p.state_epoch,
                leader_epoch: p.leader_epoch,
                start_offset: p.start_offset,
                // v0 has no count: the crate's default is -1, Kafka's "unknown".
                delivery_complete_count: p.delivery_complete_count,
                batches,
            };
            let r = run(ctx, allowed, key(&req.group_id, t.topic_id, p.partition), ShareStateOpKind::Write(w)).await;
            let (code, message) = outcome(&r);
            partitions.push(write::PartitionResult::default().with_partition(p.partition).with_error_code(code).with_error_message(message));
        }
        results.push(write::WriteStateResult::default().with_topic_id(t.topic_id).with_partitions(partitions));
    }
    meta.respond(&WriteShareGroupStateResponse::default().with_results(results))
}

pub async fn delete(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteShareGroupStateRequest) -> Response {
    if req.group_id.is_empty() {
        return meta.respond(&DeleteShareGroupStateResponse::default());
    }
    let allowed = allowed(ctx, &meta);
    let mut results = Vec::new();
    for t in &req.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let r = run(ctx, allowed, key(&req.group_id, t.topic_id, p.partition), ShareStateOpKind::Delete).await;
            let (code, message) = outcome(&r);
            partitions.push(delete::PartitionResult::default().with_partition(p.partition).with_error_code(code).with_error_message(message));
        }
        results.push(delete::DeleteStateResult::default().with_topic_id(t.topic_id).with_partitions(partitions));
    }
    meta.respond(&DeleteShareGroupStateResponse::default().with_results(results))
}

pub async fn summary(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ReadShareGroupStateSummaryRequest) -> Response {
    if req.group_id.is_empty() {
        return meta.respond(&ReadShareGroupStateSummaryResponse::default());
    }
    let allowed = allowed(ctx, &meta);
    let mut results = Vec::new();
    for t in &req.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let r = run(ctx, allowed, key(&req.group_id, t.topic_id, p.partition), ShareStateOpKind::Summary).await;
            let (code, message) = outcome(&r);
            let mut out = summary::PartitionResult::default().with_partition(p.partition).with_error_code(code).with_error_message(message);
            if let Ok(ShareStateAnswer::Summary(s)) = r {
                out = out
                    .with_state_epoch(s.state_epoch)
                    .with_leader_epoch(s.leader_epoch)
                    .with_start_offset(s.start_offset)
                    .with_delivery_complete_count(s.delivery_complete_count);
            }
            partitions.push(out);
        }
        results.push(summary::ReadStateSummaryResult::default().with_topic_id(t.topic_id).with_partitions(partitions));
    }
    meta.respond(&ReadShareGroupStateSummaryResponse::default().with_results(results))
}
