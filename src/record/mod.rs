//! RecordBatch v2, the one record format shardlog accepts, stores and serves: the byte
//! layout that protocol (produce validation, fetch), storage (segments, recovery,
//! compaction) and partition (append) share. Batches are stored exactly as the producer
//! sent them; the data path reads and patches only the fixed 61-byte header, and the
//! records inside are walked by produce validation, the cleaner, the group replay and
//! ListOffsets by timestamp, never by fetch.
//!
//! - `header.rs`   layout constants, `BatchHeader`, `parse_header`, framing, CRC-32C,
//!   `BatchError` (why a batch is refused)
//! - `iter.rs`     `iter_batches`: the one iterator over the batches in a byte range; it
//!   reports a zero-padded tail and a batch cut at the end of the range
//! - `patch.rs`    set base offset / partition leader epoch / LogAppendTime (+ CRC), and
//!   rebuild a batch around a new records section (compaction)
//! - `validate.rs` `validate_produce_records`: Kafka's checks on a client's produce batch,
//!   records included (LogValidator); `check_produce_version` (zstd needs Produce v7)
//! - `records.rs`  the records inside a batch: varints, the one bounded decompression
//!   (`decompress_bounded`, `MAX_DECOMPRESSED_BYTES`), the one record walker
//!   (`walk_records`, `parse_records`)
//! - `builder.rs`  `encode_batch`: batches the broker writes itself (group offsets, bench)
//! - `control.rs`  transaction markers (control batches): build one, read one
//! - `tests.rs`    layout tests and the test batches other modules' tests use
//!
//! Must never import: `server`, `protocol`, `group`, `cluster`, `partition`,
//! `controller`, `storage` (it is the bottom of the data path). Kafka error codes for
//! `BatchError` are chosen above, in the one place errors become codes.
mod builder;
mod control;
mod header;
mod iter;
mod patch;
mod records;
#[cfg(test)]
pub(crate) mod tests;
mod validate;

pub use builder::{encode_batch, encode_batch_with_headers, encode_transactional_batch, NewHeaders, NewRecord};
pub use control::{build_marker, parse_marker, ControlType, Marker};
pub use header::{compute_crc, parse_header, BatchError, BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, MIN_BATCH_LENGTH};
pub use iter::{iter_batches, BatchIter, IterStop};
pub use patch::{rebuild_with_records, set_base_offset, set_log_append_time, set_partition_leader_epoch, set_producer};
pub use records::{
    decompress_bounded, first_record_at_or_after, parse_records, read_field, read_varint, read_varlong, records_section, walk_records, with_records_section,
    RecordRef, MAX_DECOMPRESSED_BYTES,
};
pub use validate::{check_produce_version, validate_produce_records, ProduceChecks, RecordError, RecordErrorKind, RecordErrors};

/// The stored batches one read returns (a fetch's records), in offset order. Inline up to
/// four: a tailing consumer's read (one or a few new batches) allocates nothing for its
/// list (issue 10: no allocation per request on the fetch path in steady state); a long
/// catch-up read spills to the heap, once per partition read, not per batch.
pub type BatchList = smallvec::SmallVec<[bytes::Bytes; 4]>;
