//! The log end offsets (ListOffsets latest: the high watermark) of partitions anywhere in
//! the cluster, as Kafka's group coordinator fetches them for DescribeShareGroupOffsets'
//! lag (its PartitionMetadataClient): the partitions this broker leads through the
//! router, the others with one ListOffsets per leading broker over the inter-broker
//! listener. Not a hot path (an admin request).
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, ListOffsetsResponse, TopicName};

use super::shard::ShardContext;
use crate::cluster::router::{OpBatch, OpOutput, PartitionOp};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// ListOffsets' "latest".
const LATEST_TIMESTAMP: i64 = -1;
/// The ListOffsets version sent to other brokers (Kafka 4.4 and shardlog serve it).
const LIST_OFFSETS_VERSION: i16 = 9;
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Each partition's log end offset, or its error, in the order given.
pub async fn latest_offsets(ctx: &Rc<ShardContext>, partitions: &[(String, i32)]) -> Vec<Result<i64, ErrorCode>> {
    let image = ctx.image();
    let mut out: Vec<Result<i64, ErrorCode>> = vec![Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION); partitions.len()];
    let mut local = OpBatch::with_capacity(partitions.len());
    let mut local_at = Vec::new();
    let mut remote: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, (topic, partition)) in partitions.iter().enumerate() {
        let Some(meta) = image.topic(topic).and_then(|t| t.partition(*partition)) else { continue };
        if meta.leader == ctx.config.node_id {
            local.push(meta.shard, topic, *partition, PartitionOp::ListOffsets { timestamp: LATEST_TIMESTAMP, read_committed: false });
            local_at.push(i);
        } else if meta.leader >= 0 {
            remote.entry(meta.leader).or_default().push(i);
        } else {
            out[i] = Err(ErrorCode::LEADER_NOT_AVAILABLE);
        }
    }
    for (i, result) in local_at.into_iter().zip(ctx.router.run(local).await) {
        out[i] = match result {
            Ok(OpOutput::Offset(offset, _)) => Ok(offset),
            Ok(_) => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
            Err(e) => Err(ErrorCode::from(&e)),
        };
    }
    let calls = remote.into_iter().map(|(leader, at)| {
        let image = &image;
        async move {
            let Some(broker) = image.brokers.get(&leader).filter(|b| !b.fenced) else { return (at, Err(ErrorCode::LEADER_NOT_AVAILABLE)) };
            let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
            for &i in &at {
                let (topic, partition) = &partitions[i];
                topics.entry(topic).or_default().push(ListOffsetsPartition::default().with_partition_index(*partition).with_timestamp(LATEST_TIMESTAMP));
            }
            let req = ListOffsetsRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(topics.into_iter().map(|(t, ps)| ListOffsetsTopic::default().with_name(TopicName(str_bytes(t))).with_partitions(ps)).collect());
            let client_id = format!("shardlog-partition-end-offsets-{}", ctx.config.node_id);
            let resp: Result<ListOffsetsResponse, String> =
                super::broker_call::call(broker, &ctx.inter_broker, &client_id, ApiKey::ListOffsets, LIST_OFFSETS_VERSION, &req, CALL_TIMEOUT).await;
            (
                at,
                resp.map_err(|e| {
                    tracing::debug!(broker = leader, error = %e, "ListOffsets to the partition's leader failed");
                    ErrorCode::REQUEST_TIMED_OUT
                }),
            )
        }
    });
    for (at, resp) in futures::future::join_all(calls).await {
        for i in at {
            out[i] = match &resp {
                Err(e) => Err(*e),
                Ok(r) => {
                    let (topic, partition) = &partitions[i];
                    let p = r.topics.iter().filter(|t| t.name.0.as_str() == topic).flat_map(|t| t.partitions.iter()).find(|p| p.partition_index == *partition);
                    match p {
                        Some(p) if p.error_code == 0 => Ok(p.offset),
                        Some(p) => Err(ErrorCode(p.error_code)),
                        None => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
                    }
                }
            };
        }
    }
    out
}
