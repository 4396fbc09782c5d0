//! What tiered storage asks of a leader partition: its sealed segments ready for upload
//! and the offsets that bound them (`remote::upload::next_to_upload` picks one).
use super::state::Partition;
use crate::remote::remote_indexes::RemoteAbortedTxn;
use crate::remote::upload::LocalSealedSegment;
use crate::storage::segment::{log_file_name, snapshot_path};

impl Partition {
    /// The sealed, synced segments with saved indexes, with the leader epochs up to each
    /// one's end. Only a leader uploads; a follower gets none.
    pub fn sealed_segments_for_upload(&self) -> Vec<LocalSealedSegment> {
        if !self.is_leader() {
            return Vec::new();
        }
        let log = self.log.borrow();
        let dir = log.dir().to_path_buf();
        let epochs = self.epochs.borrow();
        let producers = self.producers.borrow();
        log.sealed_and_saved()
            .into_iter()
            .filter(|&(base, next, _)| next > base && next > log.log_start_offset())
            .map(|(base, next, size)| LocalSealedSegment {
                start_offset: base,
                end_offset: next - 1,
                log_path: dir.join(log_file_name(base)),
                producer_snapshot: Some(snapshot_path(&dir, next)),
                leader_epochs: epochs.entries().iter().filter(|e| e.start_offset < next).map(|e| (e.epoch, e.start_offset)).collect(),
                file_bytes: size,
                // Every transaction of a segment below the last stable offset is decided,
                // and aborted ones are kept until the local log start passes them.
                aborted_transactions: producers
                    .aborted_between(base, next)
                    .into_iter()
                    .map(|a| RemoteAbortedTxn { producer_id: a.producer_id, first_offset: a.first_offset, last_offset: a.last_offset })
                    .collect(),
            })
            .collect()
    }

    /// Bytes of the local segments holding offsets above `offset` (Kafka's
    /// onlyLocalLogSegmentsSize when `offset` is the last one in remote storage).
    pub fn local_bytes_above(&self, offset: i64) -> u64 {
        self.log.borrow().bytes_above(offset)
    }

    /// Tiered storage uploads this log (`PartitionSettings::tiered`).
    pub fn is_tiered(&self) -> bool {
        self.settings.borrow().tiered
    }
}
