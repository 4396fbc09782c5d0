//! Tiered storage (KIP-405): closed segments of tiered topics go to an S3-compatible
//! object store, so a partition's history is no longer bounded by local disks.
//!
//! The shard of a partition's leader decides what to upload (`upload.rs`: the sealed
//! segments past the highest offset already remote, below the last stable offset) and
//! records each step in the metadata log (`segment_metadata.rs`; the controller applies
//! the records, fenced by leader epoch, into every broker's image). The bytes move on the
//! remote I/O side (`store.rs`: its own tokio runtime, never a shard thread), which reads
//! the segment file (`segment_export.rs`: batches checked, padding dropped) and writes the
//! objects (`object_keys.rs`: the Aiven plugin's layout; `remote_indexes.rs`: offsets,
//! timestamps, leader epochs, producer snapshot).
//!
//! `expiration.rs` decides which remote segments go (unfinished copies, DeleteRecords,
//! retention.ms / retention.bytes over the whole log).
//!
//! Below partition/, cluster/ and server/; names only storage, record, config and runtime.
pub mod byte_rate;
pub mod chunk_cache;
pub mod expiration;
pub mod object_keys;
pub mod remote_indexes;
pub mod remote_read;
pub mod segment_export;
pub mod segment_metadata;
pub mod settings;
pub mod store;
pub mod upload;

/// Why a remote operation failed. Nothing here is fatal to the broker: an upload that
/// fails is tried again, and the local segment stays until one succeeds.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("remote store settings: {0}")]
    Settings(String),
    #[error("remote store: {0}")]
    Store(String),
    /// A remote object that is not what was uploaded (a checksum, a frame, a size).
    #[error("remote object damaged: {0}")]
    Corrupt(String),
    #[error("local segment: {0}")]
    LocalSegment(String),
    #[error("the remote I/O runtime has stopped")]
    Stopped,
}
