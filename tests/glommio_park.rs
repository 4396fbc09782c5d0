//! An executor never parks while one of its task queues is runnable (the vendored
//! glommio's `run_task_queues`, `vendor/README.md`).
//!
//! Upstream glommio parked whenever a pass over the task queues ran nothing, and a pass
//! also runs nothing when the preemption timer has fired before its first queue. The
//! executor then sleeps with runnable work and nothing coming to wake it: no I/O in
//! flight, no other thread to write its eventfd. It sleeps in `io_uring_enter` forever
//! (found as the real-parts replication simulation hanging in release builds on a busy
//! machine; glommio/glommio#53 is the same hang).
//!
//! Here the preemption timer is 20 µs, so it has often fired by the time the executor looks
//! at its queues (shorter still and nothing runs at all: every pass is preempted before
//! its first queue), and the only work is tasks that yield to each other:
//! nothing but the executor itself can make them progress. A park with a runnable queue
//! shows as a count that stops moving; the main thread then fails the test with the
//! count reached. `PARK_YIELDS` sets the yields per task (200,000 by default),
//! `PARK_PREEMPT_NS` the timer. Upstream's code stops at 0 yields with the 20 µs timer;
//! the patched one finishes in about a second (debug build).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use glommio::LocalExecutorBuilder;

/// How long the main thread waits without the count moving before it calls the executor
/// asleep. Generous: it is a liveness check, not a timing (a yield takes nanoseconds).
const STALL: Duration = Duration::from_secs(60);

const TASKS: u64 = 4;

#[test]
fn an_executor_with_runnable_tasks_never_parks() {
    let yields: u64 = std::env::var("PARK_YIELDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let preempt_ns: u64 = std::env::var("PARK_PREEMPT_NS").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let progress = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel::<()>();

    let executor = {
        let progress = progress.clone();
        LocalExecutorBuilder::default()
            .name("yields")
            // Short enough to fire before a pass's first queue often (the case that used
            // to park), long enough that passes do run queues.
            .preempt_timer(Duration::from_nanos(preempt_ns))
            .spawn(move || async move {
                let tasks: Vec<_> = (0..TASKS)
                    .map(|_| {
                        let progress = progress.clone();
                        glommio::spawn_local(async move {
                            for _ in 0..yields {
                                futures_lite::future::yield_now().await;
                                progress.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await;
                }
                let _ = done_tx.send(());
            })
            .expect("spawn the executor")
    };

    let mut last = 0;
    loop {
        match done_rx.recv_timeout(STALL) {
            Ok(()) => break,
            Err(_) => {
                let now = progress.load(Ordering::Relaxed);
                assert!(now != last, "the executor parked with runnable tasks: stopped at {now} of {} yields", TASKS * yields);
                last = now;
            }
        }
    }
    executor.join().expect("executor");
    assert_eq!(progress.load(Ordering::Relaxed), TASKS * yields);
}
