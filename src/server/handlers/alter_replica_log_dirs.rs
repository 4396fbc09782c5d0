//! AlterReplicaLogDirs 1-2 (Kafka 4.1 removed v0), answered as Kafka's
//! ReplicaManager.alterReplicaLogDirs:
//! - a path that is not one of the log dirs: LOG_DIR_NOT_FOUND (checked first, for every
//!   partition);
//! - a partition it does not host: UNKNOWN_TOPIC_OR_PARTITION;
//! - a partition already in that dir: NONE (nothing to do);
//! - a partition in another log dir: KAFKA_STORAGE_ERROR, with no move. Deviation: Kafka
//!   copies the replica into a "future" log in the new dir while it keeps serving, then
//!   swaps; shardlog does not move replicas between its log dirs (yet). KAFKA_STORAGE_ERROR
//!   is what Kafka answers when it cannot place a replica in the dir asked for, and the
//!   partition stays where it is, served as before.
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
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterReplicaLogDirsRequest) -> Response {
    // A topic another shard already reported (Metadata, CreateTopics) is known here too.
    let named: Vec<&str> = req.dirs.iter().flat_map(|d| d.topics.iter().map(|t| &*t.name.0)).collect();
    ctx.catch_up_for_topics(Some(&named)).await;
    let image = ctx.image();
    let mut outcome: BTreeMap<String, BTreeMap<i32, ErrorCode>> = BTreeMap::new();
    // ACLs: ALTER on the cluster, else every partition is CLUSTER_AUTHORIZATION_FAILED.
    let denied = !ctx.access(&meta).allows_cluster(Operation::Alter);
    for dir in &req.dirs {
        let target = ctx.log_dirs.index_of(std::path::Path::new(&*dir.path));
        for t in &dir.topics {
            let hosted = image.topic(&t.name.0);
            for &p in &t.partitions {
                let code = match target {
                    _ if denied => ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                    None => ErrorCode::LOG_DIR_NOT_FOUND,
                    Some(_) if hosted.is_none_or(|m| m.partition(p).is_none()) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    // Not placed yet (no files): Kafka would remember the dir for its creation;
                    // shardlog places it itself, so it cannot promise that dir.
                    Some(i) if ctx.log_dirs.dir_index_of(&t.name.0, p) == Some(i) => ErrorCode::NONE,
                    Some(_) => ErrorCode::KAFKA_STORAGE_ERROR,
                };
                outcome.entry(t.name.0.to_string()).or_default().insert(p, code);
            }
        }
    }
    let results = outcome
        .into_iter()
        .map(|(t, ps)| {
            AlterReplicaLogDirTopicResult::default().with_topic_name(topic_name(&t)).with_partitions(
                ps.into_iter().map(|(p, e)| AlterReplicaLogDirPartitionResult::default().with_partition_index(p).with_error_code(e.code())).collect(),
            )
        })
        .collect();
    meta.respond(&AlterReplicaLogDirsResponse::default().with_results(results))
}
