//! What happens to the broker when a log goes offline (Kafka's LogDirFailureChannel, reduced
//! to what shardlog needs).
//!
//! A log goes offline after a failed fdatasync (invariant 8, the "fsyncgate" rule) or a
//! truncation that failed half-way (`log_writer.rs`). Offline alone is not enough in a
//! cluster: the replica keeps its leadership and its ISR seat, so a leader whose disk failed
//! answers KAFKA_STORAGE_ERROR for good and shrinks the ISR to itself while two healthy
//! followers wait (found by the chaos runner's disk-full nemesis, seed 4). Kafka takes the
//! whole log dir offline and, with no other log dir online, halts the broker: the controller
//! then fences it and elects a leader from the rest of the ISR.
//!
//! The broker installs a handler once at start-up (`server/broker.rs`: halt); every log that
//! goes offline reports here. Without a handler (unit tests, tools) the log only stays
//! offline, as before.
use std::sync::OnceLock;

/// A log that went offline.
#[derive(Debug)]
pub struct OfflineLog<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub reason: &'a str,
}

type Handler = Box<dyn Fn(&OfflineLog) + Send + Sync>;

static HANDLER: OnceLock<Handler> = OnceLock::new();

/// Installs the process's handler; false if one was installed already (it stays).
pub fn install(handler: impl Fn(&OfflineLog) + Send + Sync + 'static) -> bool {
    HANDLER.set(Box::new(handler)).is_ok()
}

/// A log went offline: the installed handler hears of it (no-op without one).
pub(super) fn report(offline: &OfflineLog) {
    if let Some(handler) = HANDLER.get() {
        handler(offline);
    }
}
