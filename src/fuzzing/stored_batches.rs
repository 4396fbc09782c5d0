//! Bytes as a segment holds them. Random bytes almost never carry a right CRC-32C, so each
//! input is read twice: as given, and with every length-framed batch's CRC recomputed
//! (what a corrupt-but-checksummed batch, or a client's, looks like), which reaches the
//! records, their decompression, the cleaner's key map and filter.
use bytes::Bytes;

use crate::record::{compute_crc, iter_batches, parse_records, records_section, validate_produce_records, ProduceChecks, LOG_OVERHEAD};
use crate::storage::compaction::{filter_batch, OffsetMap};

/// The cleaner's key budget in this check: small, so the over-budget answer is reached.
const MAX_KEY_BYTES: usize = 4096;

pub fn check(data: &[u8]) {
    read_log(data);
    read_log(&with_crcs_recomputed(data));
}

/// `data` with the CRC field of every batch its length fields frame set to the batch's CRC.
pub fn with_crcs_recomputed(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut pos = 0;
    while let Some(len) = out.get(pos + 8..pos + 12).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) {
        let Some(end) = usize::try_from(len).ok().and_then(|l| (pos + LOG_OVERHEAD).checked_add(l)).filter(|&e| e <= out.len()) else { break };
        if end - pos < 21 || len == 0 {
            break;
        }
        let crc = compute_crc(&out[pos..end]);
        out[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
    out
}

fn read_log(log: &[u8]) {
    let bytes = Bytes::copy_from_slice(log);
    let mut map = OffsetMap::new(MAX_KEY_BYTES);
    let mut iter = iter_batches(log);
    let mut end = 0;
    for item in &mut iter {
        let Ok((header, range)) = item else { break };
        assert_eq!(range.start, end, "batches are contiguous");
        assert_eq!(range.len(), header.total_len());
        end = range.end;
        let batch = bytes.slice(range);
        if let Ok(section) = records_section(&batch, &header) {
            if let Ok(records) = parse_records(&section, &header) {
                for r in &records {
                    assert!(r.key.as_ref().is_none_or(|k| k.end <= section.len()), "a key lies inside its section");
                }
            }
        }
        // Out-of-order keys are damage the map reports, never a panic.
        let _ = map.add_batch(&batch, &header);
        let _ = filter_batch(&batch, &header, |r, _| r.offset % 2 == 0);
    }
    assert_eq!(iter.valid_len(), end);
    assert!(iter.stop().is_some(), "the iterator says why it stopped");
    // A client's records: what produce validation accepts, storage reads as good batches.
    if let Ok(headers) = validate_produce_records(log, &ProduceChecks::with_max_message_bytes(1 << 20)) {
        assert_eq!(iter_batches(log).take_while(|r| r.is_ok()).count(), headers.len());
    }
}
