//! Kafka wire protocol: framing, request decode, the ApiVersions table, the zero-copy
//! Fetch response writer, Kafka error codes and string helpers. The record-batch layout
//! (validation, iteration, patching) is `record/`'s; which internal error becomes which
//! code is `server/error_map.rs`'s.
//!
//! - `frame.rs`        length-prefixed frames, response encoding
//! - `request.rs`      request header + body decode (bounded)
//! - `produce_request_view.rs` the hot path's borrowing Produce request parser (v3–v12)
//! - `produce_input.rs` one walk over a Produce request, from the view or the crate
//! - `produce_response_writer.rs` the hand-written Produce response (no structs, arena buffer)
//! - `acl_operations.rs` the authorized_operations bit sets (no authorizer: all of them)
//! - `api_versions.rs` the versions this broker serves and the ApiVersions response
//! - `fetch_writer.rs` the hand-written Fetch response (stored batch bytes, no copy)
//! - `response_arena.rs` the shard's chunk that small response buffers are cut from
//! - `errors.rs`       `ErrorCode`, the wire's int16
//! - `strings.rs`      the codec's string types from Rust strings
//! - `throttle_time.rs` `throttle_time_ms` of any response body (client quotas)
//! - `response_errors.rs` the error codes of any response body (generated; ErrorsPerSec)
//!
//! Never imports the broker's inside (`server::`, `group::`, `cluster::`, `partition::`,
//! `storage::`, `controller::`): it is the wire, used by the broker and by the clients
//! (`bench/`, `cli/`).
//!
//! Message bodies are decoded and encoded with the vendored `kafka-protocol` crate, except
//! the Fetch response, which is written by hand so stored batch bytes go to the socket
//! without a copy, and the Produce request (v3–v12, read in place) and response (written
//! from flat answers), so the produce path allocates nothing per request. Record batches are never decoded on the data path: only their 61-byte
//! header is read, checked and patched.
//!
//! Everything here treats its input as hostile: lengths are checked against the bytes
//! that remain and against a limit before anything is sliced or allocated, and no
//! function panics on input (see `fuzz/fuzz_targets/request_decode.rs`).

pub mod acl_operations;
pub mod api_versions;
pub mod errors;
pub mod fetch_writer;
pub mod frame;
pub mod produce_input;
pub mod produce_request_view;
pub mod produce_response_writer;
pub mod request;
pub mod response_arena;
pub mod response_buf;
pub mod response_errors;
pub mod strings;
pub mod throttle_time;

#[cfg(test)]
mod decode_budget_tests;

pub use api_versions::{api_versions_response, produce_version_rejected, supported};
pub use errors::ErrorCode;
pub use fetch_writer::{
    write_fetch_response, AbortedTxn, CurrentLeader, DivergingEpoch, FetchPartitionParts, FetchResponseParts, FetchTopicParts, FetchWriteError, NodeEndpoint,
};
pub use frame::{encode_response, frame_len, FrameError, ProtocolError};
pub use request::{decode_request, DecodedRequest, RequestError};
pub use response_buf::{ResponseBuf, ResponseBufs};
