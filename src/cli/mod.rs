//! Command-line tools that talk to a running broker over the Kafka protocol.
//!
//! - `client.rs` a blocking request/response connection
//! - `cluster.rs` `shardlog cluster status|quorum`: brokers, roles, leaders, URPs; the quorum
//! - `topic.rs`  `shardlog topic create|list|describe|delete`
//! - `group.rs`  `shardlog group list|describe`
//! - `txn.rs`    `shardlog txn list|producers|abort`
//! - `top.rs`    `shardlog top`: a live view of brokers' /metrics (admin listeners, HTTP)
//! - `tune.rs`   `shardlog tune --check | --apply`: the host checks of `crate::tune`
//!
//! A client: it never imports the broker's inside (`server::`, `partition::`, `storage::`,
//! `cluster::`, `group::`, `controller::`).
pub mod client;
pub mod cluster;
pub mod group;
pub mod top;
pub mod topic;
pub mod tune;
pub mod txn;
