//! Kafka's bound on the metadata records one admin request may write
//! (`QuorumController.MAX_RECORDS_PER_USER_OP`, 10,000). A CreateTopics or CreatePartitions
//! that would write more is refused whole: Kafka's controller fails the operation with
//! `PolicyViolationException("Unable to perform excessively large batch operation.")`
//! and the broker answers that error for every topic of the request.
//!
//! shardlog commits one command per topic, so nothing here protects its own log; the
//! bound is kept so that a request Kafka refuses is refused here too (a client or tool
//! written against Kafka splits its requests by this bound).

/// Most metadata records one admin request may write (Kafka's `MAX_RECORDS_PER_USER_OP`).
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Kafka's message for a request over [`MAX_RECORDS_PER_USER_OP`] (POLICY_VIOLATION).
pub const EXCESSIVE_BATCH: &str = "Unable to perform excessively large batch operation.";

/// Records Kafka writes to create one topic: a TopicRecord, a ConfigRecord per config
/// the request sets and a PartitionRecord per partition.
pub fn topic_creation_records(partitions: usize, configs: usize) -> usize {
    1 + configs + partitions
}

/// Whether a request writing `records` metadata records is over Kafka's bound (the bound
/// itself is allowed: Kafka's bounded list refuses the 10,001st record).
pub fn over_limit(records: usize) -> bool {
    records > MAX_RECORDS_PER_USER_OP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_of_9999_partitions_fits_and_one_more_does_not() {
        // TopicRecord + 9,999 PartitionRecords = the bound exactly.
        assert!(!over_limit(topic_creation_records(9_999, 0)));
        assert!(over_limit(topic_creation_records(10_000, 0)));
        // Config records count too.
        assert!(over_limit(topic_creation_records(9_999, 1)));
    }

    #[test]
    fn the_bound_is_over_the_whole_request() {
        let two = topic_creation_records(5_000, 0) + topic_creation_records(5_000, 0);
        assert!(over_limit(two));
        // CreatePartitions writes a PartitionRecord per new partition.
        assert!(!over_limit(10_000));
        assert!(over_limit(10_001));
    }
}
