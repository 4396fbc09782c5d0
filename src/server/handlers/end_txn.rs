//! EndTxn 0-5: commit or abort the producer's open transaction. Answered once the outcome
//! is durable in `__transaction_state` (PrepareCommit / PrepareAbort); the markers follow
//! in the background, and the producer's next transaction waits for them
//! (CONCURRENT_TRANSACTIONS). A retry of an end already completed gets the same answer.
use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::init_producer_id::old_client_code;
use super::txn_common::route_txn;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: EndTxnRequest) -> Response {
    let txn_id = req.transactional_id.0.to_string();
    let op = TxnOp::EndTxn { txn_id: txn_id.clone(), producer_id: req.producer_id.0, producer_epoch: req.producer_epoch, commit: req.committed };
    let code = match route_txn(ctx, &txn_id, op).await {
        Ok(TxnReply::Done) => ErrorCode::NONE,
        Ok(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
        // PRODUCER_FENCED from EndTxn v2 (KIP-588 clients); older ones know INVALID_PRODUCER_EPOCH.
        Err(e) => old_client_code(e, if meta.version >= 2 { 4 } else { 0 }),
    };
    // v5 (transactions v2) answers the producer's id and epoch; -1 when not bumped.
    meta.respond(&EndTxnResponse::default().with_error_code(code.code()).with_producer_id(ProducerId(-1)).with_producer_epoch(-1))
}
