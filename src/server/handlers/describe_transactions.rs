//! DescribeTransactions 0. No transaction exists here (no transaction coordinator), so
//! each id gets what Kafka's coordinator answers for an id it has no state for:
//! TRANSACTIONAL_ID_NOT_FOUND (an empty id: INVALID_REQUEST). Not retriable: admin
//! clients fail that id at once. (Java's Admin finds the coordinator first, and
//! FindCoordinator for a transactional id already fails: see find_coordinator.rs.)
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{DescribeTransactionsRequest, DescribeTransactionsResponse};

use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};

pub fn handle(meta: RequestMeta, req: DescribeTransactionsRequest) -> Response {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let code = if id.is_empty() { ErrorCode::INVALID_REQUEST } else { ErrorCode::TRANSACTIONAL_ID_NOT_FOUND };
            TransactionState::default().with_transactional_id(id).with_error_code(code.code())
        })
        .collect();
    meta.respond(&DescribeTransactionsResponse::default().with_transaction_states(states))
}
