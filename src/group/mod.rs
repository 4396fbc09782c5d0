//! Group coordination: the classic group coordinator (JoinGroup/SyncGroup/Heartbeat/
//! LeaveGroup), KIP-848 consumer groups and committed offsets, as Apache Kafka 4.1's
//! GroupCoordinator behaves.
//!
//! A group lives on one partition of the internal topic `__consumer_offsets`
//! (`placement.rs`); its state is kept and mutated only on the shard owning that
//! partition (one `Coordinator` per shard). Handlers route each group request there
//! through the shard router (`ops.rs` → `cluster/router.rs`, as the router's extension
//! operation). Commits and group metadata are appended to that partition's log
//! (`coordinator_records.rs`) and replayed when the shard first serves the partition, so
//! offsets and groups survive a restart.
//!
//! - `context.rs`             what the coordinator needs from its shard (`CoordinatorContext`, `GroupConfig`)
//! - `placement.rs`           group id → `__consumer_offsets` partition (Kafka's hash)
//! - `coordinator_records.rs` the records written to `__consumer_offsets` (Kafka's key/value layout)
//! - `state.rs`               one group and its members; protocol selection
//! - `membership.rs`          join / sync / heartbeat / leave: the rebalance state machine
//! - `offsets.rs`             offset commit / fetch / delete, group describe / list / delete
//! - `txn_offsets.rs`        KIP-447: offsets committed in transactions, pending until their marker
//! - `expiry.rs`              offsets.retention.minutes: which offsets expire, and the pass that tombstones them
//! - `coordinator.rs`         per-shard coordinator: groups by id, loading, persistence, timers
//! - `ops.rs`                 the cross-shard group operations, their replies, and routing
//! - `consumer/`              KIP-848 consumer groups (ConsumerGroupHeartbeat / ConsumerGroupDescribe)
//! - `share/`                 KIP-932 share groups (in progress: the share-partition state)
//!
//! Never imports `server::` (the shard hands the coordinator a `CoordinatorContext`) nor
//! `controller::`.
pub mod committed_offsets;
pub mod consumer;
pub mod context;
pub mod coordinator;
pub mod coordinator_records;
pub mod expiry;
pub mod flexible_records;
pub mod membership;
pub mod offsets;
pub mod ops;
pub mod share;
/// Kafka's coordinator placement, shared with the transaction coordinator.
pub use crate::cluster::coordinator_placement as placement;
pub mod state;
pub mod streams;
mod txn_offsets;

pub use context::{CoordinatorContext, GroupConfig};
pub use coordinator::{tick_loop, Coordinator};
pub use expiry::expiry_loop;
pub use ops::{AnswersGroupOps, CarriesGroupOps, GroupOp, GroupReply};

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

#[cfg(test)]
#[test]
fn offsets_topic_is_internal_so_clients_cannot_produce_to_it() {
    assert!(crate::cluster::topic_config::is_internal_topic(OFFSETS_TOPIC));
}
