//! Throughput and latency percentiles per interval of the measured window, so a report
//! can show a tail over time (a step up after N minutes, a stall while segments are
//! deleted, a producer slowed by a consumer draining a backlog).
//!
//! Intervals are filed by completion time. Only the newest `OPEN` intervals keep a
//! histogram; an older one is reduced to its percentiles, so memory stays flat however
//! long the run (a 30-minute soak at 1-s intervals is 1,800 small rows, not 1,800
//! histograms). A completion that arrives after its interval was closed (a thread that
//! took its timestamp just before another thread moved the timeline on) is filed in the
//! oldest open interval: off by one interval, never lost.
use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use super::histogram::LatencyHistogram;
use super::report::MB;

/// Intervals that still take samples.
const OPEN: usize = 2;

/// One closed interval, as the JSON summary carries it.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Interval {
    /// Start of the interval, seconds since the window opened.
    pub t_s: f64,
    pub records: u64,
    pub mb_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

struct Open {
    index: u64,
    records: u64,
    bytes: u64,
    hist: LatencyHistogram,
}

pub struct Timeline {
    interval: Duration,
    closed: Vec<Interval>,
    /// Consecutive indexes, oldest first; never more than `OPEN`.
    open: VecDeque<Open>,
}

impl Timeline {
    pub fn new(interval: Duration) -> Timeline {
        assert!(!interval.is_zero(), "a timeline needs a positive interval");
        Timeline { interval, closed: Vec::new(), open: VecDeque::new() }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// `records` of `bytes` completed `since` the window opened.
    pub fn count(&mut self, since: Duration, records: u64, bytes: u64) {
        let o = self.slot(since);
        o.records += records;
        o.bytes += bytes;
    }

    /// Latencies completed `since` the window opened.
    pub fn latencies(&mut self, since: Duration, local: &LatencyHistogram) {
        self.slot(since).hist.merge(local);
    }

    /// Closes every interval and returns them all, in order.
    pub fn finish(&mut self) -> Vec<Interval> {
        while !self.open.is_empty() {
            self.close_oldest();
        }
        self.closed.clone()
    }

    fn slot(&mut self, since: Duration) -> &mut Open {
        let index = (since.as_nanos() / self.interval.as_nanos()) as u64;
        let next = self.open.back().map_or(self.closed.len() as u64, |o| o.index + 1);
        for i in next..=index {
            if self.open.len() == OPEN {
                self.close_oldest();
            }
            self.open.push_back(Open { index: i, records: 0, bytes: 0, hist: LatencyHistogram::new() });
        }
        if self.open.is_empty() {
            // A late completion after `finish` closed everything: it opens the next
            // interval rather than reopen a closed one.
            self.open.push_back(Open { index: next, records: 0, bytes: 0, hist: LatencyHistogram::new() });
        }
        // `open` is non-empty here: `index` was just opened, or it is at or below the
        // newest open index, or the line above opened one.
        let oldest = self.open.front().map_or(0, |o| o.index);
        let at = index.saturating_sub(oldest) as usize;
        let at = at.min(self.open.len() - 1);
        &mut self.open[at]
    }

    fn close_oldest(&mut self) {
        let Some(o) = self.open.pop_front() else { return };
        debug_assert_eq!(o.index, self.closed.len() as u64, "intervals close in order, none skipped");
        let p = o.hist.percentiles();
        let secs = self.interval.as_secs_f64();
        self.closed.push(Interval {
            t_s: o.index as f64 * secs,
            records: o.records,
            mb_s: o.bytes as f64 / MB / secs,
            p50_ms: p.p50_ms,
            p99_ms: p.p99_ms,
            p999_ms: p.p999_ms,
            max_ms: p.max_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn lat(ms_each: u64, n: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        h.record_n(ms(ms_each), n);
        h
    }

    #[test]
    fn each_interval_keeps_its_own_counts_and_percentiles() {
        let mut t = Timeline::new(Duration::from_secs(1));
        t.count(ms(100), 10, 10 << 20);
        t.latencies(ms(100), &lat(2, 10));
        t.count(ms(1500), 5, 5 << 20);
        t.latencies(ms(1500), &lat(40, 5));
        let v = t.finish();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].t_s, v[0].records, v[0].mb_s), (0.0, 10, 10.0));
        assert_eq!((v[1].t_s, v[1].records, v[1].mb_s), (1.0, 5, 5.0));
        assert!((v[0].p99_ms - 2.0).abs() < 0.01, "{:?}", v[0]);
        assert!((v[1].p99_ms - 40.0).abs() < 0.05, "{:?}", v[1]);
    }

    #[test]
    fn a_stall_shows_as_empty_intervals_and_memory_stays_flat() {
        let mut t = Timeline::new(Duration::from_secs(1));
        t.count(ms(0), 1, 1);
        t.count(ms(5_200), 1, 1); // nothing completed for four seconds
        assert!(t.open.len() <= OPEN);
        let v = t.finish();
        assert_eq!(v.iter().map(|i| i.records).collect::<Vec<_>>(), vec![1, 0, 0, 0, 0, 1]);
        assert_eq!(v[5].t_s, 5.0);
        assert_eq!(v[3].p99_ms, 0.0);
    }

    #[test]
    fn a_late_completion_lands_in_the_oldest_open_interval() {
        let mut t = Timeline::new(Duration::from_secs(1));
        t.count(ms(100), 1, 0);
        t.count(ms(2_100), 1, 0); // closes interval 0
        t.count(ms(900), 7, 0); // late: interval 0 is closed, filed in interval 1
        let v = t.finish();
        assert_eq!(v.iter().map(|i| i.records).collect::<Vec<_>>(), vec![1, 7, 1]);
        assert_eq!(v.iter().map(|i| i.records).sum::<u64>(), 9, "nothing is lost");
        // After `finish`, a straggler opens the next interval instead of panicking.
        t.count(ms(500), 2, 0);
        assert_eq!(t.finish().iter().map(|i| i.records).collect::<Vec<_>>(), vec![1, 7, 1, 2]);
    }
}
