//! Turns client requests into commands: validates them against the latest committed image
//! and makes every decision (topic id, placement, resulting configs) up front, so the
//! committed record is self-contained. Error texts follow Kafka's where it has one.
use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::config_defs::{self, ConfigDefError};
use crate::cluster::image::{BrokerId, ConfigResource, MetadataImage, TopicMeta};
use crate::cluster::topic_config::{self, TopicConfig, TopicConfigDefaults};
use crate::cluster::topic_remote_storage;

use super::placement::place;
use super::types::Command;
use super::{ConfigOp, ControllerError, MAX_PARTITIONS_PER_TOPIC, MAX_PRODUCER_ID_BLOCK};

/// Longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Kafka's topic name rules.
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    if name.is_empty() {
        return Err(ControllerError::InvalidTopic("Topic name is illegal, it can't be empty".into()));
    }
    if name == "." || name == ".." {
        return Err(ControllerError::InvalidTopic("Topic name cannot be \".\" or \"..\"".into()));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(ControllerError::InvalidTopic(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"
        )));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return Err(ControllerError::InvalidTopic(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )));
    }
    Ok(())
}

/// Kafka forbids topics whose names differ only by '.' vs '_' (they collide in metric names).
fn colliding_topic<'a>(image: &'a MetadataImage, name: &str) -> Option<&'a str> {
    let norm = |s: &str| s.replace('.', "_");
    let n = norm(name);
    image.topics.keys().find(|k| k.as_str() != name && norm(k) == n).map(String::as_str)
}

fn resolve_configs(defaults: &TopicConfigDefaults, configs: &BTreeMap<String, String>) -> Result<TopicConfig, ControllerError> {
    TopicConfig::resolve(defaults, configs).map_err(ControllerError::InvalidConfig)
}

/// Kafka's tiered-storage rules on the topic's new configs (`was`: its configs before).
fn check_remote_storage(ctx: &ProposeCtx<'_>, new: &TopicConfig, was: Option<&BTreeMap<String, String>>) -> Result<(), ControllerError> {
    let was_enabled = was.and_then(|c| TopicConfig::resolve(ctx.defaults, c).ok()).is_some_and(|c| c.remote_storage_enable);
    topic_remote_storage::validate(new, was_enabled, ctx.remote_storage_system_enabled).map_err(ControllerError::InvalidConfig)
}

/// The settings proposals depend on.
pub struct ProposeCtx<'a> {
    pub default_num_partitions: i32,
    /// Kafka's `default.replication.factor`, used for replication factor -1.
    pub default_replication_factor: i16,
    pub defaults: &'a TopicConfigDefaults,
    /// `unstable.feature.versions.enable`: feature levels still being built are supported.
    pub unstable_feature_versions: bool,
    /// `remote.log.storage.system.enable`: topics may be tiered (checked on the
    /// controller, as Kafka's).
    pub remote_storage_system_enabled: bool,
}

/// How a CreateTopics asks for its partitions: counts (-1 = the default), or an explicit
/// assignment (broker ids per partition; then both counts are -1).
#[derive(Clone, Copy)]
pub struct Layout<'a> {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignments: &'a [Vec<BrokerId>],
}

#[cfg(test)]
impl Layout<'_> {
    pub fn counts(num_partitions: i32, replication_factor: i16) -> Layout<'static> {
        Layout { num_partitions, replication_factor, assignments: &[] }
    }
}

/// Returns the command and the topic as it will be once committed (for validate_only).
pub fn create_topic(
    ctx: &ProposeCtx<'_>,
    image: &MetadataImage,
    name: String,
    layout: Layout<'_>,
    configs: BTreeMap<String, String>,
    topic_id: [u8; 16],
) -> Result<(Command, TopicMeta), ControllerError> {
    let Layout { num_partitions, replication_factor, assignments } = layout;
    validate_topic_name(&name)?;
    if image.topics.contains_key(&name) {
        return Err(ControllerError::TopicAlreadyExists(name));
    }
    if let Some(other) = colliding_topic(image, &name) {
        return Err(ControllerError::InvalidTopic(format!("Topic '{name}' collides with existing topic: {other}")));
    }
    // Kafka: with an explicit assignment, num_partitions and replication_factor are -1.
    let n = if !assignments.is_empty() {
        if num_partitions != -1 || replication_factor != -1 {
            return Err(ControllerError::InvalidRequest(
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
            ));
        }
        i32::try_from(assignments.len()).unwrap_or(i32::MAX)
    } else if num_partitions == -1 {
        ctx.default_num_partitions
    } else {
        num_partitions
    };
    if n <= 0 {
        return Err(ControllerError::InvalidPartitions("Number of partitions was set to an invalid non-positive value.".into()));
    }
    if n > MAX_PARTITIONS_PER_TOPIC {
        return Err(ControllerError::InvalidPartitions(format!("Number of partitions {n} exceeds the limit of {MAX_PARTITIONS_PER_TOPIC} per topic.")));
    }
    let rf = match replication_factor {
        -1 => usize::try_from(ctx.default_replication_factor).unwrap_or(1).max(1),
        rf if rf <= 0 => {
            return Err(ControllerError::InvalidReplicationFactor("Replication factor must be larger than 0, or -1 to use the default value.".into()))
        }
        rf => rf as usize, // > 0
    };
    check_assignments(assignments)?;
    check_remote_storage(ctx, &resolve_configs(ctx.defaults, &configs)?, None)?;
    // n is in 1..=MAX_PARTITIONS_PER_TOPIC, so it fits usize.
    let replicas = place(image, n as usize, rf, assignments)?;
    let cmd = Command::CreateTopic { name: name.clone(), topic_id, shards: Vec::new(), replicas, configs: configs.clone() };
    // Preview = what apply will produce; computed by the same code (which reads the
    // brokers' liveness for the ISR).
    let mut scratch = MetadataImage { brokers: image.brokers.clone(), ..MetadataImage::default() };
    let (resp, _) = super::apply::apply(&mut scratch, image.applied_index, &cmd);
    match resp.0 {
        Ok(super::types::Applied::TopicCreated(meta)) => Ok((cmd, meta)),
        other => Err(ControllerError::InvalidRequest(format!("internal: create preview failed: {other:?}"))),
    }
}

/// A topic without partitions (none in practice) grows with this many replicas.
const DEFAULT_REPLICATION_FACTOR: usize = 1;

/// Every partition of an explicit assignment names at least one broker, each once, and
/// all partitions have the same number of replicas (Kafka's checks).
fn check_assignments(assignments: &[Vec<BrokerId>]) -> Result<(), ControllerError> {
    let rf = assignments.first().map_or(0, Vec::len);
    for (i, brokers) in assignments.iter().enumerate() {
        if brokers.is_empty() {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes an empty replica list for partition {i}."
            )));
        }
        if brokers.len() != rf {
            return Err(ControllerError::InvalidReplicaAssignment(format!("The manual partition assignment includes the partition {i} with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).", brokers.len())));
        }
        if brokers.iter().enumerate().any(|(j, b)| brokers[..j].contains(b)) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the partition {i} with duplicate replicas."
            )));
        }
    }
    Ok(())
}

fn live_topic<'a>(image: &'a MetadataImage, name: &str) -> Result<&'a TopicMeta, ControllerError> {
    image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))
}

/// Grows `name` to `total_count` partitions; `assignments` (Kafka's explicit replica
/// assignment, broker ids per new partition) is empty or names every new partition.
pub fn create_partitions(
    _ctx: &ProposeCtx<'_>,
    image: &MetadataImage,
    name: &str,
    total_count: i32,
    assignments: &[Vec<BrokerId>],
) -> Result<Command, ControllerError> {
    let topic = live_topic(image, name)?;
    let current = topic.partitions.len() as i32;
    if total_count < current {
        return Err(ControllerError::InvalidPartitions(format!("Topic currently has {current} partitions, which is higher than the requested {total_count}.")));
    }
    if total_count == current {
        return Err(ControllerError::InvalidPartitions(format!("Topic already has {current} partitions.")));
    }
    if total_count > MAX_PARTITIONS_PER_TOPIC {
        return Err(ControllerError::InvalidPartitions(format!(
            "Number of partitions {total_count} exceeds the limit of {MAX_PARTITIONS_PER_TOPIC} per topic."
        )));
    }
    // New partitions get as many replicas as the topic's first partition has.
    let rf = topic.partitions.first().map_or(DEFAULT_REPLICATION_FACTOR, |p| p.replicas.len().max(1));
    // total_count > current >= 0, so the difference is positive.
    let added = (total_count - current) as usize;
    if !assignments.is_empty() {
        // Kafka's ReplicationControlManager messages, word for word.
        if assignments.len() != added {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                assignments.len()
            )));
        }
        check_assignments(assignments)?;
        if let Some((i, a)) = assignments.iter().enumerate().find(|(_, a)| a.len() != rf) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the partition {} with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
                current as usize + i,
                a.len()
            )));
        }
    }
    let new_replicas = place(image, added, rf, assignments)?;
    Ok(Command::CreatePartitions { name: name.to_string(), topic_id: topic.topic_id, new_shards: Vec::new(), new_replicas })
}

pub fn delete_topic(image: &MetadataImage, name: &str) -> Result<Command, ControllerError> {
    let topic = live_topic(image, name)?;
    Ok(Command::DeleteTopic { name: name.to_string(), topic_id: topic.topic_id })
}

/// The key an op names.
fn op_key(op: &ConfigOp) -> &str {
    match op {
        ConfigOp::Set(k, _) | ConfigOp::Delete(k) | ConfigOp::Append(k, _) | ConfigOp::Subtract(k, _) => k,
    }
}

/// Refuses a request naming one key twice (Kafka: INVALID_CONFIG on the resource).
fn check_unique_keys(ops: &[ConfigOp]) -> Result<(), ControllerError> {
    let mut seen = BTreeSet::new();
    for op in ops {
        let key = op_key(op);
        if !seen.insert(key) {
            return Err(ControllerError::InvalidConfig(format!("Error due to duplicate config keys: {key}")));
        }
    }
    Ok(())
}

/// Applies IncrementalAlterConfigs ops (or, with `replace`, legacy AlterConfigs: the ops
/// are the whole new set) to the topic's overrides; the result is validated as a whole and
/// replaces the overrides when committed.
pub fn alter_configs(ctx: &ProposeCtx<'_>, image: &MetadataImage, name: &str, ops: Vec<ConfigOp>, replace: bool) -> Result<Command, ControllerError> {
    let topic = live_topic(image, name)?;
    let mut configs = if replace { BTreeMap::new() } else { topic.configs.clone() };
    check_unique_keys(&ops)?;
    for op in ops {
        let key = op_key(&op).to_string();
        if !topic_config::is_known_key(&key) {
            return Err(ControllerError::InvalidConfig(format!("Unknown topic config name: {key}")));
        }
        match op {
            ConfigOp::Set(k, v) => {
                topic_config::validate_key_value(&k, &v).map_err(ControllerError::InvalidConfig)?;
                configs.insert(k, v);
            }
            ConfigOp::Delete(k) => {
                configs.remove(&k);
            }
            ConfigOp::Append(k, _) | ConfigOp::Subtract(k, _) if !topic_config::is_list_key(&k) => {
                return Err(ControllerError::InvalidConfig(format!("Config value append/subtract is not allowed for config key: {k} (not a list config)")));
            }
            ConfigOp::Append(k, v) => {
                let mut items = current_list(ctx.defaults, &configs, &k);
                for item in topic_config::split_list(&v) {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                }
                configs.insert(k, items.join(","));
            }
            ConfigOp::Subtract(k, v) => {
                let remove = topic_config::split_list(&v);
                let items: Vec<String> = current_list(ctx.defaults, &configs, &k).into_iter().filter(|i| !remove.contains(i)).collect();
                configs.insert(k, items.join(","));
            }
        }
    }
    check_remote_storage(ctx, &resolve_configs(ctx.defaults, &configs)?, Some(&topic.configs))?;
    Ok(Command::SetTopicConfigs { name: name.to_string(), topic_id: topic.topic_id, configs })
}

/// Applies config ops to a broker's or group's dynamic configs (`replace`: legacy
/// AlterConfigs, the ops are the whole new set). List ops (APPEND/SUBTRACT) are refused:
/// the one dynamic list key, log.cleanup.policy, is SET as a whole.
pub fn alter_resource_configs(image: &MetadataImage, resource: ConfigResource, ops: Vec<ConfigOp>, replace: bool) -> Result<Command, ControllerError> {
    let mut configs = if replace { BTreeMap::new() } else { image.configs_of(&resource).clone() };
    check_unique_keys(&ops)?;
    for op in ops {
        match op {
            ConfigOp::Set(k, v) => {
                configs.insert(k, v);
            }
            ConfigOp::Delete(k) => {
                configs.remove(&k);
            }
            ConfigOp::Append(k, _) | ConfigOp::Subtract(k, _) => {
                return Err(ControllerError::InvalidConfig(format!("Config value append/subtract is not allowed for config key: {k} (set the whole value)")));
            }
        }
    }
    config_defs::validate_resource_configs(&resource, &configs).map_err(|e| match e {
        ConfigDefError::InvalidRequest(m) => ControllerError::InvalidRequest(m),
        ConfigDefError::InvalidConfig(m) => ControllerError::InvalidConfig(m),
    })?;
    Ok(Command::SetResourceConfigs { resource, configs })
}

/// The effective items of list config `key`: the override if set, else the default.
fn current_list(defaults: &TopicConfigDefaults, configs: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    match configs.get(key) {
        Some(v) => topic_config::split_list(v),
        None => topic_config::split_list(&topic_config::default_value(defaults, key).unwrap_or_default()),
    }
}

pub fn allocate_producer_ids(image: &MetadataImage, count: i64) -> Result<Command, ControllerError> {
    if !(1..=MAX_PRODUCER_ID_BLOCK).contains(&count) {
        return Err(ControllerError::InvalidRequest(format!("producer id block size must be in 1..={MAX_PRODUCER_ID_BLOCK}, got {count}")));
    }
    if image.next_producer_id.checked_add(count).is_none() {
        return Err(ControllerError::InvalidRequest("producer id space exhausted".into()));
    }
    Ok(Command::AllocateProducerIds { count })
}

/// A new cluster id: 16 random bytes as unpadded base64url (22 chars), like Kafka's
/// `Uuid.randomUuid().toString()`, which also never starts with '-'.
pub fn new_cluster_id() -> String {
    use base64::Engine;
    loop {
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}
