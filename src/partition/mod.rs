//! One partition's state, owned by exactly one shard: its log (with the log's writer),
//! idempotent-producer state, high watermark, and the long-poll watchers of fetches.
//!
//! - `state.rs`          the `Partition` struct, open (log + producer state), accessors,
//!   the high watermark, close
//! - `append.rs`         produce: validation, producer-sequence checks, roll, patch and
//!   append, waiting until the write is as durable as acks ask; transaction markers
//! - `read.rs`           fetch reads, ListOffsets (by timestamp, max timestamp), `watch()`
//! - `replication.rs`    leader / follower role, the high watermark, acks=all waiters, the
//!   leader's view of its followers and ISR proposals
//! - `replica_tracker.rs` the followers' states and the ISR (pure: no I/O, no clock)
//! - `follower.rs`       appending fetched batches as a follower, truncation
//! - `hw_checkpoint.rs`  loading and saving the high watermark
//! - `retention.rs`      DeleteRecords, retention, advancing the log start offset
//! - `remote_copy.rs`    tiered storage: a leader's sealed segments ready for upload
//! - `cleaner.rs`        one compaction pass over the sealed segments (Kafka's cleaner)
//! - `producer_state.rs` the idempotent and transactional producer table, its snapshot encoding
//! - `transactions.rs`   the last stable offset, aborted transactions for read_committed, producer views
//! - `gauges.rs`         what a metrics scrape reads of a partition (size, segments, waiters)
//! - `replay.rs`         a coordinator's replay of its partition (records and markers)
//! - `error.rs`          `PartitionError`
//! - `tests.rs`, `cleaner_tests.rs`, `replication_tests.rs`  tests on a real executor
//!   with real DMA files
//! - `fault_tests.rs`    the log under injected storage faults and crashes (proptest)
//!
//! Must never import: `server`, `group`, `protocol` (no connections, no Kafka messages or
//! error codes here), nor `controller`. It builds on `storage` and `record`.
mod append;
mod cleaner;
#[cfg(test)]
mod cleaner_tests;
pub mod divergence;
pub mod error;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod file_slice_tests;
mod follower;
pub mod gauges;
mod hw_checkpoint;
pub mod producer_state;
mod read;
mod remote_copy;
mod replay;
pub mod replica_tracker;
mod replication;
#[cfg(test)]
mod replication_tests;
mod retention;
mod shutdown;
mod state;
#[cfg(test)]
pub(crate) mod tests;
mod tiered_restart;
#[cfg(test)]
mod tiered_restart_tests;
mod transactions;
#[cfg(test)]
mod txn_tests;

pub use append::AppendOutcome;
pub use cleaner::CleanerStats;
pub use error::PartitionError;
pub use hw_checkpoint::HW_CHECKPOINT_INTERVAL;
pub use producer_state::AbortedTxn;
pub use read::{FetchData, ReadLimit, WatchSignal};
pub use replay::Replayed;
pub use replica_tracker::{BrokerId, ReplicaTracker};
pub use replication::{ReplicaRead, Role, RoleState};
pub use state::{effective_flush, write_mode, Partition, PartitionSettings, SOLE_REPLICA};
pub use transactions::ProducerView;
