//! The classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and committed
//! offsets, as Apache Kafka 4.1's classic GroupCoordinator behaves.
//!
//! A group lives on one partition of the internal topic `__consumer_offsets`
//! (`placement.rs`); its state is kept and mutated only on the shard owning that
//! partition (`Coordinator`, one per shard). Handlers route each group request there
//! through `partition_ops` (`PartitionOp::Group`). Commits and group metadata are appended
//! to that partition's log (`records.rs`) and replayed when the shard first serves the
//! partition, so offsets survive a restart.
//!
//! - `placement.rs`   group id → `__consumer_offsets` partition (Kafka's hash)
//! - `records.rs`     the records written to `__consumer_offsets` (Kafka's key/value layout)
//! - `state.rs`       one group and its members; protocol selection
//! - `membership.rs`  join / sync / heartbeat / leave: the rebalance state machine
//! - `offsets.rs`     offset commit / fetch / delete, group describe / list / delete
//! - `expiry.rs`     offsets.retention.minutes: which offsets expire, and the pass that
//!   tombstones them
//! - `coordinator.rs` per-shard coordinator: groups by id, loading, persistence, timers
//! - `ops.rs`         the cross-shard operations and their replies
//! - `consumer/`      KIP-848 consumer groups (ConsumerGroupHeartbeat / ConsumerGroupDescribe)
pub mod consumer;
pub mod context;
pub mod coordinator;
pub mod expiry;
pub mod membership;
pub mod offsets;
pub mod ops;
pub mod placement;
pub mod coordinator_records;
pub mod state;

pub use coordinator::{tick_loop, Coordinator};
pub use expiry::expiry_loop;
pub use context::{CoordinatorContext, GroupConfig};
pub use ops::{GroupOp, GroupReply, ShardRouter};

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
