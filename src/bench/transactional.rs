//! The transactional workload (`shardlog bench txn`): one transactional producer per
//! partition, as exactly-once producers run (idempotent, acks=all), each committing
//! transactions of `--txn-records` records to its partition, one after the other.
//!
//! Counted: records once their transaction's EndTxn(commit) is answered (committed
//! throughput); latency: the EndTxn round trip, and the whole transaction (first send to
//! commit answered). The protocol is the one Kafka's Java client picks: transactions v2
//! (Produce v12 adds the partition, EndTxn v5 bumps the epoch) when the broker finalizes
//! `transaction.version` 2, else v1 (AddPartitionsToTxn before the first send).
//!
//! Each producer is one thread with one connection; its transaction's batches are sent
//! pipelined, then their answers read. Retriable errors (the coordinator still writing
//! the previous transaction's markers) resend the batches not yet appended, in order,
//! with the same sequences, as a client does.
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, ProduceRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::client::{self, FrameReader, FrameWriter, PreparedRequest};
use super::histogram::LatencyHistogram;
use super::records::build_batch;
use super::report::Meter;
use super::workload::{encode_one_batch, Spec, Stop};
use crate::record::set_producer;

const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// Attempts of one step on retriable errors before the run fails.
const ATTEMPTS: usize = 200;
const RETRY_BACKOFF: Duration = Duration::from_millis(10);

// Kafka error codes this client handles.
const NONE: i16 = 0;
const REQUEST_TIMED_OUT: i16 = 7;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
const CONCURRENT_TRANSACTIONS: i16 = 51;

fn retriable(code: i16) -> bool {
    matches!(
        code,
        REQUEST_TIMED_OUT
            | COORDINATOR_LOAD_IN_PROGRESS
            | COORDINATOR_NOT_AVAILABLE
            | NOT_COORDINATOR
            | NOT_ENOUGH_REPLICAS
            | NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | CONCURRENT_TRANSACTIONS
    )
}

/// Which transaction protocol the producers speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnProtocol {
    /// AddPartitionsToTxn v3, Produce v9, EndTxn v3: one epoch for every transaction.
    V1,
    /// Produce v12 (the partition's leader adds it), EndTxn v5 (epoch bumped each end).
    V2,
}

impl TxnProtocol {
    fn produce_version(self) -> i16 {
        match self {
            TxnProtocol::V1 => 9,
            TxnProtocol::V2 => 12,
        }
    }
    fn end_txn_version(self) -> i16 {
        match self {
            TxnProtocol::V1 => 3,
            TxnProtocol::V2 => 5,
        }
    }
}

/// One connection used one request at a time (or a pipelined run of Produce requests).
struct Conn {
    writer: FrameWriter,
    reader: FrameReader,
    correlation_id: i32,
}

impl Conn {
    fn open(bootstrap: &str) -> anyhow::Result<Conn> {
        let (writer, reader) = client::connect(bootstrap)?;
        Ok(Conn { writer, reader, correlation_id: 0 })
    }

    fn send(&mut self, req: &PreparedRequest) -> anyhow::Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.writer.send(req, self.correlation_id).context("sending a request")?;
        Ok(self.correlation_id)
    }

    fn call<R: Request + Encodable>(&mut self, req: &R, version: i16) -> anyhow::Result<R::Response>
    where
        R::Response: Decodable + HeaderVersion,
    {
        let id = self.send(&PreparedRequest::encode(req, version)?)?;
        self.reader.read_response::<R>(version, id)
    }
}

/// The protocol Kafka's Java client would pick on this broker: v2 when the broker
/// finalizes `transaction.version` >= 2 and serves Produce v12 and EndTxn v5.
pub fn detect_protocol(bootstrap: &str) -> anyhow::Result<TxnProtocol> {
    let mut c = Conn::open(bootstrap)?;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("shardlog-bench"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let resp = c.call(&req, 3)?;
    if resp.error_code != NONE {
        bail!("ApiVersions: error {}", resp.error_code);
    }
    let max = |key: ApiKey| resp.api_keys.iter().find(|k| k.api_key == key as i16).map_or(-1, |k| k.max_version);
    let tv = resp.finalized_features.iter().find(|f| f.name.as_str() == "transaction.version").map_or(0, |f| f.max_version_level);
    let v2 = tv >= 2 && max(ApiKey::Produce) >= 12 && max(ApiKey::EndTxn) >= 5;
    Ok(if v2 { TxnProtocol::V2 } else { TxnProtocol::V1 })
}

/// Runs one transactional producer per partition of `spec` until the window ends (or
/// `spec.total_bytes` are committed). `txn_meter`: whole-transaction latencies.
pub fn run_txn_produce(
    spec: &Spec,
    txn_records: usize,
    protocol: TxnProtocol,
    origin: Instant,
    meter: Arc<Meter>,
    txn_meter: Arc<Meter>,
    stop: Stop,
) -> anyhow::Result<()> {
    if txn_records == 0 {
        bail!("--txn-records must be positive");
    }
    let producers = spec.partitions.len().max(1) as u64;
    let handles: Vec<_> = spec
        .partitions
        .iter()
        .enumerate()
        .map(|(i, &partition)| {
            let spec = spec.clone();
            let (meter, txn_meter, stop) = (meter.clone(), txn_meter.clone(), stop.clone());
            let budget = spec.total_bytes.map(|t| t / producers + u64::from(i == 0) * (t % producers));
            thread::spawn(move || -> anyhow::Result<()> {
                let mut p = Producer::start(&spec, partition, txn_records, protocol)?;
                thread::sleep(origin.saturating_duration_since(Instant::now()));
                let result = p.run(&meter, &txn_meter, &stop, budget);
                if result.is_err() {
                    stop.set();
                }
                result.with_context(|| format!("transactional producer of partition {partition}"))
            })
        })
        .collect();
    let mut first_err = None;
    for h in handles {
        if let Err(e) = h.join().unwrap_or_else(|_| Err(anyhow!("a producer thread panicked"))) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// One encoded Produce request whose batch is restamped for each transaction.
struct BatchTemplate {
    frame: Bytes,
    batch: std::ops::Range<usize>,
    records: i32,
    bytes: u64,
}

struct Producer {
    conn: Conn,
    protocol: TxnProtocol,
    txn_id: String,
    topic: String,
    partition: i32,
    producer_id: i64,
    epoch: i16,
    sequence: i32,
    /// The batches of one transaction, in order (the last may hold fewer records).
    batches: Vec<BatchTemplate>,
}

impl Producer {
    fn start(spec: &Spec, partition: i32, txn_records: usize, protocol: TxnProtocol) -> anyhow::Result<Producer> {
        let txn_id = format!("shardlog-bench-{}-{partition}", spec.topic);
        let mut conn = Conn::open(&spec.bootstrap)?;
        // FindCoordinator first: it makes the broker create __transaction_state. The
        // generator talks to --bootstrap only (single node), so only its answer matters.
        retry("FindCoordinator", || {
            let req = FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(vec![StrBytes::from_string(txn_id.clone())]);
            let resp = conn.call(&req, 4)?;
            Ok(resp.coordinators.first().map_or(COORDINATOR_NOT_AVAILABLE, |c| c.error_code))
        })?;
        let (mut producer_id, mut epoch) = (-1, -1);
        retry("InitProducerId", || {
            let req = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_string(txn_id.clone()))))
                .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            let resp = conn.call(&req, 4)?;
            producer_id = resp.producer_id.0;
            epoch = resp.producer_epoch;
            Ok(resp.error_code)
        })?;
        let per_batch = spec.batch_records.clamp(1, txn_records);
        let mut batches = Vec::new();
        let mut left = txn_records;
        while left > 0 {
            let n = per_batch.min(left);
            // The last batch's template is shared with the full ones when it is full too.
            let seed = 0x9e37_79b9_7f4a_7c15 ^ ((partition as u64) << 16 | batches.len() as u64);
            batches.push(batch_template(spec, &txn_id, partition, n, seed, protocol)?);
            left -= n;
        }
        Ok(Producer { conn, protocol, txn_id, topic: spec.topic.clone(), partition, producer_id, epoch, sequence: 0, batches })
    }

    fn run(&mut self, meter: &Meter, txn_meter: &Meter, stop: &Stop, budget: Option<u64>) -> anyhow::Result<()> {
        let (mut end_local, mut txn_local) = (LatencyHistogram::new(), LatencyHistogram::new());
        let (records, bytes): (u64, u64) = (self.batches.iter().map(|b| b.records as u64).sum(), self.batches.iter().map(|b| b.bytes).sum());
        let mut committed_bytes = 0u64;
        while !stop.is_set() && Instant::now() < meter.measure_end && budget.is_none_or(|b| committed_bytes < b) {
            let started = Instant::now();
            if self.protocol == TxnProtocol::V1 {
                self.add_partition()?;
            }
            self.send_batches()?;
            let ending = Instant::now();
            self.end_txn()?;
            let done = Instant::now();
            meter.complete(done, records, bytes);
            committed_bytes += bytes;
            if meter.in_window(started) {
                end_local.record(done - ending);
                txn_local.record(done - started);
                meter.add_latencies(&mut end_local, done);
                txn_meter.add_latencies(&mut txn_local, done);
            }
        }
        Ok(())
    }

    fn add_partition(&mut self) -> anyhow::Result<()> {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(self.txn_id.clone())))
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(vec![self.partition])]);
        let conn = &mut self.conn;
        retry("AddPartitionsToTxn", || {
            let resp = conn.call(&req, 3)?;
            let code =
                resp.results_by_topic_v3_and_below.iter().flat_map(|t| t.results_by_partition.iter()).map(|p| p.partition_error_code).find(|c| *c != NONE);
            Ok(code.unwrap_or(resp.error_code))
        })
    }

    /// Sends this transaction's batches pipelined; resends, in order, from the first one
    /// not appended, while the errors are retriable.
    fn send_batches(&mut self) -> anyhow::Result<()> {
        let version = self.protocol.produce_version();
        let mut frames = Vec::with_capacity(self.batches.len());
        let mut seq = self.sequence;
        for t in &self.batches {
            let mut frame = BytesMut::from(t.frame.as_ref());
            set_producer(&mut frame[t.batch.clone()], self.producer_id, self.epoch, seq, true).map_err(|e| anyhow!("stamping the batch: {e}"))?;
            frames.push(PreparedRequest::from_frame(frame.freeze(), version));
            seq = seq.wrapping_add(t.records);
        }
        let mut from = 0;
        for attempt in 1..=ATTEMPTS {
            let ids = frames[from..].iter().map(|f| self.conn.send(f)).collect::<anyhow::Result<Vec<i32>>>()?;
            let mut first_failed: Option<(usize, i16, String)> = None;
            for (k, id) in ids.into_iter().enumerate() {
                let resp = self.conn.reader.read_response::<ProduceRequest>(version, id)?;
                let (code, message) = resp
                    .responses
                    .iter()
                    .flat_map(|t| t.partition_responses.iter())
                    .map(|p| (p.error_code, p.error_message.as_ref().map_or(String::new(), |m| m.to_string())))
                    .next()
                    .unwrap_or((NONE, String::new()));
                let ok = code == NONE || code == DUPLICATE_SEQUENCE_NUMBER;
                if !ok && first_failed.is_none() {
                    // Batches after a refused one are refused as out of order: resent too.
                    first_failed = Some((from + k, code, message));
                }
            }
            match first_failed {
                None => {
                    self.sequence = seq;
                    return Ok(());
                }
                Some((at, code, message)) if retriable(code) || (code == OUT_OF_ORDER_SEQUENCE_NUMBER && at > from) => {
                    if attempt == ATTEMPTS {
                        bail!("Produce: error {code} ({message}) after {ATTEMPTS} attempts");
                    }
                    if std::env::var_os("SHARDLOG_BENCH_DEBUG").is_some() {
                        eprintln!("partition {}: batch {at} refused ({code}: {message}), resending from it", self.partition);
                    }
                    from = at;
                    thread::sleep(RETRY_BACKOFF);
                }
                Some((_, code, message)) => bail!("Produce: error {code} ({message})"),
            }
        }
        unreachable!("the last attempt returns")
    }

    fn end_txn(&mut self) -> anyhow::Result<()> {
        let version = self.protocol.end_txn_version();
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(self.txn_id.clone())))
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_committed(true);
        let (conn, mut next) = (&mut self.conn, None);
        retry("EndTxn", || {
            let resp = conn.call(&req, version)?;
            next = Some((resp.producer_id.0, resp.producer_epoch));
            Ok(resp.error_code)
        })?;
        if self.protocol == TxnProtocol::V2 {
            // Transactions v2: the next transaction runs with the bumped epoch, from
            // sequence 0.
            let (id, epoch) = next.ok_or_else(|| anyhow!("EndTxn: no answer"))?;
            if id >= 0 {
                (self.producer_id, self.epoch, self.sequence) = (id, epoch, 0);
            }
        }
        Ok(())
    }
}

/// Runs `step` (which returns a Kafka error code) until it answers NONE; retriable codes
/// are tried again after a back-off.
fn retry(what: &str, mut step: impl FnMut() -> anyhow::Result<i16>) -> anyhow::Result<()> {
    for _ in 0..ATTEMPTS {
        match step()? {
            NONE => return Ok(()),
            c if retriable(c) => thread::sleep(RETRY_BACKOFF),
            c => bail!("{what}: error {c}"),
        }
    }
    bail!("{what}: still failing after {ATTEMPTS} attempts")
}

fn batch_template(spec: &Spec, txn_id: &str, partition: i32, records: usize, seed: u64, protocol: TxnProtocol) -> anyhow::Result<BatchTemplate> {
    let batch = build_batch(records, spec.record_size, seed)?;
    let (req, at) = encode_one_batch(&spec.topic, partition, Some(txn_id), -1, protocol.produce_version(), &batch)?;
    Ok(BatchTemplate {
        frame: req.frame().clone(),
        batch: at,
        records: i32::try_from(records).context("too many records per batch")?,
        bytes: (records * spec.record_size) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{compute_crc, parse_header};

    #[test]
    fn stamped_batch_carries_the_producer_and_a_valid_crc() {
        let mut b = BytesMut::from(build_batch(5, 16, 3).unwrap().as_ref());
        set_producer(&mut b, 4242, 7, 95, true).unwrap();
        let h = parse_header(&b).unwrap();
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (4242, 7, 95));
        assert!(h.is_transactional());
        assert_eq!(compute_crc(&b), h.crc);
        assert_eq!(h.records_count, 5);
    }

    #[test]
    fn protocols_pick_kafkas_versions() {
        assert_eq!((TxnProtocol::V1.produce_version(), TxnProtocol::V1.end_txn_version()), (9, 3));
        assert_eq!((TxnProtocol::V2.produce_version(), TxnProtocol::V2.end_txn_version()), (12, 5));
        assert!(retriable(CONCURRENT_TRANSACTIONS) && retriable(NOT_ENOUGH_REPLICAS));
        assert!(!retriable(OUT_OF_ORDER_SEQUENCE_NUMBER) && !retriable(NONE));
    }
}
