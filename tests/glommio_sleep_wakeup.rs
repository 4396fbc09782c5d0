//! An executor that goes to sleep is always woken by a message another executor sends
//! it (the vendored glommio's sleep barrier, `vendor/README.md`).
//!
//! Going to sleep is a Dekker pair: the sleeper sets its "notify me" flag and then sweeps
//! its channels once more; a sender pushes its message and then reads that flag. Each
//! side needs a full barrier between its store and its load, or both can miss the other
//! and the message waits until something else wakes the sleeper (for a shard: forever).
//! Upstream glommio paid for the sleeper's half with `sys_membarrier` (an interrupt on
//! every core of the process, at every sleep); the patch uses a fence on each side.
//!
//! Two executors on two threads play ping-pong over shared channels with capacity 1;
//! between messages each side sometimes waits a few microseconds on a timer, so the other
//! side has gone to sleep (or is just about to) when the message arrives. A lost wakeup
//! shows as a game that stops: the main thread then fails the test with the round reached.
//! `SLEEP_WAKEUP_ROUNDS` sets the rounds (20,000 by default).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use glommio::channels::shared_channel;
use glommio::LocalExecutorBuilder;

/// How long the main thread waits without the game moving before it calls the wakeup
/// lost. Generous: it is a liveness check, not a timing (a round takes microseconds).
const STALL: Duration = Duration::from_secs(60);

/// The pause before a reply: none most rounds, a few microseconds on some (so the peer
/// sleeps), chosen by a xorshift so a failing run can be replayed.
fn pause(state: &mut u64) -> Option<Duration> {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    match *state % 4 {
        0 => Some(Duration::from_micros(*state % 50)),
        _ => None,
    }
}

#[test]
fn a_sleeping_executor_is_woken_by_every_message_from_another_executor() {
    let rounds: u64 = std::env::var("SLEEP_WAKEUP_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let (to_b, from_a) = shared_channel::new_bounded::<u64>(1);
    let (to_a, from_b) = shared_channel::new_bounded::<u64>(1);
    let progress = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel::<&'static str>();

    let a = {
        let (progress, done) = (progress.clone(), done_tx.clone());
        LocalExecutorBuilder::default()
            .name("ping")
            .spawn(move || async move {
                let (tx, rx) = (to_b.connect().await, from_b.connect().await);
                let mut seed = 0x9e37_79b9_7f4a_7c15u64;
                for round in 0..rounds {
                    if let Some(d) = pause(&mut seed) {
                        glommio::timer::sleep(d).await;
                    }
                    tx.send(round).await.expect("pong side gone");
                    let back = rx.recv().await.expect("pong side gone");
                    assert_eq!(back, round, "replies come back in order");
                    progress.store(round + 1, Ordering::Relaxed);
                }
                let _ = done.send("ping");
            })
            .expect("spawn ping executor")
    };
    let b = {
        let done = done_tx;
        LocalExecutorBuilder::default()
            .name("pong")
            .spawn(move || async move {
                // Connect in ping's order (its sender meets this receiver first): each
                // `connect` waits for the other end's.
                let rx = from_a.connect().await;
                let tx = to_a.connect().await;
                let mut seed = 0x2545_f491_4f6c_dd1du64;
                while let Some(round) = rx.recv().await {
                    if let Some(d) = pause(&mut seed) {
                        glommio::timer::sleep(d).await;
                    }
                    if tx.send(round).await.is_err() {
                        break;
                    }
                }
                let _ = done.send("pong");
            })
            .expect("spawn pong executor")
    };

    // The game must keep moving: fail (with where it stopped) if it stalls.
    let mut last = 0;
    loop {
        match done_rx.recv_timeout(STALL) {
            Ok("ping") => break,
            Ok(_) => panic!("pong ended before ping finished"),
            Err(_) => {
                let now = progress.load(Ordering::Relaxed);
                assert!(now != last, "lost wakeup: the game stopped at round {now} of {rounds}");
                last = now;
            }
        }
    }
    a.join().expect("ping executor");
    b.join().expect("pong executor");
    assert_eq!(progress.load(Ordering::Relaxed), rounds);
}
