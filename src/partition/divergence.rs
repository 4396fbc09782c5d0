//! The two halves of KIP-101/279/320 log reconciliation, as pure functions so the real
//! fetch paths and the replication simulation share them. `end_offset_for(epoch)` is a
//! log's OffsetForLeaderEpoch answer: the largest epoch <= `epoch` it holds and where that
//! epoch's writes end (`LeaderEpochCache::end_offset_for`; `(-1, -1)` when it holds none).

/// Leader side (Kafka's Partition.fetchRecords for a follower): the follower's log, whose
/// last batch has `last_fetched_epoch` and which ends at `fetch_offset`, parts from the
/// leader's where the leader's copy of that epoch ends, if the leader holds a different
/// last epoch at or below it, or ends it before `fetch_offset`. `None`: the logs agree up
/// to `fetch_offset` (or the follower's log is empty: -1), so data can be sent.
pub fn diverging_epoch(last_fetched_epoch: i32, fetch_offset: i64, end_offset_for: impl Fn(i32) -> (i32, i64)) -> Option<(i32, i64)> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end) = end_offset_for(last_fetched_epoch);
    (epoch != last_fetched_epoch || end < fetch_offset).then_some((epoch, end))
}

/// Follower side (Kafka's AbstractFetcherThread.truncateOnFetchResponse): given the
/// leader's diverging `(epoch, end_offset)`, the offset this follower cuts its log to: the
/// leader's end of that epoch, or this log's own end of it if sooner (when this log's
/// largest epoch at or below it is another one, its end is where they surely still
/// agree). Never below the log start nor above the log end.
pub fn truncation_offset(diverging: (i32, i64), own_end_offset_for: impl Fn(i32) -> (i32, i64), log_start: i64, log_end: i64) -> i64 {
    let (leader_epoch, leader_end) = diverging;
    let (own_epoch, own_end) = own_end_offset_for(leader_epoch);
    let to = if leader_epoch < 0 || own_epoch < 0 {
        // The leader holds no epoch at or below ours, or we none at or below its: nothing
        // is known to agree.
        log_start
    } else {
        // Same epoch: the shorter copy. Our largest epoch below the leader's: it ends
        // where our log moved on to an epoch the leader does not have.
        leader_end.min(own_end)
    };
    to.clamp(log_start, log_end.max(log_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (epoch, start offset) entries and a log end: `end_offset_for` as the cache answers.
    fn log(entries: &[(i32, i64)], log_end: i64) -> impl Fn(i32) -> (i32, i64) + '_ {
        move |requested| {
            let mut found: Option<usize> = None;
            for (i, (e, _)) in entries.iter().enumerate() {
                if *e <= requested {
                    found = Some(i);
                }
            }
            match found {
                None => (-1, -1),
                Some(i) => (entries[i].0, entries.get(i + 1).map_or(log_end, |n| n.1)),
            }
        }
    }

    #[test]
    fn agreeing_logs_do_not_diverge() {
        let leader = log(&[(0, 0), (2, 10)], 20);
        assert_eq!(diverging_epoch(2, 15, &leader), None);
        assert_eq!(diverging_epoch(0, 10, &leader), None, "epoch 0 ends at 10, the follower is at 10");
        assert_eq!(diverging_epoch(-1, 0, &leader), None, "an empty follower");
    }

    #[test]
    fn a_deposed_leaders_tail_is_cut_where_the_new_leader_moved_on() {
        // The old leader wrote epoch 1 up to 14; the new leader (epoch 2) has epoch 1 up
        // to 10 only, then its own from 10.
        let new_leader = log(&[(0, 0), (1, 5), (2, 10)], 30);
        let old = log(&[(0, 0), (1, 5)], 14);
        let d = diverging_epoch(1, 14, &new_leader).expect("diverges");
        assert_eq!(d, (1, 10));
        assert_eq!(truncation_offset(d, &old, 0, 14), 10);
    }

    #[test]
    fn an_epoch_the_leader_never_had_cuts_to_the_end_of_the_one_below() {
        // The follower has epoch 3 (from a leader that lost everything it wrote); the
        // leader's largest epoch at or below 3 is 2, ending at 12.
        let leader = log(&[(0, 0), (2, 8)], 12);
        let follower = log(&[(0, 0), (2, 8), (3, 11)], 17);
        let d = diverging_epoch(3, 17, &leader).expect("diverges");
        assert_eq!(d, (2, 12));
        assert_eq!(truncation_offset(d, &follower, 0, 17), 11, "our epoch 2 ends at 11, before the leader's end");
    }

    #[test]
    fn the_cut_stays_inside_the_log() {
        let follower = log(&[(5, 100)], 120);
        assert_eq!(truncation_offset((-1, -1), &follower, 100, 120), 100);
        assert_eq!(truncation_offset((7, 500), &follower, 100, 120), 120);
    }
}
