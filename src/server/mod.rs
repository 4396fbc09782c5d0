//! The broker process: starts the controller thread and one shard executor per core,
//! each accepting Kafka connections and owning its partitions.
//!
//! - `broker.rs`         start-up and shutdown of the whole process
//! - `shard.rs`          one shard's state (`ShardContext`) and its background tasks
//! - `partition_ops.rs`  operations on a partition, run on its owning shard (local call
//!                       or a message over the cross-shard mesh)
//! - `connection.rs`     one client connection: framing, in-order pipelined responses
//! - `dispatch.rs`       request → handler
//! - `handlers/`         one file per Kafka API
pub mod broker;
pub mod connection;
pub mod dispatch;
pub mod error_map;
pub mod handlers;
pub mod shard;
mod socket_split;

pub use broker::run_broker;
