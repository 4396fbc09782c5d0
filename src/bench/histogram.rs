//! Latency histogram (hdrhistogram, microsecond resolution) and the percentiles we report.
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest trackable latency: one hour in microseconds; larger values saturate there.
const MAX_US: u64 = 3_600_000_000;
/// Three significant digits: 0.1% relative error, a few hundred KiB per histogram.
const SIGFIG: u8 = 3;

/// Latencies in microseconds.
#[derive(Clone)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

/// The percentiles in every report, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2*low,
        // sigfig <= 5), so construction cannot fail.
        let h = Histogram::new_with_bounds(1, MAX_US, SIGFIG).expect("constant histogram bounds are valid");
        LatencyHistogram { h }
    }

    pub fn record(&mut self, latency: Duration) {
        self.record_n(latency, 1);
    }

    /// Records `n` samples of the same latency (a batch acknowledged at once).
    pub fn record_n(&mut self, latency: Duration, n: u64) {
        // Clamp into the trackable range rather than dropping: a saturated max is still
        // visibly "huge" in the report, a dropped sample would hide a stall.
        let us = (latency.as_micros().min(u128::from(MAX_US)) as u64).max(1);
        self.h.saturating_record_n(us, n);
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so `add` cannot fail; saturate counts if it did.
        let _ = self.h.add(&other.h);
    }

    pub fn len(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    pub fn reset(&mut self) {
        self.h.reset();
    }

    /// Latency at quantile `q` (0..=1) in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            return 0.0;
        }
        self.h.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn percentiles(&self) -> Percentiles {
        if self.h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: self.h.len(),
            p50_ms: self.quantile_ms(0.50),
            p90_ms: self.quantile_ms(0.90),
            p99_ms: self.quantile_ms(0.99),
            p999_ms: self.quantile_ms(0.999),
            p9999_ms: self.quantile_ms(0.9999),
            max_ms: self.h.max() as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        // hdrhistogram with 3 significant digits: within 0.1% (plus rounding to 1 us).
        (a - b).abs() <= b * 0.001 + 0.001
    }

    #[test]
    fn empty_reports_zeros() {
        let h = LatencyHistogram::new();
        assert!(h.is_empty());
        assert_eq!(h.percentiles(), Percentiles::default());
    }

    #[test]
    fn uniform_percentiles() {
        let mut h = LatencyHistogram::new();
        for us in 1..=100_000u64 {
            h.record(Duration::from_micros(us));
        }
        let p = h.percentiles();
        assert_eq!(p.count, 100_000);
        assert!(close(p.p50_ms, 50.0), "{p:?}");
        assert!(close(p.p90_ms, 90.0), "{p:?}");
        assert!(close(p.p99_ms, 99.0), "{p:?}");
        assert!(close(p.p999_ms, 99.9), "{p:?}");
        assert!(close(p.p9999_ms, 99.99), "{p:?}");
        assert!(close(p.max_ms, 100.0), "{p:?}");
        // Percentiles never decrease.
        assert!(p.p50_ms <= p.p90_ms && p.p90_ms <= p.p99_ms && p.p99_ms <= p.p999_ms);
        assert!(p.p999_ms <= p.p9999_ms && p.p9999_ms <= p.max_ms);
    }

    #[test]
    fn one_outlier_shows_in_the_tail_only() {
        let mut h = LatencyHistogram::new();
        h.record_n(Duration::from_millis(1), 9_999);
        h.record(Duration::from_secs(2));
        let p = h.percentiles();
        assert!(close(p.p50_ms, 1.0) && close(p.p99_ms, 1.0) && close(p.p999_ms, 1.0), "{p:?}");
        assert!(close(p.max_ms, 2000.0), "{p:?}");
        assert!(close(p.p9999_ms, 1.0) || close(p.p9999_ms, 2000.0), "{p:?}");
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record_n(Duration::from_millis(1), 50);
        b.record_n(Duration::from_millis(3), 50);
        a.merge(&b);
        let p = a.percentiles();
        assert_eq!(p.count, 100);
        assert!(close(p.p50_ms, 1.0), "{p:?}");
        assert!(close(p.p90_ms, 3.0), "{p:?}");
    }

    #[test]
    fn out_of_range_values_saturate_instead_of_vanishing() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(10 * 3600));
        assert_eq!(h.len(), 2);
        assert!(h.percentiles().max_ms >= 3_600_000.0 * 0.999);
    }
}
