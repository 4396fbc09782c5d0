//! The controller's files, read at start (and a snapshot also from the quorum leader):
//! `raft.log` scanned for its valid prefix, the snapshot decoded. Each input is tried as
//! given and framed with a right CRC, so the JSON entry and the rkyv archive validation
//! behind the frame are reached.
use crate::controller::fuzz_surface::{decode_snapshot, framed_log_record, framed_snapshot, scan_metadata_log};

pub fn check(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    if which % 2 == 0 {
        scan_metadata_log(rest);
        // Records framed right, one per 0xff-separated piece: a log of several entries.
        let log: Vec<u8> = rest.split(|b| *b == 0xff).flat_map(framed_log_record).collect();
        scan_metadata_log(&log);
    } else {
        decode_snapshot(rest);
        decode_snapshot(&framed_snapshot(rest));
    }
}
