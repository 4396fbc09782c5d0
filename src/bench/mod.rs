//! `shardlog bench produce|consume|e2e`: a load generator with its own lean Kafka
//! client, for `scripts/bench.sh` (shardlog vs Apache Kafka) and for ad-hoc runs.
//!
//! - `client.rs`    pipelined connections (writer + reader thread), prepared requests
//! - `records.rs`   the reusable record batch; walking fetched batches
//! - `workload.rs`  produce / consume / e2e drivers
//! - `transactional.rs` the transactional producers (`txn`)
//! - `rate.rs`      fixed-rate schedule with coordinated-omission correction
//! - `histogram.rs` hdrhistogram latencies and the percentiles we report
//! - `report.rs`    progress line, final summary, `--json`
//! - `timeline.rs`  throughput and percentiles per interval (latency over time)
//!
//! Single-node assumption: every connection goes to `--bootstrap`; the topic's
//! partitions must all be led by that broker (checked).
//!
//! A client: it knows the wire (`protocol::`, `record::`) and never the broker's inside
//! (`server::`, `partition::`, `storage::`, `cluster::`, `group::`, `controller::`).
pub mod client;
pub mod histogram;
pub mod rate;
pub mod records;
pub mod report;
pub mod timeline;
pub mod transactional;
pub mod workload;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::cli::client::Client;
use report::{Meter, Summary, MB};
use workload::{ProduceProgress, Spec, Stop};

#[derive(Subcommand, Debug)]
pub enum BenchMode {
    /// Produce as fast as possible (or at --rate-mb-s) and report throughput and ack latency.
    Produce(BenchArgs),
    /// Fetch a topic from offset 0 to its end (or for --duration-s) and report throughput.
    Consume(BenchArgs),
    /// Produce at --rate-mb-s with timestamps in the values; report produce->fetch latency.
    E2e(BenchArgs),
    /// One transactional producer per partition (idempotent, acks=all), committing
    /// --txn-records per transaction; report committed throughput and EndTxn latency.
    Txn(BenchArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TxnProtocolArg {
    /// What the broker finalizes (transaction.version), as Kafka's Java client picks.
    Auto,
    V1,
    V2,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum IsolationArg {
    ReadUncommitted,
    /// Up to the last stable offset (the generator's transactions all commit; aborted
    /// transactions in a fetch fail the run).
    ReadCommitted,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CompressionArg {
    None,
    Lz4,
    Zstd,
}

impl CompressionArg {
    fn codec(self) -> Compression {
        match self {
            CompressionArg::None => Compression::None,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long, default_value = "shardlog-bench")]
    pub topic: String,
    /// Partitions; the topic is created with this many if it does not exist.
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Value bytes per record (no key).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Records per batch (overrides --batch-bytes).
    #[arg(long)]
    pub batch_records: Option<usize>,
    /// Batch size in value bytes (Kafka's batch.size default is 16384).
    #[arg(long, default_value_t = 16384)]
    pub batch_bytes: usize,
    /// Fixed rate: a batch holds at most the records one connection's schedule intends
    /// in this many ms (Kafka's linger.ms: a producer sends a batch that long after its
    /// first record, full or not). Without it a batch is always full, and at a low rate
    /// per connection its first record waits for the batch to fill (that wait counts in
    /// its latency, as it would with an unbounded linger).
    #[arg(long)]
    pub linger_ms: Option<f64>,
    /// 0, 1, or all (-1).
    #[arg(long, default_value = "1", value_parser = parse_acks, allow_hyphen_values = true)]
    pub acks: i16,
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// Pipelined Produce requests per connection.
    #[arg(long, default_value_t = 8)]
    pub inflight: usize,
    /// Target rate in MB/s (2^20 bytes) over all connections; 0 = as fast as possible.
    #[arg(long, default_value_t = 0.0)]
    pub rate_mb_s: f64,
    /// Measured seconds (after warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 2.0)]
    pub warmup_s: f64,
    /// Batch compression (produce). Compressed runs send values that compress about 2:1
    /// (half filler, half repeated text); uncompressed runs send incompressible filler.
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArg,
    /// Produce: keyed records, this many distinct keys, key k on partition k mod
    /// partitions (round-robin, as a keyed producer spreads them); 0 = no keys.
    #[arg(long, default_value_t = 0)]
    pub keys: usize,
    /// Seconds per timeline interval in the summary (latency over time); 0 = none.
    #[arg(long, default_value_t = 1.0)]
    pub timeline_s: f64,
    /// Produce: stop after this many MB (to fill a topic).
    #[arg(long)]
    pub total_mb: Option<f64>,
    #[arg(long, default_value_t = 52_428_800)]
    pub fetch_max_bytes: i32,
    /// Kafka's max.partition.fetch.bytes default.
    #[arg(long, default_value_t = 1_048_576)]
    pub fetch_partition_max_bytes: i32,
    #[arg(long, default_value_t = 500)]
    pub fetch_max_wait_ms: i32,
    /// txn: records per transaction.
    #[arg(long, default_value_t = 100)]
    pub txn_records: usize,
    #[arg(long, value_enum, default_value = "auto")]
    pub txn_protocol: TxnProtocolArg,
    /// consume: the fetch isolation level.
    #[arg(long, value_enum, default_value = "read-uncommitted")]
    pub isolation_level: IsolationArg,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        _ => Err(format!("acks must be 0, 1 or all, got {s}")),
    }
}

fn secs(s: f64, what: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("bad {what}: {s}"))
}

pub fn run(mode: BenchMode) -> anyhow::Result<()> {
    let (name, args) = match mode {
        BenchMode::Produce(a) => ("produce", a),
        BenchMode::Consume(a) => ("consume", a),
        BenchMode::E2e(a) => ("e2e", a),
        BenchMode::Txn(a) => ("txn", a),
    };
    if args.record_size == 0 || args.partitions <= 0 {
        bail!("--record-size and --partitions must be positive");
    }
    if args.rate_mb_s < 0.0 || !args.rate_mb_s.is_finite() {
        bail!("--rate-mb-s must be >= 0");
    }
    if name == "e2e" && !matches!(args.compression, CompressionArg::None) {
        bail!("e2e stamps send times into the values: it cannot send compressed batches");
    }
    if name == "txn" && (args.keys > 0 || !matches!(args.compression, CompressionArg::None)) {
        bail!("txn sends unkeyed, uncompressed batches (--keys and --compression are for produce)");
    }
    if name == "e2e" && args.rate_mb_s == 0.0 {
        bail!("e2e needs a fixed --rate-mb-s (latency at max rate measures queueing, not the broker)");
    }
    let mut batch_records = args.batch_records.unwrap_or(args.batch_bytes / args.record_size).max(1);
    if let (Some(linger_ms), true) = (args.linger_ms, args.rate_mb_s > 0.0) {
        batch_records = linger_batch_records(batch_records, args.rate_mb_s * MB, args.connections.max(1), args.record_size, linger_ms);
    }
    let partitions = ensure_topic(&args.bootstrap, &args.topic, args.partitions)?;
    if args.keys > 0 && args.keys < partitions.len() {
        bail!("--keys {} is fewer than the {} partitions: some partitions would get no records", args.keys, partitions.len());
    }
    let mut spec = Spec {
        bootstrap: args.bootstrap.clone(),
        topic: args.topic.clone(),
        partitions,
        record_size: args.record_size,
        batch_records,
        acks: args.acks,
        connections: args.connections.max(1),
        inflight: args.inflight.max(1),
        rate_bytes_s: args.rate_mb_s * MB,
        duration: secs(args.duration_s, "--duration-s")?,
        warmup: secs(args.warmup_s, "--warmup-s")?,
        total_bytes: args.total_mb.map(|m| (m * MB) as u64),
        fetch_max_bytes: args.fetch_max_bytes,
        fetch_partition_max_bytes: args.fetch_partition_max_bytes,
        fetch_max_wait_ms: args.fetch_max_wait_ms,
        isolation_level: match args.isolation_level {
            IsolationArg::ReadUncommitted => 0,
            IsolationArg::ReadCommitted => 1,
        },
        keys: args.keys,
        compression: args.compression.codec(),
    };
    let timeline = if args.timeline_s > 0.0 { secs(args.timeline_s, "--timeline-s")? } else { Duration::ZERO };
    if name == "txn" {
        // One transactional producer (connection) per partition, acks=all, a
        // transaction's batches in flight at once.
        spec.acks = -1;
        spec.connections = spec.partitions.len();
        spec.inflight = args.txn_records.div_ceil(batch_records).max(1);
    }
    // A little head room so connections are set up before the first intended send.
    let origin = Instant::now() + Duration::from_millis(50);
    let measure_start = origin + spec.warmup;
    // Filling by size has no time limit (a day is "never" for a benchmark).
    let measure_end = if spec.total_bytes.is_some() { measure_start + Duration::from_secs(86_400) } else { measure_start + spec.duration };
    // e2e: this is the consumer's meter; it runs until everything produced was read (or
    // 10 s after the producer stopped), so the last records' latencies count too.
    let meter_end = if name == "e2e" { measure_end + Duration::from_secs(10) } else { measure_end };
    let meter = Arc::new(Meter::new(measure_start, meter_end).with_timeline(timeline));
    let stop = Stop::default();
    let progress_stop = Stop::default();
    let progress = (!args.quiet).then(|| report::spawn_progress(name, meter.clone(), progress_stop.flag()));

    let mut produce_latency = None;
    let mut txn: Option<report::TxnSummary> = None;
    let (result, latency_from) = match name {
        "produce" => {
            let r = workload::run_produce(&spec, origin, meter.clone(), stop.clone(), false, Arc::new(ProduceProgress::default()));
            let from = if spec.rate_bytes_s > 0.0 { "ack minus intended send time" } else { "ack minus send time" };
            (r, from)
        }
        "txn" => {
            let protocol = match args.txn_protocol {
                TxnProtocolArg::Auto => transactional::detect_protocol(&spec.bootstrap)?,
                TxnProtocolArg::V1 => transactional::TxnProtocol::V1,
                TxnProtocolArg::V2 => transactional::TxnProtocol::V2,
            };
            let txn_meter = Arc::new(Meter::new(measure_start, meter_end));
            let r = transactional::run_txn_produce(&spec, args.txn_records, protocol, origin, meter.clone(), txn_meter.clone(), stop.clone());
            txn = Some(report::TxnSummary {
                protocol: if protocol == transactional::TxnProtocol::V2 { "v2" } else { "v1" },
                records_per_txn: args.txn_records,
                transactions: 0, // counted below, from the window's records
                txn_latency: txn_meter.finish().3,
            });
            (r, "EndTxn(commit) round trip")
        }
        "consume" => {
            let starts = vec![0; spec.partitions.len()];
            (workload::run_consume(&spec, starts, meter.clone(), stop.clone(), true, None), "none")
        }
        _ => {
            let starts = latest_offsets(&spec.bootstrap, &spec.topic, &spec.partitions)?;
            let acked = Arc::new(ProduceProgress::default());
            let produce_meter = Arc::new(Meter::new(measure_start, measure_end));
            let consume_meter = meter.clone();
            let consumer = {
                let (spec, meter, stop) = (spec.clone(), consume_meter.clone(), stop.clone());
                let mut spec = spec;
                spec.connections = 1;
                spec.fetch_max_wait_ms = spec.fetch_max_wait_ms.min(100);
                thread::spawn(move || workload::run_consume(&spec, starts, meter, stop, false, Some(origin)))
            };
            let r = workload::run_produce(&spec, origin, produce_meter.clone(), stop.clone(), true, acked.clone());
            let target = acked.acked_records.load(std::sync::atomic::Ordering::Relaxed);
            let drain_deadline = Instant::now() + Duration::from_secs(10);
            while consume_meter.total().0 < target && Instant::now() < drain_deadline && !stop.is_set() {
                thread::sleep(Duration::from_millis(10));
            }
            stop.set();
            let rc = consumer.join().unwrap_or_else(|_| Err(anyhow::anyhow!("consumer thread panicked")));
            produce_latency = Some(produce_meter.finish().3);
            // Throughput of e2e is what the producer got acknowledged in the window; the
            // consumer's count includes the drain after it.
            let (pr, pb, pe, _) = produce_meter.finish();
            let (_, _, _, lat) = consume_meter.finish();
            progress_stop.set();
            if let Some(p) = progress {
                let _ = p.join();
            }
            r.and(rc)?;
            let consumed = consume_meter.total().0;
            if consumed < target {
                eprintln!("warning: consumed {consumed} of {target} produced records before the drain deadline");
            }
            let mut summary = summary(
                name,
                &spec,
                pr,
                pb,
                pe,
                consume_meter.errors.load(std::sync::atomic::Ordering::Relaxed) + produce_meter.errors.load(std::sync::atomic::Ordering::Relaxed),
                lat,
                produce_latency,
                "fetched minus intended send time",
            );
            (summary.timeline_interval_s, summary.timeline) = consume_meter.timeline();
            summary.print(args.json);
            return Ok(());
        }
    };
    progress_stop.set();
    if let Some(p) = progress {
        let _ = p.join();
    }
    result?;
    let (records, bytes, elapsed, lat) = meter.finish();
    let errors = meter.errors.load(std::sync::atomic::Ordering::Relaxed);
    let mut s = summary(name, &spec, records, bytes, elapsed, errors, lat, produce_latency, latency_from);
    s.txn = txn.map(|t| report::TxnSummary { transactions: records / t.records_per_txn.max(1) as u64, ..t });
    (s.timeline_interval_s, s.timeline) = meter.timeline();
    s.print(args.json);
    if records == 0 {
        bail!("no records completed in the measured window");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn summary(
    mode: &str,
    spec: &Spec,
    records: u64,
    bytes: u64,
    elapsed_s: f64,
    errors: u64,
    latency: histogram::Percentiles,
    produce_latency: Option<histogram::Percentiles>,
    latency_from: &'static str,
) -> Summary {
    let e = elapsed_s.max(1e-9);
    Summary {
        mode: mode.to_string(),
        topic: spec.topic.clone(),
        partitions: spec.partitions.len(),
        record_size: spec.record_size,
        batch_records: spec.batch_records,
        acks: spec.acks,
        connections: spec.connections,
        inflight: spec.inflight,
        rate_mb_s: spec.rate_bytes_s / MB,
        records,
        bytes,
        elapsed_s,
        records_s: records as f64 / e,
        mb_s: bytes as f64 / MB / e,
        errors,
        latency,
        produce_latency,
        latency_from,
        isolation_level: if spec.isolation_level == 1 { "read_committed" } else { "read_uncommitted" },
        txn: None,
        keys: spec.keys,
        compression: compression_name(spec.compression),
        timeline_interval_s: 0.0,
        timeline: Vec::new(),
    }
}

/// Records one connection's fixed-rate schedule intends within `linger_ms`, at most
/// `full` and at least one: the batch a lingering producer would send.
fn linger_batch_records(full: usize, rate_bytes_s: f64, connections: usize, record_size: usize, linger_ms: f64) -> usize {
    let per_connection_records_s = rate_bytes_s / connections as f64 / record_size as f64;
    let in_linger = (per_connection_records_s * linger_ms.max(0.0) / 1000.0).floor();
    if in_linger.is_finite() {
        (in_linger as usize).clamp(1, full)
    } else {
        full
    }
}

fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates `topic` with `partitions` if missing and waits until every partition has a
/// leader. Returns the partition ids (an existing topic keeps its own count).
pub fn ensure_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<Vec<i32>> {
    let mut c = Client::connect(bootstrap)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut created = false;
    loop {
        let md = c.send(
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(topic)))]))
                .with_allow_auto_topic_creation(false),
            12,
        )?;
        let Some(t) = md.topics.first() else { bail!("metadata response without the topic") };
        match t.error_code {
            0 if !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader_id.0 >= 0 && p.error_code == 0) => {
                let leaders: std::collections::BTreeSet<i32> = t.partitions.iter().map(|p| p.leader_id.0).collect();
                // The generator talks to --bootstrap only: in a cluster, every partition
                // must be led by that broker (create the topic with a replica assignment
                // naming it first, e.g. to measure replication from one leader).
                let me = md.brokers.iter().find(|b| format!("{}:{}", b.host.as_str(), b.port) == bootstrap).map(|b| b.node_id.0);
                let led_here = leaders.len() == 1 && (md.brokers.len() == 1 || leaders.iter().next().copied() == me);
                if !led_here {
                    bail!("topic {topic} is led by brokers {leaders:?}: the generator only talks to --bootstrap ({bootstrap})");
                }
                if t.partitions.len() as i32 != partitions {
                    eprintln!("note: topic {topic} exists with {} partitions (asked for {partitions})", t.partitions.len());
                }
                let mut ids: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
                ids.sort_unstable();
                return Ok(ids);
            }
            3 if !created => {
                let req = CreateTopicsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(vec![CreatableTopic::default().with_name(topic_name(topic)).with_num_partitions(partitions).with_replication_factor(-1)]);
                let resp = c.send(&req, 7)?;
                for r in &resp.topics {
                    // 36 = TOPIC_ALREADY_EXISTS: another generator won the race; fine.
                    if r.error_code != 0 && r.error_code != 36 {
                        bail!("create topic {topic}: error {} {:?}", r.error_code, r.error_message.as_ref().map(|m| m.to_string()));
                    }
                }
                created = true;
            }
            // Not yet visible / leaders not elected: wait.
            0 | 3 | 5 => {}
            code => bail!("metadata for {topic}: error {code}"),
        }
        if Instant::now() > deadline {
            bail!("topic {topic} has no leader for every partition after 60 s");
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The log end offset of each partition (ListOffsets, timestamp -1 = latest).
fn latest_offsets(bootstrap: &str, topic: &str, partitions: &[i32]) -> anyhow::Result<Vec<i64>> {
    let mut c = Client::connect(bootstrap)?;
    let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
        .with_name(topic_name(topic))
        .with_partitions(
            partitions.iter().map(|&p| ListOffsetsPartition::default().with_partition_index(p).with_current_leader_epoch(-1).with_timestamp(-1)).collect(),
        )]);
    let resp = c.send(&req, 7)?;
    let mut out = vec![0; partitions.len()];
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                bail!("list offsets {topic}-{}: error {}", p.partition_index, p.error_code);
            }
            if let Some(i) = partitions.iter().position(|&x| x == p.partition_index) {
                out[i] = p.offset;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linger_bounds_the_batch_at_low_rates_per_connection() {
        // 20 MB/s over 50 connections of 1 KiB records: 409.6 records/s each, 2 in 5 ms.
        assert_eq!(linger_batch_records(16, 20.0 * MB, 50, 1024, 5.0), 2);
        // 200 connections: 102.4 records/s each, less than one in 5 ms: one a batch.
        assert_eq!(linger_batch_records(16, 20.0 * MB, 200, 1024, 5.0), 1);
        // 50 MB/s over 2 connections: 25,600 records/s each, 128 in 5 ms: a full batch.
        assert_eq!(linger_batch_records(16, 50.0 * MB, 2, 1024, 5.0), 16);
        assert_eq!(linger_batch_records(16, 50.0 * MB, 2, 1024, 0.0), 1);
    }
}
