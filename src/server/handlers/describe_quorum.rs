//! DescribeQuorum 0-2 (KIP-595; v2 adds KIP-853's directory ids and nodes): the metadata
//! quorum's leader, epoch, high watermark, voters and observers with their log end
//! offsets. Every node answers: the question goes to the quorum leader through the
//! controller (as Kafka 4.1 brokers forward it to the active controller), so
//! `kafka-metadata-quorum describe --status / --replication` works against any node.
//!
//! The only partition asked about is `__cluster_metadata`-0, as in Kafka; anything else
//! is UNKNOWN_TOPIC_OR_PARTITION. Directory ids are the zero uuid (openraft has no log
//! directories per voter).
use kafka_protocol::messages::describe_quorum_response::{DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest};

use super::{code, str_bytes, topic_name};
use crate::controller::{QuorumInfo, ReplicaProgress};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Kafka's name for the metadata log's topic.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name Kafka's tools print for controller endpoints.
const CONTROLLER_LISTENER_NAME: &str = "CONTROLLER";

fn broker_id(id: u64) -> BrokerId {
    BrokerId(i32::try_from(id).unwrap_or(-1))
}

fn replica_state(q: &QuorumInfo, r: &ReplicaProgress) -> ReplicaState {
    let directory_id = q.directory_ids.get(&r.id).map_or(uuid::Uuid::nil(), |d| uuid::Uuid::from_bytes(*d));
    ReplicaState::default()
        .with_replica_id(broker_id(r.id))
        .with_replica_directory_id(directory_id)
        .with_log_end_offset(r.log_end_offset)
        .with_last_fetch_timestamp(r.last_fetch_timestamp_ms)
        .with_last_caught_up_timestamp(r.last_caught_up_timestamp_ms)
}

fn nodes(q: &QuorumInfo) -> Vec<Node> {
    q.listeners
        .iter()
        .filter_map(|(id, addr)| {
            let (host, port) = crate::config::split_host_port(addr).ok()?;
            Some(
                Node::default()
                    .with_node_id(broker_id(*id))
                    .with_listeners(vec![Listener::default().with_name(str_bytes(CONTROLLER_LISTENER_NAME)).with_host(str_bytes(&host)).with_port(port)]),
            )
        })
        .collect()
}

fn asks_for_metadata_log(req: &DescribeQuorumRequest) -> bool {
    matches!(&req.topics[..], [t] if t.topic_name.0.as_str() == METADATA_TOPIC
        && matches!(&t.partitions[..], [p] if p.partition_index == 0))
}

pub async fn handle(ctx: &ShardContext, meta: RequestMeta, req: DescribeQuorumRequest) -> Response {
    let topic = TopicData::default().with_topic_name(topic_name(METADATA_TOPIC));
    if !asks_for_metadata_log(&req) {
        let part = PartitionData::default().with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
        let resp = DescribeQuorumResponse::default().with_topics(vec![topic.with_partitions(vec![part])]);
        return meta.respond(&resp);
    }
    // ACLs: DESCRIBE on the cluster.
    if !ctx.access(&meta).allows_cluster(Operation::Describe) {
        let resp = DescribeQuorumResponse::default().with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code());
        return meta.respond(&if meta.version >= 2 { resp.with_error_message(Some(str_bytes("Cluster authorization failed."))) } else { resp });
    }
    let resp = match ctx.controller.describe_quorum().await {
        Ok(q) => {
            let part = PartitionData::default()
                .with_partition_index(0)
                .with_leader_id(broker_id(q.leader_id))
                .with_leader_epoch(i32::try_from(q.leader_epoch).unwrap_or(i32::MAX))
                .with_high_watermark(q.high_watermark)
                .with_current_voters(q.voters.iter().map(|r| replica_state(&q, r)).collect())
                .with_observers(q.observers.iter().map(|r| replica_state(&q, r)).collect());
            let resp = DescribeQuorumResponse::default().with_topics(vec![topic.with_partitions(vec![part])]);
            if meta.version >= 2 {
                resp.with_nodes(nodes(&q))
            } else {
                resp
            }
        }
        Err(e) => {
            let resp = DescribeQuorumResponse::default().with_error_code(code(&e));
            if meta.version >= 2 {
                resp.with_error_message(Some(str_bytes(&e.to_string())))
            } else {
                resp
            }
        }
    };
    meta.respond(&resp)
}
