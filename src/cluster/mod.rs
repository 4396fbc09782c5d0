//! Cluster metadata as shards see it, and routing by it: an immutable image replaced on
//! every committed change, the deltas that tell a shard what to do (open, create, delete
//! partitions), the partitions each shard owns, and the router that runs an operation
//! on a partition's owning shard.
//!
//! - `image.rs`            the metadata image and deltas (built by the controller)
//! - `topic_config.rs`     typed topic configs resolved against broker defaults
//! - `shard_partitions.rs` one shard's partitions and applied image; the metadata barrier
//! - `router.rs`           run an operation on the partition's owning shard (local or mesh)
//!
//! Never imports `server::`, `group::`, `controller::` or `protocol::` (the router carries
//! the layers' own operations as an opaque extension instead).
pub mod image;
pub mod router;
pub mod shard_partitions;
pub mod topic_config;
