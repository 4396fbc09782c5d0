//! A measurement seam for `benches/metadata_scale.rs` (issue 11: metadata log size and
//! snapshot time at 10k and 100k partitions): metadata built by the real proposal and
//! apply code (`propose.rs`, `apply.rs`), sized as the log store frames its entries and
//! encoded/decoded as the snapshot files are. Nothing on a broker's path calls it.
use std::collections::BTreeMap;

use openraft::entry::RaftEntry;
use openraft::vote::leader_id_std::CommittedLeaderId;

use super::propose::{self, Layout, ProposeCtx};
use super::types::{Command, Entry, LogId, SnapshotMeta};
use super::{apply, log_store, snapshot, ControllerError};
use crate::cluster::image::{BrokerMeta, MetadataImage};
use crate::cluster::topic_config::TopicConfigDefaults;

/// A metadata image and the log that built it.
pub struct ScaleImage {
    pub image: MetadataImage,
    /// Bytes of the controller log holding every entry that built the image (framed as
    /// `log_store.rs` writes them).
    pub log_bytes: usize,
    pub entries: usize,
    /// The largest single entry (a CreateTopic), against `log_store::MAX_ENTRY_BYTES`.
    pub largest_entry_bytes: usize,
}

/// `brokers` registered brokers (2 shards each) and `topics` topics of
/// `partitions_per_topic` partitions with `replication_factor` replicas, placed as the
/// controller places them.
pub fn build(brokers: i32, topics: usize, partitions_per_topic: i32, replication_factor: i16) -> Result<ScaleImage, ControllerError> {
    let defaults = TopicConfigDefaults::default();
    let ctx = ProposeCtx {
        default_num_partitions: 1,
        default_replication_factor: 1,
        defaults: &defaults,
        unstable_feature_versions: false,
        remote_storage_system_enabled: false,
    };
    let mut image = MetadataImage::default();
    let (mut log_bytes, mut entries, mut largest) = (0usize, 0usize, 0usize);
    let mut commit = |image: &mut MetadataImage, cmd: Command| -> Result<(), ControllerError> {
        entries += 1;
        let index = entries as u64;
        let entry = Entry::new_normal(LogId::new(CommittedLeaderId::new(1), index), cmd.clone());
        let mut framed = Vec::new();
        log_store::encode_entry(&mut framed, &entry).map_err(|e| ControllerError::Storage(e.to_string()))?;
        log_bytes += framed.len();
        largest = largest.max(framed.len());
        apply::apply(image, index, &cmd).0 .0.map(|_| ()).map_err(|e| ControllerError::InvalidRequest(format!("apply: {e:?}")))
    };
    commit(&mut image, Command::InitCluster { cluster_id: "scale".into() })?;
    for id in 1..=brokers {
        let broker = BrokerMeta {
            id,
            incarnation: [id as u8; 16],
            host: format!("broker-{id}.example.com"),
            port: 9092,
            rack: Some(format!("rack-{}", id % 3)),
            shard_count: 2,
            fenced: false,
            listeners: Vec::new(),
        };
        commit(&mut image, Command::RegisterBroker { broker, unclean_default: false, min_isr_default: 0, clean_shutdown_of: None })?;
    }
    for t in 0..topics {
        let layout = Layout { num_partitions: partitions_per_topic, replication_factor, assignments: &[] };
        let (cmd, _) = propose::create_topic(&ctx, &image, format!("topic-{t:06}"), layout, BTreeMap::new(), [t as u8; 16])?;
        commit(&mut image, cmd)?;
    }
    Ok(ScaleImage { image, log_bytes, entries, largest_entry_bytes: largest })
}

/// The bytes of a snapshot file of `image`.
pub fn snapshot_file(image: &MetadataImage) -> Result<Vec<u8>, ControllerError> {
    let meta = SnapshotMeta { last_log_id: None, last_membership: Default::default() };
    snapshot::encode(&meta, image).map_err(|e| ControllerError::Storage(e.to_string()))
}

/// Checks and decodes snapshot-file bytes, as a restarting controller does.
pub fn load_snapshot_file(bytes: &[u8]) -> Result<MetadataImage, ControllerError> {
    snapshot::decode(bytes).map(|(_, image)| image).map_err(|e| ControllerError::Storage(e.to_string()))
}
