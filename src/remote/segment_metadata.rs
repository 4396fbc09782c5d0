//! What the metadata log records about each remote segment: Kafka's
//! RemoteLogSegmentMetadata and its states (KIP-405). shardlog keeps these records in its
//! own metadata log (the controller quorum) instead of `__remote_log_metadata`, so every
//! broker's image has each partition's remote log, replicated and durable.
use serde::{Deserialize, Serialize};

/// Kafka's RemoteLogSegmentState, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RemoteSegmentState {
    /// The leader started uploading it: not readable (an upload that never finishes leaves
    /// it "dangling"; the expiration pass deletes it).
    CopySegmentStarted,
    /// Every object of the segment is in the store: readable.
    CopySegmentFinished,
    /// Its objects are being deleted: not readable any more.
    DeleteSegmentStarted,
    /// Its objects are gone: the record leaves the image.
    DeleteSegmentFinished,
}

impl RemoteSegmentState {
    /// Kafka's `RemoteLogSegmentState.isValidTransition`: forward along copy → delete, a
    /// started copy may be deleted without finishing, and a state may repeat (a retry).
    pub fn can_become(self, next: RemoteSegmentState) -> bool {
        use RemoteSegmentState::*;
        self == next
            || matches!(
                (self, next),
                (CopySegmentStarted, CopySegmentFinished)
                    | (CopySegmentStarted, DeleteSegmentStarted)
                    | (CopySegmentFinished, DeleteSegmentStarted)
                    | (DeleteSegmentStarted, DeleteSegmentFinished)
            )
    }
}

/// One remote segment (Kafka's RemoteLogSegmentMetadata). Offsets are inclusive; a segment
/// holds every offset of `[start_offset, end_offset]` that the local segment held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLogSegmentMetadata {
    /// New for every upload attempt (a retry never reuses one), so a dangling attempt's
    /// objects are told apart from the finished attempt's.
    pub segment_id: [u8; 16],
    pub start_offset: i64,
    pub end_offset: i64,
    pub max_timestamp_ms: i64,
    /// The broker that uploaded it (led the partition then).
    pub broker_id: i32,
    /// When the record was made (the proposing broker's clock).
    pub event_timestamp_ms: i64,
    /// (leader epoch, first offset of that epoch in the segment), ascending: which
    /// leaders wrote the segment's batches (KIP-405's segmentLeaderEpochs).
    pub leader_epochs: Vec<(i32, i64)>,
    /// Bytes of the segment's log object (its batches, without the local file's padding).
    pub size_bytes: u64,
    pub state: RemoteSegmentState,
}

impl RemoteLogSegmentMetadata {
    /// The record's own consistency (Kafka's constructor checks): offsets in order, leader
    /// epochs non-empty, ascending, inside the segment.
    pub fn check(&self) -> Result<(), String> {
        if self.start_offset < 0 {
            return Err(format!("Unexpected start offset = {}. StartOffset for a remote segment cannot be negative", self.start_offset));
        }
        if self.end_offset < self.start_offset {
            return Err(format!("end offset {} below start offset {}", self.end_offset, self.start_offset));
        }
        if self.leader_epochs.is_empty() {
            return Err("segmentLeaderEpochs can not be null or empty".into());
        }
        let in_order = self.leader_epochs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
        let inside = self.leader_epochs.iter().all(|&(_, o)| o <= self.end_offset);
        if !in_order || !inside {
            return Err(format!("leader epochs {:?} out of order or outside [{}, {}]", self.leader_epochs, self.start_offset, self.end_offset));
        }
        Ok(())
    }
}

/// One partition's remote log as the metadata log built it: every segment not yet wholly
/// deleted, sorted by (start offset, id). A retried upload can leave two records with the
/// same start offset (the dangling one and the finished one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRemoteLog {
    segments: Vec<RemoteLogSegmentMetadata>,
    /// The partition's log start offset as DeleteRecords moved it while its history was
    /// remote (Kafka's logStartOffset below the local log start): offsets below it are
    /// gone even while a segment holding them waits for deletion. 0: never moved.
    #[serde(default)]
    log_start_offset: i64,
}

impl PartitionRemoteLog {
    /// Applies one record: a new id must start a copy; a known id moves by
    /// `RemoteSegmentState::can_become` and keeps its offsets; DeleteSegmentFinished
    /// removes the record. Deterministic (the controller applies it on every replica).
    pub fn apply(&mut self, record: &RemoteLogSegmentMetadata) -> Result<(), String> {
        self.apply_expecting(record, None)
    }

    /// `apply`, refused unless the segment is in state `expected` now (when given): a
    /// deletion decided on an older view (a copy that looked unfinished) must not delete a
    /// segment whose copy finished meanwhile.
    pub fn apply_expecting(&mut self, record: &RemoteLogSegmentMetadata, expected: Option<RemoteSegmentState>) -> Result<(), String> {
        if let Some(expected) = expected {
            let now = self.segments.iter().find(|s| s.segment_id == record.segment_id).map(|s| s.state);
            if now != Some(expected) {
                return Err(format!("remote segment is {now:?}, the record expected {expected:?}"));
            }
        }
        record.check()?;
        match self.segments.iter().position(|s| s.segment_id == record.segment_id) {
            None => {
                if record.state != RemoteSegmentState::CopySegmentStarted {
                    return Err(format!("unknown remote segment in state {:?}: a segment starts with CopySegmentStarted", record.state));
                }
                let at = self.segments.partition_point(|s| (s.start_offset, s.segment_id) < (record.start_offset, record.segment_id));
                self.segments.insert(at, record.clone());
            }
            Some(i) => {
                let known = &mut self.segments[i];
                if !known.state.can_become(record.state) {
                    return Err(format!("remote segment state {:?} cannot become {:?}", known.state, record.state));
                }
                if (known.start_offset, known.end_offset) != (record.start_offset, record.end_offset) {
                    return Err(format!(
                        "remote segment offsets changed: [{}, {}] then [{}, {}]",
                        known.start_offset, known.end_offset, record.start_offset, record.end_offset
                    ));
                }
                if record.state == RemoteSegmentState::DeleteSegmentFinished {
                    self.segments.remove(i);
                } else {
                    *known = record.clone();
                }
            }
        }
        Ok(())
    }

    /// A saved list read back (a snapshot): each record checked, sorted, ids unique, no
    /// finished deletion kept.
    pub fn restore(mut segments: Vec<RemoteLogSegmentMetadata>) -> Result<PartitionRemoteLog, String> {
        for s in &segments {
            s.check()?;
            if s.state == RemoteSegmentState::DeleteSegmentFinished {
                return Err("a deleted remote segment was kept".into());
            }
        }
        segments.sort_by_key(|s| (s.start_offset, s.segment_id));
        let mut ids: Vec<[u8; 16]> = segments.iter().map(|s| s.segment_id).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != segments.len() {
            return Err("a remote segment id appears twice".into());
        }
        Ok(PartitionRemoteLog { segments, log_start_offset: 0 })
    }

    /// DeleteRecords below the local log start: the log now starts at `offset` (never
    /// moves back).
    pub fn advance_log_start(&mut self, offset: i64) {
        self.log_start_offset = self.log_start_offset.max(offset);
    }

    /// Where the partition's log starts as far as remote storage knows (0 if never moved).
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn segments(&self) -> &[RemoteLogSegmentMetadata] {
        &self.segments
    }

    /// No segment, and no log start offset to remember.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.log_start_offset == 0
    }

    /// Readable segments (CopySegmentFinished), by start offset.
    pub fn finished(&self) -> impl Iterator<Item = &RemoteLogSegmentMetadata> {
        self.segments.iter().filter(|s| s.state == RemoteSegmentState::CopySegmentFinished)
    }

    /// The last offset in remote storage (Kafka's highestOffsetInRemoteStorage), or -1.
    pub fn highest_offset(&self) -> i64 {
        self.finished().map(|s| s.end_offset).max().unwrap_or(-1)
    }

    /// The first offset readable in remote storage, if any: the first finished
    /// segment's start, or the log start offset DeleteRecords set inside it.
    pub fn start_offset(&self) -> Option<i64> {
        let first = self.finished().filter(|s| s.end_offset >= self.log_start_offset).map(|s| s.start_offset).min()?;
        Some(first.max(self.log_start_offset))
    }

    /// The readable segment holding `offset` (none below the log start offset).
    pub fn segment_for(&self, offset: i64) -> Option<&RemoteLogSegmentMetadata> {
        if offset < self.log_start_offset {
            return None;
        }
        self.finished().find(|s| s.start_offset <= offset && offset <= s.end_offset)
    }

    /// Bytes of the readable segments (Kafka's RemoteLogSizeBytes counts the finished ones).
    pub fn size_bytes(&self) -> u64 {
        self.finished().map(|s| s.size_bytes).sum()
    }
}

/// A segment record for tests: segment id `[id; 16]`, 100 bytes, epoch 0 from its start.
#[cfg(test)]
pub(crate) fn sample_segment(id: u8, start: i64, end: i64, state: RemoteSegmentState) -> RemoteLogSegmentMetadata {
    RemoteLogSegmentMetadata {
        segment_id: [id; 16],
        start_offset: start,
        end_offset: end,
        max_timestamp_ms: 0,
        broker_id: 1,
        event_timestamp_ms: 0,
        leader_epochs: vec![(0, start)],
        size_bytes: 100,
        state,
    }
}

#[cfg(test)]
mod tests {
    use super::RemoteSegmentState::*;
    use super::*;

    use super::sample_segment as seg;

    #[test]
    fn a_segment_is_readable_only_once_its_copy_finished_and_leaves_when_deleted() {
        let mut log = PartitionRemoteLog::default();
        log.apply(&seg(1, 0, 99, CopySegmentStarted)).unwrap();
        assert_eq!((log.highest_offset(), log.segment_for(5)), (-1, None));
        log.apply(&seg(1, 0, 99, CopySegmentFinished)).unwrap();
        assert_eq!(log.highest_offset(), 99);
        assert_eq!(log.segment_for(99).map(|s| s.segment_id), Some([1; 16]));
        // A dangling attempt at the next segment, then a finished retry with another id.
        log.apply(&seg(2, 100, 199, CopySegmentStarted)).unwrap();
        log.apply(&seg(3, 100, 199, CopySegmentStarted)).unwrap();
        log.apply(&seg(3, 100, 199, CopySegmentFinished)).unwrap();
        assert_eq!((log.highest_offset(), log.size_bytes(), log.segments().len()), (199, 200, 3));
        log.apply(&seg(1, 0, 99, DeleteSegmentStarted)).unwrap();
        assert_eq!((log.start_offset(), log.segment_for(5)), (Some(100), None));
        log.apply(&seg(1, 0, 99, DeleteSegmentFinished)).unwrap();
        log.apply(&seg(2, 100, 199, DeleteSegmentStarted)).unwrap();
        log.apply(&seg(2, 100, 199, DeleteSegmentFinished)).unwrap();
        assert_eq!(log.segments().iter().map(|s| s.segment_id[0]).collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        let mut log = PartitionRemoteLog::default();
        assert!(log.apply(&seg(1, 0, 9, CopySegmentFinished)).unwrap_err().contains("starts with CopySegmentStarted"));
        log.apply(&seg(1, 0, 9, CopySegmentStarted)).unwrap();
        log.apply(&seg(1, 0, 9, CopySegmentFinished)).unwrap();
        assert!(log.apply(&seg(1, 0, 9, CopySegmentStarted)).unwrap_err().contains("cannot become"));
        assert!(log.apply(&seg(1, 0, 9, DeleteSegmentFinished)).unwrap_err().contains("cannot become"));
        assert!(log.apply(&seg(1, 0, 19, DeleteSegmentStarted)).unwrap_err().contains("offsets changed"));
        let mut bad = seg(2, 10, 5, CopySegmentStarted);
        assert!(log.apply(&bad).unwrap_err().contains("below start"));
        bad = seg(2, -1, 5, CopySegmentStarted);
        assert!(log.apply(&bad).unwrap_err().contains("cannot be negative"));
        bad = seg(2, 10, 19, CopySegmentStarted);
        bad.leader_epochs.clear();
        assert!(log.apply(&bad).unwrap_err().contains("can not be null or empty"));
        bad.leader_epochs = vec![(3, 12), (2, 15)];
        assert!(log.apply(&bad).unwrap_err().contains("out of order"));
        assert_eq!(log.segments().len(), 1, "nothing refused was kept");
        // A deletion decided while the copy looked unfinished, after it finished: refused.
        let mut del = seg(1, 0, 9, DeleteSegmentStarted);
        assert!(log.apply_expecting(&del, Some(CopySegmentStarted)).unwrap_err().contains("expected CopySegmentStarted"));
        del.state = DeleteSegmentStarted;
        log.apply_expecting(&del, Some(CopySegmentFinished)).unwrap();
    }
}
