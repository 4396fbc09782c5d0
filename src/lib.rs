//! shardlog: a Kafka-wire-compatible, thread-per-core message broker.
//!
//! Folders tell the architecture (see README.md):
//! - `runtime/`    executors pinned to cores, shard ids, the cross-shard mesh
//! - `record/`     the RecordBatch v2 layout every layer shares: parse, validate, iterate, patch
//! - `protocol/`   Kafka framing, ApiVersions table, fetch writer
//! - `server/`     per-shard accept loop, connections, one handler file per Kafka API
//! - `storage/`    segmented log on glommio DMA files, indexes, recovery, retention
//! - `partition/`  one partition's state: log, producer state, high watermark
//! - `controller/` the openraft metadata quorum on its own pinned thread
//! - `cluster/`    the metadata image every shard reads, deltas, topic configs
//! - `group/`      the classic group coordinator and committed offsets (`__consumer_offsets`)
//! - `bench/`      the load generator (`shardlog bench`) with its own pipelined client
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod group;
pub mod partition;
pub mod protocol;
pub mod record;
pub mod runtime;
pub mod server;
pub mod storage;
