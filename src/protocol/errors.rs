//! Kafka error codes as they go on the wire. Which internal error becomes which code is
//! decided in one place above the layers that raise them: `server/error_map.rs`.

use kafka_protocol::ResponseError;

/// A Kafka error code as it goes on the wire (`int16`).
///
/// A newtype rather than an enum so that codes we do not name here (sent by a peer, or
/// added by a later Kafka) still round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
    pub const NONE: ErrorCode = ErrorCode(0);
    pub const OFFSET_OUT_OF_RANGE: ErrorCode = ErrorCode(1);
    pub const CORRUPT_MESSAGE: ErrorCode = ErrorCode(2);
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
    pub const INVALID_FETCH_SIZE: ErrorCode = ErrorCode(4);
    pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(5);
    pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode(6);
    pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode(7);
    pub const REPLICA_NOT_AVAILABLE: ErrorCode = ErrorCode(9);
    pub const MESSAGE_TOO_LARGE: ErrorCode = ErrorCode(10);
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
    pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = ErrorCode(14);
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
    pub const INVALID_TOPIC_EXCEPTION: ErrorCode = ErrorCode(17);
    pub const RECORD_LIST_TOO_LARGE: ErrorCode = ErrorCode(18);
    pub const NOT_ENOUGH_REPLICAS: ErrorCode = ErrorCode(19);
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode = ErrorCode(20);
    pub const INVALID_REQUIRED_ACKS: ErrorCode = ErrorCode(21);
    pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode(22);
    pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = ErrorCode(23);
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
    pub const INVALID_SESSION_TIMEOUT: ErrorCode = ErrorCode(26);
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
    pub const INVALID_COMMIT_OFFSET_SIZE: ErrorCode = ErrorCode(28);
    pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(29);
    pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(30);
    pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(31);
    pub const INVALID_TIMESTAMP: ErrorCode = ErrorCode(32);
    pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
    pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
    pub const TOPIC_ALREADY_EXISTS: ErrorCode = ErrorCode(36);
    pub const INVALID_PARTITIONS: ErrorCode = ErrorCode(37);
    pub const INVALID_REPLICATION_FACTOR: ErrorCode = ErrorCode(38);
    pub const INVALID_REPLICA_ASSIGNMENT: ErrorCode = ErrorCode(39);
    pub const INVALID_CONFIG: ErrorCode = ErrorCode(40);
    pub const NOT_CONTROLLER: ErrorCode = ErrorCode(41);
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorCode = ErrorCode(43);
    pub const POLICY_VIOLATION: ErrorCode = ErrorCode(44);
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = ErrorCode(45);
    pub const DUPLICATE_SEQUENCE_NUMBER: ErrorCode = ErrorCode(46);
    pub const INVALID_PRODUCER_EPOCH: ErrorCode = ErrorCode(47);
    pub const INVALID_TXN_STATE: ErrorCode = ErrorCode(48);
    pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode = ErrorCode(49);
    pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode = ErrorCode(50);
    pub const CONCURRENT_TRANSACTIONS: ErrorCode = ErrorCode(51);
    pub const TRANSACTION_COORDINATOR_FENCED: ErrorCode = ErrorCode(52);
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(53);
    pub const SECURITY_DISABLED: ErrorCode = ErrorCode(54);
    pub const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode(56);
    pub const OPERATION_NOT_ATTEMPTED: ErrorCode = ErrorCode(55);
    pub const LOG_DIR_NOT_FOUND: ErrorCode = ErrorCode(57);
    pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);
    pub const UNKNOWN_PRODUCER_ID: ErrorCode = ErrorCode(59);
    pub const DELEGATION_TOKEN_AUTH_DISABLED: ErrorCode = ErrorCode(61);
    pub const DELEGATION_TOKEN_NOT_FOUND: ErrorCode = ErrorCode(62);
    pub const DELEGATION_TOKEN_OWNER_MISMATCH: ErrorCode = ErrorCode(63);
    pub const DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: ErrorCode = ErrorCode(64);
    pub const DELEGATION_TOKEN_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(65);
    pub const DELEGATION_TOKEN_EXPIRED: ErrorCode = ErrorCode(66);
    pub const INVALID_PRINCIPAL_TYPE: ErrorCode = ErrorCode(67);
    pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode(68);
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
    pub const UNSTABLE_OFFSET_COMMIT: ErrorCode = ErrorCode(88);
    pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode(74);
    pub const UNKNOWN_LEADER_EPOCH: ErrorCode = ErrorCode(75);
    pub const UNSUPPORTED_COMPRESSION_TYPE: ErrorCode = ErrorCode(76);
    pub const OFFSET_NOT_AVAILABLE: ErrorCode = ErrorCode(78);
    pub const MEMBER_ID_REQUIRED: ErrorCode = ErrorCode(79);
    pub const PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(80);
    pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
    pub const FENCED_INSTANCE_ID: ErrorCode = ErrorCode(82);
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode = ErrorCode(83);
    pub const ELECTION_NOT_NEEDED: ErrorCode = ErrorCode(84);
    pub const NO_REASSIGNMENT_IN_PROGRESS: ErrorCode = ErrorCode(85);
    pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode = ErrorCode(86);
    pub const INVALID_RECORD: ErrorCode = ErrorCode(87);
    pub const THROTTLING_QUOTA_EXCEEDED: ErrorCode = ErrorCode(89);
    pub const PRODUCER_FENCED: ErrorCode = ErrorCode(90);
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(91);
    pub const DUPLICATE_RESOURCE: ErrorCode = ErrorCode(92);
    pub const UNACCEPTABLE_CREDENTIAL: ErrorCode = ErrorCode(93);
    pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode(100);
    pub const INCONSISTENT_TOPIC_ID: ErrorCode = ErrorCode(103);
    pub const TRANSACTIONAL_ID_NOT_FOUND: ErrorCode = ErrorCode(105);
    // KIP-848 consumer groups.
    /// A follower's fetch below the leader's local log start, inside the remote log
    /// (KIP-405): the follower restarts from the tiered offset.
    pub const OFFSET_MOVED_TO_TIERED_STORAGE: ErrorCode = ErrorCode(109);
    pub const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
    pub const UNRELEASED_INSTANCE_ID: ErrorCode = ErrorCode(111);
    pub const UNSUPPORTED_ASSIGNOR: ErrorCode = ErrorCode(112);
    pub const STALE_MEMBER_EPOCH: ErrorCode = ErrorCode(113);
    pub const TRANSACTION_ABORTABLE: ErrorCode = ErrorCode(120);
    pub const FENCED_STATE_EPOCH: ErrorCode = ErrorCode(124);
    pub const INVALID_REGULAR_EXPRESSION: ErrorCode = ErrorCode(128);
    pub const REBOOTSTRAP_REQUIRED: ErrorCode = ErrorCode(129);
    // KIP-1071 streams groups.
    pub const STREAMS_INVALID_TOPOLOGY: ErrorCode = ErrorCode(130);

    /// The wire value.
    #[inline]
    pub const fn code(self) -> i16 {
        self.0
    }

    /// What a coordinator (transactions, share-group state) answers when appending its
    /// record to its partition failed with `self`, as Kafka's coordinators map it: the
    /// partition unavailable or short of replicas is COORDINATOR_NOT_AVAILABLE, leadership
    /// or the disk lost is NOT_COORDINATOR, anything else UNKNOWN_SERVER_ERROR.
    pub fn from_coordinator_append(self) -> ErrorCode {
        match self {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode::NOT_ENOUGH_REPLICAS
            | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode::REQUEST_TIMED_OUT => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => ErrorCode::NOT_COORDINATOR,
            _ => ErrorCode::UNKNOWN_SERVER_ERROR,
        }
    }

    #[inline]
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Kafka's own classification (Errors.java), via `kafka_protocol::ResponseError`.
    pub fn is_retriable(self) -> bool {
        ResponseError::try_from_code(self.0).is_some_and(|e| e.is_retriable())
    }

    /// The matching `ResponseError`, or `None` for `NONE`.
    pub fn as_response_error(self) -> Option<ResponseError> {
        ResponseError::try_from_code(self.0)
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.0
    }
}

impl From<ResponseError> for ErrorCode {
    fn from(e: ResponseError) -> ErrorCode {
        ErrorCode(e.code())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match ResponseError::try_from_code(self.0) {
            None => write!(f, "NONE (0)"),
            Some(e) => write!(f, "{e} ({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_kafka_protocol_crate() {
        // The crate's table is generated from Kafka's Errors.java; our names must agree.
        let pairs = [
            (ErrorCode::UNKNOWN_SERVER_ERROR, ResponseError::UnknownServerError),
            (ErrorCode::OFFSET_OUT_OF_RANGE, ResponseError::OffsetOutOfRange),
            (ErrorCode::OFFSET_MOVED_TO_TIERED_STORAGE, ResponseError::OffsetMovedToTieredStorage),
            (ErrorCode::CORRUPT_MESSAGE, ResponseError::CorruptMessage),
            (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, ResponseError::UnknownTopicOrPartition),
            (ErrorCode::INVALID_FETCH_SIZE, ResponseError::InvalidFetchSize),
            (ErrorCode::LEADER_NOT_AVAILABLE, ResponseError::LeaderNotAvailable),
            (ErrorCode::NOT_LEADER_OR_FOLLOWER, ResponseError::NotLeaderOrFollower),
            (ErrorCode::REQUEST_TIMED_OUT, ResponseError::RequestTimedOut),
            (ErrorCode::MESSAGE_TOO_LARGE, ResponseError::MessageTooLarge),
            (ErrorCode::COORDINATOR_NOT_AVAILABLE, ResponseError::CoordinatorNotAvailable),
            (ErrorCode::NOT_COORDINATOR, ResponseError::NotCoordinator),
            (ErrorCode::INVALID_TOPIC_EXCEPTION, ResponseError::InvalidTopicException),
            (ErrorCode::RECORD_LIST_TOO_LARGE, ResponseError::RecordListTooLarge),
            (ErrorCode::NOT_ENOUGH_REPLICAS, ResponseError::NotEnoughReplicas),
            (ErrorCode::INVALID_REQUIRED_ACKS, ResponseError::InvalidRequiredAcks),
            (ErrorCode::INVALID_TIMESTAMP, ResponseError::InvalidTimestamp),
            (ErrorCode::UNSUPPORTED_VERSION, ResponseError::UnsupportedVersion),
            (ErrorCode::TOPIC_ALREADY_EXISTS, ResponseError::TopicAlreadyExists),
            (ErrorCode::INVALID_PARTITIONS, ResponseError::InvalidPartitions),
            (ErrorCode::INVALID_REPLICATION_FACTOR, ResponseError::InvalidReplicationFactor),
            (ErrorCode::INVALID_CONFIG, ResponseError::InvalidConfig),
            (ErrorCode::INVALID_REQUEST, ResponseError::InvalidRequest),
            (ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT, ResponseError::UnsupportedForMessageFormat),
            (ErrorCode::POLICY_VIOLATION, ResponseError::PolicyViolation),
            (ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, ResponseError::OutOfOrderSequenceNumber),
            (ErrorCode::DUPLICATE_SEQUENCE_NUMBER, ResponseError::DuplicateSequenceNumber),
            (ErrorCode::INVALID_PRODUCER_EPOCH, ResponseError::InvalidProducerEpoch),
            (ErrorCode::INVALID_PRODUCER_ID_MAPPING, ResponseError::InvalidProducerIdMapping),
            (ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ResponseError::TransactionalIdAuthorizationFailed),
            (ErrorCode::KAFKA_STORAGE_ERROR, ResponseError::KafkaStorageError),
            (ErrorCode::UNKNOWN_PRODUCER_ID, ResponseError::UnknownProducerId),
            (ErrorCode::FENCED_LEADER_EPOCH, ResponseError::FencedLeaderEpoch),
            (ErrorCode::UNKNOWN_LEADER_EPOCH, ResponseError::UnknownLeaderEpoch),
            (ErrorCode::UNSUPPORTED_COMPRESSION_TYPE, ResponseError::UnsupportedCompressionType),
            (ErrorCode::OFFSET_NOT_AVAILABLE, ResponseError::OffsetNotAvailable),
            (ErrorCode::INVALID_RECORD, ResponseError::InvalidRecord),
            (ErrorCode::THROTTLING_QUOTA_EXCEEDED, ResponseError::ThrottlingQuotaExceeded),
            (ErrorCode::PRODUCER_FENCED, ResponseError::ProducerFenced),
            (ErrorCode::UNKNOWN_TOPIC_ID, ResponseError::UnknownTopicId),
            (ErrorCode::INCONSISTENT_TOPIC_ID, ResponseError::InconsistentTopicId),
            (ErrorCode::REPLICA_NOT_AVAILABLE, ResponseError::ReplicaNotAvailable),
            (ErrorCode::SECURITY_DISABLED, ResponseError::SecurityDisabled),
            (ErrorCode::TOPIC_AUTHORIZATION_FAILED, ResponseError::TopicAuthorizationFailed),
            (ErrorCode::GROUP_AUTHORIZATION_FAILED, ResponseError::GroupAuthorizationFailed),
            (ErrorCode::CLUSTER_AUTHORIZATION_FAILED, ResponseError::ClusterAuthorizationFailed),
            (ErrorCode::LOG_DIR_NOT_FOUND, ResponseError::LogDirNotFound),
            (ErrorCode::RESOURCE_NOT_FOUND, ResponseError::ResourceNotFound),
            (ErrorCode::DUPLICATE_RESOURCE, ResponseError::DuplicateResource),
            (ErrorCode::UNACCEPTABLE_CREDENTIAL, ResponseError::UnacceptableCredential),
            (ErrorCode::TRANSACTIONAL_ID_NOT_FOUND, ResponseError::TransactionalIdNotFound),
            (ErrorCode::INVALID_REGULAR_EXPRESSION, ResponseError::InvalidRegularExpression),
            (ErrorCode::FENCED_STATE_EPOCH, ResponseError::FencedStateEpoch),
            (ErrorCode::REBOOTSTRAP_REQUIRED, ResponseError::RebootstrapRequired),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours.code(), theirs.code(), "{theirs:?}");
            assert_eq!(ours.as_response_error(), Some(theirs));
        }
        assert_eq!(ErrorCode::NONE.as_response_error(), None);
        assert!(ErrorCode::NOT_LEADER_OR_FOLLOWER.is_retriable());
        assert!(!ErrorCode::INVALID_RECORD.is_retriable());
    }
}
