//! Wall-clock time in Kafka's unit (milliseconds since the Unix epoch).

#[cfg(test)]
thread_local! {
    /// Tests only: a simulated clock for this thread (the replication simulation on real
    /// partitions), so every time the partition layer reads is the simulation's.
    static SIMULATED_NOW_MS: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Tests only: `now_ms` on this thread returns `ms` from now on (None: the wall clock).
#[cfg(test)]
pub fn set_simulated_now_ms(ms: Option<i64>) {
    SIMULATED_NOW_MS.with(|c| c.set(ms));
}

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
pub fn now_ms() -> i64 {
    #[cfg(test)]
    if let Some(ms) = SIMULATED_NOW_MS.with(|c| c.get()) {
        return ms;
    }
    use std::time::{SystemTime, UNIX_EPOCH};
    // A clock before 1970 is a broken machine; 0 keeps timestamps ordered anyway.
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
