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
    /// acks=all with fewer in-sync replicas than min.insync.replicas: nothing appended.
    #[error("the in-sync replicas ({isr}) are fewer than min.insync.replicas ({min_insync})")]
    NotEnoughReplicas { isr: usize, min_insync: i32 },
    /// acks=all: appended and replicated to the ISR, but the ISR shrank below
    /// min.insync.replicas meanwhile (the producer may retry; a duplicate is detected).
    #[error("appended, but the in-sync replicas ({isr}) are now fewer than min.insync.replicas ({min_insync})")]
    NotEnoughReplicasAfterAppend { isr: usize, min_insync: i32 },
    /// A follower append whose batches do not start at (or continue densely from) the
    /// follower's log end (internal: the fetcher restarts from its log end offset).
    #[error("follower append at offset {got}, expected {expected}")]
    OffsetMismatch { expected: i64, got: i64 },
    /// A follower-only operation (append_as_follower) on a leader, or a replica fetch
    /// path reached a partition that is not following (internal).
    #[error("partition is not a follower")]
    NotFollower,
    /// acks=all: the in-sync replicas did not all have the batch within the request's
    /// timeout (the batch stays appended, unacknowledged).
    #[error("not replicated to every in-sync replica within {timeout_ms} ms")]
    RequestTimedOut { timeout_ms: u64 },
    /// The request's leader epoch is older than this replica's (Kafka's FENCED_LEADER_EPOCH).
    #[error("leader epoch {request} is older than the current {current}")]
    FencedLeaderEpoch { request: i32, current: i32 },
    /// KIP-890 part 1: the first transactional batch of a producer's transaction here must
    /// be verified with its transaction coordinator first; the caller verifies and
    /// appends again with `guard` (cleared by a marker meanwhile: then verified again).
    #[error("the transaction of producer {producer_id} must be verified before its first write here")]
    TxnVerificationNeeded { producer_id: i64, guard: u64 },
    /// KIP-890: verified, but a batch of the same transaction with a lower sequence is
    /// still being verified; it must be appended first (Kafka answers
    /// OUT_OF_ORDER_SEQUENCE_NUMBER, which the client retries).
    #[error("sequence {first_seq} waits for the transaction's first write (sequence {lowest}) here")]
    TxnEarlierWritePending { first_seq: i32, lowest: i32 },
    /// KIP-890: the transaction coordinator refused this partition's first write of the
    /// transaction (not in the transaction, or another producer's batch in the request).
    #[error("the partition is not in the producer's open transaction")]
    TxnNotVerifiable,
    /// KIP-890: the transaction coordinator could not verify the write yet (busy ending
    /// the previous transaction, moving, or unreachable); the producer retries.
    #[error("the transaction coordinator could not verify the write yet ({0}): retry")]
    TxnVerificationPending(&'static str),
    /// The request's leader epoch is newer than this replica knows (UNKNOWN_LEADER_EPOCH).
    #[error("leader epoch {request} is newer than the current {current}")]
    UnknownLeaderEpoch { request: i32, current: i32 },
}
