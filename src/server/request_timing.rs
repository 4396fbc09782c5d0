//! A request's phases, as Kafka's RequestMetrics splits them: queued until its handler
//! first ran, running (local), waiting (remote), waiting for the connection's writer
//! (response queue), being written (send). Measured on the shard, recorded into its
//! metrics when the response is written.
use std::future::Future;
use std::time::Instant;

use super::dispatch::Response;
use crate::metrics::stall::{Metered, Metering, TaskName};
use crate::metrics::RequestTiming;

/// A response and, for a timed request, what its handler measured.
pub struct Answered {
    pub response: Response,
    timing: Option<Handled>,
}

struct Handled {
    api_key: i16,
    received: Instant,
    metering: Metering,
    handled: Instant,
}

impl Answered {
    /// A response that is not a handled request (SASL steps, a closed connection).
    pub fn untimed(response: Response) -> Answered {
        Answered { response, timing: None }
    }

    /// The writer took the response at `taken` and finished writing it now: records the
    /// request's phases in the shard's metrics.
    pub fn record_written(&self, taken: Instant) {
        let Some(h) = &self.timing else { return };
        let written = Instant::now();
        let handling = h.handled.saturating_duration_since(h.metering.first_poll);
        let timing = RequestTiming {
            queue: h.metering.first_poll.saturating_duration_since(h.received),
            local: h.metering.busy,
            remote: handling.saturating_sub(h.metering.busy),
            response_queue: taken.saturating_duration_since(h.handled),
            send: written.saturating_duration_since(taken),
            total: written.saturating_duration_since(h.received),
        };
        crate::metrics::with(|m| m.record_request(h.api_key, &timing));
    }
}

/// Runs a request's handler `handle`, read off the socket at `received`, timing its polls
/// (and counting any that stalls the shard under the API's name).
pub async fn timed(api_key: i16, received: Instant, handle: impl Future<Output = Response>) -> Answered {
    let (response, metering) = Metered::new(TaskName::Request(api_key), handle).await;
    Answered { response, timing: Some(Handled { api_key, received, metering, handled: Instant::now() }) }
}
