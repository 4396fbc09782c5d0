//! AddOffsetsToTxn 0-4: the group's `__consumer_offsets` partition joins the producer's
//! open transaction, so the transaction's commit marker reaches the offsets that
//! TxnOffsetCommit then writes there (KIP-98 / KIP-447).
use std::rc::Rc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::init_producer_id::old_client_code;
use super::txn_common::route_txn;
use crate::group::ops::coordinator_of;
use crate::group::OFFSETS_TOPIC;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AddOffsetsToTxnRequest) -> Response {
    let txn_id = req.transactional_id.0.to_string();
    // ACLs: WRITE on the transactional id, READ on the group.
    let access = ctx.access(&meta);
    let code = match coordinator_of(&ctx.router, &req.group_id.0) {
        _ if !access.allows_transactional_id(Operation::Write, &txn_id) => ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        _ if !access.allows_group(Operation::Read, req.group_id.as_str()) => ErrorCode::GROUP_AUTHORIZATION_FAILED,
        None => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        Some((partition, _)) => {
            let op = TxnOp::AddPartitions {
                txn_id: txn_id.clone(),
                producer_id: req.producer_id.0,
                producer_epoch: req.producer_epoch,
                partitions: vec![(OFFSETS_TOPIC.to_string(), partition)],
                verify_only: false,
            };
            match route_txn(ctx, &txn_id, op).await {
                Ok(TxnReply::Partitions(codes)) => codes.into_iter().find(|c| *c != ErrorCode::NONE).unwrap_or(ErrorCode::NONE),
                Ok(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
                Err(e) => old_client_code(e, if meta.version >= 2 { 4 } else { 0 }),
            }
        }
    };
    meta.respond(&AddOffsetsToTxnResponse::default().with_error_code(code.code()))
}
