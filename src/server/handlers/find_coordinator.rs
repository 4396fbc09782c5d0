//! FindCoordinator 0-6: a group's coordinator is the broker leading its
//! `__consumer_offsets` partition, a transactional id's (key type 1) the broker leading
//! its `__transaction_state` partition, a share-partition's (key type 2, from v6, asked
//! by brokers: `group:topic_id:partition`, CLUSTER_ACTION) the broker leading its
//! `__share_group_state` partition (each coordinator runs on the shard owning that
//! partition there); COORDINATOR_NOT_AVAILABLE while the partition has no leader, or
//! while the internal topic is being created (the first lookup creates it, as Kafka
//! does). Batched keys from v4.
use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::cluster_view::endpoint_of;
use super::share_state_common::{ensure_share_group_state_topic, share_coordinator_of};
use super::str_bytes;
use super::txn_common::ensure_transaction_state_topic;
use crate::group::ops::coordinator_of;
use crate::group::share::state_coordinator::SHARE_GROUP_STATE_TOPIC;
use crate::group::share::state_records::SharePartitionKey;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::authorization::Access;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::ops::coordinator_of as txn_coordinator_of;
use crate::txn::TRANSACTION_STATE_TOPIC;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;

/// A lookup failure: the code and the message sent with it.
struct Failure(ErrorCode, String);

fn lookup(ctx: &Rc<ShardContext>, access: &Access<'_>, key: &str, key_type: i8, meta: &RequestMeta) -> Result<(i32, String, i32), Failure> {
    let plain = |e: ErrorCode| Failure(e, e.to_string());
    let listener = meta.listener;
    match key_type {
        KEY_TYPE_GROUP if key.is_empty() => Err(plain(ErrorCode::INVALID_REQUEST)),
        // ACLs: DESCRIBE on the group or transactional id (Kafka's KafkaApis).
        KEY_TYPE_GROUP if !access.allows_group(Operation::Describe, key) => Err(plain(ErrorCode::GROUP_AUTHORIZATION_FAILED)),
        KEY_TYPE_TRANSACTION if !key.is_empty() && !access.allows_transactional_id(Operation::Describe, key) => {
            Err(plain(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        }
        KEY_TYPE_GROUP => {
            let image = ctx.image();
            let leader = coordinator_of(&ctx.router, key).and_then(|(p, _)| image.topic(crate::group::OFFSETS_TOPIC)?.partition(p).map(|m| m.leader));
            match leader.and_then(|l| endpoint_of(ctx, &image, l, listener)) {
                Some(node) => Ok(node),
                None => Err(plain(ErrorCode::COORDINATOR_NOT_AVAILABLE)),
            }
        }
        KEY_TYPE_TRANSACTION if key.is_empty() => Err(plain(ErrorCode::INVALID_REQUEST)),
        KEY_TYPE_TRANSACTION => {
            let image = ctx.image();
            let Some(topic) = image.topic(TRANSACTION_STATE_TOPIC) else {
                ensure_transaction_state_topic(ctx);
                return Err(plain(ErrorCode::COORDINATOR_NOT_AVAILABLE));
            };
            let leader = txn_coordinator_of(&ctx.router, key).and_then(|(p, _)| topic.partition(p).map(|m| m.leader));
            match leader.and_then(|l| endpoint_of(ctx, &image, l, listener)) {
                Some(node) => Ok(node),
                None => Err(plain(ErrorCode::COORDINATOR_NOT_AVAILABLE)),
            }
        }
        KEY_TYPE_SHARE if meta.version < 6 => Err(plain(ErrorCode::INVALID_REQUEST)),
        KEY_TYPE_SHARE if !access.allows_cluster(Operation::ClusterAction) => Err(plain(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)),
        KEY_TYPE_SHARE => {
            let Some(share_key) = SharePartitionKey::parse_coordinator_key(key) else {
                return Err(Failure(ErrorCode::INVALID_REQUEST, format!("not a share coordinator key (group:topic_id:partition): {key}")));
            };
            let image = ctx.image();
            let Some((_, leader)) = share_coordinator_of(&image, &share_key) else {
                ensure_share_group_state_topic(ctx);
                return Err(plain(ErrorCode::COORDINATOR_NOT_AVAILABLE));
            };
            endpoint_of(ctx, &image, leader, listener).ok_or_else(|| plain(ErrorCode::COORDINATOR_NOT_AVAILABLE))
        }
        _ => Err(plain(ErrorCode::INVALID_REQUEST)),
    }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: FindCoordinatorRequest) -> Response {
    let internal_topic = match req.key_type {
        KEY_TYPE_TRANSACTION => Some(TRANSACTION_STATE_TOPIC),
        KEY_TYPE_SHARE => Some(SHARE_GROUP_STATE_TOPIC),
        _ => None,
    };
    if let Some(topic) = internal_topic.filter(|t| ctx.image().topic(t).is_none()) {
        // Created through another shard or broker a moment ago: this shard may lag.
        ctx.catch_up_for_topics(Some(&[topic])).await;
    }
    let access = ctx.access(&meta);
    if meta.version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let c = Coordinator::default().with_key(k.clone());
                match lookup(ctx, &access, k, req.key_type, &meta) {
                    Ok((id, host, port)) => c.with_node_id(BrokerId(id)).with_host(str_bytes(&host)).with_port(port),
                    Err(Failure(e, msg)) => c
                        .with_node_id(BrokerId(-1))
                        .with_host(StrBytes::default())
                        .with_port(-1)
                        .with_error_code(e.code())
                        .with_error_message(Some(str_bytes(&msg))),
                }
            })
            .collect();
        return meta.respond(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let resp = match lookup(ctx, &access, &req.key, req.key_type, &meta) {
        Ok((id, host, port)) => FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(str_bytes(&host)).with_port(port),
        Err(Failure(e, msg)) => {
            let r = FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)).with_port(-1);
            // error_message exists from v1.
            if meta.version >= 1 {
                r.with_error_message(Some(str_bytes(&msg)))
            } else {
                r
            }
        }
    };
    meta.respond(&resp)
}
