//! Fixed-rate send schedule with coordinated-omission correction.
//!
//! Record `i` is *intended* to be sent at `start + i * interval`. A batch of `n` records
//! is due when its last record is (a producer that fills batches waits that long). The
//! schedule never slips: after a stall (broker slow, in-flight window full, generator
//! descheduled) the overdue batches are handed out at once, still carrying their original
//! intended times, so the latency measured from them includes the time spent waiting to
//! be sent. Measuring from the actual send time instead would hide exactly the stalls a
//! latency benchmark exists to show ("coordinated omission").
use std::time::{Duration, Instant};

/// One scheduled batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledBatch {
    /// Batch number since the start of the schedule.
    pub index: u64,
    /// Intended send time of the batch's first record.
    pub first_intended: Instant,
    /// When the batch may be sent: the intended time of its last record.
    pub due: Instant,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    start: Instant,
    /// Nanoseconds between consecutive records (fractional so odd rates do not drift).
    record_interval_ns: f64,
    batch_records: u64,
    next_batch: u64,
}

impl Schedule {
    /// `records_per_s` must be > 0; `batch_records` >= 1 (clamped).
    pub fn new(start: Instant, records_per_s: f64, batch_records: u64) -> Schedule {
        let records_per_s = if records_per_s.is_finite() && records_per_s > 0.0 { records_per_s } else { 1.0 };
        Schedule { start, record_interval_ns: 1e9 / records_per_s, batch_records: batch_records.max(1), next_batch: 0 }
    }

    /// Time between the intended sends of two consecutive records.
    pub fn record_interval(&self) -> Duration {
        Duration::from_nanos(self.record_interval_ns.round() as u64)
    }

    /// Intended send time of record `i` (counted from the start of the schedule).
    pub fn intended(&self, record: u64) -> Instant {
        self.start + Duration::from_nanos((record as f64 * self.record_interval_ns).round() as u64)
    }

    /// The next batch in order. Does not wait: the caller sleeps until `due` if that is in
    /// the future, and sends at once if it is in the past (catching up after a stall).
    pub fn next_batch(&mut self) -> ScheduledBatch {
        let index = self.next_batch;
        self.next_batch += 1;
        let first = index * self.batch_records;
        ScheduledBatch { index, first_intended: self.intended(first), due: self.intended(first + self.batch_records - 1) }
    }

    /// Batches whose due time is at or before `now` but that have not been handed out:
    /// how far behind the sender is.
    pub fn overdue(&self, now: Instant) -> u64 {
        if now < self.start {
            return 0;
        }
        let elapsed_ns = now.duration_since(self.start).as_nanos() as f64;
        // Record k is due at k * interval; batch b's last record is b*n + n - 1.
        let records_due = (elapsed_ns / self.record_interval_ns).floor() as u64 + 1;
        let batches_due = records_due / self.batch_records;
        batches_due.saturating_sub(self.next_batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intended_times_follow_the_rate() {
        let t0 = Instant::now();
        // 1000 records/s => 1 ms apart; batches of 10 => a batch every 10 ms.
        let mut s = Schedule::new(t0, 1000.0, 10);
        assert_eq!(s.record_interval(), Duration::from_millis(1));
        assert_eq!(s.intended(0), t0);
        assert_eq!(s.intended(7), t0 + Duration::from_millis(7));
        let b0 = s.next_batch();
        assert_eq!(b0, ScheduledBatch { index: 0, first_intended: t0, due: t0 + Duration::from_millis(9) });
        let b1 = s.next_batch();
        assert_eq!(b1.first_intended, t0 + Duration::from_millis(10));
        assert_eq!(b1.due, t0 + Duration::from_millis(19));
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        let t0 = Instant::now();
        // 3 records/s: 333.33 ms apart; after 3 million records exactly 1e6 s.
        let s = Schedule::new(t0, 3.0, 1);
        assert_eq!(s.intended(3_000_000), t0 + Duration::from_secs(1_000_000));
    }

    #[test]
    fn catch_up_after_a_stall_keeps_the_intended_times() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 1000.0, 10);
        let _ = s.next_batch(); // batch 0 sent on time
                                // The sender stalls until t0 + 100 ms: batches 1..=9 are due at 19, 29, ... 99 ms.
        let now = t0 + Duration::from_millis(100);
        assert_eq!(s.overdue(now), 9);
        let mut caught_up = Vec::new();
        loop {
            let b = s.next_batch();
            if b.due > now {
                // The first batch not yet due is batch 10, due at 109 ms.
                assert_eq!(b.index, 10);
                assert_eq!(b.due, t0 + Duration::from_millis(109));
                break;
            }
            caught_up.push(b);
        }
        assert_eq!(caught_up.len(), 9);
        for (i, b) in caught_up.iter().enumerate() {
            let idx = i as u64 + 1;
            assert_eq!(b.index, idx);
            // Latency is measured from these, so a record sent at 100 ms that was meant
            // for 10 ms counts 90 ms of waiting.
            assert_eq!(b.first_intended, t0 + Duration::from_millis(idx * 10));
        }
        assert_eq!(s.overdue(now), 0);
    }

    #[test]
    fn nothing_overdue_before_start() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let s = Schedule::new(t0, 1000.0, 10);
        assert_eq!(s.overdue(Instant::now()), 0);
    }

    #[test]
    fn bad_rates_are_clamped() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, 0.0, 0);
        let b = s.next_batch();
        assert_eq!(b.first_intended, t0);
        assert_eq!(b.due, t0); // one record per batch
    }
}
