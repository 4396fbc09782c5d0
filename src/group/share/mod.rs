//! Share groups (KIP-932, Kafka's queues), built in steps (issue 27, point 2):
//!
//! - `share_partition.rs`  one share-partition's in-flight records: acquisition with
//!   locks, delivery counts, acknowledgements, the start offset; kept on the partition's
//!   shard (built, unit-tested)
//!
//! Still to come, each in its own file: the share-group coordinator (ShareGroupHeartbeat,
//! ShareGroupDescribe, the simple assignor), share sessions and ShareFetch /
//! ShareAcknowledge, the durable state in `__share_group_state` (the share-coordinator
//! APIs), and the offset admin APIs.
pub mod share_partition;
