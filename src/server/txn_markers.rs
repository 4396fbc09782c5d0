//! Transaction markers on their way to partition leaders: the transaction coordinator's
//! marker writer (`txn::MarkerWriter`), and the partition-leader side that both local
//! markers and WriteTxnMarkers requests from other brokers go through.
//!
//! A marker for a partition this broker leads is appended on its owning shard through
//! the router (one message per shard); the others go to their leaders as one
//! WriteTxnMarkers v1 request per broker. A marker on a `__consumer_offsets` partition
//! then completes the transaction's offset commits in the group coordinator there
//! (KIP-447: pending until the marker).
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::protocol::StrBytes;

use super::shard::ShardRouter;
use crate::cluster::image::BrokerMeta;
use crate::cluster::router::{OpBatch, PartitionOp};
use crate::cluster::shard_partitions::ShardPartitions;
use crate::group::ops::{call_partition as call_group, GroupOp};
use crate::group::OFFSETS_TOPIC;
use crate::protocol::ErrorCode;
use crate::record::{ControlType, Marker};
use crate::security::peer_security::PeerSecurity;
use crate::txn::{MarkerRequest, MarkerWriter};

/// The WriteTxnMarkers version brokers send each other (Kafka 4.1's only one).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Appends the markers of `req` on the partitions this broker leads (each on its owning
/// shard), then completes the group offsets of markers on `__consumer_offsets`. One code
/// per partition, in order.
pub async fn write_markers_here(router: &ShardRouter, req: &MarkerRequest, timeout_ms: i32) -> Vec<ErrorCode> {
    let image = router.partitions().image();
    let marker = Marker { control: if req.commit { ControlType::Commit } else { ControlType::Abort }, coordinator_epoch: req.coordinator_epoch };
    let mut codes = vec![ErrorCode::NONE; req.partitions.len()];
    let mut batch = OpBatch::with_capacity(req.partitions.len());
    let mut sent = Vec::with_capacity(req.partitions.len());
    for (i, (topic, partition)) in req.partitions.iter().enumerate() {
        match image.topic(topic).and_then(|t| t.partition(*partition)) {
            None => codes[i] = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            Some(pm) => {
                let op = PartitionOp::WriteTxnMarker {
                    producer_id: req.producer_id,
                    producer_epoch: req.producer_epoch,
                    marker,
                    transaction_version: req.transaction_version,
                    timeout_ms,
                };
                batch.push(pm.shard, topic.as_str(), *partition, op);
                sent.push(i);
            }
        }
    }
    let results = router.run(batch).await;
    for (i, r) in sent.into_iter().zip(results) {
        codes[i] = match r {
            Ok(_) => ErrorCode::NONE,
            Err(e) => ErrorCode::from(&e),
        };
    }
    // KIP-447: the offsets the transaction committed become visible (or are dropped)
    // once the marker is on their `__consumer_offsets` partition.
    for (i, (topic, partition)) in req.partitions.iter().enumerate() {
        if topic == OFFSETS_TOPIC && codes[i] == ErrorCode::NONE {
            let Some(pm) = image.topic(topic).and_then(|t| t.partition(*partition)) else { continue };
            let op = GroupOp::CompleteTxn { producer_id: req.producer_id, commit: req.commit };
            if let Err(e) = call_group(router, pm.shard, *partition, op).await {
                tracing::warn!(partition, producer_id = req.producer_id, code = %e, "could not complete transactional offsets after the marker");
                codes[i] = e;
            }
        }
    }
    codes
}

/// The transaction coordinator's marker writer on this shard: local partitions through
/// `write_markers_here`, the others as WriteTxnMarkers to their leaders.
pub fn marker_writer(router: Rc<ShardRouter>, partitions: Rc<ShardPartitions>, node_id: i32, inter_broker: Arc<PeerSecurity>) -> MarkerWriter {
    let timeout_ms = super::shard::MARKER_TIMEOUT_MS;
    Box::new(move |req: MarkerRequest| {
        let (router, partitions, inter_broker) = (router.clone(), partitions.clone(), inter_broker.clone());
        Box::pin(async move {
            let image = partitions.image();
            let mut codes = vec![ErrorCode::NONE; req.partitions.len()];
            let mut local: Vec<usize> = Vec::new();
            let mut remote: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            for (i, (topic, partition)) in req.partitions.iter().enumerate() {
                match image.topic(topic).and_then(|t| t.partition(*partition)) {
                    None => codes[i] = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    Some(pm) if pm.leader < 0 => codes[i] = ErrorCode::LEADER_NOT_AVAILABLE,
                    Some(pm) if pm.leader == node_id => local.push(i),
                    Some(pm) => remote.entry(pm.leader).or_default().push(i),
                }
            }
            if !local.is_empty() {
                let here = MarkerRequest { partitions: local.iter().map(|&i| req.partitions[i].clone()).collect(), ..req.clone() };
                for (i, code) in local.iter().zip(write_markers_here(&router, &here, timeout_ms).await) {
                    codes[*i] = code;
                }
            }
            for (broker, idx) in remote {
                let Some(b) = image.brokers.get(&broker).filter(|b| !b.fenced) else {
                    for i in idx {
                        codes[i] = ErrorCode::NOT_LEADER_OR_FOLLOWER;
                    }
                    continue;
                };
                let answered = send_markers(b, &inter_broker, node_id, &req, &idx, timeout_ms).await;
                for (k, i) in idx.iter().enumerate() {
                    codes[*i] = match &answered {
                        Ok(per) => per.get(k).copied().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR),
                        Err(e) => {
                            tracing::debug!(broker, error = %e, "WriteTxnMarkers failed; retried");
                            ErrorCode::REQUEST_TIMED_OUT
                        }
                    };
                }
            }
            codes
        })
    })
}

/// One WriteTxnMarkers request for the partitions `idx` of `req` to `broker`; the codes
/// in `idx` order.
async fn send_markers(
    broker: &BrokerMeta,
    inter_broker: &PeerSecurity,
    node_id: i32,
    req: &MarkerRequest,
    idx: &[usize],
    timeout_ms: i32,
) -> Result<Vec<ErrorCode>, String> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for &i in idx {
        let (topic, partition) = &req.partitions[i];
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == topic => t.partition_indexes.push(*partition),
            _ => topics
                .push(WritableTxnMarkerTopic::default().with_name(TopicName(StrBytes::from_string(topic.clone()))).with_partition_indexes(vec![*partition])),
        }
    }
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(req.producer_id))
        .with_producer_epoch(req.producer_epoch)
        .with_transaction_result(req.commit)
        .with_coordinator_epoch(req.coordinator_epoch)
        .with_topics(topics);
    let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
    // The leader waits up to the marker timeout for its replicas; leave it time to answer.
    let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(30_000) + 5_000);
    let client_id = format!("shardlog-txn-coordinator-{node_id}");
    let resp: WriteTxnMarkersResponse =
        super::broker_call::call(broker, inter_broker, &client_id, ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION, &request, timeout).await?;
    let mut out = Vec::with_capacity(idx.len());
    let m = resp.markers.into_iter().find(|m| m.producer_id.0 == req.producer_id).ok_or("no result for the marker")?;
    for &i in idx {
        let (topic, partition) = &req.partitions[i];
        let code = m
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == topic)
            .and_then(|t| t.partitions.iter().find(|p| p.partition_index == *partition))
            .map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |p| ErrorCode(p.error_code));
        out.push(code);
    }
    let _ = BrokerId(node_id);
    Ok(out)
}
