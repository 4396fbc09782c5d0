//! Which remote segments a leader deletes (Kafka's RLMExpirationTask), decided from the
//! partition's remote log alone (pure: the task in `server/shard` carries it out):
//! - a copy that never finished (CopySegmentStarted while no upload of this leader runs:
//!   a failed attempt, or a leader that died mid-upload) and a deletion that never
//!   finished (DeleteSegmentStarted): their objects go again;
//! - finished segments wholly below the log start offset (DeleteRecords);
//! - the oldest finished segments past retention.ms (by their largest timestamp) or
//!   while the whole log (remote plus what only the local log has) exceeds
//!   retention.bytes, oldest first, stopping at the first segment retention keeps;
//! - all of them when remote storage is turned off with remote.log.delete.on.disable.
use super::segment_metadata::{PartitionRemoteLog, RemoteLogSegmentMetadata, RemoteSegmentState};

/// What to delete, and the log start offset the retention part moves to (set before the
/// segments go, so no reader is sent to a segment being deleted).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expiration {
    pub segments: Vec<RemoteLogSegmentMetadata>,
    pub new_log_start: Option<i64>,
}

/// `local_only_bytes`: bytes of the local segments above the last remote offset;
/// `retention_ms` / `retention_bytes`: the topic's totals (-1: unlimited).
pub fn expire(log: &PartitionRemoteLog, now_ms: i64, retention_ms: i64, retention_bytes: i64, local_only_bytes: u64) -> Expiration {
    let mut out = Expiration::default();
    let mut breach = if retention_bytes >= 0 {
        let total = local_only_bytes.saturating_add(log.size_bytes());
        total.saturating_sub(retention_bytes as u64)
    } else {
        0
    };
    let mut retaining = false;
    for s in log.segments() {
        match s.state {
            RemoteSegmentState::CopySegmentStarted | RemoteSegmentState::DeleteSegmentStarted => out.segments.push(s.clone()),
            RemoteSegmentState::DeleteSegmentFinished => {}
            RemoteSegmentState::CopySegmentFinished => {
                if s.end_offset < log.log_start_offset() {
                    out.segments.push(s.clone());
                    continue;
                }
                if retaining {
                    continue;
                }
                let by_time = retention_ms >= 0 && s.max_timestamp_ms >= 0 && s.max_timestamp_ms < now_ms.saturating_sub(retention_ms);
                let by_size = breach > 0 && breach >= s.size_bytes;
                if by_time || by_size {
                    breach = breach.saturating_sub(s.size_bytes);
                    out.new_log_start = Some(out.new_log_start.unwrap_or(0).max(s.end_offset + 1));
                    out.segments.push(s.clone());
                } else {
                    retaining = true;
                }
            }
        }
    }
    out
}

/// Remote storage turned off with remote.log.delete.on.disable (KIP-950): every segment
/// goes, and the log starts where the local log does (`local_log_start`), once anything
/// readable was remote.
pub fn expire_all(log: &PartitionRemoteLog, local_log_start: i64) -> Expiration {
    let segments: Vec<RemoteLogSegmentMetadata> = log.segments().iter().filter(|s| s.state != RemoteSegmentState::DeleteSegmentFinished).cloned().collect();
    let readable = log.start_offset().is_some();
    Expiration { segments, new_log_start: readable.then_some(local_log_start) }
}

#[cfg(test)]
mod tests {
    use super::RemoteSegmentState::*;
    use super::*;

    fn log(segments: &[(u8, i64, i64, i64, RemoteSegmentState)]) -> PartitionRemoteLog {
        let mut log = PartitionRemoteLog::default();
        for &(id, start, end, ts, state) in segments {
            let mut s = RemoteLogSegmentMetadata {
                segment_id: [id; 16],
                start_offset: start,
                end_offset: end,
                max_timestamp_ms: ts,
                broker_id: 1,
                event_timestamp_ms: 0,
                leader_epochs: vec![(0, start)],
                size_bytes: 100,
                state: CopySegmentStarted,
            };
            log.apply(&s).unwrap();
            if state != CopySegmentStarted {
                s.state = CopySegmentFinished;
                log.apply(&s).unwrap();
            }
            if state == DeleteSegmentStarted {
                s.state = state;
                log.apply(&s).unwrap();
            }
        }
        log
    }

    fn ids(e: &Expiration) -> Vec<u8> {
        e.segments.iter().map(|s| s.segment_id[0]).collect()
    }

    #[test]
    fn unfinished_copies_and_deletions_always_go() {
        let l = log(&[(1, 0, 9, 50, CopySegmentFinished), (2, 10, 19, 60, CopySegmentStarted), (3, 10, 19, 60, DeleteSegmentStarted)]);
        let e = expire(&l, 100, -1, -1, 0);
        assert_eq!((ids(&e), e.new_log_start), (vec![2, 3], None));
    }

    #[test]
    fn time_and_size_retention_delete_the_oldest_first_and_move_the_log_start() {
        let l = log(&[(1, 0, 9, 10, CopySegmentFinished), (2, 10, 19, 20, CopySegmentFinished), (3, 20, 29, 90, CopySegmentFinished)]);
        // retention.ms 50 at 100: timestamps below 50 are past it.
        let e = expire(&l, 100, 50, -1, 0);
        assert_eq!((ids(&e), e.new_log_start), (vec![1, 2], Some(20)));
        // retention.bytes 250 with 100 bytes only local: 400 in all, 150 over: one segment.
        let e = expire(&l, 100, -1, 250, 100);
        assert_eq!((ids(&e), e.new_log_start), (vec![1], Some(10)));
        // Within both: nothing.
        assert_eq!(expire(&l, 100, 1_000, 1_000, 100), Expiration::default());
    }

    #[test]
    fn turned_off_with_delete_on_disable_every_segment_goes_and_the_log_starts_locally() {
        let l = log(&[(1, 0, 9, 10, CopySegmentFinished), (2, 10, 19, 20, CopySegmentStarted), (3, 20, 29, 90, CopySegmentFinished)]);
        let e = expire_all(&l, 25);
        assert_eq!((ids(&e), e.new_log_start), (vec![1, 2, 3], Some(25)));
        let dangling = log(&[(2, 10, 19, 20, CopySegmentStarted)]);
        assert_eq!((ids(&expire_all(&dangling, 0)), expire_all(&dangling, 0).new_log_start), (vec![2], None), "nothing was readable");
        assert_eq!(expire_all(&PartitionRemoteLog::default(), 5), Expiration::default());
    }

    #[test]
    fn segments_below_the_log_start_go_and_retention_stops_at_the_first_kept_one() {
        let mut l = log(&[(1, 0, 9, 10, CopySegmentFinished), (2, 10, 19, 95, CopySegmentFinished), (3, 20, 29, 10, CopySegmentFinished)]);
        l.advance_log_start(10);
        let e = expire(&l, 100, 50, -1, 0);
        // 1 is below the log start; 2 is kept by time, so 3 (old, but after it) stays.
        assert_eq!((ids(&e), e.new_log_start), (vec![1], None));
    }
}
