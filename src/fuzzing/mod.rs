//! The bodies of the fuzz targets: each takes arbitrary bytes, runs one decoder or
//! recovery path that reads what a client or a disk hands the broker, and asserts what
//! must hold of its answer (nothing may panic; what is accepted round-trips or re-reads
//! the same). `fuzz/fuzz_targets/*.rs` call them under libFuzzer (`scripts/fuzz.sh`, the
//! campaign); `smoke_tests.rs` runs every one over the committed corpus and seeded random
//! and mutated inputs in `cargo test` (the CI smoke, no nightly toolchain needed).
//!
//! - `request_frame.rs`    a connection's bytes: frame length, request decode, produce batches
//! - `stored_batches.rs`   bytes as a segment holds them: batch iteration, records,
//!   decompression, the cleaner's key map and filter, produce validation
//! - `segment_recovery.rs` a segment file recovered at start (truncation, index rebuild)
//! - `storage_files.rs`    index, time index, leader-epoch checkpoint, partition.metadata
//! - `metadata_files.rs`   the controller's raft log and snapshot files
//! - `seeds.rs`            valid seed inputs built by the writers (tests; written to `fuzz/corpus/`)
//!
//! Compiled for tests and the `fuzzing` feature only; nothing in the broker names it.
pub mod metadata_files;
pub mod request_frame;
#[cfg(test)]
mod seeds;
pub mod segment_recovery;
#[cfg(test)]
mod smoke_tests;
pub mod storage_files;
pub mod stored_batches;

/// Every target by the name of its fuzz target (`fuzz/fuzz_targets/<name>.rs`) and corpus
/// directory (`fuzz/corpus/<name>/`).
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("request_decode", request_frame::check),
    ("stored_batches", stored_batches::check),
    ("segment_recovery", segment_recovery::check),
    ("storage_files", storage_files::check),
    ("metadata_files", metadata_files::check),
];
