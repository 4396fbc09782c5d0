//! What the transaction coordinator needs from the shard hosting it: its shard id, the
//! transaction settings, the shard's partitions (its `__transaction_state` partitions and
//! the metadata image), and a way to write markers on any partition leader of the cluster
//! (installed by the server, which owns the router and the inter-broker connections).
use std::rc::Rc;

use futures::future::LocalBoxFuture;

use super::coordinator::TxnCoordinator;
use crate::cluster::shard_partitions::ShardPartitions;
use crate::protocol::ErrorCode;
use crate::runtime::ShardId;

/// The broker settings transactions use (Kafka's transaction.* keys).
#[derive(Clone, Debug)]
pub struct TxnConfig {
    pub transaction_max_timeout_ms: i32,
    pub transactional_id_expiration_ms: i64,
    /// How often timed-out transactions and expired ids are looked for.
    pub cleanup_interval_ms: u64,
    pub max_transactional_ids_per_shard: usize,
    /// How long one marker write waits for the partition's in-sync replicas.
    pub marker_timeout_ms: i32,
}

/// Markers for one transaction outcome on several partitions (Kafka's WriteTxnMarkers
/// entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerRequest {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<(String, i32)>,
    /// WriteTxnMarkers v2's TransactionVersion (KIP-1228): >= 2, the marker's epoch must
    /// be above the producer's (`ProducerStateTable::check_marker`). This coordinator
    /// sends 0 (the epoch checked as before KIP-1228: not below the producer's).
    pub transaction_version: i8,
}

/// Writes markers on the partitions' leaders wherever they are; answers one code per
/// partition, in order.
pub type MarkerWriter = Box<dyn Fn(MarkerRequest) -> LocalBoxFuture<'static, Vec<ErrorCode>>>;

/// The coordinator of one shard with its view of that shard (shard-owned).
pub struct TxnContext {
    pub shard: ShardId,
    pub config: TxnConfig,
    pub partitions: Rc<ShardPartitions>,
    pub coordinator: TxnCoordinator,
    pub markers: MarkerWriter,
}

impl TxnContext {
    pub fn new(config: TxnConfig, partitions: Rc<ShardPartitions>, markers: MarkerWriter) -> TxnContext {
        TxnContext { shard: partitions.shard(), config, partitions, coordinator: TxnCoordinator::default(), markers }
    }
}
