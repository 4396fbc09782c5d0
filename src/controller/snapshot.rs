//! State-machine snapshot format: `<data_dir>/controller/snapshot.bin`.
//!
//! One framed record (magic "SLSS", version, length, CRC-32C; see `frame.rs`) whose payload
//! is an rkyv archive of `SnapFile`: the raft snapshot meta (last log id, membership; JSON,
//! it is openraft's serde type) and the metadata image. The same bytes are what a leader
//! would send a follower (`SnapshotData = Vec<u8>`), so a received snapshot is checked by
//! the same code as one read from disk.
//!
//! The image is copied into private structs rather than deriving rkyv on the shared image
//! types: the on-disk format then changes only when this file does.
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use crate::cluster::features::FinalizedFeatures;
use crate::cluster::image::{BrokerMeta, ConfigResource, MetadataImage, PartitionMeta, ReplicaMeta, TopicMeta};
use crate::cluster::remote_log_image::RemoteLogImage;
use crate::cluster::security_image::SecurityImage;
use crate::remote::segment_metadata::PartitionRemoteLog;

use super::files::{read_if_exists, write_atomic};
use super::frame::{self, FrameError};
use super::types::SnapshotMeta;
use crate::security::listeners::ListenerEndpoint;

pub(super) const MAGIC: u32 = u32::from_le_bytes(*b"SLSS");
/// 2 added dynamic broker and group configs; 3 brokers and each partition's replicas,
/// leader, ISR and partition epoch; 4 each partition's ongoing reassignment (adding and
/// removing replicas); 5 each broker's listeners; 6 the security section (SCRAM
/// credentials, as JSON: `cluster/security_image.rs`); 7 the finalized features (JSON:
/// `cluster/features.rs`); 8 the KIP-966 section (each partition's eligible leader
/// replicas and last known leader, the controllers' min.insync.replicas default; JSON,
/// `SnapElr`); 9 the remote log section (tiered storage: each partition's remote
/// segments, JSON, `SnapRemoteLog`). Versions 1 and 2 are still read (their partitions have no replicas until
/// the node registers and adopts them), 3 (no reassignment ongoing), 4, 5, 6 (the
/// features a cluster had before they could change: the bootstrap levels), 7 (no ELR) and 8
/// (no remote segments).
pub(super) const VERSION: u16 = 9;
const VERSION_8: u16 = 8;
const VERSION_7: u16 = 7;
const VERSION_6: u16 = 6;
const VERSION_5: u16 = 5;
const VERSION_4: u16 = 4;
const VERSION_3: u16 = 3;
const VERSION_2: u16 = 2;
const VERSION_1: u16 = 1;
/// Largest snapshot accepted (from disk or from a peer).
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 30;
pub const SNAPSHOT_FILE: &str = "snapshot.bin";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot frame invalid: {0}")]
    Frame(#[from] FrameError),
    #[error("snapshot archive invalid: {0}")]
    Archive(String),
    #[error("snapshot raft meta invalid: {0}")]
    Meta(String),
    #[error("snapshot io: {0}")]
    Io(#[from] io::Error),
}

impl From<SnapshotError> for io::Error {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFile {
    meta_json: Vec<u8>,
    image: SnapImage,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImage {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
    /// `SecurityImage` as JSON; empty = none (older layouts).
    security_json: Vec<u8>,
    /// `FinalizedFeatures` as JSON; empty = the bootstrap levels (older layouts).
    features_json: Vec<u8>,
    /// `SnapElr` as JSON; empty = no ELR anywhere, default 0 (older layouts).
    elr_json: Vec<u8>,
    /// `SnapRemoteLog` as JSON; empty = no remote segments (older layouts).
    remote_log_json: Vec<u8>,
}

/// The tiered-storage section: (topic id, partition, its remote segments) of every
/// partition that has some.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SnapRemoteLog {
    partitions: Vec<([u8; 16], i32, PartitionRemoteLog)>,
}

/// Version 8 layout (before the remote log section).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV8 {
    meta_json: Vec<u8>,
    image: SnapImageV8,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV8 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
    security_json: Vec<u8>,
    features_json: Vec<u8>,
    elr_json: Vec<u8>,
}

/// The KIP-966 section: only partitions with an ELR or a last known leader are listed
/// (few: those whose ISR fell below min.insync.replicas).
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SnapElr {
    min_insync_replicas_default: i32,
    /// (topic, partition, ELR, last known ELR).
    partitions: Vec<(String, i32, Vec<i32>, Vec<i32>)>,
}

/// Version 7 layout (before the ELR section).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV7 {
    meta_json: Vec<u8>,
    image: SnapImageV7,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV7 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
    security_json: Vec<u8>,
    features_json: Vec<u8>,
}

/// Version 6 layout (before the features section).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV6 {
    meta_json: Vec<u8>,
    image: SnapImageV6,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV6 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
    security_json: Vec<u8>,
}

/// Version 5 layout (before the security section).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV5 {
    meta_json: Vec<u8>,
    image: SnapImageV5,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV5 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapBroker {
    id: i32,
    incarnation: [u8; 16],
    host: String,
    port: i32,
    rack: Option<String>,
    shard_count: u16,
    fenced: bool,
    /// (listener name, advertised host, port) of every client listener.
    listeners: Vec<(String, String, i32)>,
}

/// Version 4 layout (before named listeners): brokers without their listeners.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV4 {
    meta_json: Vec<u8>,
    image: SnapImageV4,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV4 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBrokerV4>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapBrokerV4 {
    id: i32,
    incarnation: [u8; 16],
    host: String,
    port: i32,
    rack: Option<String>,
    shard_count: u16,
    fenced: bool,
}

impl From<SnapBrokerV4> for SnapBroker {
    fn from(b: SnapBrokerV4) -> SnapBroker {
        SnapBroker {
            id: b.id,
            incarnation: b.incarnation,
            host: b.host,
            port: b.port,
            rack: b.rack,
            shard_count: b.shard_count,
            fenced: b.fenced,
            listeners: Vec::new(),
        }
    }
}

/// Version 2 layout (before brokers and replicas).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV2 {
    meta_json: Vec<u8>,
    image: SnapImageV2,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV2 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopicV2>,
    resource_configs: Vec<SnapResourceConfigs>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapTopicV2 {
    name: String,
    topic_id: [u8; 16],
    partitions: Vec<SnapPartitionV2>,
    configs: Vec<SnapConfig>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapPartitionV2 {
    partition: i32,
    shard: u16,
    leader_epoch: i32,
}

impl From<SnapTopicV2> for SnapTopic {
    fn from(t: SnapTopicV2) -> SnapTopic {
        let partitions = t
            .partitions
            .into_iter()
            .map(|p| {
                let u = PartitionMeta::unassigned(p.partition, p.shard);
                SnapPartition {
                    partition: p.partition,
                    shard: p.shard,
                    leader_epoch: p.leader_epoch,
                    replicas: Vec::new(),
                    leader: u.leader,
                    isr: Vec::new(),
                    partition_epoch: 0,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                }
            })
            .collect();
        SnapTopic { name: t.name, topic_id: t.topic_id, partitions, configs: t.configs }
    }
}

/// Version 1 layout (before dynamic broker and group configs).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV1 {
    meta_json: Vec<u8>,
    image: SnapImageV1,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV1 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopicV2>,
}

/// `kind`: 0 = broker, 1 = group.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapResourceConfigs {
    kind: u8,
    name: String,
    configs: Vec<SnapConfig>,
}

const RESOURCE_BROKER: u8 = 0;
const RESOURCE_GROUP: u8 = 1;

fn snap_configs(configs: &BTreeMap<String, String>) -> Vec<SnapConfig> {
    configs.iter().map(|(k, v)| SnapConfig { key: k.clone(), value: v.clone() }).collect()
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapTopic {
    name: String,
    topic_id: [u8; 16],
    partitions: Vec<SnapPartition>,
    configs: Vec<SnapConfig>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapPartition {
    partition: i32,
    shard: u16,
    leader_epoch: i32,
    /// (broker, shard) pairs.
    replicas: Vec<(i32, u16)>,
    leader: i32,
    isr: Vec<i32>,
    partition_epoch: i32,
    adding_replicas: Vec<i32>,
    removing_replicas: Vec<i32>,
}

/// Version 3 layout (before reassignments): the same but for the partitions.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapFileV3 {
    meta_json: Vec<u8>,
    image: SnapImageV3,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapImageV3 {
    cluster_id: String,
    applied_index: u64,
    next_producer_id: i64,
    topics: Vec<SnapTopicV3>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBrokerV4>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapTopicV3 {
    name: String,
    topic_id: [u8; 16],
    partitions: Vec<SnapPartitionV3>,
    configs: Vec<SnapConfig>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapPartitionV3 {
    partition: i32,
    shard: u16,
    leader_epoch: i32,
    replicas: Vec<(i32, u16)>,
    leader: i32,
    isr: Vec<i32>,
    partition_epoch: i32,
}

impl From<SnapTopicV3> for SnapTopic {
    fn from(t: SnapTopicV3) -> SnapTopic {
        let partitions = t
            .partitions
            .into_iter()
            .map(|p| SnapPartition {
                partition: p.partition,
                shard: p.shard,
                leader_epoch: p.leader_epoch,
                replicas: p.replicas,
                leader: p.leader,
                isr: p.isr,
                partition_epoch: p.partition_epoch,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            })
            .collect();
        SnapTopic { name: t.name, topic_id: t.topic_id, partitions, configs: t.configs }
    }
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapConfig {
    key: String,
    value: String,
}

impl TryFrom<&MetadataImage> for SnapImage {
    type Error = SnapshotError;

    fn try_from(img: &MetadataImage) -> Result<Self, SnapshotError> {
        let security_json = if img.security == SecurityImage::default() {
            Vec::new()
        } else {
            serde_json::to_vec(&img.security).map_err(|e| SnapshotError::Archive(format!("security section: {e}")))?
        };
        let features_json = if img.features == FinalizedFeatures::default() {
            Vec::new()
        } else {
            serde_json::to_vec(&img.features).map_err(|e| SnapshotError::Archive(format!("features section: {e}")))?
        };
        let elr = SnapElr {
            min_insync_replicas_default: img.min_insync_replicas_default,
            partitions: img
                .topics
                .values()
                .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                .filter(|(_, p)| !p.elr.is_empty() || !p.last_known_elr.is_empty())
                .map(|(t, p)| (t.name.clone(), p.partition, p.elr.clone(), p.last_known_elr.clone()))
                .collect(),
        };
        let elr_json = if elr.min_insync_replicas_default == 0 && elr.partitions.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&elr).map_err(|e| SnapshotError::Archive(format!("ELR section: {e}")))?
        };
        let remote = SnapRemoteLog { partitions: img.remote_log.iter().map(|(t, p, log)| (*t, p, log.clone())).collect() };
        let remote_log_json = if remote.partitions.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&remote).map_err(|e| SnapshotError::Archive(format!("remote log section: {e}")))?
        };
        Ok(SnapImage {
            security_json,
            features_json,
            elr_json,
            remote_log_json,
            cluster_id: img.cluster_id.clone(),
            applied_index: img.applied_index,
            next_producer_id: img.next_producer_id,
            topics: img
                .topics
                .values()
                .map(|t| SnapTopic {
                    name: t.name.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| SnapPartition {
                            partition: p.partition,
                            shard: p.shard,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replicas.iter().map(|r| (r.broker, r.shard)).collect(),
                            leader: p.leader,
                            isr: p.isr.clone(),
                            partition_epoch: p.partition_epoch,
                            adding_replicas: p.adding_replicas.clone(),
                            removing_replicas: p.removing_replicas.clone(),
                        })
                        .collect(),
                    configs: snap_configs(&t.configs),
                })
                .collect(),
            resource_configs: img
                .resource_configs
                .iter()
                .map(|(r, c)| {
                    let (kind, name) = match r {
                        ConfigResource::Broker(n) => (RESOURCE_BROKER, n.clone()),
                        ConfigResource::Group(n) => (RESOURCE_GROUP, n.clone()),
                    };
                    SnapResourceConfigs { kind, name, configs: snap_configs(c) }
                })
                .collect(),
            brokers: img
                .brokers
                .values()
                .map(|b| SnapBroker {
                    id: b.id,
                    incarnation: b.incarnation,
                    host: b.host.clone(),
                    port: b.port,
                    rack: b.rack.clone(),
                    shard_count: b.shard_count,
                    fenced: b.fenced,
                    listeners: b.listeners.iter().map(|l| (l.name.clone(), l.host.clone(), l.port)).collect(),
                })
                .collect(),
        })
    }
}

impl TryFrom<SnapImage> for MetadataImage {
    type Error = SnapshotError;

    fn try_from(s: SnapImage) -> Result<Self, SnapshotError> {
        let mut resource_configs = BTreeMap::new();
        for r in s.resource_configs {
            let resource = match r.kind {
                RESOURCE_BROKER => ConfigResource::Broker(r.name),
                RESOURCE_GROUP => ConfigResource::Group(r.name),
                other => return Err(SnapshotError::Archive(format!("unknown config resource kind {other}"))),
            };
            let configs = r.configs.into_iter().map(|c| (c.key, c.value)).collect::<BTreeMap<_, _>>();
            resource_configs.insert(resource, configs);
        }
        let topics = s
            .topics
            .into_iter()
            .map(|t| {
                let meta = TopicMeta {
                    name: t.name.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionMeta {
                            partition: p.partition,
                            shard: p.shard,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replicas.into_iter().map(|(broker, shard)| ReplicaMeta { broker, shard }).collect(),
                            leader: p.leader,
                            isr: p.isr,
                            partition_epoch: p.partition_epoch,
                            adding_replicas: p.adding_replicas,
                            removing_replicas: p.removing_replicas,
                            elr: Vec::new(),
                            last_known_elr: Vec::new(),
                        })
                        .collect(),
                    configs: t.configs.into_iter().map(|c| (c.key, c.value)).collect::<BTreeMap<_, _>>(),
                };
                (t.name, meta)
            })
            .collect();
        let security = if s.security_json.is_empty() {
            SecurityImage::default()
        } else {
            serde_json::from_slice(&s.security_json).map_err(|e| SnapshotError::Archive(format!("security section: {e}")))?
        };
        let features = if s.features_json.is_empty() {
            FinalizedFeatures::default()
        } else {
            serde_json::from_slice(&s.features_json).map_err(|e| SnapshotError::Archive(format!("features section: {e}")))?
        };
        let elr: SnapElr = if s.elr_json.is_empty() {
            SnapElr::default()
        } else {
            serde_json::from_slice(&s.elr_json).map_err(|e| SnapshotError::Archive(format!("ELR section: {e}")))?
        };
        let remote: SnapRemoteLog = if s.remote_log_json.is_empty() {
            SnapRemoteLog::default()
        } else {
            serde_json::from_slice(&s.remote_log_json).map_err(|e| SnapshotError::Archive(format!("remote log section: {e}")))?
        };
        let mut remote_log = RemoteLogImage::default();
        for (topic_id, partition, log) in remote.partitions {
            let start = log.log_start_offset();
            let mut log = PartitionRemoteLog::restore(log.segments().to_vec()).map_err(|e| SnapshotError::Archive(format!("remote log section: {e}")))?;
            log.advance_log_start(start);
            remote_log.restore(&topic_id, partition, log);
        }
        let mut topics: BTreeMap<String, TopicMeta> = topics;
        for (topic, partition, set, last_known) in elr.partitions {
            let p = topics
                .get_mut(&topic)
                .and_then(|t| t.partitions.iter_mut().find(|p| p.partition == partition))
                .ok_or_else(|| SnapshotError::Archive(format!("ELR section names {topic}-{partition}, which the snapshot lacks")))?;
            (p.elr, p.last_known_elr) = (set, last_known);
        }
        Ok(MetadataImage {
            remote_log,
            min_insync_replicas_default: elr.min_insync_replicas_default,
            security,
            features,
            cluster_id: s.cluster_id,
            applied_index: s.applied_index,
            topics,
            next_producer_id: s.next_producer_id,
            resource_configs,
            brokers: s
                .brokers
                .into_iter()
                .map(|b| {
                    (
                        b.id,
                        BrokerMeta {
                            id: b.id,
                            incarnation: b.incarnation,
                            host: b.host,
                            port: b.port,
                            rack: b.rack,
                            shard_count: b.shard_count,
                            fenced: b.fenced,
                            listeners: b.listeners.into_iter().map(|(name, host, port)| ListenerEndpoint { name, host, port }).collect(),
                        },
                    )
                })
                .collect(),
        })
    }
}

/// Serializes a snapshot to the bytes of a snapshot file.
pub fn encode(meta: &SnapshotMeta, image: &MetadataImage) -> Result<Vec<u8>, SnapshotError> {
    let meta_json = serde_json::to_vec(meta).map_err(|e| SnapshotError::Meta(e.to_string()))?;
    let file = SnapFile { meta_json, image: SnapImage::try_from(image)? };
    let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&file).map_err(|e| SnapshotError::Archive(e.to_string()))?;
    if archived.len() > MAX_SNAPSHOT_BYTES {
        return Err(SnapshotError::Archive(format!("snapshot is {} bytes, limit {MAX_SNAPSHOT_BYTES}", archived.len())));
    }
    Ok(frame::encode(MAGIC, VERSION, &archived))
}

/// Checks (frame, CRC, archive validation) and decodes snapshot-file bytes.
pub fn decode(bytes: &[u8]) -> Result<(SnapshotMeta, MetadataImage), SnapshotError> {
    let (payload, used, version) = match frame::decode(bytes, MAGIC, VERSION, MAX_SNAPSHOT_BYTES) {
        Err(FrameError::BadVersion {
            found: old @ (VERSION_1 | VERSION_2 | VERSION_3 | VERSION_4 | VERSION_5 | VERSION_6 | VERSION_7 | VERSION_8), ..
        }) => {
            let (p, u) = frame::decode(bytes, MAGIC, old, MAX_SNAPSHOT_BYTES)?;
            (p, u, old)
        }
        other => {
            let (p, u) = other?;
            (p, u, VERSION)
        }
    };
    if used != bytes.len() {
        return Err(SnapshotError::Archive(format!("{} trailing bytes after the snapshot record", bytes.len() - used)));
    }
    // rkyv reads in place and needs its buffer aligned; a Vec<u8> from disk is not.
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(payload.len());
    aligned.extend_from_slice(payload);
    let file = if version == VERSION_1 {
        let SnapFileV1 { meta_json, image: i } = archived(&aligned)?;
        let topics = i.topics.into_iter().map(SnapTopic::from).collect();
        upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), topics, Vec::new(), Vec::new())
    } else if version == VERSION_2 {
        let SnapFileV2 { meta_json, image: i } = archived(&aligned)?;
        let topics = i.topics.into_iter().map(SnapTopic::from).collect();
        upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), topics, i.resource_configs, Vec::new())
    } else if version == VERSION_3 {
        let SnapFileV3 { meta_json, image: i } = archived(&aligned)?;
        let topics = i.topics.into_iter().map(SnapTopic::from).collect();
        let brokers = i.brokers.into_iter().map(SnapBroker::from).collect();
        upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), topics, i.resource_configs, brokers)
    } else if version == VERSION_4 {
        let SnapFileV4 { meta_json, image: i } = archived(&aligned)?;
        let brokers = i.brokers.into_iter().map(SnapBroker::from).collect();
        upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), i.topics, i.resource_configs, brokers)
    } else if version == VERSION_5 {
        let SnapFileV5 { meta_json, image: i } = archived(&aligned)?;
        upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), i.topics, i.resource_configs, i.brokers)
    } else if version == VERSION_6 {
        let SnapFileV6 { meta_json, image: i } = archived(&aligned)?;
        let mut file = upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), i.topics, i.resource_configs, i.brokers);
        file.image.security_json = i.security_json;
        file
    } else if version == VERSION_7 {
        let SnapFileV7 { meta_json, image: i } = archived(&aligned)?;
        let mut file = upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), i.topics, i.resource_configs, i.brokers);
        (file.image.security_json, file.image.features_json) = (i.security_json, i.features_json);
        file
    } else if version == VERSION_8 {
        let SnapFileV8 { meta_json, image: i } = archived(&aligned)?;
        let mut file = upgraded(meta_json, (i.cluster_id, i.applied_index, i.next_producer_id), i.topics, i.resource_configs, i.brokers);
        (file.image.security_json, file.image.features_json, file.image.elr_json) = (i.security_json, i.features_json, i.elr_json);
        file
    } else {
        rkyv::from_bytes::<SnapFile, rkyv::rancor::Error>(&aligned).map_err(|e| SnapshotError::Archive(e.to_string()))?
    };
    let meta: SnapshotMeta = serde_json::from_slice(&file.meta_json).map_err(|e| SnapshotError::Meta(e.to_string()))?;
    Ok((meta, MetadataImage::try_from(file.image)?))
}

/// An archive of type `T` (any layout version), validated.
fn archived<T>(aligned: &[u8]) -> Result<T, SnapshotError>
where
    T: rkyv::Archive,
    T::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Error>>
        + rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<rkyv::rancor::Error>>,
{
    rkyv::from_bytes::<T, rkyv::rancor::Error>(aligned).map_err(|e| SnapshotError::Archive(e.to_string()))
}

/// An older layout's content in the current layout (what it lacked is empty).
fn upgraded(
    meta_json: Vec<u8>,
    (cluster_id, applied_index, next_producer_id): (String, u64, i64),
    topics: Vec<SnapTopic>,
    resource_configs: Vec<SnapResourceConfigs>,
    brokers: Vec<SnapBroker>,
) -> SnapFile {
    let (security_json, features_json, elr_json, remote_log_json) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    SnapFile {
        meta_json,
        image: SnapImage {
            cluster_id,
            applied_index,
            next_producer_id,
            topics,
            resource_configs,
            brokers,
            security_json,
            features_json,
            elr_json,
            remote_log_json,
        },
    }
}

/// Durably replaces the snapshot file in `dir`.
pub fn store(dir: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic(&dir.join(SNAPSHOT_FILE), bytes)
}

/// Loads the snapshot file in `dir`, if any. Corruption is an error that names the file:
/// the log before the snapshot has been purged, so nothing can replace it.
pub fn load(dir: &Path) -> Result<Option<(SnapshotMeta, MetadataImage, Vec<u8>)>, String> {
    let path = dir.join(SNAPSHOT_FILE);
    let bytes = match read_if_exists(&path) {
        Ok(None) => return Ok(None),
        Ok(Some(b)) => b,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    match decode(&bytes) {
        Ok((meta, image)) => Ok(Some((meta, image, bytes))),
        Err(e) => Err(format!("{} is corrupt ({e}); the log before it was purged, so restore the file from a backup or another controller", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_files_still_load() {
        let meta = SnapshotMeta::default();
        let v1 = SnapFileV1 {
            meta_json: serde_json::to_vec(&meta).unwrap(),
            image: SnapImageV1 { cluster_id: "c".into(), applied_index: 7, next_producer_id: 9, topics: Vec::new() },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v1).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_1, &archived)).unwrap();
        assert_eq!((image.cluster_id.as_str(), image.applied_index, image.next_producer_id), ("c", 7, 9));
        assert!(image.resource_configs.is_empty());
    }

    #[test]
    fn version_2_partitions_load_unassigned() {
        let v2 = SnapFileV2 {
            meta_json: serde_json::to_vec(&SnapshotMeta::default()).unwrap(),
            image: SnapImageV2 {
                cluster_id: "c".into(),
                applied_index: 7,
                next_producer_id: 9,
                topics: vec![SnapTopicV2 {
                    name: "t".into(),
                    topic_id: [2; 16],
                    partitions: vec![SnapPartitionV2 { partition: 0, shard: 1, leader_epoch: 3 }],
                    configs: Vec::new(),
                }],
                resource_configs: Vec::new(),
            },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v2).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_2, &archived)).unwrap();
        let mut expected = PartitionMeta::unassigned(0, 1);
        expected.leader_epoch = 3;
        assert_eq!(image.topics["t"].partitions, vec![expected]);
    }

    #[test]
    fn brokers_and_replicas_round_trip() {
        let mut image = MetadataImage::default();
        let listeners =
            vec![ListenerEndpoint { name: "PLAINTEXT".into(), host: "h".into(), port: 1 }, ListenerEndpoint { name: "SSL".into(), host: "h".into(), port: 2 }];
        image
            .brokers
            .insert(2, BrokerMeta { id: 2, incarnation: [5; 16], host: "h".into(), port: 1, rack: Some("r".into()), shard_count: 3, listeners, fenced: true });
        let mut p = PartitionMeta::new_on(0, vec![ReplicaMeta { broker: 2, shard: 1 }, ReplicaMeta { broker: 3, shard: 0 }]);
        p.partition_epoch = 4;
        image.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions: vec![p], configs: BTreeMap::new() });
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
    }

    #[test]
    fn eligible_leader_replicas_round_trip() {
        let mut image = MetadataImage { min_insync_replicas_default: 2, ..MetadataImage::default() };
        let mut p = PartitionMeta::new_on(0, (1..=3).map(|b| ReplicaMeta { broker: b, shard: 0 }).collect());
        (p.leader, p.isr, p.elr, p.last_known_elr) = (crate::cluster::image::NO_LEADER, vec![], vec![2, 3], vec![1]);
        let q = PartitionMeta::new_on(1, vec![ReplicaMeta { broker: 1, shard: 0 }]);
        image.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions: vec![p, q], configs: BTreeMap::new() });
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
    }

    #[test]
    fn remote_segments_round_trip() {
        use crate::remote::segment_metadata::{RemoteLogSegmentMetadata, RemoteSegmentState};
        let mut image = MetadataImage::default();
        image.topics.insert(
            "t".into(),
            TopicMeta { name: "t".into(), topic_id: [1; 16], partitions: vec![PartitionMeta::new_on(0, vec![])], configs: BTreeMap::new() },
        );
        let seg = |id: u8, start: i64, state| RemoteLogSegmentMetadata {
            segment_id: [id; 16],
            start_offset: start,
            end_offset: start + 9,
            max_timestamp_ms: 5,
            broker_id: 1,
            event_timestamp_ms: 6,
            leader_epochs: vec![(0, start)],
            size_bytes: 700,
            state,
        };
        image.remote_log.apply(&[1; 16], 0, &seg(1, 0, RemoteSegmentState::CopySegmentStarted)).unwrap();
        image.remote_log.apply(&[1; 16], 0, &seg(1, 0, RemoteSegmentState::CopySegmentFinished)).unwrap();
        image.remote_log.apply(&[1; 16], 0, &seg(2, 10, RemoteSegmentState::CopySegmentStarted)).unwrap();
        image.remote_log.advance_log_start(&[1; 16], 0, 4);
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
        assert_eq!((back.remote_log.highest_offset(&[1; 16], 0), back.remote_log.partition(&[1; 16], 0).unwrap().segments().len()), (9, 2));
    }

    #[test]
    fn an_ongoing_reassignment_round_trips() {
        let mut image = MetadataImage::default();
        let mut p = PartitionMeta::new_on(0, vec![ReplicaMeta { broker: 3, shard: 0 }, ReplicaMeta { broker: 1, shard: 1 }]);
        (p.adding_replicas, p.removing_replicas) = (vec![3], vec![1]);
        image.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [1; 16], partitions: vec![p], configs: BTreeMap::new() });
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
        assert_eq!(back.topics["t"].partitions[0].removing_replicas, vec![1]);
    }

    #[test]
    fn version_3_partitions_load_with_no_reassignment() {
        let part = SnapPartitionV3 { partition: 0, shard: 1, leader_epoch: 3, replicas: vec![(2, 1)], leader: 2, isr: vec![2], partition_epoch: 5 };
        let v3 = SnapFileV3 {
            meta_json: serde_json::to_vec(&SnapshotMeta::default()).unwrap(),
            image: SnapImageV3 {
                cluster_id: "c".into(),
                applied_index: 7,
                next_producer_id: 9,
                topics: vec![SnapTopicV3 { name: "t".into(), topic_id: [2; 16], partitions: vec![part], configs: Vec::new() }],
                resource_configs: Vec::new(),
                brokers: Vec::new(),
            },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v3).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_3, &archived)).unwrap();
        let p = &image.topics["t"].partitions[0];
        assert_eq!((p.leader, p.partition_epoch, p.is_reassigning()), (2, 5, false));
    }

    #[test]
    fn version_4_brokers_load_with_only_their_plaintext_endpoint() {
        let broker = SnapBrokerV4 { id: 2, incarnation: [5; 16], host: "h".into(), port: 9092, rack: None, shard_count: 1, fenced: false };
        let v4 = SnapFileV4 {
            meta_json: serde_json::to_vec(&SnapshotMeta::default()).unwrap(),
            image: SnapImageV4 {
                cluster_id: "c".into(),
                applied_index: 7,
                next_producer_id: 9,
                topics: Vec::new(),
                resource_configs: Vec::new(),
                brokers: vec![broker],
            },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v4).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_4, &archived)).unwrap();
        let b = &image.brokers[&2];
        assert!(b.listeners.is_empty());
        assert_eq!(b.endpoint("PLAINTEXT"), Some(("h", 9092)));
        assert_eq!(b.endpoint("SSL"), None);
    }

    #[test]
    fn resource_configs_round_trip() {
        let mut image = MetadataImage::default();
        image.resource_configs.insert(ConfigResource::Broker(String::new()), [("log.retention.ms".to_string(), "5".to_string())].into());
        image.resource_configs.insert(ConfigResource::Group("g".into()), [("consumer.session.timeout.ms".to_string(), "50000".to_string())].into());
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
    }

    #[test]
    fn scram_credentials_round_trip_and_version_5_loads_without_them() {
        use crate::security::scram::{ScramCredential, ScramMechanism};
        let mut image = MetadataImage::default();
        let c = ScramCredential { salt: vec![1, 2], stored_key: vec![3; 32], server_key: vec![4; 32], iterations: 4096 };
        image.security.set_scram_credential("alice", ScramMechanism::Sha512, c.clone());
        image.security.set_scram_credential("alice", ScramMechanism::Sha256, c.clone());
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!(back, image);
        assert_eq!(back.security.scram_credential("alice", ScramMechanism::Sha512), Some(&c));
        let v5 = SnapFileV5 {
            meta_json: serde_json::to_vec(&SnapshotMeta::default()).unwrap(),
            image: SnapImageV5 {
                cluster_id: "c".into(),
                applied_index: 7,
                next_producer_id: 9,
                topics: Vec::new(),
                resource_configs: Vec::new(),
                brokers: Vec::new(),
            },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v5).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_5, &archived)).unwrap();
        assert_eq!((image.applied_index, image.security.scram_credentials.len()), (7, 0));
    }

    #[test]
    fn features_round_trip_and_version_6_loads_the_bootstrap_levels() {
        use crate::cluster::features::{GROUP_VERSION, TRANSACTION_VERSION};
        let mut image = MetadataImage::default();
        image.features.set(&[(GROUP_VERSION.into(), 0), (TRANSACTION_VERSION.into(), 1)]);
        let (_, back) = decode(&encode(&SnapshotMeta::default(), &image).unwrap()).unwrap();
        assert_eq!((back.features.level(GROUP_VERSION), back.features.level(TRANSACTION_VERSION)), (0, 1));
        assert_eq!(back, image);
        let security_json = serde_json::to_vec(&SecurityImage::default()).unwrap();
        let v6 = SnapFileV6 {
            meta_json: serde_json::to_vec(&SnapshotMeta::default()).unwrap(),
            image: SnapImageV6 {
                cluster_id: "c".into(),
                applied_index: 7,
                next_producer_id: 9,
                topics: Vec::new(),
                resource_configs: Vec::new(),
                brokers: Vec::new(),
                security_json,
            },
        };
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&v6).unwrap();
        let (_, image) = decode(&frame::encode(MAGIC, VERSION_6, &archived)).unwrap();
        assert_eq!((image.applied_index, image.features), (7, FinalizedFeatures::default()));
    }
}
