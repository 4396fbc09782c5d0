//! KIP-1071 streams groups (`group.protocol=streams`), as Apache Kafka 4.4 runs them: a
//! Kafka Streams application's members heartbeat (StreamsGroupHeartbeat) with their
//! topology; the coordinator configures the topology against the topics' metadata
//! (repartition and changelog partition counts, which internal topics are missing), assigns
//! tasks (subtopology, partition) with the sticky task assignor, and moves each member
//! towards its target (a task moves only once its previous process released it).
//!
//! On while streams.version >= 1 (a new cluster's level). The parts:
//! - `topology.rs`  the topology a member declares (the StreamsGroupTopology record's form)
//! - `tasks.rs`     task sets: active (with assignment epochs), standby, warm-up
//! - `heartbeat.rs` join / heartbeat / leave / fencing / session expiry, the epoch bumps,
//!   the target assignment and the member's reconciliation
//! - `heartbeat_request.rs` a heartbeat checked as Kafka checks it, converted to the types here
//! - `group.rs`     the group's state (epochs, topology, members, targets), replayed from its records
//! - `configure.rs` the topology configured against the metadata (Kafka's InternalTopicManager)
//! - `assignor/`    `sticky` (Kafka's StickyTaskAssignor, the only built-in)
//! - `reconcile.rs` one member's current assignment → its target (CurrentAssignmentBuilder)
//! - `streams_group_records.rs` the group's records in `__consumer_offsets` (keys 17, 19-23)
//! - `coordinator.rs` the coordinator's side: heartbeats stored before they are answered,
//!   the group's `streams.*` settings, replay and load, expiry
//! - `describe.rs`  StreamsGroupDescribe
//!
//! Part of `group/`: never imports `server::` or `controller::`.
pub mod assignor;
pub mod configure;
pub mod coordinator;
pub mod describe;
pub mod group;
pub mod heartbeat;
pub mod heartbeat_request;
pub mod reconcile;
pub mod streams_group_records;
pub mod tasks;
pub mod topology;
