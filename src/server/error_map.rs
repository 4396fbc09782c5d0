//! Internal errors → Kafka error codes: the one place that decides which code a client
//! sees for a record-batch, storage, partition or controller error (Kafka 4.1's choices).
//! Lower layers raise their own `thiserror` enums and know no Kafka codes.
use crate::controller::{AlterPartitionError, ControllerError, ElectionError, MembershipError, ReassignmentError};
use crate::partition::producer_state::SequenceError;
use crate::partition::PartitionError;
use crate::protocol::{ErrorCode, FetchWriteError};
use crate::record::BatchError;
use crate::storage::StorageError;

impl From<&StorageError> for ErrorCode {
    fn from(e: &StorageError) -> ErrorCode {
        match e {
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            // A failed fdatasync took the log offline (Kafka marks the log dir offline and
            // answers KAFKA_STORAGE_ERROR for its partitions until a restart).
            StorageError::Offline { .. } => ErrorCode::KAFKA_STORAGE_ERROR,
            // Disk full, I/O errors, corrupt files: the log directory cannot serve this.
            _ => ErrorCode::KAFKA_STORAGE_ERROR,
        }
    }
}

impl From<&PartitionError> for ErrorCode {
    fn from(e: &PartitionError) -> ErrorCode {
        match e {
            PartitionError::Batch(b) => ErrorCode::from(b),
            PartitionError::Sequence(SequenceError::OutOfOrder { .. }) => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            PartitionError::Sequence(SequenceError::InvalidProducerEpoch { .. }) => ErrorCode::INVALID_PRODUCER_EPOCH,
            // Kafka: "Expected transactional write from producer ..." (InvalidTxnStateException).
            PartitionError::Sequence(SequenceError::NonTransactionalWriteInTransaction { .. }) => ErrorCode::INVALID_TXN_STATE,
            PartitionError::Sequence(SequenceError::CoordinatorFenced { .. }) => ErrorCode::TRANSACTION_COORDINATOR_FENCED,
            PartitionError::Storage(s) => ErrorCode::from(s),
            PartitionError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            PartitionError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER,
            PartitionError::LeaderNotAvailable => ErrorCode::LEADER_NOT_AVAILABLE,
            PartitionError::UnknownTopicOrPartition => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            PartitionError::InvalidTimestamp(_) => ErrorCode::INVALID_REQUEST,
            // Kafka's LogSegment.read throws IllegalArgumentException for a negative size,
            // which its fetch path answers with UNKNOWN_SERVER_ERROR for that partition.
            PartitionError::InvalidFetchSize(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
            // acks=all with fewer in-sync replicas than min.insync.replicas: before the
            // append (nothing written), or after it (written, not acknowledged).
            PartitionError::NotEnoughReplicas { .. } => ErrorCode::NOT_ENOUGH_REPLICAS,
            PartitionError::NotEnoughReplicasAfterAppend { .. } => ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            PartitionError::FencedLeaderEpoch { .. } => ErrorCode::FENCED_LEADER_EPOCH,
            PartitionError::UnknownLeaderEpoch { .. } => ErrorCode::UNKNOWN_LEADER_EPOCH,
            // Internal to replication (the fetcher handles them); never a client's answer.
            PartitionError::NotFollower => ErrorCode::NOT_LEADER_OR_FOLLOWER,
            PartitionError::OffsetMismatch { .. } => ErrorCode::UNKNOWN_SERVER_ERROR,
            PartitionError::RequestTimedOut { .. } => ErrorCode::REQUEST_TIMED_OUT,
            // Internal to the produce handler (it verifies and retries); if it ever
            // reached a client, the write was not verified.
            PartitionError::TxnVerificationNeeded { .. } | PartitionError::TxnNotVerifiable => ErrorCode::INVALID_TXN_STATE,
            // Retriable for producers, as Kafka's ReplicaManager answers a verification
            // the coordinator could not give yet.
            PartitionError::TxnVerificationPending(_) => ErrorCode::NOT_ENOUGH_REPLICAS,
            PartitionError::TxnEarlierWritePending { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        }
    }
}

/// A Fetch response too large to frame: each partition is answered with this code and
/// no records (Kafka has no such case; its responses are bounded the same way).
impl From<&FetchWriteError> for ErrorCode {
    fn from(_: &FetchWriteError) -> ErrorCode {
        ErrorCode::UNKNOWN_SERVER_ERROR
    }
}

impl From<&ControllerError> for ErrorCode {
    fn from(e: &ControllerError) -> ErrorCode {
        match e {
            ControllerError::TopicAlreadyExists(_) => ErrorCode::TOPIC_ALREADY_EXISTS,
            ControllerError::UnknownTopic(_) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            ControllerError::InvalidTopic(_) => ErrorCode::INVALID_TOPIC_EXCEPTION,
            ControllerError::InvalidPartitions(_) => ErrorCode::INVALID_PARTITIONS,
            ControllerError::InvalidReplicationFactor(_) => ErrorCode::INVALID_REPLICATION_FACTOR,
            ControllerError::InvalidReplicaAssignment(_) => ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            ControllerError::InvalidConfig(_) => ErrorCode::INVALID_CONFIG,
            ControllerError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            ControllerError::NotController(_) => ErrorCode::NOT_CONTROLLER,
            ControllerError::Storage(_) | ControllerError::Config(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
            ControllerError::AlterPartition(e) => ErrorCode::from(e),
            ControllerError::Reassignment(e) => ErrorCode::from(e),
            ControllerError::InvalidUpdateVersion(_) => ErrorCode::from(kafka_protocol::ResponseError::InvalidUpdateVersion),
            ControllerError::Membership(e, _) => match e {
                MembershipError::DuplicateVoter => ErrorCode::from(kafka_protocol::ResponseError::DuplicateVoter),
                MembershipError::VoterNotFound => ErrorCode::from(kafka_protocol::ResponseError::VoterNotFound),
                MembershipError::UnsupportedVersion => ErrorCode::UNSUPPORTED_VERSION,
                MembershipError::RequestTimedOut => ErrorCode::REQUEST_TIMED_OUT,
            },
            ControllerError::BrokerIdNotRegistered(_) => ErrorCode::from(kafka_protocol::ResponseError::BrokerIdNotRegistered),
        }
    }
}

impl From<&ReassignmentError> for ErrorCode {
    fn from(e: &ReassignmentError) -> ErrorCode {
        match e {
            ReassignmentError::UnknownTopicOrPartition(_) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            ReassignmentError::InvalidReplicaAssignment(_) => ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            ReassignmentError::InvalidReplicationFactor(_) => ErrorCode::INVALID_REPLICATION_FACTOR,
            ReassignmentError::NoReassignmentInProgress => ErrorCode::NO_REASSIGNMENT_IN_PROGRESS,
        }
    }
}

impl From<&AlterPartitionError> for ErrorCode {
    fn from(e: &AlterPartitionError) -> ErrorCode {
        use kafka_protocol::ResponseError;
        match e {
            AlterPartitionError::UnknownTopicOrPartition => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            AlterPartitionError::FencedLeaderEpoch => ErrorCode::FENCED_LEADER_EPOCH,
            AlterPartitionError::InvalidUpdateVersion => ErrorCode::from(ResponseError::InvalidUpdateVersion),
            AlterPartitionError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            AlterPartitionError::IneligibleReplica => ErrorCode::from(ResponseError::IneligibleReplica),
        }
    }
}

impl From<&ElectionError> for ErrorCode {
    fn from(e: &ElectionError) -> ErrorCode {
        match e {
            ElectionError::NotNeeded => ErrorCode::ELECTION_NOT_NEEDED,
            ElectionError::PreferredLeaderNotAvailable => ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE,
            ElectionError::EligibleLeadersNotAvailable => ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE,
            ElectionError::UnknownTopicOrPartition => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        }
    }
}

/// What a Produce partition answers when its records fail validation. These follow
/// Kafka 4.1 (`ProduceRequest.validateRecords`, `UnifiedLog.analyzeAndValidateRecords`,
/// `LogValidator.validateBatch`) for a client append with Produce v3+:
/// - framing damage and CRC mismatch -> CORRUPT_MESSAGE (CorruptRecordException);
/// - a batch bigger than max.message.bytes -> MESSAGE_TOO_LARGE (RecordTooLargeException);
/// - magic != 2, no batch / more than one batch, bad counts or offset ranges, control
///   batches, non-zero base offset, negative sequence with a producer id -> INVALID_RECORD
///   (InvalidRecordException). Kafka 4.x answers INVALID_RECORD rather than
///   UNSUPPORTED_FOR_MESSAGE_FORMAT for old magic because v0-2 produce is rejected first.
/// - records that disagree with the header or do not parse (count mismatch: "premature
///   EOF" / "records still remaining", record lengths, headers), offset deltas other than
///   0..n-1 -> INVALID_RECORD (InvalidRecordException from Kafka's batch iterator; Kafka
///   rewrites a compressed batch with wrong inner offsets, shardlog stores batches as sent
///   and refuses it instead);
/// - compressed bytes that do not decompress -> CORRUPT_MESSAGE (Kafka answers
///   UNKNOWN_SERVER_ERROR from a KafkaException there; the batch is damaged, so we say so);
/// - records expanding past MAX_DECOMPRESSED_BYTES -> MESSAGE_TOO_LARGE (Kafka has no such
///   limit; this is the code on which the Java producer splits a batch and retries);
/// - zstd on Produce < v7 -> UNSUPPORTED_COMPRESSION_TYPE.
/// - records refused one by one (LogValidator's record errors, KIP-467): INVALID_TIMESTAMP
///   if any timestamp is outside message.timestamp.before/after.max.ms, else
///   INVALID_RECORD (records without a key on a compacted topic);
/// - a client batch claiming LogAppendTime on a LogAppendTime topic -> INVALID_TIMESTAMP.
impl From<&BatchError> for ErrorCode {
    fn from(e: &BatchError) -> ErrorCode {
        match e {
            BatchError::Truncated { .. }
            | BatchError::InvalidBatchLength { .. }
            | BatchError::CorruptMessage { .. }
            | BatchError::UnknownCompression(_)
            | BatchError::CorruptRecord(_) => ErrorCode::CORRUPT_MESSAGE,
            BatchError::MessageTooLarge { .. } | BatchError::DecompressedTooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
            BatchError::LogAppendTimeFromClient => ErrorCode::INVALID_TIMESTAMP,
            BatchError::RecordErrors(r) if r.has_timestamp_error() => ErrorCode::INVALID_TIMESTAMP,
            BatchError::RecordErrors(_) => ErrorCode::INVALID_RECORD,
            BatchError::UnsupportedMagic(_)
            | BatchError::NoBatch
            | BatchError::MultipleBatches
            | BatchError::InvalidRecordCount(_)
            | BatchError::InconsistentOffsetDelta { .. }
            | BatchError::NonZeroBaseOffset(_)
            | BatchError::ControlBatchFromClient
            | BatchError::InvalidSequence { .. }
            | BatchError::InvalidRecord(_) => ErrorCode::INVALID_RECORD,
            BatchError::CompressionNeedsNewerProduce { .. } => ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
        }
    }
}

impl From<BatchError> for ErrorCode {
    fn from(e: BatchError) -> ErrorCode {
        ErrorCode::from(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordError, RecordErrorKind, RecordErrors};

    #[test]
    fn batch_errors_map_like_kafka() {
        assert_eq!(ErrorCode::from(&BatchError::CorruptMessage { stored: 1, computed: 2 }), ErrorCode::CORRUPT_MESSAGE);
        assert_eq!(ErrorCode::from(&BatchError::MessageTooLarge { size: 10, max: 5 }), ErrorCode::MESSAGE_TOO_LARGE);
        assert_eq!(ErrorCode::from(&BatchError::UnsupportedMagic(1)), ErrorCode::INVALID_RECORD);
        assert_eq!(ErrorCode::from(&BatchError::MultipleBatches), ErrorCode::INVALID_RECORD);
        // A log offline after a failed fdatasync, directly and through a partition.
        let offline = StorageError::Offline { reason: "EIO".into() };
        assert_eq!(ErrorCode::from(&offline), ErrorCode::KAFKA_STORAGE_ERROR);
        assert_eq!(ErrorCode::from(&PartitionError::Storage(offline)), ErrorCode::KAFKA_STORAGE_ERROR);
        // A keyless record on a compacted topic (partition/ names no Kafka code).
        let no_key = RecordError { batch_index: 1, kind: RecordErrorKind::NoKeyOnCompactedTopic };
        let late = RecordError { batch_index: 2, kind: RecordErrorKind::TimestampOutOfRange { timestamp: 9, offset: 2, min: 0, max: 1 } };
        let refused = |errors: Vec<RecordError>| BatchError::RecordErrors(Box::new(RecordErrors { errors }));
        assert_eq!(ErrorCode::from(refused(vec![no_key.clone()])), ErrorCode::INVALID_RECORD);
        assert_eq!(ErrorCode::from(refused(vec![no_key, late])), ErrorCode::INVALID_TIMESTAMP);
        assert_eq!(ErrorCode::from(BatchError::InvalidRecord("count".into())), ErrorCode::INVALID_RECORD);
        assert_eq!(ErrorCode::from(BatchError::CorruptRecord("gzip".into())), ErrorCode::CORRUPT_MESSAGE);
        assert_eq!(ErrorCode::from(BatchError::DecompressedTooLarge { limit: 1 }), ErrorCode::MESSAGE_TOO_LARGE);
        assert_eq!(ErrorCode::from(BatchError::CompressionNeedsNewerProduce { version: 6 }), ErrorCode::UNSUPPORTED_COMPRESSION_TYPE);
    }
}
