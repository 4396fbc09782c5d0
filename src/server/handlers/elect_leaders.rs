//! ElectLeaders 0-2 (KIP-183, KIP-460): preferred or unclean leader election of the
//! partitions named (or, with `topic_partitions` null, of every partition), as Kafka's
//! `kafka-leader-election` tool and AdminClient `electLeaders` use it. Every node answers:
//! the request goes to the quorum leader through the controller (Kafka 4.1 brokers forward
//! it to the active controller), which elects and answers per partition
//! (`controller/election.rs`): ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
//! ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. With every partition asked
//! for, those needing no election are left out, as in Kafka. v0 has no election type
//! (PREFERRED) and no top-level error code.
//!
//! A request the controller cannot serve (no quorum leader, an unknown election type) is
//! answered as Kafka's `ElectLeadersRequest.getErrorResponse`: the error on every named
//! partition and, from v1, at the top level.
use std::rc::Rc;

use kafka_protocol::messages::elect_leaders_response::{ElectLeadersResponse, PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::ElectLeadersRequest;

use super::{code, str_bytes, topic_name};
use crate::controller::{ElectionType, TopicElection};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ElectLeadersRequest) -> Response {
    // ACLs: ALTER on the cluster.
    if !ctx.access(&meta).allows_cluster(Operation::Alter) {
        return error_response(meta, &req, ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.");
    }
    // v0 has no election type field: the codec leaves it 0 (PREFERRED).
    let election = match req.election_type {
        0 => ElectionType::Preferred,
        1 => ElectionType::Unclean,
        other => {
            let msg = format!("Unknown election type {other}");
            return error_response(meta, &req, ErrorCode::INVALID_REQUEST, &msg);
        }
    };
    let topics = req.topic_partitions.as_ref().map(|ts| ts.iter().map(|t| (t.topic.0.to_string(), t.partitions.clone())).collect());
    match ctx.controller.elect_leaders(election, topics).await {
        Ok(results) => {
            if results.iter().flat_map(|t| &t.partitions).any(|(_, r)| r.is_ok()) {
                // A client's next Metadata through this shard shows the new leaders.
                ctx.catch_up_with_controller().await;
            }
            meta.respond(&ElectLeadersResponse::default().with_replica_election_results(results.iter().map(topic_result).collect()))
        }
        Err(e) => error_response(meta, &req, (&e).into(), &e.to_string()),
    }
}

fn topic_result(t: &TopicElection) -> ReplicaElectionResult {
    let partitions = t
        .partitions
        .iter()
        .map(|(partition, res)| {
            let (error_code, message) = match res {
                Ok(()) => (0, None),
                Err(e) => (code(e), Some(str_bytes(&e.to_string()))),
            };
            PartitionResult::default().with_partition_id(*partition).with_error_code(error_code).with_error_message(message)
        })
        .collect();
    ReplicaElectionResult::default().with_topic(topic_name(&t.topic)).with_partition_result(partitions)
}

fn error_response(meta: RequestMeta, req: &ElectLeadersRequest, error: ErrorCode, message: &str) -> Response {
    let results = req
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| PartitionResult::default().with_partition_id(*p).with_error_code(error.code()).with_error_message(Some(str_bytes(message))))
                .collect();
            ReplicaElectionResult::default().with_topic(t.topic.clone()).with_partition_result(partitions)
        })
        .collect();
    let top = if meta.version >= 1 { error.code() } else { 0 };
    meta.respond(&ElectLeadersResponse::default().with_error_code(top).with_replica_election_results(results))
}
