//! Task assignors of streams groups: `sticky` (Kafka 4.4's StickyTaskAssignor, the only
//! built-in): being written.
