//! AddPartitionsToTxn 0-5: a producer's partitions join its open transaction (v0-3, one
//! transaction), or a partition leader checks that they have (v4+ batches with
//! `verify_only`, KIP-890; v4+ unverified entries are a broker adding for a producer).
//! Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others of that
//! transaction OPERATION_NOT_ATTEMPTED, as Kafka answers.
use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};

use super::init_producer_id::old_client_code;
use super::txn_common::route_txn;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AddPartitionsToTxnRequest) -> Response {
    if meta.version <= 3 {
        let txn_id = req.v3_and_below_transactional_id.0.to_string();
        let results =
            add(ctx, &meta, &txn_id, req.v3_and_below_producer_id.0, req.v3_and_below_producer_epoch, &req.v3_and_below_topics, false, meta.version).await;
        return meta.respond(&AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results));
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let txn_id = t.transactional_id.0.to_string();
        let results = add(ctx, &meta, &txn_id, t.producer_id.0, t.producer_epoch, &t.topics, t.verify_only, meta.version).await;
        out.push(AddPartitionsToTxnResult::default().with_transactional_id(t.transactional_id.clone()).with_topic_results(results));
    }
    meta.respond(&AddPartitionsToTxnResponse::default().with_results_by_transaction(out))
}

#[allow(clippy::too_many_arguments)]
async fn add(
    ctx: &Rc<ShardContext>,
    meta: &RequestMeta,
    txn_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let image = ctx
        .image_for_request(|image| topics.iter().map(|t| super::unknown_partitions(image.topic(t.name.0.as_str()), t.partitions.iter().copied())).sum())
        .await;
    let flat: Vec<(String, i32)> = topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p))).collect();
    let unknown: Vec<bool> = flat.iter().map(|(t, p)| image.topic(t).and_then(|m| m.partition(*p)).is_none()).collect();
    // ACLs (Kafka's KafkaApis): a broker's verification (v4+ verify_only) needs
    // CLUSTER_ACTION; a client needs WRITE on the transactional id (else every partition
    // is TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else its partitions are
    // TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).
    let access = ctx.access(meta);
    let denied_topic: Vec<bool> = flat.iter().map(|(t, _)| !access.allows_topic(Operation::Write, t)).collect();
    let codes: Vec<ErrorCode> = if verify_only && !access.allows_cluster(Operation::ClusterAction) {
        vec![ErrorCode::CLUSTER_AUTHORIZATION_FAILED; flat.len()]
    } else if !verify_only && !access.allows_transactional_id(Operation::Write, txn_id) {
        vec![ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED; flat.len()]
    } else if !verify_only && denied_topic.iter().any(|d| *d) {
        denied_topic.iter().map(|&d| if d { ErrorCode::TOPIC_AUTHORIZATION_FAILED } else { ErrorCode::OPERATION_NOT_ATTEMPTED }).collect()
    } else if unknown.iter().any(|u| *u) {
        unknown.iter().map(|&u| if u { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION } else { ErrorCode::OPERATION_NOT_ATTEMPTED }).collect()
    } else {
        let op = TxnOp::AddPartitions { txn_id: txn_id.to_string(), producer_id, producer_epoch, partitions: flat.clone(), verify_only };
        match route_txn(ctx, txn_id, op).await {
            Ok(TxnReply::Partitions(codes)) if codes.len() == flat.len() => codes,
            Ok(_) => vec![ErrorCode::UNKNOWN_SERVER_ERROR; flat.len()],
            Err(e) => vec![old_client_code(e, if version >= 3 { 4 } else { 0 }); flat.len()],
        }
    };
    let mut codes = codes.into_iter();
    topics
        .iter()
        .map(|t| {
            let results = t
                .partitions
                .iter()
                .map(|p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(codes.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR).code())
                })
                .collect();
            AddPartitionsToTxnTopicResult::default().with_name(TopicName(t.name.0.clone())).with_results_by_partition(results)
        })
        .collect()
}
