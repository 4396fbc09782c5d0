//! The time a task spends running (its polls), not waiting: what Kafka calls a request's
//! thread time, metered by the request-time quota (`request_percentage`).
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

/// `inner`, adding the time of each of its polls to `spent` (nanoseconds).
pub struct PollTimed<F> {
    inner: Pin<Box<F>>,
    spent: Rc<Cell<u64>>,
}

impl<F: Future> PollTimed<F> {
    pub fn new(inner: F, spent: Rc<Cell<u64>>) -> PollTimed<F> {
        PollTimed { inner: Box::pin(inner), spent }
    }
}

impl<F: Future> Future for PollTimed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let start = Instant::now();
        let out = self.inner.as_mut().poll(cx);
        let nanos = start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        self.spent.set(self.spent.get().saturating_add(nanos));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_spent_running_is_counted() {
        let spent = Rc::new(Cell::new(0));
        let busy = async {
            let start = Instant::now();
            while start.elapsed().as_millis() < 20 {}
        };
        futures::executor::block_on(PollTimed::new(busy, spent.clone()));
        assert!(spent.get() >= 20_000_000, "{}", spent.get());
    }
}
