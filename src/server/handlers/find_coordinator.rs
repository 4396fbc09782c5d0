//! FindCoordinator 0-6: a group's coordinator is the broker leading its
//! `__consumer_offsets` partition (the coordinator runs on the shard owning it there);
//! none while that partition has no leader. Batched keys from v4.
//!
//! Transactions are not implemented, so key type 1 (a transactional id) gets
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED with a message saying why — what Kafka answers a
//! client that may not use that transactional id. The code is chosen for what clients do
//! with it: it is the one FindCoordinator error librdkafka treats as fatal (every other
//! code, COORDINATOR_NOT_AVAILABLE included, is retried until `init_transactions` times
//! out), and Java's producer, franz-go and kafka-python fail at once on it too (not
//! retriable), showing our message where they show the broker's (librdkafka, franz-go).
use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::cluster_view::endpoint_of;
use super::str_bytes;
use crate::group::ops::coordinator_of;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Why a transactional id has no coordinator here (the error message clients show).
pub const TRANSACTIONS_UNSUPPORTED: &str = "transactions are not supported by this broker (shardlog has no transaction coordinator)";

/// A lookup failure: the code and the message sent with it.
struct Failure(ErrorCode, String);

fn lookup(ctx: &ShardContext, key: &str, key_type: i8) -> Result<(i32, String, i32), Failure> {
    let plain = |e: ErrorCode| Failure(e, e.to_string());
    match key_type {
        KEY_TYPE_GROUP if key.is_empty() => Err(plain(ErrorCode::INVALID_REQUEST)),
        KEY_TYPE_GROUP => {
            let image = ctx.image();
            let leader = coordinator_of(&ctx.router, key)
                .and_then(|(p, _)| image.topic(crate::group::OFFSETS_TOPIC)?.partition(p).map(|m| m.leader));
            match leader.and_then(|l| endpoint_of(&image, l)) {
                Some(node) => Ok(node),
                None => Err(plain(ErrorCode::COORDINATOR_NOT_AVAILABLE)),
            }
        }
        KEY_TYPE_TRANSACTION => Err(Failure(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONS_UNSUPPORTED.to_string())),
        _ => Err(plain(ErrorCode::INVALID_REQUEST)),
    }
}

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: FindCoordinatorRequest) -> Response {
    if meta.version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let c = Coordinator::default().with_key(k.clone());
                match lookup(ctx, k, req.key_type) {
                    Ok((id, host, port)) => c.with_node_id(BrokerId(id)).with_host(str_bytes(&host)).with_port(port),
                    Err(Failure(e, msg)) => c.with_node_id(BrokerId(-1)).with_host(StrBytes::default()).with_port(-1).with_error_code(e.code()).with_error_message(Some(str_bytes(&msg))),
                }
            })
            .collect();
        return meta.respond(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let resp = match lookup(ctx, &req.key, req.key_type) {
        Ok((id, host, port)) => FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(str_bytes(&host)).with_port(port),
        Err(Failure(e, msg)) => {
            let r = FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)).with_port(-1);
            // error_message exists from v1.
            if meta.version >= 1 { r.with_error_message(Some(str_bytes(&msg))) } else { r }
        }
    };
    meta.respond(&resp)
}
