//! Command-line tools that talk to a running broker over the Kafka protocol.
pub mod client;
pub mod group;
pub mod topic;
