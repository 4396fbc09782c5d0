use crate::partition::producer_state::SequenceError;
use crate::record::BatchError;
use crate::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("invalid record batch: {0}")]
    Batch(#[from] BatchError),
    #[error("{0}")]
    Sequence(#[from] SequenceError),
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    #[error("partition is being deleted or moved")]
    NotLeader,
    /// The partition has no leader (its replicas' brokers are fenced).
    #[error("partition has no leader")]
    LeaderNotAvailable,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("timestamp {0} is invalid")]
    InvalidTimestamp(i64),
    #[error("invalid fetch size {0}: a read limit must not be negative")]
    InvalidFetchSize(i64),
}
