//! DescribeProducers 0: the producers with state on each partition this broker leads (id,
//! epoch, last sequence and timestamp, coordinator epoch of their last marker, and the
//! first offset of their open transaction) — what `kafka-transactions describe-producers`,
//! `find-hanging` and `abort` read. A partition led elsewhere: NOT_LEADER_OR_FOLLOWER; an
//! unknown one: UNKNOWN_TOPIC_OR_PARTITION. One router batch for the whole request.
use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::code;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeProducersRequest) -> Response {
    let image = ctx
        .image_for_request(|image| {
            req.topics.iter().map(|t| super::unknown_partitions(image.topic(t.name.0.as_str()), t.partition_indexes.iter().copied())).sum()
        })
        .await;
    let mut batch = OpBatch::with_capacity(req.topics.iter().map(|t| t.partition_indexes.len()).sum());
    let mut topics = Vec::with_capacity(req.topics.len());
    // ACLs: READ on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access(&meta);
    for t in &req.topics {
        let denied = !access.allows_topic(Operation::Read, t.name.as_str());
        let meta_topic = image.topic(t.name.0.as_str()).filter(|_| !denied);
        let partitions = t
            .partition_indexes
            .iter()
            .map(|&p| {
                let resp = PartitionResponse::default().with_partition_index(p);
                match meta_topic.and_then(|m| Some((m, m.partition(p)?))) {
                    None if denied => resp.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()),
                    None => resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()),
                    Some((_, pm)) if pm.leader != ctx.config.node_id => resp.with_error_code(ErrorCode::NOT_LEADER_OR_FOLLOWER.code()),
                    Some((m, pm)) => {
                        // Sent to its shard: error code 0 until the result is in.
                        batch.push(pm.shard, m.name.as_str(), p, PartitionOp::DescribeProducers);
                        resp
                    }
                }
            })
            .collect::<Vec<_>>();
        topics.push(TopicResponse::default().with_name(t.name.clone()).with_partitions(partitions));
    }
    let mut results = ctx.router.run(batch).await.into_iter();
    for part in topics.iter_mut().flat_map(|t| t.partitions.iter_mut()).filter(|p| p.error_code == 0) {
        match results.next() {
            Some(Ok(OpOutput::Producers(list))) => {
                part.active_producers = list
                    .into_iter()
                    .map(|v| {
                        ProducerState::default()
                            .with_producer_id(ProducerId(v.producer_id))
                            .with_producer_epoch(i32::from(v.producer_epoch))
                            .with_last_sequence(v.last_sequence)
                            .with_last_timestamp(v.last_timestamp_ms)
                            .with_coordinator_epoch(v.coordinator_epoch)
                            .with_current_txn_start_offset(v.current_txn_start_offset)
                    })
                    .collect();
            }
            Some(Ok(_)) | None => part.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Some(Err(e)) => part.error_code = code(&e),
        }
    }
    meta.respond(&DescribeProducersResponse::default().with_topics(topics))
}
