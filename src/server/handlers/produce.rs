//! Produce: each partition's records go to the shard that owns the partition. All
//! partitions of all topics proceed at once, in one router batch (one message per other
//! shard, see `cluster::router`), and the request awaits them together; the response
//! keeps the request's order. acks=0 sends no response at all, as Kafka does. Checked
//! here, in Kafka's order, before the partition validates the records: the topic exists,
//! the codec is allowed for the request version (`ProduceRequest.validateRecords`), and
//! the topic is not internal (`ReplicaManager.appendToLocalLog` with
//! internalTopicsAllowed=false: the group coordinator appends to `__consumer_offsets`
//! through `Partition::append`, never here). Records refused one by one by the partition's
//! validation are listed in the response (KIP-467 `record_errors`).
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::BrokerId;

use super::{code, str_bytes, topic_name, unknown_partitions};
use crate::cluster::image::{MetadataImage, TopicMeta};
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::cluster::topic_config::is_internal_topic;
use crate::partition::PartitionError;
use crate::protocol::ErrorCode;
use crate::record::{check_produce_version, BatchError, RecordErrors};
use crate::runtime::ShardId;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, mut req: ProduceRequest) -> Response {
    let acks = req.acks;
    let image = ctx
        .image_for_request(|image| {
            let topic = |t: &kafka_protocol::messages::produce_request::TopicProduceData| {
                if meta.version >= 13 { image.topic_by_id(t.topic_id.as_bytes()) } else { image.topic(t.name.0.as_str()) }
            };
            req.topic_data.iter().map(|t| unknown_partitions(topic(t), t.partition_data.iter().map(|p| p.index))).sum()
        })
        .await;
    let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
    let partition_count = req.topic_data.iter().map(|t| t.partition_data.len()).sum();
    let mut batch = OpBatch::with_capacity(partition_count);
    let mut topics = Vec::with_capacity(req.topic_data.len());
    for topic in &mut req.topic_data {
        // The records move into the batch; the names stay borrowed from the request.
        let partition_data = std::mem::take(&mut topic.partition_data);
        let topic = &*topic;
        let meta_topic = if meta.version >= 13 {
            image.topic_by_id(topic.topic_id.as_bytes())
        } else {
            image.topic(topic.name.0.as_str())
        };
        let name = meta_topic.map_or(topic.name.0.as_str(), |t| t.name.as_str());
        let mut partitions = Vec::with_capacity(partition_data.len());
        for pd in partition_data {
            let resp = PartitionProduceResponse::default().with_index(pd.index).with_base_offset(-1).with_log_append_time_ms(-1).with_log_start_offset(-1);
            // A partition sent to its shard keeps error code 0 until its result is in.
            match admit(meta.version, acks, meta_topic, name, unknown, pd) {
                Ok((shard, records)) => {
                    batch.push(shard, name, resp.index, PartitionOp::Produce { records, acks });
                    partitions.push(resp);
                }
                Err((error, message)) => {
                    partitions.push(resp.with_error_code(error).with_error_message(message.map(|m| str_bytes(&m))));
                }
            }
        }
        let mut t = TopicProduceResponse::default().with_partition_responses(partitions);
        if meta.version >= 13 {
            t.topic_id = topic.topic_id;
        } else {
            t.name = topic_name(name);
        }
        topics.push(t);
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    for t in &mut topics {
        let name = if meta.version >= 13 {
            image.topic_by_id(t.topic_id.as_bytes()).map_or("", |m| m.name.as_str()).to_string()
        } else {
            t.name.0.to_string()
        };
        for resp in t.partition_responses.iter_mut().filter(|r| r.error_code == 0) {
            match results.next() {
                Some(Ok(OpOutput::Produce(out))) => {
                    resp.base_offset = out.base_offset;
                    resp.log_append_time_ms = out.log_append_time_ms;
                    resp.log_start_offset = out.log_start_offset;
                }
                Some(Ok(_)) | None => resp.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
                Some(Err(e)) => {
                    if !matches!(e, PartitionError::Sequence(_)) {
                        tracing::debug!(shard = ctx.shard, partition = resp.index, error = %e, "produce refused");
                    }
                    resp.error_code = code(&e);
                    if let PartitionError::Batch(BatchError::RecordErrors(r)) = &e {
                        set_record_errors(resp, r, &format!("{name}-{}", resp.index));
                    } else {
                        resp.error_message = Some(str_bytes(&e.to_string()));
                    }
                }
            }
        }
    }
    if acks == 0 {
        return Response::NoResponse;
    }
    // KIP-951 (v10+): a partition led elsewhere names its leader and the leader's endpoint.
    let node_endpoints = if meta.version >= 10 { leader_hints(&image, meta.version, &mut topics) } else { Vec::new() };
    meta.respond(&ProduceResponse::default().with_responses(topics).with_node_endpoints(node_endpoints))
}

/// Fills `current_leader` of every NOT_LEADER_OR_FOLLOWER partition whose leader is a live
/// broker, and returns those brokers' endpoints (each once). Error path only.
fn leader_hints(image: &MetadataImage, version: i16, topics: &mut [TopicProduceResponse]) -> Vec<NodeEndpoint> {
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for t in topics {
        let meta_topic = if version >= 13 { image.topic_by_id(t.topic_id.as_bytes()) } else { image.topic(t.name.0.as_str()) };
        let not_leader = ErrorCode::NOT_LEADER_OR_FOLLOWER.code();
        for resp in t.partition_responses.iter_mut().filter(|r| r.error_code == not_leader) {
            let Some((leader, epoch)) = meta_topic.and_then(|m| m.partition(resp.index)).map(|p| (p.leader, p.leader_epoch)) else { continue };
            let Some(b) = image.brokers.get(&leader).filter(|b| !b.fenced) else { continue };
            resp.current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(leader)).with_leader_epoch(epoch);
            if !endpoints.iter().any(|e| e.node_id.0 == leader) {
                endpoints.push(NodeEndpoint::default().with_node_id(BrokerId(leader)).with_host(str_bytes(&b.host)).with_port(b.port).with_rack(b.rack.as_deref().map(str_bytes)));
            }
        }
    }
    endpoints
}

/// KIP-467 (Produce v8+; older versions drop both fields): each refused record's index
/// and message, and Kafka's batch message, so a client fails exactly those records.
fn set_record_errors(resp: &mut PartitionProduceResponse, r: &RecordErrors, topic_partition: &str) {
    resp.error_message = Some(str_bytes(&r.batch_message(topic_partition)));
    resp.record_errors = r
        .errors
        .iter()
        .map(|e| BatchIndexAndErrorMessage::default().with_batch_index(e.batch_index).with_batch_index_error_message(Some(str_bytes(&e.message(topic_partition)))))
        .collect();
}

/// The owning shard and records of a partition that may be appended to, or the error
/// code (and message) it is answered with.
fn admit(
    version: i16,
    acks: i16,
    topic: Option<&TopicMeta>,
    name: &str,
    unknown: ErrorCode,
    pd: PartitionProduceData,
) -> Result<(ShardId, Bytes), (i16, Option<String>)> {
    if !matches!(acks, -1..=1) {
        return Err((ErrorCode::INVALID_REQUIRED_ACKS.code(), None));
    }
    let Some(owner) = topic.and_then(|t| t.partition(pd.index)) else { return Err((unknown.code(), None)) };
    let Some(records) = pd.records else { return Err((ErrorCode::CORRUPT_MESSAGE.code(), None)) };
    if let Err(e) = check_produce_version(&records, version) {
        return Err((code(&e), Some(e.to_string())));
    }
    if is_internal_topic(name) {
        return Err((ErrorCode::INVALID_TOPIC_EXCEPTION.code(), Some(format!("Cannot append to internal topic {name}"))));
    }
    Ok((owner.shard, records))
}
