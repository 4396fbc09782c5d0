//! AlterPartitionReassignments 0-1 (KIP-455; v1 adds `allow_replication_factor_change`,
//! KIP-860): start or cancel (`replicas` null) partition reassignments, as Kafka's
//! `kafka-reassign-partitions --execute/--cancel` and AdminClient
//! `alterPartitionReassignments` send it. Every node answers: the request goes to the
//! quorum leader through the controller (Kafka 4.1 brokers forward it to the active
//! controller), which checks each partition and answers per partition
//! (`controller/reassignment.rs`): UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
//! INVALID_REPLICATION_FACTOR, NO_REASSIGNMENT_IN_PROGRESS. The move then runs in the
//! background (add, catch up, move leadership, drop the old replicas);
//! ListPartitionReassignments shows it until it completes.
//!
//! A request the controller cannot serve (no quorum leader) is answered as Kafka's
//! `AlterPartitionReassignmentsRequest.getErrorResponse`: the error at the top level and
//! on every partition.
use std::rc::Rc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::AlterPartitionReassignmentsRequest;

use super::{code, str_bytes, topic_name};
use crate::controller::ReassignmentError;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterPartitionReassignmentsRequest) -> Response {
    // v0 has no such field: the codec leaves it true (Kafka's default).
    let allow_rf_change = req.allow_replication_factor_change;
    let topics = req
        .topics
        .iter()
        .map(|t| {
            (t.name.0.to_string(), t.partitions.iter().map(|p| (p.partition_index, p.replicas.as_ref().map(|rs| rs.iter().map(|b| b.0).collect()))).collect())
        })
        .collect();
    let base = AlterPartitionReassignmentsResponse::default().with_allow_replication_factor_change(allow_rf_change);
    // ACLs: ALTER on the cluster.
    let outcome = if ctx.access(&meta).allows_cluster(Operation::Alter) {
        ctx.controller.alter_partition_reassignments(topics, allow_rf_change).await.map_err(|e| (ErrorCode::from(&e), e.to_string()))
    } else {
        Err((ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".to_string()))
    };
    match outcome {
        Ok(results) => {
            if results.iter().flat_map(|(_, ps)| ps).any(|(_, r)| r.is_ok()) {
                // A client's next Metadata or ListPartitionReassignments here sees it.
                ctx.catch_up_with_controller().await;
            }
            let responses = results.iter().map(|(topic, ps)| topic_result(topic, ps)).collect();
            meta.respond(&base.with_responses(responses))
        }
        Err((error, message)) => {
            let responses = req
                .topics
                .iter()
                .map(|t| {
                    let partitions = t.partitions.iter().map(|p| partition_result(p.partition_index, error.code(), Some(&message))).collect();
                    ReassignableTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions)
                })
                .collect();
            meta.respond(&base.with_error_code(error.code()).with_error_message(Some(str_bytes(&message))).with_responses(responses))
        }
    }
}

fn partition_result(partition: i32, error_code: i16, message: Option<&str>) -> ReassignablePartitionResponse {
    ReassignablePartitionResponse::default().with_partition_index(partition).with_error_code(error_code).with_error_message(message.map(str_bytes))
}

fn topic_result(topic: &str, partitions: &[(i32, Result<(), ReassignmentError>)]) -> ReassignableTopicResponse {
    let partitions = partitions
        .iter()
        .map(|(partition, res)| match res {
            Ok(()) => partition_result(*partition, 0, None),
            Err(e) => partition_result(*partition, code(e), Some(&e.to_string())),
        })
        .collect();
    ReassignableTopicResponse::default().with_name(topic_name(topic)).with_partitions(partitions)
}
