//! Storage: one partition's log as a directory of segments written through io_uring,
//! in one of two modes (`WriteMode`): through the page cache with background
//! fdatasync (flush = never, Kafka's default durability), or O_DIRECT with several
//! aligned writes in flight and group-committed fdatasync (flush = always). Batches are
//! stored exactly as the producer sent them (RecordBatch v2) with the broker's base
//! offset and leader epoch patched in.
//!
//! Padding rule (the one place it is defined; `batch_reader.rs` applies it for every
//! reader): an O_DIRECT write never rewrites bytes already written, so when a write must
//! end inside a block (a sync or an idle writer needs the tail on disk) the rest of the
//! block is zeros and the next batch starts at a block boundary: the first multiple of
//! `PADDING_BLOCK` (4096) at or after the padding's start plus 12 bytes (so the padding
//! always holds a whole, zero, offset-and-length field; `after_padding`). A zero length
//! field at a position that is not a multiple of 4096 therefore means "continue at
//! `after_padding(position)`"; at a boundary (or at the end of the file) it means the end
//! of the data. Page-cache writes never pad. Fetch and the cleaner see whole batches only, never
//! padding.
//!
//! - `dma.rs`          DMA file helpers, the IOPOLL probe, small checksummed files,
//!   directory fsync
//! - `file.rs`         `SegmentFile`: the one seam between the log and the file system
//!   (every segment write, read and fdatasync), with optional fault injection
//! - `segment.rs`      one `<base>.log` file: append staging, aligned writes, indexes,
//!   the names of a segment's files
//! - `index.rs`        sparse offset and time indexes, persisted when a segment is sealed
//! - `batch_cache.rs`  recent batches kept in memory for zero-copy fetch
//! - `batch_reader.rs` the one chunked reader of a segment's batches (fetch, ListOffsets,
//!   recovery, cleaner)
//! - `log_dirs.rs`     the log dirs (JBOD): which dir each partition lives in, placement
//! - `meta_properties.rs` each log dir's cluster and node id (Kafka's meta.properties)
//!   of new partitions, the start-up scan
//! - `log_dir_failure.rs` what the broker does when a log goes offline (halts, as Kafka)
//! - `log.rs`          the segments of a partition: append, read plans, roll, truncate,
//!   retention targets, compaction bookkeeping
//! - `log_writer.rs`   the log's writer: the write-and-sync loop, group commit, the
//!   `Durable` futures appends wait on, rollback after a failed write
//! - `durable_waiters.rs` the `Durable` future and the writer's reused table of waiter
//!   slots it polls
//! - `write_slots.rs`  the writer's segment writes in flight, in reused slots polled by
//!   hand
//! - `open_files.rs`   the shard's descriptor budget: idle segment files closed beyond it,
//!   reopened on their next operation (many partitions, few descriptors)
//! - `page_cache.rs`   page-cache recycling: early writeback and a per-shard budget of
//!   written bytes left cached (page-cache segments)
//! - `recovery.rs`     opening a log directory after a crash
//! - `truncate.rs`     cutting the log's tail (replication: a follower's divergent
//!   tail) and starting it over at an offset; the on-disk order that keeps a crash safe
//! - `clean_shutdown.rs` the clean-shutdown marker: written by a clean close, it lets
//!   the next open skip verifying sealed segments
//! - `high_watermark_checkpoint.rs` the partition's high watermark, saved for restarts
//! - `compaction.rs`   log compaction: key map, record filtering, cleaned-segment swap
//! - `testing.rs`      (tests) running a test on a glommio executor
//!
//! Must never import: `server`, `protocol`, `group`, `cluster`, `partition`,
//! `controller` (storage knows no Kafka messages, no producer state, no connections).
//! It builds on `record` (the batch layout) and `runtime`.
pub mod batch_cache;
pub mod batch_reader;
pub mod cached_read;
pub mod clean_shutdown;
pub mod compaction;
pub mod dir_survey;
pub mod dma;
mod durable_waiters;
pub mod file;
pub mod high_watermark_checkpoint;
pub mod index;
pub mod leader_epoch_cache;
pub mod log;
pub mod log_dir_failure;
pub mod log_dirs;
pub mod log_writer;
pub mod meta_properties;
pub mod open_files;
pub mod page_cache;
pub mod partition_metadata;
pub mod recovery;
pub mod segment;
pub mod segment_deletion;
#[cfg(test)]
pub(crate) mod testing;
pub mod truncate;
#[cfg(test)]
mod truncate_tests;
mod write_slots;

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("disk full while {context}")]
    NoSpace { context: String },
    #[error("I/O error while {context}: {source}")]
    Io { context: String, source: io::Error },
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    #[error("the log was rolled back after a failed write; retry")]
    RolledBack,
    #[error("the log was closed before the write was durable")]
    Closed,
    /// The log was truncated (replication) below the end of this write, which was never
    /// acknowledged: its bytes are gone.
    #[error("the log was truncated to {log_end_offset} below this write")]
    Truncated { log_end_offset: i64 },
    /// An fdatasync of the log failed (invariant 8): the kernel may have dropped the
    /// unsynced pages, so nothing past the last good sync can be trusted or served.
    #[error("log offline since an fdatasync failed ({reason}); fix the disk, then restart the broker (recovery re-validates the log tail)")]
    Offline { reason: String },
}

impl StorageError {
    pub fn io(context: impl Into<String>, source: io::Error) -> StorageError {
        let context = context.into();
        if source.raw_os_error() == Some(libc::ENOSPC) || source.raw_os_error() == Some(libc::EDQUOT) {
            StorageError::NoSpace { context }
        } else {
            StorageError::Io { context, source }
        }
    }

    /// A copy for each of several waiters failed by one error (an `io::Error` is not
    /// `Clone`; the copy keeps its kind and message).
    pub fn duplicate(&self) -> StorageError {
        match self {
            StorageError::NoSpace { context } => StorageError::NoSpace { context: context.clone() },
            StorageError::Io { context, source } => StorageError::Io { context: context.clone(), source: io::Error::new(source.kind(), source.to_string()) },
            StorageError::Corrupt { what, detail } => StorageError::Corrupt { what: what.clone(), detail: detail.clone() },
            StorageError::OffsetOutOfRange { offset, log_start_offset, log_end_offset } => {
                StorageError::OffsetOutOfRange { offset: *offset, log_start_offset: *log_start_offset, log_end_offset: *log_end_offset }
            }
            StorageError::RolledBack => StorageError::RolledBack,
            StorageError::Closed => StorageError::Closed,
            StorageError::Truncated { log_end_offset } => StorageError::Truncated { log_end_offset: *log_end_offset },
            StorageError::Offline { reason } => StorageError::Offline { reason: reason.clone() },
        }
    }

    /// glommio errors carry the io::Error inside; keep ENOSPC recognisable.
    pub fn glommio(context: impl Into<String>, e: glommio::GlommioError<()>) -> StorageError {
        match e {
            glommio::GlommioError::IoError(source) => StorageError::io(context, source),
            other => StorageError::io(context, io::Error::other(other.to_string())),
        }
    }
}

pub type Result<T> = std::result::Result<T, StorageError>;

/// How a log's segments are written (see `log_writer.rs`). The on-disk format is the
/// same (a sequence of RecordBatch v2, with zero padding up to a block boundary where an
/// O_DIRECT write had to end early), so a log written in one mode opens in the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Buffered writes through the page cache (io_uring), exactly the new bytes at the
    /// end; fdatasync in the background (flush = never).
    PageCache,
    /// O_DIRECT writes of whole blocks, several in flight (flush = always).
    Direct,
}

/// The padding block (see the module comment): O_DIRECT segment writes cover whole
/// multiples of it, and a zero length field inside one means "continue at its end".
pub const PADDING_BLOCK: u64 = 4096;

/// Where the data continues after padding that starts at `pos` (see the module comment).
pub fn after_padding(pos: u64) -> u64 {
    if pos.is_multiple_of(PADDING_BLOCK) {
        return pos;
    }
    (pos + crate::record::LOG_OVERHEAD as u64).next_multiple_of(PADDING_BLOCK)
}

/// Kafka's "never" for flush.messages / flush.ms (Long.MAX_VALUE).
pub const FLUSH_NEVER: i64 = i64::MAX;

/// Per-log settings, resolved from the topic config and the broker config.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub index_interval_bytes: usize,
    pub cache_bytes: usize,
    /// cleanup.policy contains "compact": the cleaner compacts sealed segments and
    /// produce refuses records without a key.
    pub compact: bool,
    /// cleanup.policy contains "delete": retention.ms / retention.bytes apply.
    pub delete: bool,
    /// min.cleanable.dirty.ratio.
    pub min_cleanable_dirty_ratio: f64,
    /// delete.retention.ms: how long tombstones survive cleaning (simplified, see
    /// compaction.rs).
    pub delete_retention_ms: i64,
    /// How segments are written; a change applies from the next segment on.
    pub write_mode: WriteMode,
    /// flush.messages: fdatasync in the background once this many messages are written
    /// and not synced (`FLUSH_NEVER`: only at segment roll). Acks never wait for it.
    pub flush_interval_messages: i64,
    /// flush.ms: fdatasync in the background once unsynced data is this old.
    pub flush_interval_ms: i64,
    /// At an open after an unclean shutdown (no clean-shutdown marker), read every sealed
    /// segment and check each batch (CRC-32C, offsets); the first bad batch cuts the log
    /// there, later segments removed (a replica then refetches from the leader). Off: a
    /// sealed segment opens from its saved index unread, and damage found in one scanned
    /// for lack of an index refuses the open (`StorageError::Corrupt`). The broker turns
    /// it on; tests of the old behaviour keep the default.
    pub verify_sealed_after_unclean_shutdown: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            cache_bytes: 8 << 20,
            compact: false,
            delete: true,
            min_cleanable_dirty_ratio: 0.5,
            delete_retention_ms: 86_400_000,
            write_mode: WriteMode::Direct,
            flush_interval_messages: FLUSH_NEVER,
            flush_interval_ms: FLUSH_NEVER,
            verify_sealed_after_unclean_shutdown: false,
        }
    }
}
