//! Replication between brokers (Kafka's replica fetchers and the leader's ISR
//! management). The partition layer keeps each replica's state (its role, the followers'
//! positions, the high watermark: `partition::replica_tracker`); this layer moves data
//! and proposes ISR changes:
//!
//! - `peer_connection.rs`   a connection to a peer broker's inter-broker listener (TLS, SASL)
//! - `sasl_exchange.rs`     this broker authenticating to a peer's SASL listener
//! - `leader_connection.rs` a follower's connection to a leader: Fetch as a replica
//! - `fetcher.rs`           one fetcher per (leader broker, shard): fetch, append, truncate
//! - `fetcher_manager.rs`   which fetcher pulls which followed partition on a shard
//! - `isr.rs`               the leader's ISR shrink/expand proposals (AlterPartition)
//! - `settings.rs`          the replica.fetch.* settings
//! - `simulation.rs`        (tests) a seeded model of replication: the real decisions
//!   (tracker, divergence, epoch cache, the controller's apply) on in-memory logs, cheap
//!   enough for 10,000s of seeds
//! - `real_parts_simulation.rs` (tests) the same scenario on the real partitions, files,
//!   fetchers and replica-fetch serving, over a simulated network and clock (its seeds:
//!   `real_parts_simulation_tests.rs`; what both share: `sim_controller.rs`)
//!
//! The leader's half of a follower fetch is `server/handlers/replica_fetch.rs` (a Kafka
//! request) with the partition operation `PartitionOp::ReplicaFetch` (cluster/router.rs);
//! where a follower's log parts from its leader's is `partition/divergence.rs` (both halves).
//!
//! Must never import `server` or `group`.
pub mod fetcher;
pub mod fetcher_manager;
pub mod isr;
pub mod leader_connection;
pub mod peer_connection;
#[cfg(test)]
mod real_parts_simulation;
#[cfg(test)]
mod real_parts_simulation_tests;
mod sasl_exchange;
pub mod settings;
#[cfg(test)]
mod sim_controller;
#[cfg(test)]
mod simulation;
pub mod tiered_start;

pub use fetcher_manager::FetcherManager;
pub use settings::FetcherSettings;
