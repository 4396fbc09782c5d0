//! One file per Kafka API. Each handler takes the decoded request body and returns the
//! encoded response frames; partition work goes through the shard's router
//! (`cluster/router.rs`) so it runs on the owning shard.
//!
//! Handlers are the top of the stack: they may use every layer below; nothing below
//! imports them (shared helpers for lower layers live in `protocol/`).
pub mod acls;
pub mod acls_disabled;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub(crate) mod cluster_view;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delegation_tokens;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod fetch_remote;
pub mod find_coordinator;
mod group_topic_ids;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod internal_topic;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod quorum_membership;
pub mod replica_fetch;
pub mod share_acknowledge;
pub mod share_common;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod share_group_state;
pub mod share_state_common;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
pub mod streams_group_topology_description_update;
pub mod sync_group;
mod txn_common;
pub mod txn_offset_commit;
mod txn_verification;
pub mod update_features;
pub mod write_txn_markers;

use super::shard::ShardContext;
use crate::protocol::ErrorCode;

pub(crate) use crate::protocol::strings::{str_bytes, topic_name};

pub(crate) fn uuid(id: &[u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id)
}

/// This node's id and its endpoint on `listener` (`RequestMeta::listener`).
pub(crate) fn this_node(ctx: &ShardContext, listener: u8) -> (i32, String, i32) {
    let l = &ctx.listeners.all[usize::from(listener)];
    (ctx.config.node_id, l.advertised_host.clone(), l.advertised_port)
}

/// How many of `partitions` of a topic (`None`: unknown topic) an image does not have:
/// what `ShardContext::image_for_request` compares between this shard and the controller.
pub(crate) fn unknown_partitions(topic: Option<&crate::cluster::image::TopicMeta>, partitions: impl Iterator<Item = i32>) -> usize {
    match topic {
        None => partitions.count().max(1),
        Some(t) => partitions.filter(|&p| t.partition(p).is_none()).count(),
    }
}

/// Kafka's check of a request's `current_leader_epoch` (-1: not given) against the
/// partition's: a client ahead of this broker gets UNKNOWN_LEADER_EPOCH, one behind it
/// FENCED_LEADER_EPOCH.
pub(crate) fn leader_epoch_error(current_leader_epoch: i32, partition_epoch: i32) -> Option<ErrorCode> {
    if current_leader_epoch < 0 || current_leader_epoch == partition_epoch {
        None
    } else if current_leader_epoch > partition_epoch {
        Some(ErrorCode::UNKNOWN_LEADER_EPOCH)
    } else {
        Some(ErrorCode::FENCED_LEADER_EPOCH)
    }
}

pub(crate) fn code(e: impl Into<ErrorCode>) -> i16 {
    e.into().code()
}

/// Runs a group operation on the group's coordinator once the request's principal may do
/// `operation` to the group (else GROUP_AUTHORIZATION_FAILED, as Kafka answers).
pub(crate) async fn route_group(
    ctx: &std::rc::Rc<ShardContext>,
    meta: &super::dispatch::RequestMeta,
    operation: crate::security::acl::Operation,
    group_id: &str,
    op: crate::group::GroupOp,
) -> Result<crate::group::GroupReply, ErrorCode> {
    if !ctx.access(meta).allows_group(operation, group_id) {
        return Err(ErrorCode::GROUP_AUTHORIZATION_FAILED);
    }
    crate::group::ops::route(&ctx.router, group_id, op).await
}
