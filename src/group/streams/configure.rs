//! The topology configured against the metadata image (Kafka 4.4's InternalTopicManager):
//! being written.
