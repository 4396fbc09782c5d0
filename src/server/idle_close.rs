//! `connections.max.idle.ms`: a connection that has received nothing and has no request
//! in flight for that long is closed, as Kafka's processors do (clients reconnect).
//!
//! One timer task per connection, not a timer per request: the reader and writer only
//! update `Activity` (a clock read and a counter), and the task looks at it once per
//! idle period. Closing is `shutdown(2)` on the socket, which ends the reader's pending
//! read; the connection then ends the usual way.
use std::cell::Cell;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// When a connection last received a request, and how many of its requests are in flight
/// (received, response not written yet).
pub struct Activity {
    last: Cell<Instant>,
    in_flight: Cell<usize>,
}

impl Activity {
    pub fn new() -> Activity {
        Activity { last: Cell::new(Instant::now()), in_flight: Cell::new(0) }
    }

    /// A request (or its first bytes) arrived.
    pub fn touch(&self) {
        self.last.set(Instant::now());
    }

    pub fn request_started(&self) {
        self.in_flight.set(self.in_flight.get() + 1);
    }

    pub fn request_ended(&self) {
        debug_assert!(self.in_flight.get() > 0, "a response without a request");
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
        self.last.set(Instant::now());
    }

    /// How long the connection has been idle at `now` (zero while requests are in flight).
    fn idle_for(&self, now: Instant) -> Duration {
        if self.in_flight.get() > 0 {
            Duration::ZERO
        } else {
            now.saturating_duration_since(self.last.get())
        }
    }
}

/// Shuts `socket` down once `activity` has been idle for `max_idle`. The caller cancels
/// this task (drops it) while the socket is still open.
pub async fn close_when_idle(socket: RawFd, activity: Rc<Activity>, max_idle: Duration) {
    loop {
        let idle = activity.idle_for(Instant::now());
        if idle >= max_idle {
            tracing::debug!(max_idle_ms = max_idle.as_millis() as u64, "closing an idle connection");
            // SAFETY: the descriptor is open: the connection's halves own it and outlive
            // this task (see the caller). shutdown(2) only ends the connection's I/O.
            unsafe { libc::shutdown(socket, libc::SHUT_RDWR) };
            return;
        }
        glommio::timer::sleep(max_idle - idle).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_with_requests_in_flight_is_never_idle() {
        let a = Activity::new();
        let later = Instant::now() + Duration::from_secs(60);
        assert!(a.idle_for(later) >= Duration::from_secs(59));
        a.request_started();
        assert_eq!(a.idle_for(later), Duration::ZERO);
        a.request_ended();
        assert!(a.idle_for(later) <= Duration::from_secs(60));
        assert_eq!(a.idle_for(Instant::now() - Duration::from_secs(1)), Duration::ZERO, "a clock before the last activity");
    }
}
