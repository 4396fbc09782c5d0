//! DescribeTransactions 0: each id's state from its coordinator, on the shard leading its
//! `__transaction_state` partition on this broker. An id this coordinator has no state
//! for: TRANSACTIONAL_ID_NOT_FOUND; an empty id: INVALID_REQUEST; an id another broker
//! coordinates: NOT_COORDINATOR (admin clients find the coordinator first).
use std::rc::Rc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::txn_common::route_txn;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;
use crate::txn::{TxnOp, TxnReply};

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeTransactionsRequest) -> Response {
    let mut states = Vec::with_capacity(req.transactional_ids.len());
    let access = ctx.access(&meta);
    for id in req.transactional_ids {
        let s = TransactionState::default().with_transactional_id(id.clone()).with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
        if id.is_empty() {
            states.push(s.with_error_code(ErrorCode::INVALID_REQUEST.code()));
            continue;
        }
        // ACLs: DESCRIBE on the transactional id.
        if !access.allows_transactional_id(Operation::Describe, &id) {
            states.push(s.with_error_code(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code()));
            continue;
        }
        let reply = route_txn(ctx, &id, TxnOp::Describe { txn_id: id.to_string() }).await;
        states.push(match reply {
            Ok(TxnReply::Described(Some(v))) => {
                let mut topics: Vec<TopicData> = Vec::new();
                for (t, p) in v.partitions {
                    match topics.last_mut() {
                        Some(last) if last.topic.0.as_str() == t => last.partitions.push(p),
                        _ => topics.push(TopicData::default().with_topic(TopicName(StrBytes::from_string(t))).with_partitions(vec![p])),
                    }
                }
                s.with_transaction_state(StrBytes::from_static_str(v.state))
                    .with_transaction_timeout_ms(v.timeout_ms)
                    .with_transaction_start_time_ms(v.start_ms)
                    .with_producer_id(ProducerId(v.producer_id))
                    .with_producer_epoch(v.producer_epoch)
                    .with_topics(topics)
            }
            Ok(TxnReply::Described(None)) => s.with_error_code(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.code()),
            Ok(_) => s.with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
            // No __transaction_state yet: no transaction exists anywhere.
            Err(ErrorCode::COORDINATOR_NOT_AVAILABLE) if ctx.image().topic(crate::txn::TRANSACTION_STATE_TOPIC).is_none() => {
                s.with_error_code(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.code())
            }
            Err(e) => s.with_error_code(e.code()),
        });
    }
    meta.respond(&DescribeTransactionsResponse::default().with_transaction_states(states))
}
