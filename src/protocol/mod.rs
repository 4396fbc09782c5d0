//! Kafka wire protocol: framing, request decode, the ApiVersions table, the zero-copy
//! Fetch response writer, and the one place where errors become Kafka error codes.
//! The record-batch layout (validation, iteration, patching) is `record/`'s.
//!
//! Message bodies are decoded and encoded with the vendored `kafka-protocol` crate, except
//! the Fetch response, which is written by hand so stored batch bytes go to the socket
//! without a copy. Record batches are never decoded on the data path: only their 61-byte
//! header is read, checked and patched.
//!
//! Everything here treats its input as hostile: lengths are checked against the bytes
//! that remain and against a limit before anything is sliced or allocated, and no
//! function panics on input (see `fuzz/fuzz_targets/request_decode.rs`).

pub mod api_versions;
pub mod errors;
pub mod fetch_writer;
pub mod frame;
pub mod request;
pub mod strings;

pub use api_versions::{api_versions_response, produce_version_rejected, supported};
pub use errors::ErrorCode;
pub use fetch_writer::{
    write_fetch_response, AbortedTxn, FetchPartitionParts, FetchResponseParts, FetchTopicParts,
};
pub use frame::{encode_response, frame_len, FrameError, ProtocolError};
pub use request::{decode_request, DecodedRequest, RequestError};
