//! InitProducerId for idempotent producers: a fresh producer id, epoch 0. Producer ids
//! come from the controller in blocks (committed, so they are never reused after a
//! restart).
//!
//! Transactional ids need a transaction coordinator, which shardlog does not have: those
//! requests get TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as FindCoordinator answers them
//! (see find_coordinator.rs for why this code): fatal in librdkafka, Java, franz-go and
//! kafka-python, where COORDINATOR_NOT_AVAILABLE would be retried until a timeout.
use std::rc::Rc;

use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;

use super::code;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: InitProducerIdRequest) -> Response {
    let mut resp = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        resp.error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
        return meta.respond(&resp);
    }
    match ctx.next_producer_id().await {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => resp.error_code = code(&e),
    }
    meta.respond(&resp)
}
