//! ListTransactions 0-2. shardlog has no transaction coordinator, so no transaction
//! exists and the truthful answer is Kafka's for a coordinator with none: an empty list,
//! error NONE (`kafka-transactions list` prints an empty table; no client retries).
//! The filters are still checked as Kafka checks them: state names Kafka does not know
//! come back in `unknown_state_filters`; an invalid v2 `transactional_id_pattern` is
//! INVALID_REGULAR_EXPRESSION.
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse};

use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};

/// Kafka's TransactionState names.
const STATES: [&str; 8] =
    ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"];

pub fn handle(meta: RequestMeta, req: ListTransactionsRequest) -> Response {
    let mut resp = ListTransactionsResponse::default();
    if let Some(p) = req.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        // The pattern is short (bounded by the frame); the size limit bounds compile work.
        if regex::RegexBuilder::new(p).size_limit(1 << 20).build().is_err() {
            resp.error_code = ErrorCode::INVALID_REGULAR_EXPRESSION.code();
            return meta.respond(&resp);
        }
    }
    resp.unknown_state_filters = req.state_filters.into_iter().filter(|s| !STATES.contains(&&**s)).collect();
    meta.respond(&resp)
}
