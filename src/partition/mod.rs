//! One partition's state, owned by exactly one shard: its log, idempotent-producer
//! state, high watermark, and the waiters for durability and for new data.
//! `cleaner.rs` compacts the sealed segments of compacted topics.
mod cleaner;
pub mod error;
pub mod partition;
pub mod producer_state;
#[cfg(test)]
mod cleaner_tests;
#[cfg(test)]
mod tests;

pub use cleaner::CleanerStats;
pub use error::PartitionError;
pub use partition::{AppendOutcome, FetchData, Partition, PartitionSettings};
