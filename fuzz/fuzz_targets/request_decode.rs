//! Arbitrary bytes through the request path: frame length check, request decode, and
//! for Produce the record-batch validation of every partition. Nothing may panic.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::RequestKind;
use libfuzzer_sys::fuzz_target;
use shardlog::protocol::frame::frame_len;
use shardlog::record::{iter_batches, set_log_append_time, validate_produce_records};
use shardlog::protocol::request::decode_request;

const MAX_FRAME_BYTES: usize = 1 << 20;
const MAX_MESSAGE_BYTES: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // Input is what a connection reads: a 4-byte length and the frame.
    let Some((prefix, rest)) = data.split_first_chunk::<4>() else { return };
    let Ok(len) = frame_len(*prefix, MAX_FRAME_BYTES) else { return };
    // The reader waits for the whole frame; a short input is decoded as far as it goes
    // so the fuzzer need not match the length exactly.
    let frame = &rest[..len.min(rest.len())];
    let Ok(req) = decode_request(Bytes::copy_from_slice(frame)) else { return };
    if let RequestKind::Produce(p) = req.body {
        for topic in &p.topic_data {
            for part in &topic.partition_data {
                let Some(records) = &part.records else { continue };
                if let Ok(headers) = validate_produce_records(records, MAX_MESSAGE_BYTES) {
                    let mut copy = records.to_vec();
                    for h in &headers {
                        assert!(h.total_len() <= records.len());
                    }
                    // Patching a validated batch must keep it a valid stored batch.
                    set_log_append_time(&mut copy, 1_700_000_000_000).expect("validated batch patches");
                    assert!(iter_batches(&copy).all(|r| r.is_ok()));
                }
                for r in iter_batches(records) {
                    let _ = r;
                }
            }
        }
    }
});
