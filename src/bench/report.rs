//! What the generator prints: a progress line a second on stderr, a final summary on
//! stdout (human or `--json`). MB means 2^20 bytes, as in Kafka's own perf tools.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::histogram::{LatencyHistogram, Percentiles};
use super::timeline::{Interval, Timeline};

pub const MB: f64 = (1u64 << 20) as f64;

/// Counters and latencies one workload shares between its threads. The histogram mutex
/// is taken once per response by a reader and once a second by the progress line, so
/// it is uncontended in practice.
pub struct Meter {
    /// Latencies and throughput count only inside [measure_start, measure_end).
    pub measure_start: Instant,
    pub measure_end: Instant,
    total_records: AtomicU64,
    total_bytes: AtomicU64,
    win_records: AtomicU64,
    win_bytes: AtomicU64,
    /// Nanoseconds after `measure_start` of the last completion inside the window.
    last_in_window_ns: AtomicU64,
    pub errors: AtomicU64,
    hist: Mutex<LatencyHistogram>,
    /// Per-interval throughput and percentiles over the window (None: not asked for).
    timeline: Option<Mutex<Timeline>>,
}

impl Meter {
    pub fn new(measure_start: Instant, measure_end: Instant) -> Meter {
        Meter {
            measure_start,
            measure_end,
            total_records: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            win_records: AtomicU64::new(0),
            win_bytes: AtomicU64::new(0),
            last_in_window_ns: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            hist: Mutex::new(LatencyHistogram::new()),
            timeline: None,
        }
    }

    /// Also keeps a timeline of `interval`s (a zero interval keeps none).
    pub fn with_timeline(mut self, interval: Duration) -> Meter {
        self.timeline = (!interval.is_zero()).then(|| Mutex::new(Timeline::new(interval)));
        self
    }

    /// Counts records completed at `done` (acknowledged, or fetched).
    pub fn complete(&self, done: Instant, records: u64, bytes: u64) {
        self.total_records.fetch_add(records, Ordering::Relaxed);
        self.total_bytes.fetch_add(bytes, Ordering::Relaxed);
        if done >= self.measure_start && done < self.measure_end {
            self.win_records.fetch_add(records, Ordering::Relaxed);
            self.win_bytes.fetch_add(bytes, Ordering::Relaxed);
            let since = done.duration_since(self.measure_start);
            self.last_in_window_ns.fetch_max(since.as_nanos() as u64, Ordering::Relaxed);
            if let Some(t) = &self.timeline {
                t.lock().unwrap_or_else(|p| p.into_inner()).count(since, records, bytes);
            }
        }
    }

    /// Records latencies measured in a local histogram (one lock per response), all of
    /// them completed at `done` (the timeline files them under that moment).
    pub fn add_latencies(&self, local: &mut LatencyHistogram, done: Instant) {
        if local.is_empty() {
            return;
        }
        if let Some(t) = &self.timeline {
            if self.in_window(done) {
                t.lock().unwrap_or_else(|p| p.into_inner()).latencies(done.duration_since(self.measure_start), local);
            }
        }
        // A poisoned lock means another reader panicked; keep counting regardless.
        let mut h = self.hist.lock().unwrap_or_else(|p| p.into_inner());
        h.merge(local);
        local.reset();
    }

    /// The timeline's intervals so far (empty without a timeline).
    pub fn timeline(&self) -> (f64, Vec<Interval>) {
        match &self.timeline {
            Some(t) => {
                let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
                (t.interval().as_secs_f64(), t.finish())
            }
            None => (0.0, Vec::new()),
        }
    }

    /// Whether a record intended (or sent) at `t` belongs in the latency figures.
    pub fn in_window(&self, t: Instant) -> bool {
        t >= self.measure_start && t < self.measure_end
    }

    pub fn total(&self) -> (u64, u64) {
        (self.total_records.load(Ordering::Relaxed), self.total_bytes.load(Ordering::Relaxed))
    }

    pub fn p99_ms(&self) -> f64 {
        self.hist.lock().unwrap_or_else(|p| p.into_inner()).quantile_ms(0.99)
    }

    /// Window totals: (records, bytes, elapsed seconds, percentiles).
    pub fn finish(&self) -> (u64, u64, f64, Percentiles) {
        let records = self.win_records.load(Ordering::Relaxed);
        let bytes = self.win_bytes.load(Ordering::Relaxed);
        // The window ends at its end, or at the last completion if the run ended early
        // (a consume that reached the end of the topic, a fill of N bytes).
        let last = Duration::from_nanos(self.last_in_window_ns.load(Ordering::Relaxed));
        let full = self.measure_end.saturating_duration_since(self.measure_start);
        let elapsed = if Instant::now() >= self.measure_end { full } else { last.min(full) };
        let p = self.hist.lock().unwrap_or_else(|p| p.into_inner()).percentiles();
        (records, bytes, elapsed.as_secs_f64(), p)
    }
}

/// Prints `[  3s] 51200 rec/s  50.0 MB/s  p99 1.234 ms` to stderr every second until
/// `stop` is set.
pub fn spawn_progress(label: &'static str, meter: Arc<Meter>, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let start = Instant::now();
        let (mut last_r, mut last_b) = (0, 0);
        let mut tick = start;
        while !stop.load(Ordering::Relaxed) {
            tick += Duration::from_secs(1);
            // Sleep in small steps so the final summary is not delayed by up to a second.
            while Instant::now() < tick && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(20));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let (r, b) = meter.total();
            let phase = if Instant::now() < meter.measure_start { " (warm-up)" } else { "" };
            eprintln!(
                "[{:>4}s] {label}: {:>9} rec/s {:>9.1} MB/s  p99 {:.3} ms{phase}",
                start.elapsed().as_secs(),
                r - last_r,
                (b - last_b) as f64 / MB,
                meter.p99_ms()
            );
            (last_r, last_b) = (r, b);
        }
    })
}

/// The final result of one `shardlog bench` run.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub mode: String,
    pub topic: String,
    pub partitions: usize,
    pub record_size: usize,
    pub batch_records: usize,
    pub acks: i16,
    pub connections: usize,
    pub inflight: usize,
    pub rate_mb_s: f64,
    pub records: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub records_s: f64,
    pub mb_s: f64,
    pub errors: u64,
    /// produce: ack latency; consume: none (zeros); e2e: produce -> fetched.
    pub latency: Percentiles,
    /// e2e only: the producer's ack latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub produce_latency: Option<Percentiles>,
    /// How latency was measured, so a reader of the JSON does not have to guess.
    pub latency_from: &'static str,
    /// consume: read_uncommitted or read_committed.
    pub isolation_level: &'static str,
    /// txn only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnSummary>,
    /// produce (and e2e: the end-to-end side) with --keys: distinct keys.
    pub keys: usize,
    pub compression: &'static str,
    /// Seconds per timeline interval (0: no timeline).
    pub timeline_interval_s: f64,
    /// The window in intervals, by completion time: throughput and latency over time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Interval>,
}

/// What the transactional workload adds to its summary.
#[derive(Debug, Serialize)]
pub struct TxnSummary {
    /// "v1" or "v2" (the one the broker finalizes).
    pub protocol: &'static str,
    pub records_per_txn: usize,
    /// Transactions committed in the window.
    pub transactions: u64,
    /// From a transaction's first send to its commit answered.
    pub txn_latency: Percentiles,
}

impl Summary {
    pub fn print(&self, json: bool) {
        if json {
            match serde_json::to_string(self) {
                Ok(s) => println!("{s}"),
                Err(e) => eprintln!("error: cannot serialize summary: {e}"),
            }
            return;
        }
        println!(
            "{} {}: {} records in {:.1} s = {:.0} records/s, {:.1} MB/s ({} partitions, {} B records, {} per batch, acks={}, {} conn x {} in flight){}",
            self.mode,
            self.topic,
            self.records,
            self.elapsed_s,
            self.records_s,
            self.mb_s,
            self.partitions,
            self.record_size,
            self.batch_records,
            self.acks,
            self.connections,
            self.inflight,
            if self.errors > 0 { format!(", {} records failed", self.errors) } else { String::new() }
        );
        let line = |name: &str, from: &str, p: &Percentiles| {
            println!(
                "{name} latency (ms, {from}): p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  p99.99 {:.3}  max {:.3}  ({} samples)",
                p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.p9999_ms, p.max_ms, p.count
            )
        };
        if self.latency.count > 0 {
            line(
                match self.mode.as_str() {
                    "e2e" => "end-to-end",
                    "txn" => "EndTxn",
                    _ => "produce",
                },
                self.latency_from,
                &self.latency,
            );
        }
        if let Some(p) = &self.produce_latency {
            line("produce ack", "ack minus intended send time", p);
        }
        if let Some(t) = &self.txn {
            println!("{} transactions of {} records, transactions {}", t.transactions, t.records_per_txn, t.protocol);
            line("transaction", "first send to commit answered", &t.txn_latency);
        }
    }
}
