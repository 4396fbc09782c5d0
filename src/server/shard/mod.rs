//! One shard: a glommio executor pinned to a core that owns a set of partitions.
//!
//! It learns metadata only from its controller update channel, opens/closes/deletes its
//! own partitions as deltas say, serves other shards' operations from its inbox (the
//! router), accepts client connections on the shared listen address (SO_REUSEPORT), and
//! runs retention and the cleaner for its partitions.
//!
//! - `context.rs`             the shard's state every handler reads (`ShardContext`)
//! - `partition_lifecycle.rs` metadata updates → open / reconfigure / delete partitions
//! - `background.rs`          retention and log-cleaner loops
//! - `remote_log_copy.rs`     tiered storage: uploading the sealed segments of tiered leaders
//! - `shutdown.rs`            closing every replica cleanly when the broker stops
//! - `shard_ops.rs`           the coordinators' operations the router carries (group, txn)
//! - `metrics_scrape.rs`      answering a metrics scrape: the shard's counters and gauges
//!
//! Part of `server/`: nothing below imports it. The group coordinator sees the shard
//! only through `group::CoordinatorContext`, the router through `cluster::router`.
mod background;
mod context;
mod metrics_scrape;
mod partition_lifecycle;
mod remote_log_copy;
mod remote_orphans;
mod shard_ops;
mod shutdown;

pub use background::{cleaner_loop, retention_loop};
pub use context::{ShardContext, ShardMessage, MARKER_TIMEOUT_MS};
pub use metrics_scrape::{serve_scrapes, ScrapeRequest};
pub use partition_lifecycle::follow_metadata;
pub use remote_log_copy::remote_copy_loop;
pub use remote_orphans::{delete_remote_orphans, DeletedPartition};
pub use shard_ops::{ShardOp, ShardResult, ShardRouter};
pub use shutdown::close_on_shutdown;
