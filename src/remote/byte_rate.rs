//! A bytes-per-second bound on one shard's remote traffic (Kafka's
//! remote.log.manager.copy.max.bytes.per.second and ...fetch.max.bytes.per.second, which
//! bound a broker: each shard takes an equal share, so no shard waits on another's count).
//!
//! A bucket of credit filling at the rate, holding at most one second of it: a transfer
//! is recorded after it happened (a segment is uploaded whole, Kafka's copy quota also
//! counts it afterwards) and may leave the credit negative; the next one waits until the
//! credit is back to zero.
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct ByteRate {
    /// Bytes per second; None: unbounded.
    rate: Option<f64>,
    credit: f64,
    at: Option<Instant>,
}

impl ByteRate {
    /// `broker_rate` (the setting; i64::MAX or <= 0: unbounded) shared by `shards`.
    pub fn per_shard(broker_rate: i64, shards: usize) -> ByteRate {
        let rate = (broker_rate > 0 && broker_rate < i64::MAX).then(|| broker_rate as f64 / shards.max(1) as f64);
        ByteRate { rate, credit: rate.unwrap_or(0.0), at: None }
    }

    fn refill(&mut self, now: Instant) {
        let Some(rate) = self.rate else { return };
        if let Some(at) = self.at {
            let elapsed = now.saturating_duration_since(at).as_secs_f64();
            self.credit = (self.credit + elapsed * rate).min(rate);
        }
        self.at = Some(now);
    }

    /// How long to wait before the next transfer (zero: go now).
    pub fn delay(&mut self, now: Instant) -> Duration {
        self.refill(now);
        match self.rate {
            Some(rate) if self.credit < 0.0 => Duration::from_secs_f64(-self.credit / rate),
            _ => Duration::ZERO,
        }
    }

    /// `bytes` went.
    pub fn record(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        if self.rate.is_some() {
            self.credit -= bytes as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbounded_never_waits() {
        let now = Instant::now();
        for setting in [i64::MAX, 0, -1] {
            let mut r = ByteRate::per_shard(setting, 2);
            r.record(u64::MAX, now);
            assert_eq!(r.delay(now), Duration::ZERO);
        }
    }

    #[test]
    fn a_transfer_over_the_credit_delays_the_next_by_the_debt() {
        let t0 = Instant::now();
        // 2 MB/s for the broker, two shards: 1 MB/s here, one second of credit.
        let mut r = ByteRate::per_shard(2_000_000, 2);
        assert_eq!(r.delay(t0), Duration::ZERO);
        r.record(3_000_000, t0);
        // 2 MB in debt at 1 MB/s: two seconds.
        assert_eq!(r.delay(t0).as_millis(), 2000);
        assert_eq!(r.delay(t0 + Duration::from_millis(1500)).as_millis(), 500);
        assert_eq!(r.delay(t0 + Duration::from_secs(2)), Duration::ZERO);
        // Credit never builds past one second's worth.
        let later = t0 + Duration::from_secs(60);
        r.record(1_500_000, later);
        assert_eq!(r.delay(later).as_millis(), 500);
    }
}
