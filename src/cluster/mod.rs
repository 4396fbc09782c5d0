//! Cluster metadata as shards see it, and routing by it: an immutable image replaced on
//! every committed change, the deltas that tell a shard what to do (open, create, delete
//! partitions), the partitions each shard owns, and the router that runs an operation
//! on a partition's owning shard.
//!
//! - `image.rs`            the metadata image and deltas (built by the controller)
//! - `security_image.rs`  SCRAM credentials, ACLs, quotas and tokens in the image
//! - `features.rs`         feature versions: supported, finalized, Kafka's rules for changing them
//! - `topic_config.rs`     typed topic configs resolved against broker defaults
//! - `config_defs.rs`      broker and group config definitions (types, docs, dynamic keys)
//! - `shard_load.rs`       leaders and replicas per broker and shard (admin listener, `cluster status`)
//! - `replica_role.rs`     what a broker's replica is for a partition; re-roling an open one
//! - `shard_partitions.rs` one shard's partitions and applied image; the metadata barrier
//! - `router.rs`           run a request's operations on their owning shards (local, or one
//!   mesh message per other shard); `router_tests.rs` runs it on two real shards
//!
//! Never imports `server::`, `group::`, `controller::` or `protocol::` (the router carries
//! the layers' own operations as an opaque extension instead).
pub mod config_defs;
pub mod coordinator_placement;
pub mod features;
pub mod image;
pub mod remote_log_image;
pub mod replica_role;
pub mod router;
#[cfg(test)]
mod router_tests;
pub mod security_image;
pub mod shard_load;
pub mod shard_partitions;
pub mod topic_config;
pub mod topic_remote_storage;
