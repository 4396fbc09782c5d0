//! The persister (KIP-932) of the share-partition leaders and the group coordinator: each
//! state call of a share-partition (`group/share/state_persister.rs`) goes to the broker
//! leading the key's `__share_group_state` partition: this broker's shard through the
//! router, another broker as Initialize / Read / Write / Delete / ReadSummary
//! ShareGroupState over the inter-broker listener.
//! While the coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, loading, no
//! answer) it retries, as Kafka's persister does, with a shorter backoff: a member's
//! acknowledgement waits for it. Not a hot path: one call per acknowledgement request
//! and share-partition, so the codecs are kafka-protocol's.
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    delete_share_group_state_request as delete_req, initialize_share_group_state_request as init_req, read_share_group_state_request as read_req,
    read_share_group_state_summary_request as summary_req, write_share_group_state_request as write_req, ApiKey, DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, ReadShareGroupStateRequest,
    ReadShareGroupStateResponse, ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::handlers::share_state_common::{run_here, share_coordinator_of};
use super::shard::ShardRouter;
use crate::cluster::image::BrokerMeta;
use crate::group::share::state_coordinator::{ShareStateAnswer, ShareStateFailure, ShareStateOpKind, ShareStateResult};
use crate::group::share::state_persister::StatePersister;
use crate::group::share::state_records::{PersistedBatch, SharePartitionKey};
use crate::group::share::state_store::{ReadState, StateSummary};
use crate::protocol::ErrorCode;
use crate::security::peer_security::PeerSecurity;

/// Attempts per call, and the first backoff (doubled after each attempt): 0.2 + 0.4 +
/// 0.8 + 1.6 s, about a leader election's length.
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// One inter-broker call's bound (the coordinator appends with acks=all before it answers).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

pub fn share_persister(router: Rc<ShardRouter>, node_id: i32, inter_broker: Arc<PeerSecurity>) -> StatePersister {
    Box::new(move |key: SharePartitionKey, kind: ShareStateOpKind| {
        let (router, inter_broker) = (router.clone(), inter_broker.clone());
        Box::pin(async move {
            let mut backoff = FIRST_BACKOFF;
            let mut attempt = 1;
            loop {
                let r = once(&router, node_id, &inter_broker, &key, &kind).await;
                match &r {
                    Err(f) if retried(f.code) && attempt < ATTEMPTS => {
                        tracing::debug!(group = %key.group_id, partition = key.partition, code = %f.code, attempt, "share coordinator not reached; retrying");
                        glommio::timer::sleep(backoff).await;
                        backoff *= 2;
                        attempt += 1;
                    }
                    _ => return r,
                }
            }
        })
    })
}

/// Kafka's persister retries these (the coordinator is moving or loading).
fn retried(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS | ErrorCode::REQUEST_TIMED_OUT)
}

async fn once(router: &ShardRouter, node_id: i32, inter_broker: &PeerSecurity, key: &SharePartitionKey, kind: &ShareStateOpKind) -> ShareStateResult {
    let fail = |code: ErrorCode| Err(ShareStateFailure { code, message: None });
    let image = router.partitions().image();
    let Some((_, leader)) = share_coordinator_of(&image, key) else { return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
    if leader == node_id {
        return run_here(router, node_id, key.clone(), kind.clone()).await;
    }
    let Some(broker) = image.brokers.get(&leader).filter(|b| !b.fenced) else { return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
    remote(broker, inter_broker, node_id, key, kind).await.unwrap_or_else(|e| {
        tracing::debug!(broker = leader, error = %e, "share coordinator call failed");
        fail(ErrorCode::REQUEST_TIMED_OUT)
    })
}

/// One state call to the coordinator on `broker`; Err when it did not answer.
async fn remote(
    broker: &BrokerMeta,
    security: &PeerSecurity,
    node_id: i32,
    key: &SharePartitionKey,
    kind: &ShareStateOpKind,
) -> Result<ShareStateResult, String> {
    let client_id = format!("shardlog-share-persister-{node_id}");
    let group_id = StrBytes::from_string(key.group_id.clone());
    let failed = |code: i16, message: Option<StrBytes>| Err(ShareStateFailure { code: ErrorCode(code), message: message.map(|m| m.to_string()) });
    match kind {
        ShareStateOpKind::Read { leader_epoch } => {
            let p = read_req::PartitionData::default().with_partition(key.partition).with_leader_epoch(*leader_epoch);
            let t = read_req::ReadStateData::default().with_topic_id(key.topic_id).with_partitions(vec![p]);
            let req = ReadShareGroupStateRequest::default().with_group_id(group_id).with_topics(vec![t]);
            let resp: ReadShareGroupStateResponse =
                super::broker_call::call(broker, security, &client_id, ApiKey::ReadShareGroupState, 0, &req, CALL_TIMEOUT).await?;
            let p = resp.results.into_iter().flat_map(|t| t.partitions).find(|p| p.partition == key.partition).ok_or("no result for the partition")?;
            if p.error_code != 0 {
                return Ok(failed(p.error_code, p.error_message));
            }
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
            Ok(Ok(ShareStateAnswer::Read(ReadState { state_epoch: p.state_epoch, start_offset: p.start_offset, batches })))
        }
        ShareStateOpKind::Write(w) => {
            let batches = w
                .batches
                .iter()
                .map(|b| {
                    write_req::StateBatch::default()
                        .with_first_offset(b.first_offset)
                        .with_last_offset(b.last_offset)
                        .with_delivery_state(b.delivery_state)
                        .with_delivery_count(b.delivery_count)
                })
                .collect();
            let p = write_req::PartitionData::default()
                .with_partition(key.partition)
                .with_state_epoch(w.state_epoch)
                .with_leader_epoch(w.leader_epoch)
                .with_start_offset(w.start_offset)
                .with_delivery_complete_count(w.delivery_complete_count)
                .with_state_batches(batches);
            let t = write_req::WriteStateData::default().with_topic_id(key.topic_id).with_partitions(vec![p]);
            let req = WriteShareGroupStateRequest::default().with_group_id(group_id).with_topics(vec![t]);
            let resp: WriteShareGroupStateResponse =
                super::broker_call::call(broker, security, &client_id, ApiKey::WriteShareGroupState, 1, &req, CALL_TIMEOUT).await?;
            let p = resp.results.into_iter().flat_map(|t| t.partitions).find(|p| p.partition == key.partition).ok_or("no result for the partition")?;
            Ok(if p.error_code != 0 { failed(p.error_code, p.error_message) } else { Ok(ShareStateAnswer::Done) })
        }
        ShareStateOpKind::Initialize { state_epoch, start_offset } => {
            let p = init_req::PartitionData::default().with_partition(key.partition).with_state_epoch(*state_epoch).with_start_offset(*start_offset);
            let t = init_req::InitializeStateData::default().with_topic_id(key.topic_id).with_partitions(vec![p]);
            let req = InitializeShareGroupStateRequest::default().with_group_id(group_id).with_topics(vec![t]);
            let resp: InitializeShareGroupStateResponse =
                super::broker_call::call(broker, security, &client_id, ApiKey::InitializeShareGroupState, 0, &req, CALL_TIMEOUT).await?;
            let p = resp.results.into_iter().flat_map(|t| t.partitions).find(|p| p.partition == key.partition).ok_or("no result for the partition")?;
            Ok(if p.error_code != 0 { failed(p.error_code, p.error_message) } else { Ok(ShareStateAnswer::Done) })
        }
        // The group coordinator's calls (offset admin, group deletion).
        ShareStateOpKind::Delete => {
            let p = delete_req::PartitionData::default().with_partition(key.partition);
            let t = delete_req::DeleteStateData::default().with_topic_id(key.topic_id).with_partitions(vec![p]);
            let req = DeleteShareGroupStateRequest::default().with_group_id(group_id).with_topics(vec![t]);
            let resp: DeleteShareGroupStateResponse =
                super::broker_call::call(broker, security, &client_id, ApiKey::DeleteShareGroupState, 0, &req, CALL_TIMEOUT).await?;
            let p = resp.results.into_iter().flat_map(|t| t.partitions).find(|p| p.partition == key.partition).ok_or("no result for the partition")?;
            Ok(if p.error_code != 0 { failed(p.error_code, p.error_message) } else { Ok(ShareStateAnswer::Done) })
        }
        ShareStateOpKind::Summary => {
            let p = summary_req::PartitionData::default().with_partition(key.partition);
            let t = summary_req::ReadStateSummaryData::default().with_topic_id(key.topic_id).with_partitions(vec![p]);
            let req = ReadShareGroupStateSummaryRequest::default().with_group_id(group_id).with_topics(vec![t]);
            let resp: ReadShareGroupStateSummaryResponse =
                super::broker_call::call(broker, security, &client_id, ApiKey::ReadShareGroupStateSummary, 1, &req, CALL_TIMEOUT).await?;
            let p = resp.results.into_iter().flat_map(|t| t.partitions).find(|p| p.partition == key.partition).ok_or("no result for the partition")?;
            if p.error_code != 0 {
                return Ok(failed(p.error_code, p.error_message));
            }
            let summary = StateSummary {
                state_epoch: p.state_epoch,
                leader_epoch: p.leader_epoch,
                start_offset: p.start_offset,
                delivery_complete_count: p.delivery_complete_count,
            };
            Ok(Ok(ShareStateAnswer::Summary(summary)))
        }
    }
}
