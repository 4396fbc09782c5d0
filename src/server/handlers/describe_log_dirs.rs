//! DescribeLogDirs 1-4 (Kafka 4.1 removed v0): every log dir (`log_dirs`, JBOD), each with
//! the partitions it holds, their bytes on disk and offset lag, and the file system's total
//! and usable bytes (v4).
//!
//! As Kafka's ReplicaManager.describeLogDirs: `topics` null means every partition;
//! partitions the request names that this broker does not host are left out (no error); a
//! dir holding none of the partitions asked for is still listed, with no topics.
//! Offset lag is `max(high watermark - log end offset, 0)` for a current (not future)
//! replica: 0 for every partition here (one replica, the leader, whose high watermark
//! never passes its log end). A log dir that cannot be read carries KAFKA_STORAGE_ERROR
//! and no topics, as Kafka reports an offline log dir; the others are still answered.
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_log_dirs_response::{DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic};
use kafka_protocol::messages::DescribeLogDirsRequest;

use super::{str_bytes, topic_name};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::log_dir::{log_dir_path, measure, MAX_PARTITIONS_MEASURED};
use crate::server::shard::ShardContext;
use crate::storage::log_dirs::partition_dir_name;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeLogDirsRequest) -> Response {
    // ACLs: DESCRIBE on the cluster (v3+ says so; older versions get no dirs, as Kafka).
    if !ctx.access(&meta).allows_cluster(Operation::Describe) {
        let resp = DescribeLogDirsResponse::default();
        return meta.respond(&if meta.version >= 3 { resp.with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code()) } else { resp });
    }
    // A topic another shard already reported (Metadata, CreateTopics) is known here too.
    let named: Option<Vec<&str>> = req.topics.as_ref().map(|ts| ts.iter().map(|t| &*t.topic.0).collect());
    ctx.catch_up_for_topics(named.as_deref()).await;
    let image = ctx.image();
    // (topic, partition) hosted here and asked for.
    let mut wanted: Vec<(String, i32)> = Vec::new();
    match &req.topics {
        None => {
            for t in image.topics.values() {
                wanted.extend(t.partitions.iter().map(|p| (t.name.clone(), p.partition)));
            }
        }
        Some(topics) => {
            for t in topics {
                let Some(meta) = image.topic(&t.topic.0) else { continue };
                for &p in &t.partitions {
                    if meta.partition(p).is_some() && !wanted.contains(&(meta.name.clone(), p)) {
                        wanted.push((meta.name.clone(), p));
                    }
                }
            }
        }
    }
    wanted.truncate(MAX_PARTITIONS_MEASURED);
    // Each partition is measured in the dir that holds it (not placed yet: no files, left out).
    let dirs = ctx.log_dirs.dirs();
    let mut in_dir: Vec<Vec<(String, i32)>> = vec![Vec::new(); dirs.len()];
    for (t, p) in wanted {
        if let Some(i) = ctx.log_dirs.dir_index_of(&t, p) {
            in_dir[i].push((t, p));
        }
    }
    let mut results = Vec::with_capacity(dirs.len());
    for (dir, partitions) in dirs.iter().zip(in_dir) {
        results.push(describe_dir(ctx, dir, partitions).await);
    }
    meta.respond(&DescribeLogDirsResponse::default().with_results(results))
}

/// One log dir's result: `partitions` are the ones asked for that it holds.
async fn describe_dir(ctx: &ShardContext, dir: &std::path::Path, partitions: Vec<(String, i32)>) -> DescribeLogDirsResult {
    let log_dir = log_dir_path(dir);
    let result = DescribeLogDirsResult::default().with_log_dir(str_bytes(&log_dir));
    let names = partitions.iter().map(|(t, p)| partition_dir_name(t, *p)).collect();
    match measure(dir.to_path_buf(), names).await {
        Ok(usage) => {
            let mut by_topic: BTreeMap<&str, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for (t, p) in &partitions {
                let Some(&bytes) = usage.partition_bytes.get(&partition_dir_name(t, *p)) else { continue };
                by_topic.entry(t).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(*p)
                        .with_partition_size(i64::try_from(bytes).unwrap_or(i64::MAX))
                        .with_offset_lag(0)
                        .with_is_future_key(false),
                );
            }
            let topics = by_topic.into_iter().map(|(t, ps)| DescribeLogDirsTopic::default().with_name(topic_name(t)).with_partitions(ps)).collect();
            result
                .with_topics(topics)
                .with_total_bytes(i64::try_from(usage.total_bytes).unwrap_or(i64::MAX))
                .with_usable_bytes(i64::try_from(usage.usable_bytes).unwrap_or(i64::MAX))
        }
        Err(e) => {
            tracing::warn!(shard = ctx.shard, dir = %log_dir, error = %e, "cannot read the log dir for DescribeLogDirs");
            // Kafka's offline log dir: error, no topics, sizes unknown (-1).
            result.with_error_code(ErrorCode::KAFKA_STORAGE_ERROR.code()).with_total_bytes(-1).with_usable_bytes(-1)
        }
    }
}
