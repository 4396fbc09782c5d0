//! Where a tiered topic's partitions keep their data (KIP-405), for `shardlog topic
//! describe`: from each partition's leader over the Kafka protocol, the log start
//! (ListOffsets earliest, -2), the local log start (earliest-local, -4), the last offset
//! in remote storage (latest-tiered, -5) and the local bytes (DescribeLogDirs, as Kafka's
//! kafka-log-dirs reports them); with `--admin`, the remote bytes and segment count from a
//! node's admin listener (`/v1/remote-log`: Kafka's protocol carries no remote size).
use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_request::{DescribableLogDirTopic, DescribeLogDirsRequest};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponseTopic};
use kafka_protocol::messages::{BrokerId, TopicName};

use super::client::{admin_get, Client};

/// One partition's local and remote figures (-1: unknown or none).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionStorage {
    pub log_start_offset: i64,
    pub local_log_start_offset: i64,
    pub highest_remote_offset: i64,
    pub local_bytes: i64,
    /// From the admin listener, when asked for.
    pub remote: Option<(u64, usize)>,
}

impl PartitionStorage {
    /// The line `topic describe` prints under the partition.
    pub fn line(&self) -> String {
        let mut s = format!(
            "\t\tLogStartOffset: {}\tLocalLogStartOffset: {}\tHighestRemoteOffset: {}\tLocalBytes: {}",
            self.log_start_offset, self.local_log_start_offset, self.highest_remote_offset, self.local_bytes
        );
        if let Some((bytes, segments)) = self.remote {
            s.push_str(&format!("\tRemoteBytes: {bytes}\tRemoteSegments: {segments}"));
        }
        s
    }
}

/// The figures of every partition of `topic` (as `resp` describes it), asked of each
/// partition's leader; partitions without a leader are left out.
pub fn partition_storage(resp: &MetadataResponse, topic: &MetadataResponseTopic, admin: Option<&str>) -> anyhow::Result<BTreeMap<i32, PartitionStorage>> {
    let name = topic.name.clone().unwrap_or_else(|| TopicName(Default::default()));
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in &topic.partitions {
        if p.leader_id.0 >= 0 {
            by_leader.entry(p.leader_id.0).or_default().push(p.partition_index);
        }
    }
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let Some(b) = resp.brokers.iter().find(|b| b.node_id.0 == leader) else { continue };
        let mut c = Client::connect(&format!("{}:{}", b.host, b.port))?;
        for &p in &partitions {
            out.insert(p, PartitionStorage { log_start_offset: -1, local_log_start_offset: -1, highest_remote_offset: -1, local_bytes: -1, remote: None });
        }
        for timestamp in [-2i64, -4, -5] {
            let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
                .with_name(name.clone())
                .with_partitions(partitions.iter().map(|&p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(timestamp)).collect())]);
            for t in &c.send(&req, 9)?.topics {
                for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                    if let Some(s) = out.get_mut(&p.partition_index) {
                        match timestamp {
                            -2 => s.log_start_offset = p.offset,
                            -4 => s.local_log_start_offset = p.offset,
                            _ => s.highest_remote_offset = p.offset,
                        }
                    }
                }
            }
        }
        let dirs = c.send(
            &DescribeLogDirsRequest::default()
                .with_topics(Some(vec![DescribableLogDirTopic::default().with_topic(name.clone()).with_partitions(partitions.clone())])),
            4,
        )?;
        for d in dirs.results.iter().filter(|d| d.error_code == 0) {
            for t in d.topics.iter().filter(|t| t.name == name) {
                for p in t.partitions.iter().filter(|p| !p.is_future_key) {
                    if let Some(s) = out.get_mut(&p.partition_index) {
                        s.local_bytes = s.local_bytes.max(0) + p.partition_size;
                    }
                }
            }
        }
    }
    if let Some(admin) = admin {
        for r in remote_logs(admin)?.into_iter().filter(|r| r.topic == name.0.as_str()) {
            if let Some(s) = out.get_mut(&r.partition) {
                s.remote = Some((r.size_bytes, r.segments));
            }
        }
        for s in out.values_mut() {
            s.remote.get_or_insert((0, 0));
        }
    }
    Ok(out)
}

/// One partition of `/v1/remote-log` (the broker's `RemoteLogSummary`; the CLI knows the
/// JSON, not the broker's types).
#[derive(serde::Deserialize)]
struct RemoteLogSummary {
    topic: String,
    partition: i32,
    size_bytes: u64,
    segments: usize,
}

/// Every partition's remote log in figures from an admin listener (host:port or a URL).
fn remote_logs(admin: &str) -> anyhow::Result<Vec<RemoteLogSummary>> {
    #[derive(serde::Deserialize)]
    struct Answer {
        partitions: Vec<RemoteLogSummary>,
    }
    let (url, body) = admin_get(admin, "/v1/remote-log")?;
    Ok(serde_json::from_str::<Answer>(&body).map_err(|e| anyhow::anyhow!("{url}: {e}"))?.partitions)
}
