//! What one upload carries, and which sealed segment a leader uploads next (Kafka's
//! RLMCopyTask candidate rule).
use std::path::PathBuf;

use super::remote_indexes::RemoteAbortedTxn;

/// A sealed local segment, as its partition hands it over for upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalSealedSegment {
    pub start_offset: i64,
    /// Inclusive: the next segment's base offset minus one.
    pub end_offset: i64,
    pub log_path: PathBuf,
    /// The producer snapshot as of the segment's end (`<end + 1>.snapshot`), if kept.
    pub producer_snapshot: Option<PathBuf>,
    /// The log's leader epochs with a start at or below `end_offset` (all of them, as
    /// Kafka's leader-epoch checkpoint in LogSegmentData).
    pub leader_epochs: Vec<(i32, i64)>,
    /// Bytes of the local file (padding included).
    pub file_bytes: u64,
    /// The aborted transactions overlapping the segment (its remote transaction index).
    pub aborted_transactions: Vec<RemoteAbortedTxn>,
}

impl LocalSealedSegment {
    /// The epochs that wrote this segment's batches: KIP-405's segmentLeaderEpochs (the
    /// first clipped to the segment's start).
    pub fn segment_leader_epochs(&self) -> Vec<(i32, i64)> {
        let mut out: Vec<(i32, i64)> = Vec::new();
        for &(epoch, start) in &self.leader_epochs {
            if start <= self.start_offset {
                out.clear();
                out.push((epoch, self.start_offset));
            } else if start <= self.end_offset {
                out.push((epoch, start));
            }
        }
        out
    }
}

/// One upload: a segment and the objects it becomes.
#[derive(Clone, Debug)]
pub struct SegmentUpload {
    /// `object_keys::partition_prefix` of its partition.
    pub partition_prefix: String,
    pub segment_id: [u8; 16],
    pub segment: LocalSealedSegment,
}

/// What an upload wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedSegment {
    pub size_bytes: u64,
    pub batches: u64,
    pub max_timestamp: i64,
}

/// The next segment to upload of `sealed` (a leader's sealed segments, in offset order):
/// the first that ends past `highest_remote` (the last offset already remote, -1 for
/// none) and below `last_stable_offset`, as Kafka's candidate rule (the active segment
/// is never sealed, so never a candidate). Copies go in order: a segment that cannot go
/// yet stops the search.
pub fn next_to_upload(sealed: &[LocalSealedSegment], highest_remote: i64, last_stable_offset: i64) -> Option<&LocalSealedSegment> {
    let next = sealed.iter().find(|s| s.end_offset > highest_remote)?;
    (next.end_offset < last_stable_offset).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: i64, end: i64) -> LocalSealedSegment {
        LocalSealedSegment {
            start_offset: start,
            end_offset: end,
            log_path: PathBuf::new(),
            producer_snapshot: None,
            leader_epochs: vec![(0, 0), (2, 50), (5, 120)],
            file_bytes: 0,
            aborted_transactions: Vec::new(),
        }
    }

    #[test]
    fn uploads_in_order_past_what_is_remote_and_below_the_last_stable_offset() {
        let sealed = [seg(0, 99), seg(100, 199), seg(200, 299)];
        assert_eq!(next_to_upload(&sealed, -1, 1_000).map(|s| s.start_offset), Some(0));
        assert_eq!(next_to_upload(&sealed, 99, 1_000).map(|s| s.start_offset), Some(100));
        // A new leader whose segments are cut elsewhere: the one holding the next offset.
        assert_eq!(next_to_upload(&sealed, 150, 1_000).map(|s| s.start_offset), Some(100));
        assert_eq!(next_to_upload(&sealed, 299, 1_000), None);
        // An open transaction (or the high watermark) inside the segment holds it back.
        assert_eq!(next_to_upload(&sealed, 99, 199), None);
        assert_eq!(next_to_upload(&sealed, 99, 200).map(|s| s.start_offset), Some(100));
    }

    #[test]
    fn segment_epochs_are_those_that_wrote_it() {
        assert_eq!(seg(0, 99).segment_leader_epochs(), vec![(0, 0), (2, 50)]);
        assert_eq!(seg(100, 199).segment_leader_epochs(), vec![(2, 100), (5, 120)]);
        assert_eq!(seg(200, 299).segment_leader_epochs(), vec![(5, 200)]);
    }
}
