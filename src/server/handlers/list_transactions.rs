//! ListTransactions 0-2: the transactions this broker coordinates (every shard leading a
//! `__transaction_state` partition), filtered as Kafka filters: by state names (unknown
//! names come back in `unknown_state_filters`), producer ids, v1+ minimum duration
//! (KIP-994), v2 a transactional-id regular expression (INVALID_REGULAR_EXPRESSION when
//! it does not compile).
use std::rc::Rc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::ops::{call_partition, one_led_partition_per_shard};
use crate::txn::state::TxnState;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListTransactionsRequest) -> Response {
    let mut resp = ListTransactionsResponse::default();
    let pattern = match req.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        // The pattern is short (bounded by the frame); the size limit bounds compile work.
        Some(p) => match regex::RegexBuilder::new(p).size_limit(1 << 20).build() {
            Ok(r) => Some(r),
            Err(_) => {
                resp.error_code = ErrorCode::INVALID_REGULAR_EXPRESSION.code();
                return meta.respond(&resp);
            }
        },
        None => None,
    };
    resp.unknown_state_filters = req.state_filters.iter().filter(|s| TxnState::from_name(s).is_none_or(|t| t.name() != s.as_str())).cloned().collect();
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let producer_ids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let min_duration_ms = if meta.version >= 1 { req.duration_filter } else { -1 };
    let access = ctx.access(&meta);
    let mut listed = Vec::new();
    for (shard, partition) in one_led_partition_per_shard(&ctx.router, ctx.config.node_id) {
        let op = TxnOp::List { states: states.clone(), producer_ids: producer_ids.clone(), min_duration_ms };
        match call_partition(&ctx.router, shard, partition, op).await {
            Ok(TxnReply::Listed(v)) => listed.extend(v),
            // A shard leading none of the partitions has no transactions here.
            Ok(_) | Err(ErrorCode::NOT_COORDINATOR) => {}
            Err(e) => resp.error_code = e.code(),
        }
    }
    resp.transaction_states = listed
        .into_iter()
        .filter(|v| pattern.as_ref().is_none_or(|r| r.is_match(&v.transactional_id)))
        // ACLs: only the transactional ids the principal may DESCRIBE.
        .filter(|v| access.allows_transactional_id(Operation::Describe, &v.transactional_id))
        .map(|v| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(v.transactional_id)))
                .with_producer_id(ProducerId(v.producer_id))
                .with_transaction_state(StrBytes::from_static_str(v.state))
        })
        .collect();
    meta.respond(&resp)
}
