//! Every partition's remote log (tiered storage, KIP-405) as the metadata log built it:
//! the image's share of Kafka's `__remote_log_metadata`. Each partition's list sits behind
//! an `Arc`, so the controller's copy of the image per committed record copies pointers,
//! and a record copies only its own partition's list.
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::remote::segment_metadata::{PartitionRemoteLog, RemoteLogSegmentMetadata, RemoteSegmentState};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteLogImage {
    /// (topic id, partition) -> its remote segments; a partition with none has no entry.
    partitions: BTreeMap<([u8; 16], i32), Arc<PartitionRemoteLog>>,
}

impl RemoteLogImage {
    pub fn partition(&self, topic_id: &[u8; 16], partition: i32) -> Option<&PartitionRemoteLog> {
        self.partitions.get(&(*topic_id, partition)).map(|p| &**p)
    }

    /// The last offset of `partition` in remote storage, or -1.
    pub fn highest_offset(&self, topic_id: &[u8; 16], partition: i32) -> i64 {
        self.partition(topic_id, partition).map_or(-1, PartitionRemoteLog::highest_offset)
    }

    /// Applies one segment record (see `PartitionRemoteLog::apply`).
    pub fn apply(&mut self, topic_id: &[u8; 16], partition: i32, record: &RemoteLogSegmentMetadata) -> Result<(), String> {
        self.apply_expecting(topic_id, partition, record, None)
    }

    /// `apply` that requires the segment's current state (`PartitionRemoteLog::apply_expecting`).
    pub fn apply_expecting(
        &mut self,
        topic_id: &[u8; 16],
        partition: i32,
        record: &RemoteLogSegmentMetadata,
        expected: Option<RemoteSegmentState>,
    ) -> Result<(), String> {
        let entry = self.partitions.entry((*topic_id, partition)).or_default();
        let mut updated = (**entry).clone();
        let applied = updated.apply_expecting(record, expected);
        if let Err(e) = applied {
            if entry.is_empty() {
                self.partitions.remove(&(*topic_id, partition));
            }
            return Err(e);
        }
        if updated.is_empty() {
            self.partitions.remove(&(*topic_id, partition));
        } else {
            *entry = Arc::new(updated);
        }
        Ok(())
    }

    /// DeleteRecords moved the partition's log start offset to `offset` (see
    /// `PartitionRemoteLog::advance_log_start`).
    pub fn advance_log_start(&mut self, topic_id: &[u8; 16], partition: i32, offset: i64) {
        let entry = self.partitions.entry((*topic_id, partition)).or_default();
        let mut updated = (**entry).clone();
        updated.advance_log_start(offset);
        *entry = Arc::new(updated);
    }

    /// Puts back a partition's saved remote log (a snapshot).
    pub fn restore(&mut self, topic_id: &[u8; 16], partition: i32, log: PartitionRemoteLog) {
        if !log.is_empty() {
            self.partitions.insert((*topic_id, partition), Arc::new(log));
        }
    }

    /// Forgets a deleted topic's remote segments.
    pub fn remove_topic(&mut self, topic_id: &[u8; 16]) {
        self.partitions.retain(|(t, _), _| t != topic_id);
    }

    /// Every partition with remote segments (snapshots).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8; 16], i32, &PartitionRemoteLog)> {
        self.partitions.iter().map(|((t, p), log)| (t, *p, &**log))
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// Every partition's remote log in figures, by topic name (`topic_names` maps a topic
    /// id to its name; a topic being deleted is left out): the admin listener's
    /// `/v1/remote-log`, which `shardlog topic describe --admin` shows.
    pub fn summaries(&self, topic_names: &std::collections::HashMap<[u8; 16], &str>) -> Vec<RemoteLogSummary> {
        self.iter()
            .filter_map(|(topic_id, partition, log)| {
                Some(RemoteLogSummary {
                    topic: topic_names.get(topic_id)?.to_string(),
                    partition,
                    start_offset: log.start_offset().unwrap_or(-1),
                    highest_offset: log.highest_offset(),
                    size_bytes: log.size_bytes(),
                    segments: log.finished().count(),
                })
            })
            .collect()
    }
}

/// One partition's remote log in figures (readable segments only).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteLogSummary {
    pub topic: String,
    pub partition: i32,
    /// The first offset readable remotely (-1: none).
    pub start_offset: i64,
    /// The last offset in remote storage (-1: none).
    pub highest_offset: i64,
    pub size_bytes: u64,
    pub segments: usize,
}
