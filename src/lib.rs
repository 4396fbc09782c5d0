//! shardlog: a Kafka-wire-compatible, thread-per-core message broker.
//!
//! Folders tell the architecture (see docs/architecture.md). Dependencies point down this list
//! (`scripts/check_layers.py` checks it):
//! - `server/`     the broker: start-up, per-shard context, connections, one handler file per Kafka API
//! - `group/`      group coordinator (classic + KIP-848) and committed offsets (`__consumer_offsets`)
//! - `txn/`        transaction coordinator (`__transaction_state`): producer epochs, two-phase end, markers
//! - `cluster/`    the metadata image shards read, each shard's partitions, the router to the owning shard
//! - `controller/` the openraft metadata quorum on its own pinned thread
//! - `partition/`  one partition: append and idempotence, reads, retention, producer state, cleaner
//! - `protocol/`   Kafka framing, request decode, ApiVersions table, fetch writer, error codes
//! - `storage/`    the segmented log on glommio DMA files: writer, reader, indexes, recovery, compaction
//! - `remote/`     tiered storage: the object store (S3), uploads of sealed segments, remote segment records
//! - `record/`     the RecordBatch v2 layout every layer shares: parse, validate, iterate, patch
//! - `security/`   listeners and their security protocols, TLS (rustls)
//! - `metrics/`    per-shard counters and histograms, the stall detector, the admin HTTP listener (/metrics)
//! - `runtime/`    shard ids, core placement, the cross-shard mesh, the clock
//! - `tune/`       host checks (`shardlog tune`, and the ones `serve` requires): kernel, io_uring, disks, sysctls
//! - `config.rs`   the one config struct
//! - `bench/`, `cli/` clients of the wire: the load generator and the admin CLI
//! - `fuzzing/`    the fuzz targets' bodies (tests and the `fuzzing` feature only; `fuzz/` runs them)
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod controller;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod group;
pub mod metrics;
pub mod partition;
pub mod protocol;
pub mod record;
pub mod remote;
pub mod replication;
pub mod runtime;
pub mod security;
pub mod server;
pub mod storage;
pub mod tune;
pub mod txn;
