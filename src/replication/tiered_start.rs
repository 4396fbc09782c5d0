//! Kafka's "fetch from tiered offset" (KIP-405, ReplicaFetcherTierStateMachine): a
//! follower (or a new replica on a replacement broker) whose fetch is below its leader's
//! local log start, inside the remote log, gets OFFSET_MOVED_TO_TIERED_STORAGE. It does
//! not copy that history: it restarts its log at the end of the remote log (KIP-1023's
//! last tiered offset, which the replicated metadata on this broker names) with the state
//! the remote log had there — the leader epochs and the producer snapshot stored in the
//! last remote segment's `.indexes` object — and fetches the rest from the leader.
use std::path::Path;

use crate::partition::producer_state::{SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use crate::remote::object_keys::partition_prefix;
use crate::remote::segment_metadata::{PartitionRemoteLog, RemoteLogSegmentMetadata};
use crate::remote::store::RemoteStore;
use crate::storage::dma::parse_checked_file;
use crate::storage::leader_epoch_cache::EpochEntry;

/// Where and with what state a follower's log restarts.
#[derive(Debug)]
pub struct TieredStart {
    /// The first offset not in remote storage: the log starts (empty) there.
    pub offset: i64,
    /// The remote log's leader epochs up to `offset`.
    pub epochs: Vec<EpochEntry>,
    /// The producer snapshot's payload as of `offset` (empty: none was uploaded).
    pub producer_snapshot: Vec<u8>,
}

/// The remote segment a follower asking from `fetch_offset` restarts after: the last
/// readable one, when it ends at or past `fetch_offset` (otherwise this broker's metadata
/// is behind the leader's, which has already deleted what lies below its local start:
/// the follower waits for the metadata).
pub fn last_tiered_segment(remote: &PartitionRemoteLog, fetch_offset: i64) -> Option<&RemoteLogSegmentMetadata> {
    remote.finished().filter(|s| s.end_offset >= remote.log_start_offset()).max_by_key(|s| s.end_offset).filter(|s| s.end_offset >= fetch_offset)
}

/// The epochs an `.indexes` object carries, checked as the leader-epoch cache requires
/// (epochs and start offsets strictly rising, all below `offset`): what came over the
/// network is not trusted into an invariant.
pub fn remote_epochs(entries: &[(i32, i64)], offset: i64) -> Result<Vec<EpochEntry>, String> {
    let out: Vec<EpochEntry> = entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect();
    let rising = out.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
    let in_range = out.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0 && e.start_offset < offset);
    if rising && in_range {
        Ok(out)
    } else {
        Err(format!("the remote leader epochs {entries:?} are not rising offsets below {offset}"))
    }
}

/// The state to restart `partition`'s log with, read from the remote store.
pub async fn tiered_start(
    store: &RemoteStore,
    remote: &PartitionRemoteLog,
    topic: &str,
    topic_id: &[u8; 16],
    partition: i32,
    fetch_offset: i64,
) -> Result<Option<TieredStart>, String> {
    let Some(segment) = last_tiered_segment(remote, fetch_offset) else { return Ok(None) };
    let prefix = partition_prefix(&store.settings.key_prefix, topic, topic_id, partition);
    let indexes = store.read_indexes(prefix, segment.start_offset, segment.segment_id).await.map_err(|e| e.to_string())?;
    let offset = segment.end_offset + 1;
    let epochs = remote_epochs(&indexes.leader_epochs, offset)?;
    let producer_snapshot = if indexes.producer_snapshot.is_empty() {
        Vec::new()
    } else {
        // The uploaded bytes are the local `.snapshot` file: header, payload, padding.
        let what = format!("{topic}-{partition} remote producer snapshot at {offset}");
        parse_checked_file(Path::new(&what), &indexes.producer_snapshot, SNAPSHOT_MAGIC, SNAPSHOT_VERSION).map_err(|e| e.to_string())?
    };
    Ok(Some(TieredStart { offset, epochs, producer_snapshot }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::segment_metadata::{sample_segment, RemoteSegmentState};

    fn segment(start: i64, end: i64, state: RemoteSegmentState) -> RemoteLogSegmentMetadata {
        sample_segment(start as u8, start, end, state)
    }

    #[test]
    fn restarts_after_the_last_finished_segment_when_it_covers_the_fetch() {
        use RemoteSegmentState::*;
        let log = PartitionRemoteLog::restore(vec![
            segment(0, 99, CopySegmentFinished),
            segment(100, 199, CopySegmentFinished),
            segment(200, 299, CopySegmentStarted),
        ])
        .expect("a valid remote log");
        assert_eq!(last_tiered_segment(&log, 0).map(|s| s.end_offset), Some(199), "a started copy is not readable");
        assert_eq!(last_tiered_segment(&log, 199).map(|s| s.end_offset), Some(199));
        assert!(last_tiered_segment(&log, 200).is_none(), "the leader knows more than this broker's metadata yet");
        assert!(last_tiered_segment(&PartitionRemoteLog::default(), 0).is_none());
    }

    #[test]
    fn remote_epochs_must_rise_below_the_restart_offset() {
        assert_eq!(remote_epochs(&[(0, 0), (3, 50)], 100).expect("valid").len(), 2);
        assert!(remote_epochs(&[], 100).expect("none is valid").is_empty());
        assert!(remote_epochs(&[(3, 0), (2, 50)], 100).is_err(), "falling epochs");
        assert!(remote_epochs(&[(0, 50), (1, 50)], 100).is_err(), "repeated start offset");
        assert!(remote_epochs(&[(0, 0), (1, 100)], 100).is_err(), "an epoch starting at the restart offset");
        assert!(remote_epochs(&[(-1, 0)], 100).is_err(), "a negative epoch");
    }
}
