//! Broker-side errors → Kafka error codes. With `errors.rs` (BatchError), the one
//! place that decides which code a client sees.
use crate::protocol::ErrorCode;
use crate::controller::ControllerError;
use crate::partition::producer_state::SequenceError;
use crate::partition::PartitionError;
use crate::storage::StorageError;

impl From<&StorageError> for ErrorCode {
    fn from(e: &StorageError) -> ErrorCode {
        match e {
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
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
            PartitionError::Storage(s) => ErrorCode::from(s),
            PartitionError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            PartitionError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER,
            PartitionError::UnknownTopicOrPartition => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            PartitionError::InvalidTimestamp(_) => ErrorCode::INVALID_REQUEST,
        }
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
            ControllerError::InvalidConfig(_) => ErrorCode::INVALID_CONFIG,
            ControllerError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            ControllerError::NotController(_) => ErrorCode::NOT_CONTROLLER,
            ControllerError::Storage(_) | ControllerError::Config(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
        }
    }
}
