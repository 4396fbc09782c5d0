//! FindCoordinator 0-6: this broker coordinates every group once `__consumer_offsets`
//! exists (single node). Batched keys from v4. Transaction coordinators do not exist yet:
//! key type 1 gets COORDINATOR_NOT_AVAILABLE.
use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{str_bytes, this_node};
use crate::group::ops::coordinator_of;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn lookup(ctx: &ShardContext, key: &str, key_type: i8) -> Result<(i32, String, i32), ErrorCode> {
    match key_type {
        KEY_TYPE_GROUP if key.is_empty() => Err(ErrorCode::INVALID_REQUEST),
        KEY_TYPE_GROUP => match coordinator_of(&ctx.router, key) {
            Some(_) => Ok(this_node(ctx)),
            None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        },
        KEY_TYPE_TRANSACTION => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        _ => Err(ErrorCode::INVALID_REQUEST),
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
                    Err(e) => c.with_node_id(BrokerId(-1)).with_host(StrBytes::default()).with_port(-1).with_error_code(e.code()).with_error_message(Some(str_bytes(&e.to_string()))),
                }
            })
            .collect();
        return meta.respond(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let resp = match lookup(ctx, &req.key, req.key_type) {
        Ok((id, host, port)) => FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(str_bytes(&host)).with_port(port),
        Err(e) => {
            let r = FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)).with_port(-1);
            // error_message exists from v1.
            if meta.version >= 1 { r.with_error_message(Some(str_bytes(&e.to_string()))) } else { r }
        }
    };
    meta.respond(&resp)
}
