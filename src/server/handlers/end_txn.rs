//! EndTxn 0-5: commit or abort the producer's open transaction. Answered once the outcome
//! is durable in `__transaction_state` (PrepareCommit / PrepareAbort); the markers follow
//! in the background, and the producer's next transaction waits for them
//! (CONCURRENT_TRANSACTIONS). A retry of an end already completed gets the same answer.
//! v5 (transactions v2): the producer's epoch is bumped by every end, and answered.
use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::init_producer_id::old_client_code;
use super::txn_common::route_txn;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: EndTxnRequest) -> Response {
    let txn_id = req.transactional_id.0.to_string();
    // v5 is transactions v2 (KIP-890 part 2): the end bumps the producer's epoch.
    let bump_epoch = meta.version >= 5;
    let op = TxnOp::EndTxn { txn_id: txn_id.clone(), producer_id: req.producer_id.0, producer_epoch: req.producer_epoch, commit: req.committed, bump_epoch };
    // ACLs: WRITE on the transactional id.
    let allowed = ctx.access(&meta).allows_transactional_id(Operation::Write, &txn_id);
    let routed = if allowed { route_txn(ctx, &txn_id, op).await } else { Err(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED) };
    let (code, producer_id, producer_epoch) = match routed {
        Ok(TxnReply::Done) => (ErrorCode::NONE, -1, -1),
        Ok(TxnReply::Producer { producer_id, producer_epoch }) => (ErrorCode::NONE, producer_id, producer_epoch),
        Ok(_) => (ErrorCode::UNKNOWN_SERVER_ERROR, -1, -1),
        // PRODUCER_FENCED from EndTxn v2 (KIP-588 clients); older ones know INVALID_PRODUCER_EPOCH.
        Err(e) => (old_client_code(e, if meta.version >= 2 { 4 } else { 0 }), -1, -1),
    };
    // v5 answers the producer's id and new epoch.
    meta.respond(&EndTxnResponse::default().with_error_code(code.code()).with_producer_id(ProducerId(producer_id)).with_producer_epoch(producer_epoch))
}
