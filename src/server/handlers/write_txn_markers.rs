//! WriteTxnMarkers 1-2 (between brokers, and from `kafka-transactions abort`): append the
//! markers to the partitions this broker leads (`server/txn_markers.rs`). A partition led
//! elsewhere gets NOT_LEADER_OR_FOLLOWER; a stale producer epoch INVALID_PRODUCER_EPOCH
//! (v2's TransactionVersion >= 2, KIP-1228: an epoch not above the producer's, but for the
//! retry of a marker already written); an older coordinator epoch
//! TRANSACTION_COORDINATOR_FENCED (the partition's checks).
use std::rc::Rc;

use kafka_protocol::messages::write_txn_markers_response::{WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::{ShardContext, MARKER_TIMEOUT_MS};
use crate::server::txn_markers::write_markers_here;
use crate::txn::MarkerRequest;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: WriteTxnMarkersRequest) -> Response {
    // ACLs: CLUSTER_ACTION (coordinators write markers), else every partition is
    // CLUSTER_AUTHORIZATION_FAILED.
    let denied = !ctx.access(&meta).allows_cluster(Operation::ClusterAction);
    let image = ctx.image();
    let mut results = Vec::with_capacity(req.markers.len());
    for m in &req.markers {
        let partitions: Vec<(String, i32)> = m.topics.iter().flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p))).collect();
        // Only the partitions this broker leads are written here.
        let led: Vec<bool> = partitions
            .iter()
            .map(|(t, p)| !denied && image.topic(t).and_then(|tm| tm.partition(*p)).is_some_and(|pm| pm.leader == ctx.config.node_id))
            .collect();
        let here = MarkerRequest {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
            partitions: partitions.iter().zip(&led).filter(|(_, l)| **l).map(|(tp, _)| tp.clone()).collect(),
            transaction_version: m.transaction_version,
        };
        let mut written = write_markers_here(&ctx.router, &here, MARKER_TIMEOUT_MS).await.into_iter();
        let mut codes = led.iter().zip(&partitions).map(|(&l, (topic, _))| {
            if denied {
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED
            } else if l {
                written.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR)
            } else if image.topic(topic).is_some() {
                ErrorCode::NOT_LEADER_OR_FOLLOWER
            } else {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            }
        });
        let topics = m
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partition_indexes
                    .iter()
                    .map(|p| {
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(*p)
                            .with_error_code(codes.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR).code())
                    })
                    .collect();
                WritableTxnMarkerTopicResult::default().with_name(t.name.clone()).with_partitions(parts)
            })
            .collect();
        results.push(WritableTxnMarkerResult::default().with_producer_id(m.producer_id).with_topics(topics));
    }
    meta.respond(&WriteTxnMarkersResponse::default().with_markers(results))
}
