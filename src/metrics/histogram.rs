//! A latency histogram with fixed log-spaced buckets: what Prometheus histograms are, kept
//! as plain counters so recording is a few instructions on the shard that owns it.
//!
//! Why not hdrhistogram here: Prometheus wants cumulative counts at fixed bounds that add
//! up across shards; hdrhistogram's fine buckets would be folded into those at every
//! scrape and cost ~20 KiB per series. The bounds grow by √2 from 16 µs to ~47 s, so a
//! quantile read from them (`quantile`) is within a factor √2 of the true value.

/// Bucket upper bounds grow by √2 from `1 << FIRST_POW2` microseconds.
const FIRST_POW2: u32 = 4;
/// Finite buckets (16 µs · √2^k for k < BUCKETS); one more counts what lies beyond.
pub const BUCKETS: usize = 44;

/// Counts of observed durations (microseconds), their sum and number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// counts[i]: observations in (bound(i-1), bound(i)]; counts[BUCKETS]: above the last.
    counts: [u64; BUCKETS + 1],
    sum_us: u64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: [0; BUCKETS + 1], sum_us: 0, count: 0 }
    }
}

/// The upper bound of bucket `i`, in microseconds: 16 · √2^i (exact powers of two at
/// even `i`).
pub fn bound_us(i: usize) -> f64 {
    let power_of_two = (1u64 << (FIRST_POW2 as usize + i / 2)) as f64;
    // Odd bounds rounded down to whole microseconds (readable `le` labels).
    if i % 2 == 1 {
        (power_of_two * std::f64::consts::SQRT_2).floor()
    } else {
        power_of_two
    }
}

/// The bucket of `us`: O(1), from the position of its highest bit and whether it lies in
/// the upper half (above √2 ·2^k) of its power-of-two range.
fn bucket_of(us: u64) -> usize {
    if us <= 1 << FIRST_POW2 {
        return 0;
    }
    // us is in (2^k, 2^(k+1)] with k = floor(log2(us - 1)).
    let k = 63 - (us - 1).leading_zeros();
    // Bucket 2(k - FIRST_POW2) + 1 ends at 2^k·√2, the next at 2^(k+1).
    let low_half = (us as f64) <= bound_us(2 * (k - FIRST_POW2) as usize + 1);
    let i = 2 * (k - FIRST_POW2) as usize + if low_half { 1 } else { 2 };
    i.min(BUCKETS)
}

impl Histogram {
    pub fn record_us(&mut self, us: u64) {
        self.counts[bucket_of(us)] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
    }

    pub fn record(&mut self, d: std::time::Duration) {
        self.record_us(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn add(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.count += other.count;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_us as f64 / 1e6
    }

    /// (upper bound in seconds, count) per bucket, not cumulative (prometheus-client's
    /// encoder adds them up into Prometheus's `le` buckets), ending with the overflow
    /// bucket under `f64::MAX`, which it writes as `+Inf`.
    pub fn buckets_seconds(&self) -> Vec<(f64, u64)> {
        (0..=BUCKETS).map(|i| (if i < BUCKETS { bound_us(i) / 1e6 } else { f64::MAX }, self.counts[i])).collect()
    }

    /// The upper bound (µs) of the bucket holding quantile `q` (0..=1); None when empty.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(if i < BUCKETS { bound_us(i) } else { f64::INFINITY });
            }
        }
        Some(f64::INFINITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_lands_in_the_bucket_whose_bounds_hold_it() {
        for us in [0u64, 1, 15, 16, 17, 22, 23, 32, 33, 45, 46, 1000, 1_000_000, 46_000_000] {
            let i = bucket_of(us);
            assert!(us as f64 <= bound_us(i), "{us} above bucket {i}'s bound {}", bound_us(i));
            if i > 0 {
                assert!(us as f64 > bound_us(i - 1), "{us} belongs below bucket {i}");
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS, "beyond the last bound: the overflow bucket");
    }

    #[test]
    fn merged_histograms_count_both_and_quantiles_come_from_the_buckets() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        for _ in 0..99 {
            a.record_us(100);
        }
        b.record_us(50_000);
        a.add(&b);
        assert_eq!(a.count(), 100);
        assert_eq!(a.sum_seconds(), (99.0 * 100.0 + 50_000.0) / 1e6);
        let p50 = a.quantile_us(0.5).unwrap();
        assert!((100.0..=100.0 * std::f64::consts::SQRT_2).contains(&p50), "{p50}");
        let p100 = a.quantile_us(1.0).unwrap();
        assert!((50_000.0..=50_000.0 * std::f64::consts::SQRT_2).contains(&p100), "{p100}");
        let buckets = a.buckets_seconds();
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 100, "every observation in one bucket");
        assert_eq!(buckets.last().unwrap().0, f64::MAX, "the last bucket is +Inf");
        assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(Histogram::default().quantile_us(0.99), None);
    }
}
