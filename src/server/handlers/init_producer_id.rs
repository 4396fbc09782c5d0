//! InitProducerId 0-5. Without a transactional id: a fresh producer id, epoch 0 (ids
//! come from the controller in blocks, committed, so never reused after a restart).
//! With one: the transaction coordinator of that id (`txn/`) bumps its epoch, fencing
//! older producers, after aborting a transaction the previous producer left open
//! (CONCURRENT_TRANSACTIONS meanwhile, which clients retry); v3+ carries the producer's
//! current id and epoch (KIP-360).
use std::rc::Rc;

use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;

use super::code;
use super::txn_common::route_txn;
use crate::protocol::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: InitProducerIdRequest) -> Response {
    let mut resp = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    // ACLs (Kafka's KafkaApis): WRITE on the transactional id; an idempotent producer
    // needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    let access = ctx.access(&meta);
    let refused = match req.transactional_id.as_ref().map(|t| t.as_str()).filter(|t| !t.is_empty()) {
        Some(id) if !access.allows_transactional_id(Operation::Write, id) => Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None if !access.allows_cluster(Operation::IdempotentWrite) && !access.allows_any(Operation::Write, ResourceType::Topic) => {
            Some(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
        }
        _ => None,
    };
    if let Some(e) = refused {
        resp.error_code = e.code();
        return meta.respond(&resp);
    }
    let fresh = match ctx.next_producer_id().await {
        Ok(id) => id,
        Err(e) => {
            resp.error_code = code(&e);
            return meta.respond(&resp);
        }
    };
    let Some(txn_id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) else {
        resp.producer_id = ProducerId(fresh);
        resp.producer_epoch = 0;
        return meta.respond(&resp);
    };
    if txn_id.is_empty() {
        resp.error_code = ErrorCode::INVALID_REQUEST.code();
        return meta.respond(&resp);
    }
    let (producer_id, producer_epoch) = if meta.version >= 3 { (req.producer_id.0, req.producer_epoch) } else { (-1, -1) };
    let op = TxnOp::InitProducerId { txn_id: txn_id.clone(), timeout_ms: req.transaction_timeout_ms, producer_id, producer_epoch, fresh_producer_id: fresh };
    match route_txn(ctx, &txn_id, op).await {
        Ok(TxnReply::Producer { producer_id, producer_epoch }) => {
            resp.producer_id = ProducerId(producer_id);
            resp.producer_epoch = producer_epoch;
        }
        Ok(_) => resp.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
        Err(e) => resp.error_code = old_client_code(e, meta.version).code(),
    }
    meta.respond(&resp)
}

/// PRODUCER_FENCED exists for clients of InitProducerId v4+ (KIP-588); older ones know
/// INVALID_PRODUCER_EPOCH, as Kafka answers them.
pub fn old_client_code(e: ErrorCode, version: i16) -> ErrorCode {
    if e == ErrorCode::PRODUCER_FENCED && version < 4 {
        ErrorCode::INVALID_PRODUCER_EPOCH
    } else {
        e
    }
}
