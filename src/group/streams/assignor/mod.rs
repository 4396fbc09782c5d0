//! Task assignors of streams groups (KIP-1071). A 4.4 broker has one: `sticky`, a port of
//! Kafka's StickyTaskAssignor. Pure functions of members and topology: no I/O, no shard state.
pub mod sticky;
