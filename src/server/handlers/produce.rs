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

use super::{code, unknown_partitions};
use crate::cluster::image::{MetadataImage, TopicMeta};
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::cluster::topic_config::is_internal_topic;
use crate::partition::PartitionError;
use crate::protocol::produce_input::{InputTopic, InputTopics, ProduceInput};
use crate::protocol::produce_response_writer::{write_produce_response, PartitionAnswer, TopicAnswer};
use crate::protocol::ErrorCode;
use crate::record::{check_produce_version, BatchError, RecordErrors};
use crate::runtime::ShardId;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// The image's topic a request topic names: by id from v13 on, by name before.
fn lookup<'i>(image: &'i MetadataImage, version: i16, topic: &InputTopic) -> Option<&'i TopicMeta> {
    if version >= 13 { image.topic_by_id(&topic.topic_id) } else { image.topic(topic.name) }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ProduceInput) -> Response {
    let acks = req.acks();
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
    for topic in req.topics() {
        // The records go into the batch as slices of the request frame; the names stay
        // borrowed from the request or the image.
        let meta_topic = lookup(&image, meta.version, &topic);
        let name = meta_topic.map_or(topic.name, |t| t.name.as_str());
        for (index, records) in topic.partitions {
            // A partition sent to its shard keeps error code 0 until its result is in.
            match admit(meta.version, acks, meta_topic, name, unknown, index, records) {
                Ok((shard, records)) => {
                    batch.push(shard, name, index, PartitionOp::Produce { records, acks });
                    answers.push(PartitionAnswer::pending(index));
                }
                Err((error_code, error_message)) => answers.push(PartitionAnswer { error_code, error_message, ..PartitionAnswer::pending(index) }),
            }
        }
    }
    let mut results = ctx.router.run(batch).await.into_iter();
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
    if acks == 0 {
        return Response::NoResponse;
    }
    let topics = TopicAnswers { topics: req.topics(), answers: &answers };
    match write_produce_response(meta.correlation_id, meta.version, topics) {
        Ok(frame) => Response::Frames(vec![frame.freeze()]),
        Err(e) => {
            tracing::error!(version = meta.version, error = %e, "cannot encode the Produce response");
            Response::Close
        }
    }
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
