//! The broker process, the top layer: starts the controller thread and one shard
//! executor per core, each accepting Kafka connections, decoding requests and answering
//! them through the layers below.
//!
//! - `broker.rs`      start-up and shutdown of the whole process
//! - `authorization.rs` ACL checks of requests (the shard's StandardAuthorizer)
//! - `client_quotas.rs` client quotas on a shard: meters, throttle times, muted connections
//! - `shard/`         one shard: its state, partition lifecycle, background loops
//! - `connection.rs`  one client connection: framing, in-order pipelined responses
//! - `request_memory.rs` the shard's request memory pool (queued.max.request.bytes)
//! - `request_timing.rs` a request's phases (queue, local, remote, response queue, send) into the shard's metrics
//! - `admin.rs`       the admin listener's source: a scrape gathers every shard's metrics and the cluster's gauges
//! - `socket_split.rs` a glommio TCP stream split into read and write halves
//! - `sasl_authenticator.rs` SASL authentication of a connection before it is served
//! - `idle_close.rs`  connections.max.idle.ms: closing idle connections
//! - `dispatch.rs`    request → handler
//! - `dynamic_tls.rs` a listener's key store replaced at run time (Kafka's dynamic per-broker SSL keys)
//! - `handlers/`      one file per Kafka API
//! - `log_dir.rs`     the one log dir: path, file-system bytes, partition sizes on disk
//! - `partition_end_offsets.rs` log end offsets of partitions led anywhere (share-group lag)
//! - `share_persister.rs` share-partition state calls to the share coordinator, here or on another broker
//! - `dead_letter_writer.rs` share groups' dead-letter records to their queue topic, here or on another broker
//! - `error_map.rs`   the one place where internal errors become Kafka error codes
//! - `stray_partitions.rs` start-up removal of partition dirs the metadata no longer gives us
//! - `shutdown.rs`    SIGTERM / SIGINT: the clean (controlled) shutdown
//! - `resource_limits.rs` the process limits raised at start: locked memory, open files
//!
//! Nothing below imports `server::`.
pub mod admin;
pub mod authorization;
pub mod broker;
pub(crate) mod broker_call;
pub mod client_quotas;
pub mod connection;
pub mod dead_letter_writer;
pub mod dispatch;
pub mod dynamic_tls;
pub mod error_map;
pub mod handlers;
mod idle_close;
pub mod log_dir;
mod partition_end_offsets;
pub mod request_memory;
mod request_timing;
mod resource_limits;
pub mod sasl_authenticator;
pub mod shard;
pub mod share_persister;
pub mod share_sessions;
mod shutdown;
mod socket_split;
mod storage_fault_control;
mod stray_partitions;
pub mod test_hooks;
mod txn_markers;
mod vectored_write;

pub use broker::run_broker;
