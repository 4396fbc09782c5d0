//! Metrics: per-shard counters and histograms (`shard_metrics`, recorded with no atomic or
//! lock), the reactor-stall detector (`stall`), and the admin HTTP listener that merges
//! them on scrape (`admin_listener`, `exposition`).
//!
//! A low layer: the data path (storage, partition, replication, server) records here; it
//! names only `runtime`. What a scrape needs from the cluster (gauges from the metadata
//! image, each shard's gauges) is gathered by `server/admin.rs` into the plain types of
//! `gauges` and rendered by `exposition`.
pub mod admin_listener;
pub mod exposition;
pub mod gauges;
pub mod histogram;
pub mod repeated_warnings;
pub mod shard_metrics;
pub mod stall;

pub use shard_metrics::{with, RequestTiming};
