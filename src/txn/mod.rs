//! The transaction coordinator (KIP-98, KIP-447), as Apache Kafka's TransactionCoordinator
//! behaves: transactional ids, their producer ids and epochs, the partitions of each open
//! transaction, and the two-phase end of a transaction (the outcome written to
//! `__transaction_state`, then a marker on every partition, then the completion).
//!
//! A transactional id lives on one partition of the internal topic `__transaction_state`
//! (Kafka's placement, `cluster::coordinator_placement`); its state is kept and changed
//! only on the shard owning that partition, which replays the partition when it starts
//! leading it, then finishes what a previous coordinator left in PrepareCommit /
//! PrepareAbort. The coordinator epoch is that partition's leader epoch: markers carry it,
//! and partitions refuse markers from an older one.
//!
//! - `state.rs`       one transactional id's state and Kafka's state machine (pure)
//! - `records.rs`     the records of `__transaction_state` (Kafka's key/value layout)
//! - `coordinator.rs` the per-shard coordinator: loading, the APIs, markers, timeouts
//! - `context.rs`     what the coordinator needs from its shard; the marker writer
//! - `ops.rs`         the operations as they travel to the coordinating shard
//! - `simulation.rs`  a seeded simulation over the real state machines (tests)
//!
//! The partition side (markers, the last stable offset, read_committed) is in
//! `partition/`; the group side (transactional offset commits) in `group/`.
//! Never imports `server::`, `group::`, `controller::` or `replication::`: the shard hands
//! the coordinator a `TxnContext` with a marker writer.
pub mod context;
pub mod coordinator;
pub mod ops;
pub mod records;
#[cfg(test)]
mod simulation;
pub mod state;

pub use context::{MarkerRequest, MarkerWriter, TxnConfig, TxnContext};
pub use ops::{AnswersTxnOps, CarriesTxnOps, TxnOp, TxnReply, TxnResult, TxnView};

/// The internal topic holding transaction state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
