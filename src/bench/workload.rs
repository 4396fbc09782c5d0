//! The three workloads: produce, consume, end-to-end. Each connection is a writer thread
//! and a reader thread (see `client.rs`); counters and latencies go to a shared `Meter`.
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kafka_protocol::messages::{BrokerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::client::{self, PreparedRequest};
use super::histogram::LatencyHistogram;
use super::rate::Schedule;
use super::records::{build_keyed_batch, record_values, walk_batches, OFF_CRC};
use super::report::Meter;
use crate::record::compute_crc;

pub const PRODUCE_VERSION: i16 = 9;
pub const FETCH_VERSION: i16 = 12;
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
/// Kafka error codes the consumer handles itself.
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// What every workload needs to know.
#[derive(Clone, Debug)]
pub struct Spec {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: Vec<i32>,
    pub record_size: usize,
    pub batch_records: usize,
    pub acks: i16,
    pub connections: usize,
    pub inflight: usize,
    /// Bytes per second across all connections; 0 = as fast as the window allows.
    pub rate_bytes_s: f64,
    pub duration: Duration,
    pub warmup: Duration,
    /// Produce: stop after this many bytes (fills a topic for a consume test).
    pub total_bytes: Option<u64>,
    pub fetch_max_bytes: i32,
    pub fetch_partition_max_bytes: i32,
    pub fetch_max_wait_ms: i32,
    /// Fetch: 0 read_uncommitted, 1 read_committed (up to the last stable offset).
    pub isolation_level: i8,
    /// Produce: distinct keys, key k on partition index k mod partitions; 0 = unkeyed.
    pub keys: usize,
    pub compression: Compression,
}

impl Spec {
    /// Partitions served by connection `c`: round-robin; with more connections than
    /// partitions (produce only) connections share partitions.
    fn partitions_of(&self, c: usize, conns: usize) -> Vec<i32> {
        let n = self.partitions.len();
        let mine: Vec<i32> = (0..n).filter(|i| i % conns == c).map(|i| self.partitions[i]).collect();
        if mine.is_empty() && n > 0 {
            vec![self.partitions[c % n]]
        } else {
            mine
        }
    }
}

/// Shared stop signal: set at the end of the run or when any thread fails.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);
impl Stop {
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed)
    }
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// In-flight window of one connection. Closable, so a writer blocked on a full window
/// wakes up when its reader dies.
struct Window {
    state: Mutex<(usize, bool)>, // (free slots, closed)
    cv: Condvar,
}

impl Window {
    fn new(slots: usize) -> Window {
        Window { state: Mutex::new((slots.max(1), false)), cv: Condvar::new() }
    }
    /// Takes a slot; false once closed.
    fn acquire(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.0 == 0 && !s.1 {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.1 {
            return false;
        }
        s.0 -= 1;
        true
    }
    fn release(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0 += 1;
        self.cv.notify_one();
    }
    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.cv.notify_all();
    }
}

/// One partition's Produce request, encoded once.
struct ProduceTemplate {
    req: PreparedRequest,
    records: u64,
    bytes: u64,
    /// Where the batch sits in the frame, and its record values within the batch (e2e
    /// stamps the intended send time into the first 8 bytes of each value).
    batch: Range<usize>,
    values: Vec<Range<usize>>,
}

fn produce_template(spec: &Spec, partition: i32, seed: u64, keys: &[Bytes]) -> anyhow::Result<ProduceTemplate> {
    let batch = build_keyed_batch(spec.batch_records, spec.record_size, seed, keys, spec.compression)?;
    let (req, at) = encode_one_batch(&spec.topic, partition, None, spec.acks, PRODUCE_VERSION, &batch)?;
    // Compressed values are not reachable in place (and e2e refuses compression).
    let values = if spec.compression == Compression::None { record_values(&batch)?.into_iter().map(|(_, v)| v).collect() } else { Vec::new() };
    Ok(ProduceTemplate { req, records: spec.batch_records as u64, bytes: (spec.batch_records * spec.record_size) as u64, batch: at, values })
}

/// Most batches kept per partition for keyed runs: a partition whose keys need more
/// batches than this (many keys a partition, or the small batches of --linger-ms) sends
/// only the keys these batches hold.
const MAX_KEYED_TEMPLATES: usize = 64;

/// The Produce requests connection `c` sends in turn. Unkeyed: one per partition. Keyed:
/// key k lives on partition index k mod partitions (`Spec::keys`), and each partition
/// gets enough batches to carry every one of its keys, interleaved across partitions so
/// a fixed-rate schedule visits every partition evenly.
fn connection_templates(spec: &Spec, c: usize, conns: usize) -> anyhow::Result<Vec<ProduceTemplate>> {
    let n = spec.partitions.len();
    let mut per_partition = Vec::new();
    for (i, p) in spec.partitions_of(c, conns).into_iter().enumerate() {
        let seed = 0x9e37_79b9_7f4a_7c15 ^ ((c * 1000 + i) as u64);
        if spec.keys == 0 {
            per_partition.push(vec![produce_template(spec, p, seed, &[])?]);
            continue;
        }
        let index = spec.partitions.iter().position(|&q| q == p).unwrap_or(0);
        let keys: Vec<Bytes> = (index..spec.keys).step_by(n.max(1)).map(|k| Bytes::from(format!("key-{k}"))).collect();
        if keys.is_empty() {
            bail!("partition {p} gets none of the {} keys (fewer keys than partitions)", spec.keys);
        }
        let batches = keys.len().div_ceil(spec.batch_records).clamp(1, MAX_KEYED_TEMPLATES);
        let mut mine = Vec::with_capacity(batches);
        for b in 0..batches {
            let from = (b * spec.batch_records) % keys.len();
            let batch_keys: Vec<Bytes> = keys.iter().cycle().skip(from).take(spec.batch_records).cloned().collect();
            mine.push(produce_template(spec, p, seed ^ ((b as u64) << 32), &batch_keys)?);
        }
        per_partition.push(mine);
    }
    let mut queues: Vec<_> = per_partition.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        out.extend(queues.iter_mut().filter_map(Iterator::next));
        if out.len() == before {
            return Ok(out);
        }
    }
}

/// A Produce request (v9+) carrying `batch` for one partition, encoded once, and where the
/// batch sits in its frame (so a sender can restamp it in place).
pub fn encode_one_batch(
    topic: &str,
    partition: i32,
    transactional_id: Option<&str>,
    acks: i16,
    version: i16,
    batch: &Bytes,
) -> anyhow::Result<(PreparedRequest, Range<usize>)> {
    let req = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))))
        .with_acks(acks)
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default().with_index(partition).with_records(Some(batch.clone()))])]);
    let req = PreparedRequest::encode(&req, version)?;
    // Produce v9+ is flexible: the batch is followed by three empty tagged-field sections
    // (partition, topic, request), one byte each.
    let frame = req.frame();
    let end = frame.len().checked_sub(3).ok_or_else(|| anyhow!("produce request too short"))?;
    let start = end.checked_sub(batch.len()).ok_or_else(|| anyhow!("produce request too short"))?;
    if frame[start..end] != batch[..] {
        bail!("cannot locate the record batch in the encoded Produce request");
    }
    Ok((req, start..end))
}

/// A copy of `t` whose record values start with their intended send times (ns since
/// `origin`), CRC recomputed. Only e2e pays for this copy.
fn stamped(t: &ProduceTemplate, first: Instant, interval: Duration, origin: Instant) -> PreparedRequest {
    let mut frame = BytesMut::from(t.req.frame().as_ref());
    let batch = &mut frame[t.batch.clone()];
    for (k, v) in t.values.iter().enumerate() {
        let intended = first + interval * k as u32;
        let ns = intended.saturating_duration_since(origin).as_nanos() as u64;
        if v.len() >= 8 {
            batch[v.start..v.start + 8].copy_from_slice(&ns.to_be_bytes());
        }
    }
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    PreparedRequest::from_frame(frame.freeze(), t.req.api_version)
}

struct InFlight {
    correlation_id: i32,
    /// Intended send time of the first record, and the spacing of the others (zero in
    /// max-rate mode, where the intended time is the actual send time).
    first_intended: Instant,
    interval: Duration,
    records: u64,
    bytes: u64,
}

/// Producer shared state for e2e: how many records were acknowledged.
#[derive(Default)]
pub struct ProduceProgress {
    pub acked_records: AtomicU64,
}

/// Runs producer connections until the window ends (or `total_bytes` are sent).
pub fn run_produce(spec: &Spec, origin: Instant, meter: Arc<Meter>, stop: Stop, stamp: bool, progress: Arc<ProduceProgress>) -> anyhow::Result<()> {
    if stamp && spec.record_size < 8 {
        bail!("e2e needs --record-size >= 8 (a timestamp goes in each value)");
    }
    let conns = spec.connections.max(1);
    let end = meter.measure_end;
    let mut handles = Vec::new();
    for c in 0..conns {
        let templates = connection_templates(spec, c, conns)?;
        let (mut writer, mut reader) = client::connect(&spec.bootstrap)?;
        let window = Arc::new(Window::new(spec.inflight));
        let (tx, rx) = mpsc::channel::<InFlight>();
        let batch_bytes = (spec.batch_records * spec.record_size) as f64;
        // Each connection takes an equal share of the rate, its schedule offset by a
        // fraction of a batch interval so connections do not send in lockstep.
        let schedule = (spec.rate_bytes_s > 0.0).then(|| {
            let rec_per_s = spec.rate_bytes_s / conns as f64 / spec.record_size as f64;
            let batch_interval = batch_bytes / (spec.rate_bytes_s / conns as f64);
            let offset = Duration::from_secs_f64(batch_interval * c as f64 / conns as f64);
            Schedule::new(origin + offset, rec_per_s, spec.batch_records as u64)
        });
        let byte_budget = spec.total_bytes.map(|t| t / conns as u64 + u64::from(c == 0) * (t % conns as u64));
        let acks = spec.acks;

        // Writer: paces (or not), takes a window slot, sends.
        let (w_window, w_stop, w_meter) = (window.clone(), stop.clone(), meter.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<()> {
            let mut schedule = schedule;
            let mut correlation_id: i32 = 0;
            let mut sent_bytes = 0u64;
            let mut i = 0usize;
            // Start together at the origin (connections are set up before it).
            thread::sleep(origin.saturating_duration_since(Instant::now()));
            let result = (|| {
                while !w_stop.is_set() {
                    if byte_budget.is_some_and(|b| sent_bytes >= b) {
                        break;
                    }
                    let (first, interval) = match schedule.as_mut() {
                        Some(s) => {
                            let b = s.next_batch();
                            if b.due >= end {
                                break;
                            }
                            let now = Instant::now();
                            if b.due > now {
                                thread::sleep(b.due - now);
                            }
                            (b.first_intended, s.record_interval())
                        }
                        None => (Instant::now(), Duration::ZERO),
                    };
                    if acks != 0 && !w_window.acquire() {
                        break;
                    }
                    let now = Instant::now();
                    if now >= end {
                        w_window.release();
                        break;
                    }
                    // Max-rate mode measures from the moment a slot was free: the
                    // generator's own queueing is not the broker's latency.
                    let first = if schedule.is_none() { now } else { first };
                    let t = &templates[i % templates.len()];
                    i += 1;
                    correlation_id = correlation_id.wrapping_add(1);
                    let req = if stamp { stamped(t, first, interval, origin) } else { t.req.clone() };
                    if acks != 0 {
                        let f = InFlight { correlation_id, first_intended: first, interval, records: t.records, bytes: t.bytes };
                        if tx.send(f).is_err() {
                            break; // reader gone; its error is reported by its thread
                        }
                    }
                    writer.send(&req, correlation_id).context("sending Produce")?;
                    sent_bytes += t.bytes;
                    if acks == 0 {
                        w_meter.complete(Instant::now(), t.records, t.bytes);
                    }
                }
                Ok(())
            })();
            drop(tx); // lets the reader finish once the in-flight requests are answered
            if result.is_err() {
                w_stop.set();
            }
            result
        }));

        if acks == 0 {
            // No responses at acks=0 (as in Kafka), so no reader.
            drop(rx);
            continue;
        }
        // Reader: matches responses FIFO, records latency from the intended send time.
        let (r_stop, r_meter, r_progress) = (stop.clone(), meter.clone(), progress.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<()> {
            let mut local = LatencyHistogram::new();
            let result = (|| {
                for f in rx.iter() {
                    let resp = reader.read_response::<ProduceRequest>(PRODUCE_VERSION, f.correlation_id)?;
                    let done = Instant::now();
                    window.release();
                    let mut failed = false;
                    for t in &resp.responses {
                        for p in &t.partition_responses {
                            if p.error_code != 0 {
                                failed = true;
                                if r_meter.errors.fetch_add(f.records, Ordering::Relaxed) == 0 {
                                    eprintln!(
                                        "produce error {} on partition {}: {}",
                                        p.error_code,
                                        p.index,
                                        p.error_message.as_ref().map(|m| m.as_str()).unwrap_or("")
                                    );
                                }
                            }
                        }
                    }
                    if failed {
                        continue;
                    }
                    r_meter.complete(done, f.records, f.bytes);
                    r_progress.acked_records.fetch_add(f.records, Ordering::Relaxed);
                    if r_meter.in_window(f.first_intended) {
                        if f.interval.is_zero() {
                            local.record_n(done.saturating_duration_since(f.first_intended), f.records);
                        } else {
                            for k in 0..f.records {
                                local.record(done.saturating_duration_since(f.first_intended + f.interval * k as u32));
                            }
                        }
                        r_meter.add_latencies(&mut local, done);
                    }
                }
                Ok(())
            })();
            window.close();
            if result.is_err() {
                r_stop.set();
            }
            result
        }));
    }
    join_all(handles)
}

/// Consumes from `start_offsets` (one per partition of the spec). Stops at the end of
/// the window, when `stop` is set, or (`to_end`) when every partition reached the high
/// watermark. `e2e_origin`: values carry intended send times; record end-to-end latency.
pub fn run_consume(spec: &Spec, start_offsets: Vec<i64>, meter: Arc<Meter>, stop: Stop, to_end: bool, e2e_origin: Option<Instant>) -> anyhow::Result<()> {
    // Fetch has one request in flight per connection (the next offsets depend on the
    // answer), so parallelism comes from connections; more than partitions is useless.
    let conns = spec.connections.clamp(1, spec.partitions.len().max(1));
    let offsets_of: std::collections::HashMap<i32, i64> = spec.partitions.iter().copied().zip(start_offsets).collect();
    let mut handles = Vec::new();
    for c in 0..conns {
        let mine = spec.partitions_of(c, conns);
        let mut state: VecDeque<(i32, i64, bool)> = mine.iter().map(|p| (*p, offsets_of.get(p).copied().unwrap_or(0), false)).collect();
        let (mut writer, mut reader) = client::connect(&spec.bootstrap)?;
        let (spec, meter, stop) = (spec.clone(), meter.clone(), stop.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<()> {
            let topic = TopicName(StrBytes::from_string(spec.topic.clone()));
            let mut local = LatencyHistogram::new();
            let mut correlation_id = 0i32;
            // Nothing fetched before the window opens is counted, so do not fetch then.
            if e2e_origin.is_none() {
                thread::sleep(meter.measure_start.saturating_duration_since(Instant::now()));
            }
            let result = (|| {
                while !stop.is_set() && Instant::now() < meter.measure_end {
                    if to_end && state.iter().all(|s| s.2) {
                        break;
                    }
                    let parts = state
                        .iter()
                        .filter(|s| !s.2)
                        .map(|&(p, off, _)| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(off)
                                .with_last_fetched_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(spec.fetch_partition_max_bytes)
                        })
                        .collect();
                    let req = FetchRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_max_wait_ms(spec.fetch_max_wait_ms)
                        .with_min_bytes(1)
                        .with_max_bytes(spec.fetch_max_bytes)
                        .with_isolation_level(spec.isolation_level)
                        .with_session_id(0)
                        .with_session_epoch(-1) // full fetch, no incremental session
                        .with_topics(vec![FetchTopic::default().with_topic(topic.clone()).with_partitions(parts)]);
                    correlation_id = correlation_id.wrapping_add(1);
                    writer.send(&PreparedRequest::encode(&req, FETCH_VERSION)?, correlation_id).context("sending Fetch")?;
                    let resp = reader.read_response::<FetchRequest>(FETCH_VERSION, correlation_id)?;
                    let done = Instant::now();
                    if resp.error_code != 0 {
                        bail!("fetch failed with error {}", resp.error_code);
                    }
                    let mut records = 0u64;
                    let mut bytes = 0u64;
                    for t in &resp.responses {
                        for pr in &t.partitions {
                            let Some(st) = state.iter_mut().find(|s| s.0 == pr.partition_index) else {
                                continue;
                            };
                            if pr.error_code == OFFSET_OUT_OF_RANGE && pr.log_start_offset > st.1 {
                                st.1 = pr.log_start_offset; // retention removed the start
                                continue;
                            }
                            if pr.error_code != 0 {
                                if meter.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                                    eprintln!("fetch error {} on partition {}", pr.error_code, pr.partition_index);
                                }
                                continue;
                            }
                            // The bench's transactions all commit, so it does not
                            // filter aborted ones: finding one fails the run rather
                            // than count aborted records.
                            if pr.aborted_transactions.as_ref().is_some_and(|a| !a.is_empty()) {
                                bail!("partition {} holds aborted transactions: the generator does not filter them", pr.partition_index);
                            }
                            let data = pr.records.as_deref().unwrap_or(&[]);
                            let w = walk_batches(data, st.1, |v| {
                                if let (Some(origin), Some(ts)) = (e2e_origin, v.get(..8)) {
                                    let mut b = [0u8; 8];
                                    b.copy_from_slice(ts);
                                    let intended = origin + Duration::from_nanos(u64::from_be_bytes(b));
                                    if meter.in_window(intended) {
                                        local.record(done.saturating_duration_since(intended));
                                    }
                                }
                            })?;
                            records += w.records;
                            bytes += w.value_bytes;
                            if let Some(next) = w.next_offset {
                                st.1 = st.1.max(next);
                            }
                            // read_committed reads up to the last stable offset.
                            let end = if spec.isolation_level == 1 { pr.last_stable_offset } else { pr.high_watermark };
                            if to_end && st.1 >= end {
                                st.2 = true;
                            }
                        }
                    }
                    meter.complete(done, records, bytes);
                    meter.add_latencies(&mut local, done);
                }
                Ok(())
            })();
            if to_end {
                for (p, off, done) in &state {
                    if !done {
                        eprintln!("note: partition {p} stopped at offset {off} before the end");
                    }
                }
            }
            if std::env::var_os("SHARDLOG_BENCH_DEBUG").is_some() {
                eprintln!("consumer connection {c}: final offsets {:?}", state);
            }
            writer.finish();
            if result.is_err() {
                stop.set();
            }
            result
        }));
    }
    join_all(handles)
}

fn join_all(handles: Vec<thread::JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    let mut first_err = None;
    for h in handles {
        let r = h.join().unwrap_or_else(|_| Err(anyhow!("a generator thread panicked")));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(parts: usize, batch: usize, size: usize) -> Spec {
        Spec {
            bootstrap: String::new(),
            topic: "t".into(),
            partitions: (0..parts as i32).collect(),
            record_size: size,
            batch_records: batch,
            acks: 1,
            connections: 2,
            inflight: 4,
            rate_bytes_s: 0.0,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            total_bytes: None,
            fetch_max_bytes: 1 << 20,
            fetch_partition_max_bytes: 1 << 20,
            fetch_max_wait_ms: 100,
            isolation_level: 0,
            keys: 0,
            compression: Compression::None,
        }
    }

    #[test]
    fn partitions_spread_over_connections() {
        let s = spec(6, 1, 8);
        assert_eq!(s.partitions_of(0, 2), vec![0, 2, 4]);
        assert_eq!(s.partitions_of(1, 2), vec![1, 3, 5]);
        let s = spec(1, 1, 8);
        assert_eq!(s.partitions_of(3, 4), vec![0]);
    }

    #[test]
    fn template_finds_its_batch_and_stamps_values() {
        let s = spec(1, 4, 32);
        let t = produce_template(&s, 0, 7, &[]).unwrap();
        assert_eq!(t.values.len(), 4);
        let origin = Instant::now();
        let first = origin + Duration::from_millis(5);
        let req = stamped(&t, first, Duration::from_millis(1), origin);
        let batch = &req.frame()[t.batch.clone()];
        let mut seen = Vec::new();
        // The stamped batch still passes its CRC (walk_batches checks it).
        walk_batches(batch, 0, |v| seen.push(u64::from_be_bytes(v[..8].try_into().unwrap()))).unwrap();
        assert_eq!(seen, vec![5_000_000, 6_000_000, 7_000_000, 8_000_000]);
    }

    #[test]
    fn keyed_templates_put_each_key_on_its_partition_and_interleave() {
        // 10 keys over 4 partitions, 2 records a batch: partition index i holds keys
        // i, i+4, i+8 (3 or 2 keys: 2 or 1 batches).
        let mut s = spec(4, 2, 16);
        s.keys = 10;
        let t = connection_templates(&s, 0, 1).unwrap();
        let keys_of = |t: &ProduceTemplate| -> Vec<String> {
            let req = t.req.frame();
            let batch = &req[t.batch.clone()];
            let h = crate::record::parse_header(batch).unwrap();
            let keys = crate::record::with_records_section(batch, &h, |sec| {
                Ok(crate::record::parse_records(sec, &h)?.iter().map(|r| String::from_utf8(sec[r.key.clone().unwrap()].to_vec()).unwrap()).collect())
            })
            .unwrap();
            keys
        };
        let got: Vec<_> = t.iter().map(keys_of).collect();
        // Round-robin over partitions: 0 1 2 3, then the second batches of 0 and 1.
        let partitions = [0, 1, 2, 3, 0, 1];
        assert_eq!(got.len(), partitions.len());
        for (keys, p) in got.iter().zip(partitions) {
            for k in keys {
                let k: i32 = k.strip_prefix("key-").unwrap().parse().unwrap();
                assert_eq!(k % 4, p, "key {k} sent to partition {p}");
            }
        }
        assert_eq!(got[0], vec!["key-0", "key-4"]);
        assert_eq!(got[4], vec!["key-8", "key-0"], "the last batch cycles back");
    }
}
