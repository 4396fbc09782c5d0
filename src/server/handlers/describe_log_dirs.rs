//! DescribeLogDirs 1-4 (Kafka 4.1 removed v0): the one log dir, each partition's bytes on
//! disk and offset lag, and the file system's total and usable bytes (v4).
//!
//! As Kafka's ReplicaManager.describeLogDirs: `topics` null means every partition;
//! partitions the request names that this broker does not host are left out (no error).
//! Offset lag is `max(high watermark - log end offset, 0)` for a current (not future)
//! replica: 0 for every partition here (one replica, the leader, whose high watermark
//! never passes its log end). If the log dir cannot be read the result carries
//! KAFKA_STORAGE_ERROR and no topics, as Kafka reports an offline log dir.
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::DescribeLogDirsRequest;

use super::{str_bytes, topic_name};
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::log_dir::{log_dir_path, measure, MAX_PARTITIONS_MEASURED};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeLogDirsRequest) -> Response {
    let image = ctx.image();
    // (topic, partition) hosted here and asked for, sorted by topic for the answer.
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
    let dirs = wanted.iter().map(|(t, p)| format!("{t}-{p}")).collect();
    let log_dir = log_dir_path(&ctx.config.data_dir);
    let result = DescribeLogDirsResult::default().with_log_dir(str_bytes(&log_dir));
    let result = match measure(ctx.config.data_dir.clone(), dirs).await {
        Ok(usage) => {
            let mut by_topic: BTreeMap<&str, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for (t, p) in &wanted {
                let Some(&bytes) = usage.partition_bytes.get(&format!("{t}-{p}")) else { continue };
                by_topic.entry(t).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(*p)
                        .with_partition_size(i64::try_from(bytes).unwrap_or(i64::MAX))
                        .with_offset_lag(0)
                        .with_is_future_key(false),
                );
            }
            let topics = by_topic
                .into_iter()
                .map(|(t, ps)| DescribeLogDirsTopic::default().with_name(topic_name(t)).with_partitions(ps))
                .collect();
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
    };
    meta.respond(&DescribeLogDirsResponse::default().with_results(vec![result]))
}
