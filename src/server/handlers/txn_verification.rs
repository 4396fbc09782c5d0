//! KIP-890 on the produce path: the first transactional batch of a producer's
//! transaction on a partition is appended only once the transaction's coordinator
//! confirms the partition is in that transaction (part 1: AddPartitionsToTxn v4
//! `verify_only`), or, for transactions v2 clients (Produce v12+, part 2), has added it —
//! on this broker through the router, else sent to the coordinator's broker. The
//! partition hands out a guard when it asks for verification and a marker clears it, so
//! a write verified just before its transaction ended is refused, not left hanging.
//! Errors as Kafka's ReplicaManager gives them: the coordinator busy or moving becomes
//! NOT_ENOUGH_REPLICAS (retriable for producers); a partition not in the transaction
//! INVALID_TXN_STATE; a fenced producer INVALID_PRODUCER_EPOCH.
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::txn_common::route_txn;
use crate::cluster::router::{OpBatch, OpResult, PartitionOp};
use crate::partition::producer_state::SequenceError;
use crate::partition::PartitionError;
use crate::protocol::ErrorCode;
use crate::record::parse_header;
use crate::runtime::ShardId;
use crate::server::shard::{ShardContext, ShardResult};
use crate::txn::ops::coordinator_of;
use crate::txn::{TxnOp, TxnReply, TRANSACTION_STATE_TOPIC};

/// How long a verification call to another broker may take.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times one produce request verifies a partition: a marker of the producer's
/// previous transaction may land between the partition handing out its guard and the
/// append (the coordinator adds the partition only once that marker is written), and
/// clears the guard; the partition then hands out a fresh one and is verified again.
const VERIFY_ROUNDS: usize = 3;

/// Verifies the partitions of `results` that asked for it, appends those verified again
/// with their guards, and answers the others with the verification's error.
pub async fn verify_and_append(
    ctx: &Rc<ShardContext>,
    produce_version: i16,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    sent: &[(ShardId, &str, i32, Bytes)],
    results: &mut [OpResult<ShardResult>],
) {
    // Without a transactional id (or the records) there is nothing to verify against:
    // left as they are (INVALID_TXN_STATE).
    let Some(txn_id) = transactional_id else { return };
    for round in 1..=VERIFY_ROUNDS {
        wait_for_first_writes(ctx, acks, timeout_ms, sent, results).await;
        let asked: Vec<(usize, i64, u64)> = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Err(PartitionError::TxnVerificationNeeded { producer_id, guard }) => Some((i, *producer_id, *guard)),
                _ => None,
            })
            .collect();
        if asked.is_empty() || asked.iter().any(|(i, _, _)| *i >= sent.len()) {
            break;
        }
        if round > 1 {
            // Guards cleared by a marker since the last round: verified again.
            tracing::debug!(txn_id, round, partitions = asked.len(), "transaction verification again");
        }
        verify_round(ctx, produce_version, txn_id, acks, timeout_ms, sent, results, &asked).await;
    }
    wait_for_first_writes(ctx, acks, timeout_ms, sent, results).await;
    // Still asking after every round: the producer retries (NOT_ENOUGH_REPLICAS is
    // retriable), rather than failing its transaction with INVALID_TXN_STATE.
    for r in results.iter_mut() {
        if matches!(r, Err(PartitionError::TxnVerificationNeeded { .. })) {
            *r = Err(PartitionError::TxnVerificationPending("a marker of the previous transaction cleared each verification"));
        }
    }
}

/// How often, and how long apart, a verified batch waiting for its transaction's first
/// write (a pipelined batch with a lower sequence, still being verified) is tried again
/// before the client gets OUT_OF_ORDER_SEQUENCE_NUMBER and resends it itself. Kafka reads
/// one request per connection at a time, so its clients rarely see this; shardlog serves
/// a connection's requests concurrently and waits here instead.
const FIRST_WRITE_WAITS: usize = 50;
const FIRST_WRITE_WAIT: Duration = Duration::from_millis(1);

/// Appends again, without a guard, the batches that waited for their transaction's first
/// write: once it is appended they need no verification; if it is still pending they get
/// the shared guard back (and are verified with it in the next round).
async fn wait_for_first_writes(
    ctx: &Rc<ShardContext>,
    acks: i16,
    timeout_ms: i32,
    sent: &[(ShardId, &str, i32, Bytes)],
    results: &mut [OpResult<ShardResult>],
) {
    for _ in 0..FIRST_WRITE_WAITS {
        let waiting: Vec<usize> =
            (0..results.len().min(sent.len())).filter(|&i| matches!(results[i], Err(PartitionError::TxnEarlierWritePending { .. }))).collect();
        if waiting.is_empty() {
            return;
        }
        glommio::timer::sleep(FIRST_WRITE_WAIT).await;
        let mut again = OpBatch::with_capacity(waiting.len());
        for &i in &waiting {
            let (shard, topic, partition, records) = &sent[i];
            again.push(*shard, topic, *partition, PartitionOp::Produce { records: records.clone(), acks, timeout_ms, txn_guard: None });
        }
        for (i, r) in waiting.into_iter().zip(ctx.router.run(again).await) {
            // Still behind a pending first write: the guarded append answers that again.
            results[i] = r;
        }
    }
}

/// One round of [`verify_and_append`] over the partitions in `asked`.
#[allow(clippy::too_many_arguments)]
async fn verify_round(
    ctx: &Rc<ShardContext>,
    produce_version: i16,
    txn_id: &str,
    acks: i16,
    timeout_ms: i32,
    sent: &[(ShardId, &str, i32, Bytes)],
    results: &mut [OpResult<ShardResult>],
    asked: &[(usize, i64, u64)],
) {
    let epoch_of = |i: usize| parse_header(&sent[i].3).map(|h| h.producer_epoch).unwrap_or(-1);
    let (producer_id, producer_epoch) = (asked[0].1, epoch_of(asked[0].0));
    let partitions: Vec<(String, i32)> = asked.iter().map(|(i, _, _)| (sent[*i].1.to_string(), sent[*i].2)).collect();
    // Transactions v2 (Produce v12+, KIP-890 part 2): the client sends no
    // AddPartitionsToTxn; this leader adds the partition for it.
    let add = produce_version >= 12;
    let codes = verify_retrying(ctx, txn_id, producer_id, producer_epoch, &partitions, add).await;
    let mut again = OpBatch::with_capacity(asked.len());
    let mut again_at = Vec::with_capacity(asked.len());
    for ((i, pid, guard), code) in asked.iter().zip(codes) {
        if *pid != producer_id || epoch_of(*i) != producer_epoch {
            results[*i] = Err(PartitionError::TxnNotVerifiable);
            continue; // one producer per request: anything else stays refused
        }
        match code {
            ErrorCode::NONE => {
                let (shard, topic, partition, records) = &sent[*i];
                again.push(*shard, topic, *partition, PartitionOp::Produce { records: records.clone(), acks, timeout_ms, txn_guard: Some(*guard) });
                again_at.push(*i);
            }
            ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
            | ErrorCode::NOT_COORDINATOR
            | ErrorCode::CONCURRENT_TRANSACTIONS
            | ErrorCode::REQUEST_TIMED_OUT => results[*i] = Err(PartitionError::TxnVerificationPending(pending_reason(code))),
            ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH => {
                results[*i] = Err(PartitionError::Sequence(SequenceError::InvalidProducerEpoch { epoch: producer_epoch, current: producer_epoch }))
            }
            // INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, ...: not in the transaction.
            _ => results[*i] = Err(PartitionError::TxnNotVerifiable),
        }
    }
    if again.is_empty() {
        return;
    }
    for (i, r) in again_at.into_iter().zip(ctx.router.run(again).await) {
        results[i] = r;
    }
}

/// Why a verification is pending, for the producer's log.
fn pending_reason(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::CONCURRENT_TRANSACTIONS => "the coordinator is still ending the previous transaction",
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => "the coordinator is loading",
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => "the coordinator is moving",
        _ => "the coordinator did not answer in time",
    }
}

/// [`verify`], tried again inside the broker while the coordinator answers
/// CONCURRENT_TRANSACTIONS (the producer's previous transaction still writing its
/// markers, usually for a millisecond or so): after 1 ms, doubling up to
/// `add.partitions.to.txn.retry.backoff.ms`, for `add.partitions.to.txn.retry.backoff.max.ms`
/// in all, as Kafka's ReplicaManager retries it. The producer would otherwise get a
/// retriable error and pause its own retry.backoff.ms (100 ms for Java).
async fn verify_retrying(
    ctx: &Rc<ShardContext>,
    txn_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
    add: bool,
) -> Vec<ErrorCode> {
    let max_step = Duration::from_millis(ctx.config.add_partitions_to_txn_retry_backoff_ms.max(1));
    let deadline = Instant::now() + Duration::from_millis(ctx.config.add_partitions_to_txn_retry_backoff_max_ms);
    let mut step = Duration::from_millis(1).min(max_step);
    let mut codes = verify(ctx, txn_id, producer_id, producer_epoch, partitions, add).await;
    loop {
        let busy: Vec<usize> = (0..codes.len()).filter(|&i| codes[i] == ErrorCode::CONCURRENT_TRANSACTIONS).collect();
        if busy.is_empty() || Instant::now() + step > deadline {
            return codes;
        }
        glommio::timer::sleep(step).await;
        step = (step * 2).min(max_step);
        let retry: Vec<(String, i32)> = busy.iter().map(|&i| partitions[i].clone()).collect();
        for (i, c) in busy.into_iter().zip(verify(ctx, txn_id, producer_id, producer_epoch, &retry, add).await) {
            codes[i] = c;
        }
    }
}

/// One code per partition: NONE when it is in `txn_id`'s open transaction of this
/// producer and epoch — or, with `add` (transactions v2), once it has been added to it.
pub async fn verify(ctx: &Rc<ShardContext>, txn_id: &str, producer_id: i64, producer_epoch: i16, partitions: &[(String, i32)], add: bool) -> Vec<ErrorCode> {
    let image = ctx.image();
    let leader = coordinator_of(&ctx.router, txn_id).and_then(|(p, _)| image.topic(TRANSACTION_STATE_TOPIC)?.partition(p).map(|m| m.leader));
    let fail = |e: ErrorCode| vec![e; partitions.len()];
    match leader {
        None => fail(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        Some(l) if l == ctx.config.node_id => {
            let op = TxnOp::AddPartitions { txn_id: txn_id.to_string(), producer_id, producer_epoch, partitions: partitions.to_vec(), verify_only: !add };
            match route_txn(ctx, txn_id, op).await {
                Ok(TxnReply::Partitions(codes)) if codes.len() == partitions.len() => codes,
                Ok(_) => fail(ErrorCode::UNKNOWN_SERVER_ERROR),
                Err(e) => fail(e),
            }
        }
        Some(l) => {
            let Some(b) = image.brokers.get(&l).filter(|b| !b.fenced) else { return fail(ErrorCode::COORDINATOR_NOT_AVAILABLE) };
            let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
            for (t, p) in partitions {
                match topics.last_mut() {
                    Some(last) if last.name.0.as_str() == t => last.partitions.push(*p),
                    _ => topics.push(AddPartitionsToTxnTopic::default().with_name(TopicName(StrBytes::from_string(t.clone()))).with_partitions(vec![*p])),
                }
            }
            let txn = AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(txn_id.to_string())))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
                .with_verify_only(!add)
                .with_topics(topics);
            let req = AddPartitionsToTxnRequest::default().with_transactions(vec![txn]);
            let client_id = format!("shardlog-txn-verification-{}", ctx.config.node_id);
            let resp: Result<AddPartitionsToTxnResponse, String> =
                crate::server::broker_call::call(b, &ctx.inter_broker, &client_id, ApiKey::AddPartitionsToTxn, 4, &req, VERIFY_TIMEOUT).await;
            match resp {
                Err(e) => {
                    tracing::debug!(error = %e, "transaction verification call failed");
                    fail(ErrorCode::REQUEST_TIMED_OUT)
                }
                Ok(r) if r.error_code != 0 => fail(ErrorCode(r.error_code)),
                Ok(r) => {
                    let found = r.results_by_transaction.into_iter().find(|t| t.transactional_id.0.as_str() == txn_id);
                    partitions
                        .iter()
                        .map(|(t, p)| {
                            found
                                .as_ref()
                                .and_then(|f| f.topic_results.iter().find(|x| x.name.0.as_str() == t))
                                .and_then(|x| x.results_by_partition.iter().find(|x| x.partition_index == *p))
                                .map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |x| ErrorCode(x.partition_error_code))
                        })
                        .collect()
                }
            }
        }
    }
}
