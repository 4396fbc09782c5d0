//! `shardlog top`: a running broker's or cluster's key figures from the admin listeners'
//! /metrics, refreshed every second, for an operator without Grafana. Per shard:
//! requests/s, MB/s in and out, p99 produce and fetch time, stalls; per cluster:
//! under-replicated and offline partitions, the active controller, the largest group lags.
//!
//! Rates and quantiles come from the difference of two scrapes, as Prometheus's `rate`
//! and `histogram_quantile` compute them.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One sample: its metric name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the sample lines of an OpenMetrics / Prometheus text exposition (comments and
/// lines it cannot read are skipped: this is a viewer, not a validator).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (head, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match head.split_once('{') {
        None => (head.to_string(), BTreeMap::new()),
        Some((name, rest)) => {
            let mut labels = BTreeMap::new();
            // Label values here never hold `",` (topic, group and task names are plain).
            for pair in rest.strip_suffix('}')?.split("\",") {
                let (k, v) = pair.split_once("=\"")?;
                labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
            }
            (name.to_string(), labels)
        }
    };
    Some(Sample { name, labels, value })
}

/// One node's scrape.
struct Scrape {
    at: Instant,
    samples: Vec<Sample>,
}

impl Scrape {
    fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.samples.iter().filter(|s| s.name == name && filter.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))).map(|s| s.value).sum()
    }

    fn shards(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.samples.iter().filter(|s| s.name == "shardlog_shard_connections").filter_map(|s| s.labels.get("shard").cloned()).collect();
        out.sort_by_key(|s| s.parse::<u32>().unwrap_or(0));
        out
    }

    /// (le, cumulative count) of a histogram's buckets matching `filter`.
    fn buckets(&self, name: &str, filter: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == bucket && filter.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))) {
            let le = match s.labels.get("le").map(String::as_str) {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().unwrap_or(f64::INFINITY),
                None => continue,
            };
            let e = by_le.entry(le.to_bits()).or_insert((le, 0.0));
            e.1 += s.value;
        }
        let mut out: Vec<(f64, f64)> = by_le.into_values().collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

/// Quantile `q` of the observations between two scrapes of a histogram (the upper bound of
/// the bucket it falls in, as a conservative reading); None when nothing was observed.
pub fn quantile_between(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, f64)> = after.iter().map(|(le, c)| (*le, c - before.iter().find(|(b, _)| b == le).map_or(0.0, |(_, bc)| *bc))).collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    delta.iter().find(|(_, c)| *c >= rank).map(|(le, _)| *le)
}

fn fetch(url: &str) -> Result<Scrape, String> {
    let body = ureq::get(&format!("{url}/metrics"))
        .timeout(Duration::from_secs(3))
        .call()
        .map_err(|e| format!("{url}: {e}"))?
        .into_string()
        .map_err(|e| format!("{url}: {e}"))?;
    Ok(Scrape { at: Instant::now(), samples: parse(&body) })
}

fn ms(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".into(),
        Some(s) if s.is_infinite() => ">47s".into(),
        Some(s) => format!("{:.2}", s * 1000.0),
    }
}

/// One frame: per node and shard the rates between `before` and `after`, then the cluster.
fn frame(nodes: &[(String, Option<Scrape>, Option<Scrape>)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>5} {:>9} {:>9} {:>9} {:>11} {:>11} {:>7} {:>6}",
        "node", "shard", "req/s", "MB/s in", "MB/s out", "produce p99", "fetch p99", "stalls", "conns"
    );
    let (mut urp, mut offline, mut active) = (0.0, 0.0, Vec::new());
    let mut lags: Vec<(f64, String)> = Vec::new();
    for (url, before, after) in nodes {
        let (Some(b), Some(a)) = (before, after) else {
            let _ = writeln!(out, "{url:<22} (no answer)");
            continue;
        };
        let secs = a.at.duration_since(b.at).as_secs_f64().max(1e-3);
        for shard in a.shards() {
            let f = [("shard", shard.as_str())];
            let rate = |name: &str| (a.sum(name, &f) - b.sum(name, &f)) / secs;
            let p99 = |name: &str| quantile_between(&b.buckets(name, &f), &a.buckets(name, &f), 0.99);
            let _ = writeln!(
                out,
                "{url:<22} {shard:>5} {:>9.0} {:>9.2} {:>9.2} {:>11} {:>11} {:>7.0} {:>6.0}",
                rate("shardlog_shard_requests_total"),
                rate("shardlog_shard_bytes_in_total") / 1e6,
                rate("shardlog_shard_bytes_out_total") / 1e6,
                ms(p99("shardlog_shard_produce_total_time_seconds")),
                ms(p99("shardlog_shard_fetch_total_time_seconds")),
                a.sum("shardlog_shard_stalls_total", &f) - b.sum("shardlog_shard_stalls_total", &f),
                a.sum("shardlog_shard_connections", &f),
            );
        }
        urp += a.sum("shardlog_under_replicated_partitions", &[]);
        offline += a.sum("shardlog_offline_partitions_count", &[]);
        if a.sum("shardlog_active_controller_count", &[]) >= 1.0 {
            active.push(url.clone());
        }
        for s in a.samples.iter().filter(|s| s.name == "shardlog_consumer_group_lag") {
            let group = s.labels.get("group").cloned().unwrap_or_default();
            let topic = s.labels.get("topic").cloned().unwrap_or_default();
            let partition = s.labels.get("partition").cloned().unwrap_or_default();
            lags.push((s.value, format!("{group} {topic}-{partition}")));
        }
    }
    let _ = writeln!(
        out,
        "cluster: under-replicated {urp:.0}, offline {offline:.0}, active controller {}",
        if active.is_empty() { "none seen".into() } else { active.join(", ") }
    );
    lags.sort_by(|a, b| b.0.total_cmp(&a.0));
    if lags.is_empty() {
        let _ = writeln!(out, "lag: no committed offsets seen");
    } else {
        let top: Vec<String> = lags.iter().take(5).map(|(lag, what)| format!("{what} {lag:.0}")).collect();
        let _ = writeln!(out, "largest lag: {}", top.join(", "));
    }
    out
}

/// Runs the view against `admins` (host:port or http://host:port, one per node) every
/// `interval`, `iterations` frames (None: until interrupted).
pub fn run(admins: &[String], interval: Duration, iterations: Option<u64>) -> anyhow::Result<()> {
    let urls: Vec<String> = admins.iter().map(|a| if a.starts_with("http") { a.clone() } else { format!("http://{a}") }).collect();
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut last: Vec<Option<Scrape>> = urls.iter().map(|u| fetch(u).ok()).collect();
    let mut shown = 0;
    while iterations.is_none_or(|n| shown < n) {
        std::thread::sleep(interval);
        let now: Vec<Option<Scrape>> = urls.iter().map(|u| fetch(u).ok()).collect();
        let nodes: Vec<(String, Option<Scrape>, Option<Scrape>)> =
            urls.iter().cloned().zip(std::mem::take(&mut last)).zip(now).map(|((u, b), a)| (u, b, a)).collect();
        let text = frame(&nodes);
        if terminal {
            print!("\x1b[2J\x1b[H{text}");
        } else {
            println!("{text}");
        }
        last = nodes.into_iter().map(|(_, _, a)| a).collect();
        shown += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_and_reads_quantiles_between_scrapes() {
        let s = parse("# TYPE x counter\nx_total{shard=\"0\",task=\"retention\"} 3\ny 2.5\nh_bucket{le=\"0.001\"} 1\nh_bucket{le=\"+Inf\"} 1\n");
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].labels.get("task").map(String::as_str), Some("retention"));
        assert_eq!(s[1].value, 2.5);
        assert_eq!(s[3].value, 1.0);
        let before = [(0.001, 10.0), (0.01, 10.0), (f64::INFINITY, 10.0)];
        let after = [(0.001, 10.0), (0.01, 110.0), (f64::INFINITY, 111.0)];
        assert_eq!(quantile_between(&before, &after, 0.5), Some(0.01), "the new observations are in (1, 10] ms");
        assert_eq!(quantile_between(&before, &after, 1.0), Some(f64::INFINITY));
        assert_eq!(quantile_between(&after, &after, 0.99), None, "nothing observed in between");
    }
}
