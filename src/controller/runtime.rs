//! The async runtime the controller's openraft runs on: tokio, as openraft's own
//! `TokioRuntime`, except for where its randomness comes from.
//!
//! Why: openraft draws election timeouts and tick jitter from `thread_rng()`. With the
//! OS's entropy (the production default here too), two runs of the seeded quorum
//! simulation (`controller::simulation`) would elect at different instants and diverge.
//! `seed_thread_rng` makes this thread's draws a pure function of the seed, so a failing
//! seed replays exactly. Everything else delegates to `TokioRuntime` unchanged.
use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::OptionalSend;
use openraft_rt::AsyncRuntime;
use openraft_rt_tokio::TokioRuntime;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug)]
pub struct ControllerRuntime(TokioRuntime);

thread_local! {
    /// Set by `seed_thread_rng`; `None`: the OS's entropy.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes this thread's `thread_rng()` draws deterministic from `seed` (the simulation
/// calls it; production never does).
#[cfg(test)]
pub fn seed_thread_rng(seed: u64) {
    SEEDED.with(|s| *s.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

impl AsyncRuntime for ControllerRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    /// A fresh generator per draw, seeded from this thread's seeded one (or the OS).
    type ThreadLocalRng = StdRng;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        SEEDED.with(|s| match s.borrow_mut().as_mut() {
            Some(seeded) => StdRng::seed_from_u64(seeded.next_u64()),
            None => StdRng::from_rng(&mut rand::rng()),
        })
    }

    type Mpsc = <TokioRuntime as AsyncRuntime>::Mpsc;
    type Watch = <TokioRuntime as AsyncRuntime>::Watch;
    type Oneshot = <TokioRuntime as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::Mutex<T>;

    fn new(threads: usize) -> Self {
        ControllerRuntime(TokioRuntime::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn a_seeded_thread_draws_the_same_sequence() {
        let draws = || (0..8).map(|_| ControllerRuntime::thread_rng().random_range(200..400u64)).collect::<Vec<_>>();
        seed_thread_rng(42);
        let a = draws();
        seed_thread_rng(42);
        assert_eq!(draws(), a);
        seed_thread_rng(43);
        assert_ne!(draws(), a);
    }
}
