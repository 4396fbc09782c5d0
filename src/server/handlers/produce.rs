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
//!
//! Allocation (issue 10): the request is usually the in-place view
//! (`protocol/produce_request_view.rs`), the answers one flat list, and the response is
//! written by hand into the shard's response arena (`protocol/produce_response_writer.rs`);
//! what still allocates per request is the router's batch and results and the response's
//! frame list.
use std::rc::Rc;

use bytes::Bytes;
use smallvec::SmallVec;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::BrokerId;

use super::{code, str_bytes, topic_name, unknown_partitions};
use crate::cluster::image::{MetadataImage, TopicMeta};
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::cluster::topic_config::is_internal_topic;
use crate::partition::PartitionError;
use crate::protocol::produce_input::{InputTopic, InputTopics, ProduceInput};
use crate::protocol::produce_response_writer::{write_produce_response, PartitionAnswer, TopicAnswer};
use crate::protocol::ErrorCode;
use crate::record::{check_produce_version, BatchError, RecordErrors};
use crate::runtime::ShardId;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// The image's topic a request topic names: by id from v13 on, by name before.
fn lookup<'i>(image: &'i MetadataImage, version: i16, topic: &InputTopic) -> Option<&'i TopicMeta> {
    if version >= 13 {
        image.topic_by_id(&topic.topic_id)
    } else {
        image.topic(topic.name)
    }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ProduceInput) -> Response {
    let acks = req.acks();
    let timeout_ms = req.timeout_ms();
    let image = ctx
        .image_for_request(|image| {
            req.topics().map(|t| unknown_partitions(lookup(image, meta.version, &t), t.partitions.clone().map(|(index, _)| index))).sum()
        })
        .await;
    let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
    let partition_count = req.topics().map(|t| t.partitions.count()).sum();
    let mut batch = OpBatch::with_capacity(partition_count);
    // One answer per partition, in request order (the topics are walked again from the
    // request to write the response): no Vec per topic, none at all for a few partitions.
    let mut answers: SmallVec<[PartitionAnswer; 4]> = SmallVec::with_capacity(partition_count);
    // A transactional producer's partitions, in batch order, kept for KIP-890's
    // verification (`verify_and_append`): only requests with a transactional id.
    let transactional_id = req.transactional_id();
    let mut sent: Vec<(ShardId, &str, i32, Bytes)> = Vec::new();
    // ACLs (Kafka's KafkaApis): WRITE on the transactional id, else every partition is
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else its partitions are
    // TOPIC_AUTHORIZATION_FAILED (before existence, so nothing tells a topic exists).
    let access = ctx.access(&meta);
    let txn_denied = transactional_id.is_some_and(|id| !access.allows_transactional_id(Operation::Write, id));
    for topic in req.topics() {
        // The records go into the batch as slices of the request frame; the names stay
        // borrowed from the request or the image.
        let meta_topic = lookup(&image, meta.version, &topic);
        let name = meta_topic.map_or(topic.name, |t| t.name.as_str());
        let denied = if !access.is_checked() {
            None
        } else if txn_denied {
            Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        } else if (meta_topic.is_some() || meta.version < 13) && !access.allows_topic(Operation::Write, name) {
            Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        };
        for (index, records) in topic.partitions {
            if let Some(refused) = denied {
                answers.push(PartitionAnswer { error_code: refused.code(), ..PartitionAnswer::pending(index) });
                continue;
            }
            // A partition sent to its shard keeps error code 0 until its result is in.
            match admit(meta.version, acks, meta_topic, name, unknown, index, records) {
                Ok((shard, records)) => {
                    if transactional_id.is_some() {
                        sent.push((shard, name, index, records.clone()));
                    }
                    batch.push(shard, name, index, PartitionOp::Produce { records, acks, timeout_ms, txn_guard: None });
                    answers.push(PartitionAnswer::pending(index));
                }
                Err((error_code, error_message)) => answers.push(PartitionAnswer { error_code, error_message, ..PartitionAnswer::pending(index) }),
            }
        }
    }
    let mut results = ctx.router.run(batch).await;
    if results.iter().any(|r| matches!(r, Err(PartitionError::TxnVerificationNeeded { .. } | PartitionError::TxnEarlierWritePending { .. }))) {
        super::txn_verification::verify_and_append(ctx, meta.version, transactional_id, acks, timeout_ms, &sent, &mut results).await;
    }
    let mut results = results.into_iter();
    let mut rest = &mut answers[..];
    for topic in req.topics() {
        let n = topic.partitions.count().min(rest.len());
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(n);
        rest = tail;
        // Only an error message needs it.
        let name = || if meta.version >= 13 { image.topic_by_id(&topic.topic_id).map_or("", |m| m.name.as_str()) } else { topic.name };
        for resp in mine.iter_mut().filter(|r| r.error_code == 0) {
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
                        set_record_errors(resp, r, &format!("{}-{}", name(), resp.index));
                    } else {
                        resp.error_message = Some(e.to_string());
                    }
                }
            }
        }
    }
    record_produce_metrics(&image, meta.version, &req, &answers);
    if acks == 0 {
        return Response::NoResponse;
    }
    let topics = TopicAnswers { topics: req.topics(), answers: &answers };
    // KIP-951 (v10+): a partition led elsewhere names its leader and the leader's
    // endpoint. Error path only, so it goes through the crate's response structs.
    let not_leader = ErrorCode::NOT_LEADER_OR_FOLLOWER.code();
    if meta.version >= 10 && answers.iter().any(|a| a.error_code == not_leader) {
        return respond_with_leader_hints(&meta, &image, topics);
    }
    match write_produce_response(meta.correlation_id, meta.version, topics, meta.throttle_time_ms) {
        Ok(frame) => Response::Frames(smallvec::smallvec![frame.freeze().into()]),
        Err(e) => {
            tracing::error!(version = meta.version, error = %e, "cannot encode the Produce response");
            Response::Close
        }
    }
}

/// Kafka's TotalProduceRequestsPerSec / FailedProduceRequestsPerSec per topic (of topics
/// that exist) and ErrorsPerSec, per partition written. Bytes and messages in are counted
/// where they are appended (`partition/append.rs`).
fn record_produce_metrics(image: &MetadataImage, version: i16, req: &ProduceInput, answers: &[PartitionAnswer]) {
    crate::metrics::with(|m| {
        let mut answers = answers.iter();
        for topic in req.topics() {
            let known = lookup(image, version, &topic).map(|t| t.name.as_str());
            for a in answers.by_ref().take(topic.partitions.count()) {
                m.record_error(kafka_protocol::messages::ApiKey::Produce as i16, a.error_code, 1);
                if let Some(name) = known {
                    let t = m.topic(name);
                    t.produce_requests += 1;
                    t.failed_produce_requests += u64::from(a.error_code != 0);
                }
            }
        }
    });
}

/// The request's topics with their answers (the flat list cut topic by topic).
#[derive(Clone)]
struct TopicAnswers<'a> {
    topics: InputTopics<'a>,
    answers: &'a [PartitionAnswer],
}

impl<'a> Iterator for TopicAnswers<'a> {
    type Item = TopicAnswer<'a>;

    fn next(&mut self) -> Option<TopicAnswer<'a>> {
        let t = self.topics.next()?;
        let n = t.partitions.count().min(self.answers.len());
        let (partitions, rest) = self.answers.split_at(n);
        self.answers = rest;
        Some(TopicAnswer { name: t.name, topic_id: t.topic_id, partitions })
    }
}

/// The response as the crate's structs, with KIP-951's leader hints (`leader_hints`).
fn respond_with_leader_hints(meta: &RequestMeta, image: &MetadataImage, answers: TopicAnswers) -> Response {
    let mut topics: Vec<TopicProduceResponse> = answers
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|a| {
                    PartitionProduceResponse::default()
                        .with_index(a.index)
                        .with_error_code(a.error_code)
                        .with_base_offset(a.base_offset)
                        .with_log_append_time_ms(a.log_append_time_ms)
                        .with_log_start_offset(a.log_start_offset)
                        .with_error_message(a.error_message.as_deref().map(str_bytes))
                        .with_record_errors(
                            a.record_errors
                                .iter()
                                .map(|(i, m)| {
                                    BatchIndexAndErrorMessage::default().with_batch_index(*i).with_batch_index_error_message(m.as_deref().map(str_bytes))
                                })
                                .collect(),
                        )
                })
                .collect();
            let r = TopicProduceResponse::default().with_partition_responses(partitions);
            if meta.version >= 13 {
                r.with_topic_id(uuid::Uuid::from_bytes(t.topic_id))
            } else {
                r.with_name(topic_name(t.name))
            }
        })
        .collect();
    let node_endpoints = leader_hints(image, meta.version, &mut topics);
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
                endpoints.push(
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(leader))
                        .with_host(str_bytes(&b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.as_deref().map(str_bytes)),
                );
            }
        }
    }
    endpoints
}

/// KIP-467 (Produce v8+; older versions drop both fields): each refused record's index
/// and message, and Kafka's batch message, so a client fails exactly those records.
fn set_record_errors(resp: &mut PartitionAnswer, r: &RecordErrors, topic_partition: &str) {
    resp.error_message = Some(r.batch_message(topic_partition));
    resp.record_errors = r.errors.iter().map(|e| (e.batch_index, Some(e.message(topic_partition)))).collect();
}

/// The owning shard and records of a partition that may be appended to, or the error
/// code (and message) it is answered with.
#[allow(clippy::too_many_arguments)]
fn admit(
    version: i16,
    acks: i16,
    topic: Option<&TopicMeta>,
    name: &str,
    unknown: ErrorCode,
    index: i32,
    records: Option<Bytes>,
) -> Result<(ShardId, Bytes), (i16, Option<String>)> {
    if !matches!(acks, -1..=1) {
        return Err((ErrorCode::INVALID_REQUIRED_ACKS.code(), None));
    }
    let Some(owner) = topic.and_then(|t| t.partition(index)) else { return Err((unknown.code(), None)) };
    let Some(records) = records else { return Err((ErrorCode::CORRUPT_MESSAGE.code(), None)) };
    if let Err(e) = check_produce_version(&records, version) {
        return Err((code(&e), Some(e.to_string())));
    }
    if is_internal_topic(name) {
        return Err((ErrorCode::INVALID_TOPIC_EXCEPTION.code(), Some(format!("Cannot append to internal topic {name}"))));
    }
    Ok((owner.shard, records))
}
