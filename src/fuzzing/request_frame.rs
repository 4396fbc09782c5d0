//! A connection's bytes: a 4-byte length and the frame, decoded as a request; for Produce
//! every partition's records are validated as the produce path does, and a validated
//! batch must stay a valid stored batch once the broker patches it.
use bytes::Bytes;
use kafka_protocol::messages::RequestKind;

use crate::protocol::frame::frame_len;
use crate::protocol::request::decode_request;
use crate::record::{iter_batches, set_log_append_time, validate_produce_records, ProduceChecks};

const MAX_FRAME_BYTES: usize = 1 << 20;

pub fn check(data: &[u8]) {
    let Some((prefix, rest)) = data.split_first_chunk::<4>() else { return };
    let Ok(len) = frame_len(*prefix, MAX_FRAME_BYTES) else { return };
    // The reader waits for the whole frame; a short input is decoded as far as it goes so
    // the fuzzer need not match the length exactly.
    let frame = &rest[..len.min(rest.len())];
    let Ok(req) = decode_request(Bytes::copy_from_slice(frame)) else { return };
    let RequestKind::Produce(p) = req.body else { return };
    let checks = ProduceChecks::with_max_message_bytes(MAX_FRAME_BYTES);
    for part in p.topic_data.iter().flat_map(|t| &t.partition_data) {
        let Some(records) = &part.records else { continue };
        if let Ok(headers) = validate_produce_records(records, &checks) {
            assert!(headers.iter().map(|h| h.total_len()).sum::<usize>() <= records.len());
            let mut stored = records.to_vec();
            set_log_append_time(&mut stored, 1_700_000_000_000).expect("a validated batch patches");
            assert!(iter_batches(&stored).all(|r| r.is_ok()), "a patched batch is a valid stored batch");
        }
        iter_batches(records).for_each(drop);
    }
}
