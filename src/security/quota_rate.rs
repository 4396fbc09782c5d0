//! The rate a client quota is checked against, measured as Kafka measures it (its
//! `Rate` over a `SampledStat`, `quota.window.num` samples of `quota.window.size.seconds`),
//! and the throttle time of a client over its quota (Kafka's QuotaUtils).
//!
//! Measured so: a sample starts at the first value recorded after the previous one's
//! window ended; samples older than all the windows together count nothing; the rate is
//! their total over the time since the oldest began, but over no less than
//! `samples - 1` windows (so a client's first burst is spread over that span, as in
//! Kafka: a new client may send up to about `samples - 1` windows' worth at once).
//!
//! A client over its quota is throttled for as long as it takes its rate to come back to
//! the quota: `(rate - quota) / quota × measured span`, at most `max_throttle_ms`.

/// The sampling of a rate (Kafka's MetricConfig for quotas).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateWindow {
    /// quota.window.num (Kafka's default 11).
    pub samples: usize,
    /// quota.window.size.seconds in milliseconds (Kafka's default 1000).
    pub window_ms: u64,
}

impl RateWindow {
    pub const KAFKA_DEFAULT: RateWindow = RateWindow { samples: 11, window_ms: 1000 };
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// Values recorded over time (bytes, thread-time percent-seconds); at most
/// `RateWindow::samples` samples, no allocation after the first record.
#[derive(Clone, Debug)]
pub struct SampledRate {
    window: RateWindow,
    /// Ring of samples; `current` is the one being filled.
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    pub fn new(window: RateWindow) -> SampledRate {
        assert!(window.samples >= 2 && window.window_ms > 0, "a rate needs two samples of some length: {window:?}");
        SampledRate { window, samples: Vec::new(), current: 0 }
    }

    pub fn record(&mut self, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample { start_ms: now_ms, value: 0.0 });
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= self.window.window_ms {
            // The current sample's window is over: the next one starts now.
            self.current = (self.current + 1) % self.window.samples;
            let fresh = Sample { start_ms: now_ms, value: 0.0 };
            match self.samples.get_mut(self.current) {
                Some(s) => *s = fresh,
                None => self.samples.push(fresh),
            }
        }
        self.samples[self.current].value += value;
    }

    /// Forgets samples older than all windows together (Kafka's purgeObsoleteSamples).
    fn purge(&mut self, now_ms: u64) {
        let expire_after = self.window.window_ms * self.window.samples as u64;
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= expire_after {
                *s = Sample { start_ms: now_ms, value: 0.0 };
            }
        }
    }

    /// The span the rate is measured over, in ms (Kafka's Rate.windowSize).
    pub fn span_ms(&mut self, now_ms: u64) -> u64 {
        self.purge(now_ms);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now_ms);
        let elapsed = now_ms.saturating_sub(oldest);
        let full_windows = elapsed / self.window.window_ms;
        let min_full = self.window.samples as u64 - 1;
        elapsed + min_full.saturating_sub(full_windows) * self.window.window_ms
    }

    /// Recorded per second.
    pub fn rate(&mut self, now_ms: u64) -> f64 {
        let span_ms = self.span_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (span_ms as f64 / 1000.0)
    }

    /// How long a client at this rate must wait for it to come back to `quota`; 0 when it
    /// is within it.
    pub fn throttle_ms(&mut self, quota: f64, now_ms: u64, max_throttle_ms: u64) -> u64 {
        let rate = self.rate(now_ms);
        if quota <= 0.0 {
            // A zero quota: everything is over it (Kafka throttles to the maximum).
            return if rate > 0.0 { max_throttle_ms } else { 0 };
        }
        if rate <= quota {
            return 0;
        }
        let span_ms = self.span_ms(now_ms) as f64;
        (((rate - quota) / quota * span_ms).round() as u64).min(max_throttle_ms)
    }

    /// The last time anything was recorded (to forget idle clients).
    pub fn last_record_ms(&self) -> Option<u64> {
        self.samples.get(self.current).map(|s| s.start_ms)
    }
}

/// The controller mutation quota's measure (Kafka's TokenBucket, KIP-599): a bucket of
/// `samples × window × quota` partition mutations that refills at `quota` per second. A
/// mutation is allowed while the bucket is not below zero, and takes its partitions even
/// if that overdraws it (one large CreateTopics may pass); the client then waits
/// `-tokens / quota` seconds for the bucket to come back to zero.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    window: RateWindow,
    tokens: f64,
    /// When the tokens were last refilled (None: never used, the bucket is full).
    last_ms: Option<u64>,
}

impl TokenBucket {
    pub fn new(window: RateWindow) -> TokenBucket {
        TokenBucket { window, tokens: 0.0, last_ms: None }
    }

    fn burst(&self, quota: f64) -> f64 {
        self.window.samples as f64 * (self.window.window_ms as f64 / 1000.0) * quota
    }

    fn refill(&mut self, quota: f64, now_ms: u64) {
        let burst = self.burst(quota);
        self.tokens = match self.last_ms {
            None => burst,
            Some(t) => (self.tokens + quota * now_ms.saturating_sub(t) as f64 / 1000.0).min(burst),
        };
        self.last_ms = Some(now_ms);
    }

    /// Takes `value` tokens (the bucket may go below zero).
    pub fn record(&mut self, value: f64, quota: f64, now_ms: u64) {
        self.refill(quota, now_ms);
        self.tokens = (self.tokens - value).min(self.burst(quota));
    }

    /// How long until the bucket is back at zero; 0 when it is not below it.
    pub fn throttle_ms(&mut self, quota: f64, now_ms: u64) -> u64 {
        self.refill(quota, now_ms);
        if self.tokens >= 0.0 {
            return 0;
        }
        if quota <= 0.0 {
            return u64::from(u32::MAX);
        }
        (-self.tokens / quota * 1000.0).round() as u64
    }

    /// The last time the bucket was used (to forget idle clients).
    pub fn last_record_ms(&self) -> Option<u64> {
        self.last_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: RateWindow = RateWindow::KAFKA_DEFAULT;

    #[test]
    fn first_burst_is_spread_over_the_minimum_span() {
        let mut r = SampledRate::new(W);
        r.record(10_000.0, 0);
        assert_eq!(r.span_ms(0), 10_000);
        assert_eq!(r.rate(0), 1_000.0);
        // 10 kB at once against 500 B/s: 1000 B/s is twice the quota, for 10 s.
        assert_eq!(r.throttle_ms(500.0, 0, u64::MAX), 10_000);
        assert_eq!(r.throttle_ms(500.0, 0, 3_000), 3_000, "capped");
        assert_eq!(r.throttle_ms(1_000.0, 0, u64::MAX), 0, "at the quota is within it");
    }

    #[test]
    fn a_steady_rate_is_measured_as_itself() {
        let mut r = SampledRate::new(W);
        // 100 B every 10 ms for 30 s: 10 kB/s.
        for t in (0..30_000).step_by(10) {
            r.record(100.0, t);
        }
        let rate = r.rate(30_000);
        assert!((rate - 10_000.0).abs() < 200.0, "{rate}");
    }

    #[test]
    fn old_samples_stop_counting() {
        let mut r = SampledRate::new(W);
        r.record(1_000_000.0, 0);
        assert!(r.rate(5_000) > 0.0);
        assert_eq!(r.rate(11_000), 0.0, "after all the windows together");
        assert_eq!(r.throttle_ms(1.0, 11_000, u64::MAX), 0);
    }

    #[test]
    fn waiting_the_throttle_time_brings_the_rate_back_to_the_quota() {
        let mut r = SampledRate::new(W);
        for t in 0..12u64 {
            r.record(5_000.0, t * 1000);
        }
        let now = 11_500;
        let wait = r.throttle_ms(2_000.0, now, u64::MAX);
        assert!(wait > 0);
        // No more records: after the wait, the rate over the span is about the quota
        // (samples may expire meanwhile, which only lowers it).
        let after = r.rate(now + wait);
        assert!(after <= 2_000.0 * 1.05, "rate {after} after waiting {wait} ms");
    }

    #[test]
    fn a_zero_quota_throttles_to_the_maximum() {
        let mut r = SampledRate::new(W);
        r.record(1.0, 0);
        assert_eq!(r.throttle_ms(0.0, 0, 1_000), 1_000);
    }

    #[test]
    fn token_bucket_allows_a_burst_then_overdraws_then_refills() {
        // Kafka 4.4, controller_mutation_rate=1 with 11 windows of 1 s: 11 partitions at
        // once, one request may overdraw, and the wait is the deficit over the rate.
        let mut b = TokenBucket::new(RateWindow::KAFKA_DEFAULT);
        assert_eq!(b.throttle_ms(1.0, 5_000), 0, "a new bucket is full");
        b.record(4.0, 1.0, 5_000);
        b.record(10.0, 1.0, 5_000);
        assert_eq!(b.throttle_ms(1.0, 5_000), 3_000, "11 - 14 = -3 tokens at 1/s");
        assert_eq!(b.throttle_ms(1.0, 6_000), 2_000, "refilled by one");
        assert_eq!(b.throttle_ms(1.0, 8_000), 0);
        assert_eq!(b.throttle_ms(1.0, 100_000), 0);
        b.record(11.0, 1.0, 100_000);
        assert_eq!(b.throttle_ms(1.0, 100_000), 0, "refills stop at the burst");
        b.record(0.5, 1.0, 100_000);
        assert_eq!(b.throttle_ms(1.0, 100_000), 500);
    }
}
