//! Cluster metadata as shards see it: an immutable image replaced on every committed
//! change, plus the deltas that tell a shard what to do (open, create, delete partitions).
pub mod image;
pub mod topic_config;
