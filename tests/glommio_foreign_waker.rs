//! glommio 0.9's task reference count when the last waker of a task is dropped on
//! another thread (a cross-shard channel, the controller's runtime) while the task's
//! owner drops the task's JoinHandle.
//!
//! glommio's foreign `drop_waker` decrements the count and, if that reached zero, clones
//! the waker again (count back to one) to hand it to the owner. Between the two steps the
//! owner can see zero in `JoinHandle::drop`, free the task, and then the handed-over waker
//! frees it a second time: glibc aborts with `free(): double free detected in tcache 2`
//! (or the freed header is written to). A broker connection does exactly this: every
//! request is a `Task<Response>` the connection's writer awaits and drops, and a request
//! that waited on another shard leaves its waker in a channel that thread drops.
//!
//! This test makes the two drops meet as often as it can (about 10^4 rounds a second;
//! unpatched glommio broke in each of four 20-second runs on this 2-core machine). It fails on glommio's own check (`Waker invariant broken`, a panic
//! the executor may swallow, so a hook records it) or by killing the test process (abort,
//! SIGSEGV) when the freed header no longer trips that check. `FOREIGN_WAKER_SECONDS`
//! sets how long it tries (10 s by default).
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Completes on its first poll, leaving a clone of its waker in `slot`.
struct LeaveWaker(Arc<Mutex<Option<Waker>>>);

impl Future for LeaveWaker {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
        Poll::Ready(())
    }
}

static PANICKED: AtomicBool = AtomicBool::new(false);

#[test]
fn last_waker_dropped_on_another_thread_while_the_owner_drops_the_join_handle() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, Ordering::SeqCst);
        default_hook(info);
    }));
    let seconds = std::env::var("FOREIGN_WAKER_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10u64);
    let slot: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
    // Odd: the owner has published round n's waker; even: the foreign thread dropped it.
    let turn = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);

    let foreign = {
        let (slot, turn) = (slot.clone(), turn.clone());
        std::thread::spawn(move || {
            let mut seen = 0;
            loop {
                let t = turn.load(Ordering::Acquire);
                if t == u64::MAX {
                    return seen;
                }
                if t % 2 == 1 && t != seen {
                    let w = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    turn.store(t + 1, Ordering::Release);
                    // The owner is now dropping its JoinHandle: drop the last waker with it.
                    drop(w);
                    seen = t + 1;
                }
                std::hint::spin_loop();
            }
        })
    };

    let rounds = glommio::LocalExecutorBuilder::default()
        .spawn({
            let (slot, turn) = (slot.clone(), turn.clone());
            move || async move {
                let mut rounds = 0u64;
                while Instant::now() < deadline {
                    let handle = glommio::spawn_local(LeaveWaker(slot.clone()));
                    // Let the task run and complete: only the waker in `slot` is left.
                    glommio::yield_if_needed().await;
                    futures_lite::future::yield_now().await;
                    let t = turn.load(Ordering::Acquire);
                    turn.store(t + 1, Ordering::Release);
                    while turn.load(Ordering::Acquire) == t + 1 {
                        std::hint::spin_loop();
                    }
                    drop(handle);
                    rounds += 1;
                    // Owner side of the hand-over: queued foreign wakes run here.
                    futures_lite::future::yield_now().await;
                }
                turn.store(u64::MAX, Ordering::Release);
                rounds
            }
        })
        .expect("an executor")
        .join()
        .expect("the executor's thread");
    let foreign_rounds = foreign.join().expect("the foreign thread");
    eprintln!("{rounds} rounds");
    assert!(rounds > 0 && foreign_rounds > 0, "the two drops never met");
    assert!(!PANICKED.load(Ordering::SeqCst), "a task's reference count broke (see the panic above)");
}
