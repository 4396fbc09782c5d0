//! ListPartitionReassignments 0 (KIP-455): the ongoing reassignments, of every partition
//! (`topics` null) or of the partitions named, each with its replicas (the target followed
//! by the replicas being removed), adding and removing replicas, as Kafka's
//! `kafka-reassign-partitions --list/--verify` read them. Partitions with none ongoing and
//! unknown topics or partitions are left out, as in Kafka. Answered from the committed
//! image this node has applied (read-only: nothing to forward).
use std::rc::Rc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{BrokerId, ListPartitionReassignmentsRequest};

use super::str_bytes;
use super::topic_name;
use crate::cluster::image::{PartitionMeta, TopicMeta};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListPartitionReassignmentsRequest) -> Response {
    // ACLs: DESCRIBE on the cluster.
    if !ctx.access(&meta).allows_cluster(Operation::Describe) {
        return meta.respond(
            &ListPartitionReassignmentsResponse::default()
                .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
                .with_error_message(Some(str_bytes("Cluster authorization failed."))),
        );
    }
    let image = ctx.controller.image();
    let mut topics = Vec::new();
    match &req.topics {
        None => {
            for t in image.topics.values() {
                push_ongoing(&mut topics, t, t.partitions.iter());
            }
        }
        Some(asked) => {
            for a in asked {
                if let Some(t) = image.topic(&a.name.0) {
                    push_ongoing(&mut topics, t, a.partition_indexes.iter().filter_map(|i| t.partition(*i)));
                }
            }
        }
    }
    meta.respond(&ListPartitionReassignmentsResponse::default().with_topics(topics))
}

fn push_ongoing<'a>(out: &mut Vec<OngoingTopicReassignment>, t: &TopicMeta, partitions: impl Iterator<Item = &'a PartitionMeta>) {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let ongoing: Vec<_> = partitions
        .filter(|p| p.is_reassigning())
        .map(|p| {
            let replicas: Vec<i32> = p.replicas.iter().map(|r| r.broker).collect();
            OngoingPartitionReassignment::default()
                .with_partition_index(p.partition)
                .with_replicas(ids(&replicas))
                .with_adding_replicas(ids(&p.adding_replicas))
                .with_removing_replicas(ids(&p.removing_replicas))
        })
        .collect();
    if !ongoing.is_empty() {
        out.push(OngoingTopicReassignment::default().with_name(topic_name(&t.name)).with_partitions(ongoing));
    }
}
