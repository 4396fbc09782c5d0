//! `shardlog txn list|producers|abort` against a running cluster: the transactions each
//! broker coordinates, the producers of a topic's partitions with their open transactions
//! (how long open: a transaction open far past any timeout is hanging), and aborting one
//! on a partition (a WriteTxnMarkers abort to its leader, as `kafka-transactions abort`).
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use kafka_protocol::messages::describe_producers_request::{DescribeProducersRequest, TopicRequest};
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest};
use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::client::Client;

fn err_name(code: i16) -> String {
    kafka_protocol::ResponseError::try_from_code(code).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("error {code}"))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The brokers (id -> host:port) and, for `topic`, each partition's leader.
fn cluster(bootstrap: &str, topic: Option<&str>) -> anyhow::Result<(BTreeMap<i32, String>, BTreeMap<i32, i32>)> {
    let mut c = Client::connect(bootstrap)?;
    let topics = topic.map(|t| vec![MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))]);
    let resp = c.send(&MetadataRequest::default().with_topics(topics), 12)?;
    let brokers = resp.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
    let mut leaders = BTreeMap::new();
    for t in &resp.topics {
        if t.error_code != 0 {
            bail!("topic {}: {}", topic.unwrap_or(""), err_name(t.error_code));
        }
        for p in &t.partitions {
            leaders.insert(p.partition_index, p.leader_id.0);
        }
    }
    Ok((brokers, leaders))
}

pub fn list(bootstrap: &str) -> anyhow::Result<()> {
    let (brokers, _) = cluster(bootstrap, None)?;
    println!("{:<12} {:<40} {:>12} STATE", "COORDINATOR", "TRANSACTIONAL ID", "PRODUCER ID");
    for (id, addr) in brokers {
        let mut c = Client::connect(&addr)?;
        let resp = c.send(&ListTransactionsRequest::default(), 1)?;
        if resp.error_code != 0 {
            bail!("list transactions on broker {id}: {}", err_name(resp.error_code));
        }
        for t in resp.transaction_states {
            println!("{:<12} {:<40} {:>12} {}", id, t.transactional_id.0.as_str(), t.producer_id.0, t.transaction_state.as_str());
        }
    }
    Ok(())
}

/// Every producer of every partition of `topic`, from the partitions' leaders.
pub fn producers(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    let (brokers, leaders) = cluster(bootstrap, Some(topic))?;
    println!("{:>9} {:>12} {:>6} {:>13} {:>14} {:>11}", "PARTITION", "PRODUCER ID", "EPOCH", "LAST SEQUENCE", "TXN START", "IDLE S");
    let now = now_ms();
    for (partition, leader) in leaders {
        let state = describe(&brokers, leader, topic, partition)?;
        for p in state {
            let open = if p.current_txn_start_offset >= 0 { format!("{}", (now - p.last_timestamp).max(0) / 1000) } else { "-".into() };
            let start = if p.current_txn_start_offset >= 0 { p.current_txn_start_offset.to_string() } else { "-".into() };
            println!("{:>9} {:>12} {:>6} {:>13} {:>14} {:>11}", partition, p.producer_id.0, p.producer_epoch, p.last_sequence, start, open);
        }
    }
    Ok(())
}

fn describe(
    brokers: &BTreeMap<i32, String>,
    leader: i32,
    topic: &str,
    partition: i32,
) -> anyhow::Result<Vec<kafka_protocol::messages::describe_producers_response::ProducerState>> {
    let addr = brokers.get(&leader).with_context(|| format!("partition {partition} has no leader"))?;
    let mut c = Client::connect(addr)?;
    let req = DescribeProducersRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(TopicName(StrBytes::from_string(topic.to_string()))).with_partition_indexes(vec![partition])]);
    let resp = c.send(&req, 0)?;
    let Some(p) = resp.topics.into_iter().flat_map(|t| t.partitions).find(|p| p.partition_index == partition) else {
        bail!("no answer for {topic}-{partition}")
    };
    if p.error_code != 0 {
        bail!("describe producers of {topic}-{partition}: {}", err_name(p.error_code));
    }
    Ok(p.active_producers)
}

/// Aborts the transaction open at `start_offset` on `topic`-`partition`.
pub fn abort(bootstrap: &str, topic: &str, partition: i32, start_offset: i64) -> anyhow::Result<()> {
    let (brokers, leaders) = cluster(bootstrap, Some(topic))?;
    let leader = *leaders.get(&partition).with_context(|| format!("{topic} has no partition {partition}"))?;
    let state = describe(&brokers, leader, topic, partition)?;
    let Some(p) = state.into_iter().find(|p| p.current_txn_start_offset == start_offset) else {
        bail!("no transaction starts at offset {start_offset} on {topic}-{partition} (see `shardlog txn producers`)")
    };
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(p.producer_id.0))
        .with_producer_epoch(i16::try_from(p.producer_epoch).unwrap_or(i16::MAX))
        .with_transaction_result(false)
        .with_coordinator_epoch(p.coordinator_epoch.max(0))
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(vec![partition])]);
    let addr = brokers.get(&leader).with_context(|| format!("{topic}-{partition} has no leader"))?;
    let mut c = Client::connect(addr)?;
    let resp = c.send(&WriteTxnMarkersRequest::default().with_markers(vec![marker]), 1)?;
    for m in resp.markers {
        for t in m.topics {
            for r in t.partitions {
                if r.error_code != 0 {
                    bail!("abort on {topic}-{partition}: {}", err_name(r.error_code));
                }
            }
        }
    }
    println!("aborted the transaction of producer {} (epoch {}) starting at {topic}-{partition} offset {start_offset}", p.producer_id.0, p.producer_epoch);
    Ok(())
}
