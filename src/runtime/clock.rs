//! Wall-clock time in Kafka's unit (milliseconds since the Unix epoch).

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
pub fn now_ms() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    // A clock before 1970 is a broken machine; 0 keeps timestamps ordered anyway.
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
