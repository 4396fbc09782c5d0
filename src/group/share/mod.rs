//! Share groups (KIP-932, Kafka's queues), built in steps (issue 27, point 2):
//!
//! - `share_partition.rs`  one share-partition's in-flight records: acquisition with
//!   locks, delivery counts, acknowledgements, the start offset; kept on the partition's
//!   shard (built, unit-tested)
//! - `share_group.rs`      one share group's membership: ShareGroupHeartbeat's join /
//!   heartbeat / leave / session expiry, group epoch and target assignment (of initialized
//!   share-partitions only), the records of each change and their replay
//! - `coordinator.rs`      ShareGroupHeartbeat / ShareGroupDescribe on the coordinating
//!   shard, beside the classic and consumer groups; every change stored before it is
//!   answered; share-partitions initialized in the share coordinator before they are assigned
//! - `dead_letter.rs`      the dead-letter queue (KIP-1191, share.version 2): the records
//!   written there and the writer the server provides (`server/dead_letter_writer.rs`)
//! - `offsets_admin.rs`    Describe / Alter / DeleteShareGroupOffsets and DeleteGroups'
//!   state deletion on the coordinating shard
//! - `share_group_records.rs` the group's records in `__consumer_offsets` (Kafka 4.4's
//!   ShareGroup* records: epoch, members, target and current assignments, initialized
//!   share-partitions)
//! - `simple_assignor.rs`  the `simple` assignor: every partition read, shared when members
//!   outnumber partitions
//! - `share_session.rs`    share sessions: epochs, partitions, Kafka's errors (kept per
//!   shard by the server, `server/share_sessions.rs`)
//! - `share_partitions.rs` one shard's share-partitions: ShareFetch / ShareAcknowledge's
//!   per-partition part (acknowledge, release, read the log, acquire); state read from
//!   the share coordinator on first use per leader epoch (the group coordinator
//!   initialized it), acknowledgements written there before they are answered (rolled
//!   back if refused)
//! - `state_persister.rs`  how a share-partition reaches the share coordinator (the
//!   server's `server/share_persister.rs`: local shard or another broker, with retries)
//! - `state_batches.rs`    combining persisted state batches (the higher delivery count,
//!   then state, wins), as Kafka's share coordinator does
//! - `state_store.rs`      the share coordinator's state of one `__share_group_state`
//!   partition: replay, and the records Initialize / Read / Write / Delete write
//! - `state_coordinator.rs` the share coordinator on a shard: the stores of the
//!   `__share_group_state` partitions it leads, loaded per leader epoch, each state API's
//!   record appended with acks=all before it answers
//! - `state_records.rs`    the records of `__share_group_state` (ShareSnapshot, ShareUpdate)
//!   in Kafka's layout
//!
//! Served only while `share.version` >= 1 is finalized (a new cluster finalizes 2, which
//! adds the dead-letter queue).
//!
//! The state APIs are served by `server/handlers/share_group_state.rs`, each part routed
//! to the shard leading the key's `__share_group_state` partition.
//!
//! A group's `share.*` configs (`cluster/config_defs.rs`) reach the share-partitions with
//! each operation (`SharePartitionOp::limits` / `reset`) and the membership through
//! `coordinator.rs`.
//!
//! A member's records are released when its connection closes (`server/share_sessions.rs`,
//! as Kafka's ShareSessionCache tells its onMemberLeave listener); a member the group
//! coordinator removes (session timeout, leave) keeps them until their locks expire, as in
//! Kafka 4.4.
//!
//! A read_committed group (`share.isolation.level`) reads below the last stable offset;
//! aborted transactions' batches are archived at acquisition (`aborted_batches.rs`).
pub mod aborted_batches;
pub mod coordinator;
pub mod dead_letter;
pub mod offsets_admin;
pub mod share_group;
pub mod share_group_records;
pub mod share_partition;
pub mod share_partitions;
pub mod share_session;
pub mod simple_assignor;
pub mod state_batches;
pub mod state_coordinator;
pub mod state_persister;
pub mod state_records;
pub mod state_store;
