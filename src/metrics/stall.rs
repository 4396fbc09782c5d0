//! The reactor-stall detector: a shard runs one task at a time, so a task that runs long
//! without yielding delays every other request on the shard. Tasks the broker spawns are
//! wrapped in `Metered`, which times each poll and, past `shard_stall_threshold_ms`, counts
//! a stall under the task's name and logs it. A probe (`probe_task_queue_delay`) measures
//! how late a timer task runs, which catches stalls of tasks nobody named too.
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

thread_local! {
    /// This shard's `shard_stall_threshold_ms` (set at shard start; 0 = off).
    static THRESHOLD: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// How long one poll may run before it counts as a stall on this shard (zero: never).
pub fn set_threshold(threshold: Duration) {
    THRESHOLD.with(|t| t.set(threshold));
}

/// What a watched task is called in stall counts and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskName {
    /// A long-lived task of the shard ("retention", "replica fetcher", ...).
    Named(&'static str),
    /// The handler of one request of this API key.
    Request(i16),
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskName::Named(n) => f.write_str(n),
            TaskName::Request(k) => match kafka_protocol::messages::ApiKey::try_from(*k) {
                Ok(api) => write!(f, "{api:?} request"),
                Err(_) => write!(f, "request (API key {k})"),
            },
        }
    }
}

/// What `Metered` measured of its future.
#[derive(Clone, Copy, Debug)]
pub struct Metering {
    /// When the future was first polled.
    pub first_poll: Instant,
    /// Time spent inside its polls.
    pub busy: Duration,
}

/// `inner`, timed poll by poll under `name`.
pub struct Metered<F> {
    inner: Pin<Box<F>>,
    name: TaskName,
    first_poll: Option<Instant>,
    busy: Duration,
}

impl<F: Future> Metered<F> {
    pub fn new(name: TaskName, inner: F) -> Metered<F> {
        Metered { inner: Box::pin(inner), name, first_poll: None, busy: Duration::ZERO }
    }
}

impl<F: Future> Future for Metered<F> {
    type Output = (F::Output, Metering);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let start = Instant::now();
        let first_poll = *self.first_poll.get_or_insert(start);
        let out = self.inner.as_mut().poll(cx);
        let ran = start.elapsed();
        self.busy += ran;
        let threshold = THRESHOLD.with(|t| t.get());
        if !threshold.is_zero() && ran > threshold {
            super::shard_metrics::with(|m| m.record_stall(self.name, ran));
            tracing::warn!(task = %self.name, ran_ms = ran.as_millis() as u64, threshold_ms = threshold.as_millis() as u64,
                "reactor stall: a task ran without yielding longer than shard_stall_threshold_ms");
        }
        out.map(|o| (o, Metering { first_poll, busy: self.busy }))
    }
}

/// A long-lived task, watched for stalls under `name`.
pub async fn watched<F: Future>(name: &'static str, inner: F) -> F::Output {
    Metered::new(TaskName::Named(name), inner).await.0
}

/// How often the task-queue probe wakes.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

/// Runs forever on a shard: sleeps `PROBE_INTERVAL` and records how much later than asked
/// it ran again (the shard was busy with other tasks meanwhile).
pub async fn probe_task_queue_delay() {
    loop {
        let asked = Instant::now();
        glommio::timer::sleep(PROBE_INTERVAL).await;
        let late = asked.elapsed().saturating_sub(PROBE_INTERVAL);
        super::shard_metrics::with(|m| m.task_queue_delay.record(late));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_past_the_threshold_counts_a_stall_under_the_task_name() {
        set_threshold(Duration::from_millis(5));
        let slow = async { std::thread::sleep(Duration::from_millis(20)) };
        let ((), metering) = futures::executor::block_on(Metered::new(TaskName::Named("slow-test-task"), slow));
        assert!(metering.busy >= Duration::from_millis(20));
        futures::executor::block_on(watched("quick-test-task", async {}));
        let stalls = super::super::shard_metrics::snapshot().stalls;
        assert_eq!(stalls.by_task.get(&TaskName::Named("slow-test-task")), Some(&1));
        assert_eq!(stalls.by_task.get(&TaskName::Named("quick-test-task")), None);
        set_threshold(Duration::ZERO);
    }
}
