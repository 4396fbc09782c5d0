//! AlterReplicaLogDirs 1-2 (Kafka 4.1 removed v0), answered as Kafka's
//! ReplicaManager.alterReplicaLogDirs answers on a broker with one log dir:
//! - a path that is not the log dir: LOG_DIR_NOT_FOUND (checked first, for every partition);
//! - a partition the broker hosts, moved to the dir it is already in: NONE (nothing to do);
//! - a partition it does not host: UNKNOWN_TOPIC_OR_PARTITION.
//!
//! A partition named under several dirs takes the last one, as Kafka's request map does.
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult, AlterReplicaLogDirsResponse,
};
use kafka_protocol::messages::AlterReplicaLogDirsRequest;

use super::topic_name;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::log_dir::log_dir_path;
use crate::server::shard::ShardContext;

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterReplicaLogDirsRequest) -> Response {
    let image = ctx.image();
    let log_dir = log_dir_path(&ctx.config.data_dir);
    let mut outcome: BTreeMap<String, BTreeMap<i32, ErrorCode>> = BTreeMap::new();
    for dir in &req.dirs {
        let known_dir = *dir.path == *log_dir;
        for t in &dir.topics {
            let topic = image.topic(&t.name.0);
            for &p in &t.partitions {
                let code = if !known_dir {
                    ErrorCode::LOG_DIR_NOT_FOUND
                } else if topic.is_some_and(|m| m.partition(p).is_some()) {
                    ErrorCode::NONE
                } else {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                };
                outcome.entry(t.name.0.to_string()).or_default().insert(p, code);
            }
        }
    }
    let results = outcome
        .into_iter()
        .map(|(t, ps)| {
            AlterReplicaLogDirTopicResult::default().with_topic_name(topic_name(&t)).with_partitions(
                ps.into_iter()
                    .map(|(p, e)| AlterReplicaLogDirPartitionResult::default().with_partition_index(p).with_error_code(e.code()))
                    .collect(),
            )
        })
        .collect();
    meta.respond(&AlterReplicaLogDirsResponse::default().with_results(results))
}
