//! Config definitions for broker and group resources, as DescribeConfigs reports them and
//! IncrementalAlterConfigs / AlterConfigs accept them (topic keys have their own table in
//! `topic_config.rs`, with the same type and documentation columns).
//!
//! Broker keys are the subset of what Apache Kafka 4.1 answers for
//! `kafka-configs --describe --entity-type brokers --entity-name 1 --all` that applies to
//! shardlog, each with the value shardlog actually uses (read from `Config`). Kafka keys
//! left out, and why:
//! - SSL, SASL, OAuth, delegation tokens, authorizer, principal builder: not reported yet
//!   (they are shardlog settings, docs/security.md; Kafka reports most per listener or as
//!   sensitive);
//! - remote.log.* keys shardlog has no use for (the metadata manager's, thread pools but
//!   the copier's and the readers'), and the remote store plugin's `rsm.config.*` keys:
//!   not reported yet;
//! - replica.* (but replica.lag.time.max.ms), num.replica.fetchers, replication quotas,
//!   controlled.shutdown.*, broker.heartbeat/session.*, controller.quorum.*, metadata.log.*,
//!   metadata.max.*: replication and the openraft metadata quorum have their own settings
//!   (docs/cluster.md), not Kafka's knobs one to one;
//! - transaction.partition.verification.enable, transaction.remove.expired.transaction.*,
//!   producer.id.expiration.check.interval.ms: verification is always on; expiry runs
//!   with the transaction coordinator's cleanup and the retention check;
//! - group.share.* (but max.share.sessions and the lock, delivery and record-lock limits), group.streams.*,
//!   share.coordinator.* (but the state topic's and the snapshot interval): no streams
//!   groups; share groups are in progress (the share coordinator's threads, timeouts and
//!   pruning intervals are not settings here);
//! - num.io.threads, num.network.threads, background.threads, num.recovery.threads.*,
//!   log.cleaner.threads, group.coordinator.threads: thread-per-core, one shard per core;
//! - log.retention.hours/minutes, log.roll.hours, log.roll.jitter.*: shardlog has only the
//!   millisecond forms (Kafka reports the others as synonyms of them);
//! - log.dir, log.preallocate, log.index.size.max.bytes, log.segment.delete.delay.ms,
//!   log.cleaner.io.*, log.cleaner.*compaction.lag.ms,
//!   log.flush.*checkpoint*, log.flush.scheduler.interval.ms, socket buffers, quotas,
//!   metrics reporters, max.connections*, offsets.commit.timeout.ms,
//!   offsets.load.buffer.size, purgatory intervals, queued.max.requests: shardlog has no
//!   such knob, so Kafka's default would not describe what it does.
//!
//! A broker key with a shardlog setting behind it takes its Kafka name, type, documentation
//! and scope from that setting's definition in `config/keys.rs` (`def`); the others (fixed
//! values, aliases such as broker.id) are written here.
//!
//! Dynamic broker keys are the topic defaults (Kafka's cluster-wide `log.*` keys): each maps
//! to a topic key (`topic_key`), is validated like it, and changes every partition's
//! effective config at run time. They are stored in the metadata log (a
//! `SetResourceConfigs` record), so every shard sees them and they survive a restart.
//! Per-broker-only keys: a listener's key store (`listener.name.<l>.ssl.keystore.*`,
//! `server/dynamic_tls.rs`), which this broker loads before it is committed.
use std::collections::BTreeMap;

use crate::config::{key, Config, FlushMode, KeyDef};

use super::image::{ConfigResource, MetadataImage};
use super::topic_config::{self, TopicConfig, TopicConfigDefaults};

/// Kafka's DescribeConfigs `config_type` codes (defined with the config keys).
pub use crate::config::ConfigType;

/// Kafka's DescribeConfigs `config_source` codes.
pub mod source {
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
    pub const GROUP_CONFIG: i8 = 8;
}

/// Kafka 4.1's bounds of the group configs (group.consumer.{min,max}.*); they are also the
/// broker keys of those names.
pub const GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS: i32 = 45_000;
pub const GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS: i32 = 60_000;
pub const GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS: i32 = 5_000;
pub const GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS: i32 = 15_000;

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";

/// Longest config value accepted from the network (values land in the metadata log).
pub const MAX_VALUE_LEN: usize = topic_config::MAX_VALUE_LEN;

/// Whether a broker key may change at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Set only in the config file / command line.
    ReadOnly,
    /// Dynamic, for this broker or as the cluster-wide default (Kafka's cluster-wide keys).
    ClusterWide,
}

pub struct BrokerKey {
    pub name: &'static str,
    pub ty: ConfigType,
    pub doc: &'static str,
    pub scope: Scope,
    /// Reported with a null value (Kafka's PASSWORD keys); shardlog has none today.
    pub sensitive: bool,
    /// The topic key a dynamic broker key is the default of.
    pub topic_key: Option<&'static str>,
    /// The value shardlog uses, from its static config.
    pub value: fn(&Config) -> String,
}

const fn ro(name: &'static str, ty: ConfigType, doc: &'static str, value: fn(&Config) -> String) -> BrokerKey {
    BrokerKey { name, ty, doc, scope: Scope::ReadOnly, sensitive: false, topic_key: None, value }
}

const fn dynamic(name: &'static str, ty: ConfigType, doc: &'static str, topic_key: &'static str, value: fn(&Config) -> String) -> BrokerKey {
    BrokerKey { name, ty, doc, scope: Scope::ClusterWide, sensitive: false, topic_key: Some(topic_key), value }
}

/// A broker key with a definition in `config/keys.rs`: its Kafka name, type, documentation
/// (the help line) and whether it is dynamic come from there; `topic_key` is the topic key a
/// dynamic one is the default of. Checked when the table is compiled.
const fn def(k: &KeyDef, topic_key: Option<&'static str>) -> BrokerKey {
    def_with(k, topic_key, k.value)
}

/// `def` with the value computed otherwise than the key's own rendering.
const fn def_with(k: &KeyDef, topic_key: Option<&'static str>, value: fn(&Config) -> String) -> BrokerKey {
    let Some(name) = k.kafka else { panic!("a broker key's definition needs its Kafka name") };
    let Some(ty) = k.kafka_type else { panic!("a broker key's definition needs its Kafka type (`kafka = \"..\" as Type`)") };
    assert!(k.dynamic == topic_key.is_some(), "a dynamic broker key, and only one, is the default of a topic key");
    let scope = if k.dynamic { Scope::ClusterWide } else { Scope::ReadOnly };
    BrokerKey { name, ty, doc: k.help, scope, sensitive: false, topic_key, value }
}

use ConfigType as T;

/// Every broker key shardlog reports, sorted by name.
pub const BROKER_KEYS: &[BrokerKey] = &[
    def(&key::add_partitions_to_txn_retry_backoff_max_ms, None),
    def(&key::add_partitions_to_txn_retry_backoff_ms, None),
    // A LIST in Kafka 4.4 (a STRING in 4.1).
    def_with(&key::advertised_listeners, None, |c| match c.listeners() {
        Ok(l) => l.all.iter().map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port)).collect::<Vec<_>>().join(","),
        Err(_) => String::new(),
    }),
    def(&key::auto_create_topics_enable, None),
    def(&key::auto_leader_rebalance_enable, None),
    ro("broker.id", T::Int, "This broker's id (same as node.id).", |c| c.node_id.to_string()),
    ro("compression.type", T::String, "Stored batches keep the producer's compression.", |_| "producer".into()),
    def(&key::default_replication_factor, None),
    ro("delete.topic.enable", T::Boolean, "Topics can be deleted.", |_| "true".into()),
    def(&key::fetch_max_bytes, None),
    ro("group.consumer.assignors", T::List, "Server-side assignors of KIP-848 consumer groups, the first is the default.", |_| "uniform,range".into()),
    def(&key::group_consumer_heartbeat_interval_ms, None),
    ro("group.consumer.max.heartbeat.interval.ms", T::Int, "Upper bound of a group's consumer.heartbeat.interval.ms.", |_| {
        GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS.to_string()
    }),
    ro("group.consumer.max.session.timeout.ms", T::Int, "Upper bound of a group's consumer.session.timeout.ms.", |_| {
        GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS.to_string()
    }),
    ro("group.consumer.max.size", T::Int, "Most members of a KIP-848 consumer group.", |c| c.group_max_size.to_string()),
    def(&key::group_consumer_migration_policy, None),
    ro("group.consumer.min.heartbeat.interval.ms", T::Int, "Lower bound of a group's consumer.heartbeat.interval.ms.", |_| {
        GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS.to_string()
    }),
    ro("group.consumer.min.session.timeout.ms", T::Int, "Lower bound of a group's consumer.session.timeout.ms.", |_| {
        GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS.to_string()
    }),
    def(&key::group_consumer_session_timeout_ms, None),
    def(&key::group_initial_rebalance_delay_ms, None),
    def(&key::group_max_session_timeout_ms, None),
    def(&key::group_max_size, None),
    def(&key::group_min_session_timeout_ms, None),
    def(&key::group_share_delivery_count_limit, None),
    def(&key::group_share_max_delivery_count_limit, None),
    def(&key::group_share_max_partition_max_record_locks, None),
    def(&key::group_share_max_record_lock_duration_ms, None),
    def(&key::group_share_max_share_sessions, None),
    def(&key::group_share_min_delivery_count_limit, None),
    def(&key::group_share_min_partition_max_record_locks, None),
    def(&key::group_share_min_record_lock_duration_ms, None),
    def(&key::group_share_partition_max_record_locks, None),
    def(&key::group_share_record_lock_duration_ms, None),
    ro("group.streams.assignors", T::List, "Task assignors of streams groups, the first is the default (built in: sticky).", |_| STREAMS_ASSIGNORS[0].into()),
    def(&key::group_streams_heartbeat_interval_ms, None),
    def(&key::group_streams_initial_rebalance_delay_ms, None),
    ro("group.streams.max.heartbeat.interval.ms", T::Int, "Upper bound of a group's streams.heartbeat.interval.ms.", |_| {
        StreamsGroupBounds::HEARTBEAT_INTERVAL_MS.end().to_string()
    }),
    ro("group.streams.max.session.timeout.ms", T::Int, "Upper bound of a group's streams.session.timeout.ms.", |_| {
        StreamsGroupBounds::SESSION_TIMEOUT_MS.end().to_string()
    }),
    ro("group.streams.max.size", T::Int, "Most members of a streams group.", |c| c.group_max_size.to_string()),
    ro("group.streams.max.standby.replicas", T::Int, "Upper bound of a group's streams.num.standby.replicas.", |_| {
        StreamsGroupBounds::NUM_STANDBY_REPLICAS.end().to_string()
    }),
    ro("group.streams.min.heartbeat.interval.ms", T::Int, "Lower bound of a group's streams.heartbeat.interval.ms.", |_| {
        StreamsGroupBounds::HEARTBEAT_INTERVAL_MS.start().to_string()
    }),
    ro("group.streams.min.session.timeout.ms", T::Int, "Lower bound of a group's streams.session.timeout.ms.", |_| {
        StreamsGroupBounds::SESSION_TIMEOUT_MS.start().to_string()
    }),
    def(&key::group_streams_num_standby_replicas, None),
    def(&key::group_streams_rack_aware_assignment_tags, None),
    def(&key::group_streams_session_timeout_ms, None),
    def(&key::leader_imbalance_check_interval_seconds, None),
    def(&key::leader_imbalance_per_broker_percentage, None),
    def_with(&key::listeners, None, |c| format!("PLAINTEXT://{}", c.listen)),
    def(&key::log_cleaner_backoff_ms, None),
    def(&key::log_cleaner_dedupe_buffer_size, None),
    ro("log.cleaner.delete.retention.ms", T::Long, "Default of delete.retention.ms: how long tombstones are kept.", |_| {
        topic_config::DEFAULT_DELETE_RETENTION_MS.to_string()
    }),
    ro("log.cleaner.enable", T::Boolean, "Compacted topics are cleaned.", |_| "true".into()),
    ro("log.cleaner.min.cleanable.ratio", T::Double, "Default of min.cleanable.dirty.ratio.", |_| topic_config::DEFAULT_MIN_CLEANABLE_DIRTY_RATIO.to_string()),
    dynamic("log.cleanup.policy", T::List, "Default of cleanup.policy: delete, compact or both.", topic_config::CLEANUP_POLICY, |_| "delete".into()),
    def_with(&key::log_dirs, None, |c| c.resolved_log_dirs().iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(",")),
    def_with(&key::log_flush_interval_messages, Some(topic_config::FLUSH_MESSAGES), |c| {
        if c.flush == FlushMode::Always {
            "1".into()
        } else {
            c.log_flush_interval_messages.to_string()
        }
    }),
    def(&key::log_flush_interval_ms, Some(topic_config::FLUSH_MS)),
    def(&key::log_index_interval_bytes, None),
    def(&key::log_local_retention_bytes, Some(topic_config::LOCAL_RETENTION_BYTES)),
    def(&key::log_local_retention_ms, Some(topic_config::LOCAL_RETENTION_MS)),
    def(&key::log_message_timestamp_after_max_ms, Some(topic_config::MESSAGE_TIMESTAMP_AFTER_MAX_MS)),
    def(&key::log_message_timestamp_before_max_ms, Some(topic_config::MESSAGE_TIMESTAMP_BEFORE_MAX_MS)),
    def(&key::log_message_timestamp_type, Some(topic_config::MESSAGE_TIMESTAMP_TYPE)),
    def(&key::log_retention_bytes, Some(topic_config::RETENTION_BYTES)),
    def(&key::log_retention_check_interval_ms, None),
    def(&key::log_retention_ms, Some(topic_config::RETENTION_MS)),
    def(&key::log_roll_ms, Some(topic_config::SEGMENT_MS)),
    def(&key::log_segment_bytes, Some(topic_config::SEGMENT_BYTES)),
    def(&key::message_max_bytes, Some(topic_config::MAX_MESSAGE_BYTES)),
    def(&key::min_insync_replicas, Some(topic_config::MIN_INSYNC_REPLICAS)),
    def(&key::node_id, None),
    def(&key::num_partitions, None),
    def(&key::offset_metadata_max_bytes, None),
    def(&key::offsets_retention_check_interval_ms, None),
    def(&key::offsets_retention_minutes, None),
    def(&key::offsets_topic_num_partitions, None),
    def(&key::offsets_topic_replication_factor, None),
    def(&key::offsets_topic_segment_bytes, None),
    def(&key::producer_id_expiration_ms, None),
    def(&key::queued_max_request_bytes, None),
    def(&key::remote_fetch_max_wait_ms, None),
    def(&key::remote_log_index_file_cache_total_size_bytes, None),
    def(&key::remote_log_manager_copier_thread_pool_size, None),
    def(&key::remote_log_manager_copy_max_bytes_per_second, None),
    def(&key::remote_log_manager_fetch_max_bytes_per_second, None),
    def(&key::remote_log_manager_task_interval_ms, None),
    def(&key::remote_log_reader_threads, None),
    def(&key::remote_log_storage_system_enable, None),
    def(&key::replica_lag_time_max_ms, None),
    def(&key::share_coordinator_snapshot_update_records_per_snapshot, None),
    def(&key::share_coordinator_state_topic_min_isr, None),
    def(&key::share_coordinator_state_topic_num_partitions, None),
    def(&key::share_coordinator_state_topic_replication_factor, None),
    def(&key::share_coordinator_state_topic_segment_bytes, None),
    def(&key::socket_request_max_bytes, None),
    def(&key::transaction_abort_timed_out_transaction_cleanup_interval_ms, None),
    def(&key::transaction_max_timeout_ms, None),
    def(&key::transaction_state_log_min_isr, None),
    def(&key::transaction_state_log_num_partitions, None),
    def(&key::transaction_state_log_replication_factor, None),
    def(&key::transaction_state_log_segment_bytes, None),
    def(&key::transactional_id_expiration_ms, None),
    def(&key::unclean_leader_election_enable, Some(topic_config::UNCLEAN_LEADER_ELECTION_ENABLE)),
    def(&key::unstable_feature_versions_enable, None),
];

/// Why a dynamic key cannot change under this broker's static config, if it cannot: with
/// `flush = always` every write is synced whatever log.flush.interval.messages says.
pub fn fixed_by_static_config(config: &Config, name: &str) -> Option<String> {
    (name == "log.flush.interval.messages" && config.flush == FlushMode::Always)
        .then(|| format!("Cannot update {name}: this broker runs with flush = always, which syncs every write (set flush = never to use it)"))
}

pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

/// One synonym of a described config: where a value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synonym {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
}

/// One described config: the effective value first in `synonyms` order (Kafka's
/// precedence), `source` that of the effective one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub sensitive: bool,
    pub ty: ConfigType,
    pub doc: &'static str,
    pub synonyms: Vec<Synonym>,
}

/// Why a config change is refused; the server maps the kinds to Kafka error codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigDefError {
    /// Kafka: INVALID_REQUEST (read-only broker key, unknown broker key).
    #[error("{0}")]
    InvalidRequest(String),
    /// Kafka: INVALID_CONFIG (a value out of range or of the wrong type).
    #[error("{0}")]
    InvalidConfig(String),
}

fn broker_synonyms(k: &BrokerKey, config: &Config, image: &MetadataImage, node_id: &str) -> Vec<Synonym> {
    let mut out = Vec::new();
    let mut dynamic = |resource: ConfigResource, source: i8| {
        if let Some(v) = image.configs_of(&resource).get(k.name) {
            out.push(Synonym { name: k.name.to_string(), value: Some(v.clone()), source });
        }
    };
    if !node_id.is_empty() {
        dynamic(ConfigResource::Broker(node_id.to_string()), source::DYNAMIC_BROKER_CONFIG);
    }
    dynamic(ConfigResource::Broker(String::new()), source::DYNAMIC_DEFAULT_BROKER_CONFIG);
    let static_value = (k.value)(config);
    let default_value = (k.value)(&Config::default());
    if static_value != default_value {
        out.push(Synonym { name: k.name.to_string(), value: Some(static_value), source: source::STATIC_BROKER_CONFIG });
    }
    out.push(Synonym { name: k.name.to_string(), value: Some(default_value), source: source::DEFAULT_CONFIG });
    out
}

fn described(name: &str, ty: ConfigType, doc: &'static str, read_only: bool, sensitive: bool, synonyms: Vec<Synonym>) -> Described {
    let (value, source) = synonyms.first().map(|s| (s.value.clone(), s.source)).unwrap_or((None, source::DEFAULT_CONFIG));
    let mut synonyms = synonyms;
    if sensitive {
        for s in &mut synonyms {
            s.value = None;
        }
    }
    Described { name: name.to_string(), value: if sensitive { None } else { value }, source, read_only, sensitive, ty, doc, synonyms }
}

/// DescribeConfigs of a broker resource: `node_id` is this broker's id, or empty for the
/// cluster-wide default resource (which lists only the dynamic defaults set, as Kafka).
pub fn describe_broker(config: &Config, image: &MetadataImage, node_id: &str) -> Vec<Described> {
    if node_id.is_empty() {
        return image
            .configs_of(&ConfigResource::Broker(String::new()))
            .iter()
            .filter_map(|(name, value)| {
                let k = broker_key(name)?;
                let syn = Synonym { name: name.clone(), value: Some(value.clone()), source: source::DYNAMIC_DEFAULT_BROKER_CONFIG };
                Some(described(name, k.ty, k.doc, false, k.sensitive, vec![syn]))
            })
            .collect();
    }
    BROKER_KEYS
        .iter()
        .map(|k| {
            let read_only = k.scope == Scope::ReadOnly || fixed_by_static_config(config, k.name).is_some();
            described(k.name, k.ty, k.doc, read_only, k.sensitive, broker_synonyms(k, config, image, node_id))
        })
        .collect()
}

/// The topic defaults this broker applies now: the static ones with the dynamic broker
/// configs on top (cluster-wide default, then this broker's own).
pub fn effective_topic_defaults(base: &TopicConfigDefaults, image: &MetadataImage, node_id: &str) -> TopicConfigDefaults {
    let mut overrides = BTreeMap::new();
    for resource in [ConfigResource::Broker(String::new()), ConfigResource::Broker(node_id.to_string())] {
        for (name, value) in image.configs_of(&resource) {
            if let Some(topic_key) = broker_key(name).and_then(|k| k.topic_key) {
                overrides.insert(topic_key.to_string(), value.clone());
            }
        }
    }
    match TopicConfig::resolve(base, &overrides) {
        Ok(tc) => tc.as_defaults(),
        Err(e) => {
            // Validated before commit; a bad stored value falls back to the static defaults.
            tracing::error!(error = %e, "stored dynamic broker config invalid; using static defaults");
            base.clone()
        }
    }
}

/// Synonyms of a topic key below the topic itself: the broker key it defaults to.
pub fn topic_key_broker_synonyms(topic_key: &str, config: &Config, image: &MetadataImage) -> Vec<Synonym> {
    let node_id = config.node_id.to_string();
    BROKER_KEYS.iter().find(|k| k.topic_key == Some(topic_key)).map(|k| broker_synonyms(k, config, image, &node_id)).unwrap_or_default()
}

/// Checks a whole dynamic config map of a broker or group before it is committed.
pub fn validate_resource_configs(resource: &ConfigResource, configs: &BTreeMap<String, String>) -> Result<(), ConfigDefError> {
    for (name, value) in configs {
        if value.len() > MAX_VALUE_LEN {
            return Err(ConfigDefError::InvalidConfig(format!("Invalid value for configuration {name}: longer than {MAX_VALUE_LEN} bytes")));
        }
        match resource {
            // A listener's key store: per broker only (Kafka's words); the receiving broker
            // loaded it before (`server/dynamic_tls.rs`).
            ConfigResource::Broker(id) if crate::security::tls_config::dynamic_listener_key(name).is_some() => {
                if id.is_empty() {
                    return Err(ConfigDefError::InvalidRequest(format!(
                        "Cannot update these configs at default cluster level, broker id must be specified: Set({name})"
                    )));
                }
            }
            ConfigResource::Broker(_) => validate_broker_key(name, value)?,
            ConfigResource::Group(_) => validate_group_key(name, value)?,
        }
    }
    Ok(())
}

fn validate_broker_key(name: &str, value: &str) -> Result<(), ConfigDefError> {
    let Some(k) = broker_key(name) else {
        return Err(ConfigDefError::InvalidRequest(format!("Unknown broker config name: {name} (shardlog reports the keys it knows with DescribeConfigs)")));
    };
    let Some(topic_key) = k.topic_key else {
        // Kafka's DynamicBrokerConfig refuses these with this wording.
        return Err(ConfigDefError::InvalidRequest(format!("Cannot update these configs dynamically: Set({name})")));
    };
    topic_config::validate_key_value(topic_key, value).map_err(|e| ConfigDefError::InvalidConfig(e.replace(topic_key, name)))
}

/// A group config key shardlog applies (Kafka's GroupConfig).
pub struct GroupKey {
    pub name: &'static str,
    pub doc: &'static str,
    pub kind: GroupKind,
    /// The broker default (group.consumer.* / group.share.*).
    pub default: fn(&Config) -> String,
}

pub enum GroupKind {
    /// An INT within the bounds Kafka 4.4's broker keys named by `bounds` have by default
    /// (checked by the controller, which does not see a broker's own bounds; a broker
    /// whose bounds are narrower clamps the value when it applies it).
    Int { min: i32, max: i32, bounds: &'static str },
    /// `share.auto.offset.reset`: latest, earliest or by_duration:<ISO-8601 duration>.
    ShareAutoOffsetReset,
    /// One of these strings (Kafka's `in(...)` validator).
    OneOf(&'static [&'static str]),
    /// true or false.
    Bool,
    /// A streams group's `streams.assignor.name`: one of `STREAMS_ASSIGNORS`.
    StreamsAssignor,
    /// A streams group's `rack.aware.assignment.tags`: comma separated, no empty entry, no
    /// duplicate (`config::rack_aware_assignment_tags`).
    TagList,
    /// A share group's dead-letter queue topic: blank (none) or a name not starting with
    /// `__` (Kafka's GroupConfig; the prefix and the topic's own opt-in are checked when
    /// records are written there).
    DeadLetterTopic,
}

pub const ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE: &str = "errors.deadletterqueue.copy.record.enable";
pub const ERRORS_DEADLETTERQUEUE_TOPIC_NAME: &str = "errors.deadletterqueue.topic.name";
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
pub const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
pub const SHARE_PARTITION_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
pub const STREAMS_ASSIGNOR_NAME: &str = "streams.assignor.name";
/// The task assignors streams groups may use (Kafka's built-in one; no plugged-in Java
/// class can be loaded here).
pub const STREAMS_ASSIGNORS: &[&str] = &["sticky"];
pub const STREAMS_HEARTBEAT_INTERVAL_MS: &str = "streams.heartbeat.interval.ms";
pub const STREAMS_INITIAL_REBALANCE_DELAY_MS: &str = "streams.initial.rebalance.delay.ms";
pub const STREAMS_NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
pub const STREAMS_RACK_AWARE_ASSIGNMENT_TAGS: &str = "streams.rack.aware.assignment.tags";
pub const STREAMS_SESSION_TIMEOUT_MS: &str = "streams.session.timeout.ms";

pub use crate::config::StreamsGroupBounds;

/// Kafka 4.4's group configs that apply to shardlog, sorted by name. Not here (refused as
/// unknown): share.renew.acknowledge.enable, share.assignment.interval.ms,
/// streams.assignment.interval.ms (and Kafka's internal streams.* keys).
pub const GROUP_KEYS: &[GroupKey] = &[
    GroupKey {
        name: CONSUMER_HEARTBEAT_INTERVAL_MS,
        doc: "How often members of this consumer group heartbeat.",
        kind: GroupKind::Int { min: GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS, max: GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS, bounds: "group.consumer.min/max" },
        default: |c| c.group_consumer_heartbeat_interval_ms.to_string(),
    },
    GroupKey {
        name: CONSUMER_SESSION_TIMEOUT_MS,
        doc: "A member of this consumer group silent this long is removed.",
        kind: GroupKind::Int { min: GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS, max: GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS, bounds: "group.consumer.min/max" },
        default: |c| c.group_consumer_session_timeout_ms.to_string(),
    },
    GroupKey {
        name: ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE,
        doc: "Whether this share group's dead-letter records carry the original record's key and value, or only the headers that say where it came from.",
        kind: GroupKind::Bool,
        default: |_| "false".to_string(),
    },
    GroupKey {
        name: ERRORS_DEADLETTERQUEUE_TOPIC_NAME,
        doc: "The dead-letter queue of this share group (KIP-1191, share.version 2): where rejected records and records delivered share.delivery.count.limit times are written before they are archived. Blank: none.",
        kind: GroupKind::DeadLetterTopic,
        default: |_| String::new(),
    },
    GroupKey {
        name: SHARE_AUTO_OFFSET_RESET,
        doc: "Where this share group starts reading a partition it has no offset for: latest, earliest or by_duration:<ISO-8601 duration>.",
        kind: GroupKind::ShareAutoOffsetReset,
        default: |_| "latest".to_string(),
    },
    GroupKey {
        name: SHARE_DELIVERY_COUNT_LIMIT,
        doc: "Deliveries of a record to this share group before it is archived.",
        kind: GroupKind::Int { min: 2, max: 10, bounds: "group.share.min/max.delivery.count.limit" },
        default: |c| c.group_share_delivery_count_limit.to_string(),
    },
    GroupKey {
        name: SHARE_HEARTBEAT_INTERVAL_MS,
        doc: "How often members of this share group heartbeat.",
        kind: GroupKind::Int { min: 5_000, max: 15_000, bounds: "group.share.min/max.heartbeat.interval.ms" },
        default: |_| ShareGroupDefaults::HEARTBEAT_INTERVAL_MS.to_string(),
    },
    GroupKey {
        name: SHARE_ISOLATION_LEVEL,
        doc: "How this share group reads records written transactionally: read_uncommitted (all of them, the default) or read_committed (below the last stable offset; aborted transactions' records are archived, never delivered).",
        kind: GroupKind::OneOf(&["read_committed", "read_uncommitted"]),
        default: |_| "read_uncommitted".to_string(),
    },
    GroupKey {
        name: SHARE_PARTITION_MAX_RECORD_LOCKS,
        doc: "Records of one share-partition this share group may hold acquired at once.",
        kind: GroupKind::Int { min: 100, max: 4_000, bounds: "group.share.min/max.partition.max.record.locks" },
        default: |c| c.group_share_partition_max_record_locks.to_string(),
    },
    GroupKey {
        name: SHARE_RECORD_LOCK_DURATION_MS,
        doc: "How long a record delivered to this share group stays locked to its member.",
        kind: GroupKind::Int { min: 15_000, max: 60_000, bounds: "group.share.min/max.record.lock.duration.ms" },
        default: |c| c.group_share_record_lock_duration_ms.to_string(),
    },
    GroupKey {
        name: SHARE_SESSION_TIMEOUT_MS,
        doc: "A member of this share group silent this long is removed.",
        kind: GroupKind::Int { min: 45_000, max: 60_000, bounds: "group.share.min/max.session.timeout.ms" },
        default: |_| ShareGroupDefaults::SESSION_TIMEOUT_MS.to_string(),
    },
    GroupKey {
        name: STREAMS_ASSIGNOR_NAME,
        doc: "The task assignor of this streams group (group.streams.assignors).",
        kind: GroupKind::StreamsAssignor,
        default: |_| STREAMS_ASSIGNORS[0].into(),
    },
    streams_int_key(
        STREAMS_HEARTBEAT_INTERVAL_MS,
        "How often members of this streams group heartbeat.",
        StreamsGroupBounds::HEARTBEAT_INTERVAL_MS,
        "group.streams.min/max.heartbeat.interval.ms",
        |c| c.group_streams_heartbeat_interval_ms.to_string(),
    ),
    streams_int_key(
        STREAMS_INITIAL_REBALANCE_DELAY_MS,
        "How long this streams group, new or emptied, waits for more members before its first assignment.",
        StreamsGroupBounds::INITIAL_REBALANCE_DELAY_MS,
        "at least 0",
        |c| c.group_streams_initial_rebalance_delay_ms.to_string(),
    ),
    streams_int_key(
        STREAMS_NUM_STANDBY_REPLICAS,
        "Standby replicas of each stateful task of this streams group.",
        StreamsGroupBounds::NUM_STANDBY_REPLICAS,
        "group.streams.max.standby.replicas",
        |c| c.group_streams_num_standby_replicas.to_string(),
    ),
    GroupKey {
        name: STREAMS_RACK_AWARE_ASSIGNMENT_TAGS,
        doc: "Client tag keys every member of this streams group should send (MISSING_CLIENT_TAGS otherwise); kept for rack-aware assignors.",
        kind: GroupKind::TagList,
        default: |c| c.group_streams_rack_aware_assignment_tags.clone(),
    },
    streams_int_key(
        STREAMS_SESSION_TIMEOUT_MS,
        "A member of this streams group silent this long is removed.",
        StreamsGroupBounds::SESSION_TIMEOUT_MS,
        "group.streams.min/max.session.timeout.ms",
        |c| c.group_streams_session_timeout_ms.to_string(),
    ),
];

/// A streams-group INT key bounded as its `StreamsGroupBounds` range.
const fn streams_int_key(
    name: &'static str,
    doc: &'static str,
    range: std::ops::RangeInclusive<i32>,
    bounds: &'static str,
    default: fn(&Config) -> String,
) -> GroupKey {
    GroupKey { name, doc, kind: GroupKind::Int { min: *range.start(), max: *range.end(), bounds }, default }
}

/// Kafka 4.4's broker defaults of the share-group keys shardlog has no broker key for.
pub struct ShareGroupDefaults;

impl ShareGroupDefaults {
    pub const HEARTBEAT_INTERVAL_MS: i32 = 5_000;
    pub const SESSION_TIMEOUT_MS: i32 = 45_000;
}

fn validate_group_key(name: &str, value: &str) -> Result<(), ConfigDefError> {
    let Some(k) = GROUP_KEYS.iter().find(|k| k.name == name) else {
        return Err(ConfigDefError::InvalidConfig(format!("Unknown group config name: {name}")));
    };
    match k.kind {
        GroupKind::Int { min, max, bounds } => {
            let n: i32 = value
                .trim()
                .parse()
                .map_err(|_| ConfigDefError::InvalidConfig(format!("Invalid value {value} for configuration {name}: Not a number of type INT")))?;
            // The bounds also keep the heartbeat interval below the session timeout (15 s < 45 s),
            // which Kafka checks separately.
            if n < min || n > max {
                return Err(ConfigDefError::InvalidConfig(format!("Invalid value {n} for configuration {name}: must be between {min} and {max} ({bounds})")));
            }
        }
        GroupKind::ShareAutoOffsetReset => {
            ShareAutoOffsetReset::parse(value).map_err(|e| ConfigDefError::InvalidConfig(format!("Invalid value {value} for configuration {name}: {e}")))?;
        }
        GroupKind::OneOf(allowed) => {
            if !allowed.contains(&value) {
                return Err(ConfigDefError::InvalidConfig(format!(
                    "Invalid value {value} for configuration {name}: String must be one of: {}",
                    allowed.join(", ")
                )));
            }
        }
        GroupKind::Bool => {
            if !value.trim().eq_ignore_ascii_case("true") && !value.trim().eq_ignore_ascii_case("false") {
                return Err(ConfigDefError::InvalidConfig(format!(
                    "Invalid value {value} for configuration {name}: Expected value to be either true or false"
                )));
            }
        }
        GroupKind::StreamsAssignor => {
            if !STREAMS_ASSIGNORS.contains(&value) {
                return Err(ConfigDefError::InvalidConfig(format!(
                    "{name} '{value}' is not a registered task assignor. Registered assignors are: [{}].",
                    STREAMS_ASSIGNORS.join(", ")
                )));
            }
        }
        GroupKind::TagList => {
            // Kafka's GroupConfig answers INVALID_CONFIG with the validator's words.
            crate::config::rack_aware_assignment_tags(name, value).map_err(ConfigDefError::InvalidConfig)?;
        }
        GroupKind::DeadLetterTopic => {
            // Kafka's GroupConfig.validate (internal names are reserved).
            if value.starts_with("__") {
                return Err(ConfigDefError::InvalidConfig(format!("{name}: DLQ topic name must not start with '__'")));
            }
            if value.len() > 249 {
                return Err(ConfigDefError::InvalidConfig(format!("Invalid value for configuration {name}: a topic name is at most 249 characters")));
            }
        }
    }
    Ok(())
}

/// `share.auto.offset.reset`, as Kafka's ShareGroupAutoOffsetResetStrategy reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShareAutoOffsetReset {
    /// The log end (high watermark) when the share-partition is first read.
    #[default]
    Latest,
    /// The log start.
    Earliest,
    /// The first record at or after (now - this many ms).
    ByDuration(i64),
}

impl ShareAutoOffsetReset {
    pub fn parse(value: &str) -> Result<ShareAutoOffsetReset, String> {
        let v = value.trim().to_ascii_lowercase();
        match v.as_str() {
            "latest" => Ok(ShareAutoOffsetReset::Latest),
            "earliest" => Ok(ShareAutoOffsetReset::Earliest),
            _ => match v.strip_prefix("by_duration:") {
                Some(d) => iso_duration_ms(d).map(ShareAutoOffsetReset::ByDuration).ok_or_else(|| format!("Unable to parse duration string '{d}'.")),
                None => Err("Invalid value for share.auto.offset.reset; allowed: latest, earliest, by_duration:<ISO-8601 duration>".to_string()),
            },
        }
    }
}

/// An ISO-8601 duration as Java's Duration.parse reads it (`PnDTnHnMn.nS`, case
/// insensitive, not negative) in milliseconds; None if it is not one.
fn iso_duration_ms(s: &str) -> Option<i64> {
    let rest = s.strip_prefix('p')?;
    let (days, time) = match rest.split_once('t') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut ms: i64 = 0;
    if !days.is_empty() {
        let n: i64 = days.strip_suffix('d')?.parse().ok()?;
        ms = ms.checked_add(n.checked_mul(86_400_000)?)?;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, scale) in [('h', 3_600_000f64), ('m', 60_000f64), ('s', 1_000f64)] {
            if let Some(at) = t.find(unit) {
                let n: f64 = t[..at].parse().ok()?;
                if !n.is_finite() || n < 0.0 {
                    return None;
                }
                ms = ms.checked_add((n * scale) as i64)?;
                t = &t[at + 1..];
            }
        }
        if !t.is_empty() {
            return None;
        }
    } else if days.is_empty() {
        return None;
    }
    (ms >= 0).then_some(ms)
}

/// A group's INT config if set (and readable), else None (the broker default applies).
pub fn group_int(image: &MetadataImage, group: &str, key: &str) -> Option<i32> {
    if image.resource_configs.is_empty() {
        return None;
    }
    image.configs_of(&ConfigResource::Group(group.to_string())).get(key).and_then(|v| v.trim().parse().ok())
}

/// A streams group's `streams.rack.aware.assignment.tags` if set (an empty value is set:
/// no tags, whatever the broker's), else None (the broker default applies).
pub fn streams_rack_aware_assignment_tags(image: &MetadataImage, group: &str) -> Option<Vec<String>> {
    if image.resource_configs.is_empty() {
        return None;
    }
    let set = image.configs_of(&ConfigResource::Group(group.to_string()));
    set.get(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS).map(|v| crate::config::rack_aware_assignment_tags(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, v).unwrap_or_default())
}

/// A share group's `share.auto.offset.reset` (latest when not set).
pub fn share_auto_offset_reset(image: &MetadataImage, group: &str) -> ShareAutoOffsetReset {
    if image.resource_configs.is_empty() {
        return ShareAutoOffsetReset::Latest;
    }
    image
        .configs_of(&ConfigResource::Group(group.to_string()))
        .get(SHARE_AUTO_OFFSET_RESET)
        .and_then(|v| ShareAutoOffsetReset::parse(v).ok())
        .unwrap_or_default()
}

/// A share group's dead-letter queue (KIP-1191): its `errors.deadletterqueue.topic.name`
/// when set, and whether records are copied there (`errors.deadletterqueue.copy.record.enable`).
/// Whether it is used also depends on share.version (2).
pub fn share_dead_letter_queue(image: &MetadataImage, group: &str) -> Option<(String, bool)> {
    if image.resource_configs.is_empty() {
        return None;
    }
    let set = image.configs_of(&ConfigResource::Group(group.to_string()));
    let topic = set.get(ERRORS_DEADLETTERQUEUE_TOPIC_NAME).map(|t| t.trim()).filter(|t| !t.is_empty())?;
    let copy = set.get(ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    Some((topic.to_string(), copy))
}

/// Whether share group `group` reads read_committed (its share.isolation.level).
pub fn share_read_committed(image: &MetadataImage, group: &str) -> bool {
    !image.resource_configs.is_empty()
        && image.configs_of(&ConfigResource::Group(group.to_string())).get(SHARE_ISOLATION_LEVEL).is_some_and(|v| v == "read_committed")
}

/// DescribeConfigs of a group resource: every group key, GROUP_CONFIG where set on the
/// group, else the broker default.
pub fn describe_group(config: &Config, image: &MetadataImage, group: &str) -> Vec<Described> {
    let set = image.configs_of(&ConfigResource::Group(group.to_string()));
    GROUP_KEYS
        .iter()
        .map(|k| {
            let mut synonyms = Vec::new();
            if let Some(v) = set.get(k.name) {
                synonyms.push(Synonym { name: k.name.to_string(), value: Some(v.clone()), source: source::GROUP_CONFIG });
            }
            synonyms.push(Synonym { name: k.name.to_string(), value: Some((k.default)(config)), source: source::DEFAULT_CONFIG });
            let ty = match k.kind {
                GroupKind::Int { .. } => ConfigType::Int,
                GroupKind::Bool => ConfigType::Boolean,
                GroupKind::TagList => ConfigType::List,
                GroupKind::ShareAutoOffsetReset | GroupKind::OneOf(_) | GroupKind::DeadLetterTopic | GroupKind::StreamsAssignor => ConfigType::String,
            };
            described(k.name, ty, k.doc, false, false, synonyms)
        })
        .collect()
}

/// The session timeout and heartbeat interval of a KIP-848 group: its group configs, else
/// the broker's defaults.
pub fn group_consumer_timeouts(image: &MetadataImage, group: &str, default_session_ms: u64, default_heartbeat_ms: i32) -> (u64, i32) {
    // Called per group on every coordinator tick: skip the lookup when nothing is set.
    if image.resource_configs.is_empty() {
        return (default_session_ms, default_heartbeat_ms);
    }
    let set = image.configs_of(&ConfigResource::Group(group.to_string()));
    let session = set.get(CONSUMER_SESSION_TIMEOUT_MS).and_then(|v| v.trim().parse().ok()).unwrap_or(default_session_ms);
    let heartbeat = set.get(CONSUMER_HEARTBEAT_INTERVAL_MS).and_then(|v| v.trim().parse().ok()).unwrap_or(default_heartbeat_ms);
    (session, heartbeat)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_with(resource: ConfigResource, pairs: &[(&str, &str)]) -> MetadataImage {
        let mut img = MetadataImage::default();
        img.resource_configs.insert(resource, pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        img
    }

    #[test]
    fn broker_keys_are_sorted_unique_and_dynamic_ones_map_to_topic_keys() {
        for w in BROKER_KEYS.windows(2) {
            assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
        }
        for k in BROKER_KEYS {
            assert_eq!(k.scope == Scope::ClusterWide, k.topic_key.is_some(), "{}", k.name);
            if let Some(t) = k.topic_key {
                assert!(topic_config::is_known_key(t), "{t}");
                // The static value is a valid value of the topic key.
                topic_config::validate_key_value(t, &(k.value)(&Config::default())).unwrap();
            }
        }
    }

    /// A broker key that has a definition in config/keys.rs is described as defined there
    /// (not written again here), and every dynamic key there can be altered here.
    #[test]
    fn broker_keys_with_a_definition_take_it() {
        for def in crate::config::KEYS {
            let reported = def.kafka.and_then(broker_key);
            if let Some(k) = reported {
                assert_eq!((Some(k.ty), k.doc, k.scope == Scope::ClusterWide), (def.kafka_type, def.help, def.dynamic), "{}", k.name);
            }
            assert!(!def.dynamic || reported.is_some(), "{} is dynamic but not a broker key", def.name);
        }
    }

    #[test]
    fn broker_sources_follow_kafka_precedence() {
        let config = Config { log_retention_ms: 1000, ..Config::default() };
        let img = image_with(ConfigResource::Broker(String::new()), &[("log.retention.ms", "2000"), ("message.max.bytes", "5000")]);
        let all = describe_broker(&config, &img, "1");
        let get = |n: &str| all.iter().find(|d| d.name == n).unwrap().clone();
        let r = get("log.retention.ms");
        assert_eq!((r.value.as_deref(), r.source, r.read_only), (Some("2000"), source::DYNAMIC_DEFAULT_BROKER_CONFIG, false));
        let sources: Vec<i8> = r.synonyms.iter().map(|s| s.source).collect();
        assert_eq!(sources, vec![source::DYNAMIC_DEFAULT_BROKER_CONFIG, source::STATIC_BROKER_CONFIG, source::DEFAULT_CONFIG]);
        let n = get("num.partitions");
        assert_eq!((n.source, n.read_only, n.ty), (source::DEFAULT_CONFIG, true, ConfigType::Int));
        // The default resource lists only what is set on it.
        let d = describe_broker(&config, &img, "");
        assert_eq!(d.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), vec!["log.retention.ms", "message.max.bytes"]);
        // flush = always (the default) syncs every write: reported as 1, read-only.
        let f = get("log.flush.interval.messages");
        assert_eq!((f.value.as_deref(), f.read_only), (Some("1"), true));
        let never = Config { flush: FlushMode::Never, ..Config::default() };
        let f = describe_broker(&never, &img, "1").into_iter().find(|d| d.name == "log.flush.interval.messages").unwrap();
        assert_eq!((f.value, f.read_only), (Some(i64::MAX.to_string()), false));
    }

    #[test]
    fn per_broker_beats_cluster_default_in_topic_defaults() {
        let mut img = image_with(ConfigResource::Broker(String::new()), &[("log.retention.ms", "2000")]);
        img.resource_configs.insert(ConfigResource::Broker("1".into()), [("log.retention.ms".to_string(), "3000".to_string())].into());
        let d = effective_topic_defaults(&TopicConfigDefaults::default(), &img, "1");
        assert_eq!(d.retention_ms, 3000);
        let d = effective_topic_defaults(&TopicConfigDefaults::default(), &img, "2");
        assert_eq!(d.retention_ms, 2000);
    }

    #[test]
    fn broker_validation_kinds() {
        let broker = ConfigResource::Broker("1".into());
        let one = |k: &str, v: &str| validate_resource_configs(&broker, &[(k.to_string(), v.to_string())].into());
        assert!(one("log.flush.interval.messages", "10").is_ok());
        assert!(matches!(one("num.partitions", "3"), Err(ConfigDefError::InvalidRequest(_))));
        assert!(matches!(one("no.such.key", "3"), Err(ConfigDefError::InvalidRequest(_))));
        let e = one("log.retention.ms", "-5").unwrap_err();
        assert!(matches!(&e, ConfigDefError::InvalidConfig(m) if m.contains("log.retention.ms")), "{e}");
    }

    #[test]
    fn group_bounds_and_resolution() {
        let g = ConfigResource::Group("g".into());
        let one = |k: &str, v: &str| validate_resource_configs(&g, &[(k.to_string(), v.to_string())].into());
        assert!(one(CONSUMER_SESSION_TIMEOUT_MS, "50000").is_ok());
        assert!(one(CONSUMER_SESSION_TIMEOUT_MS, "44999").is_err());
        assert!(one(CONSUMER_HEARTBEAT_INTERVAL_MS, "15001").is_err());
        assert!(one(SHARE_ISOLATION_LEVEL, "read_committed").is_ok());
        assert!(one(SHARE_ISOLATION_LEVEL, "read_uncommitted").is_ok());
        let bad = one(SHARE_ISOLATION_LEVEL, "READ_COMMITTED").unwrap_err();
        assert!(format!("{bad:?}").contains("String must be one of: read_committed, read_uncommitted"), "{bad:?}");
        assert!(one(SHARE_AUTO_OFFSET_RESET, "latest").is_ok());
        assert!(one(SHARE_AUTO_OFFSET_RESET, "by_duration:PT1H").is_ok());
        assert!(one(SHARE_AUTO_OFFSET_RESET, "by_duration:-PT1H").is_err());
        assert!(one(SHARE_AUTO_OFFSET_RESET, "newest").is_err());
        assert!(one(SHARE_RECORD_LOCK_DURATION_MS, "14999").is_err());
        assert!(one(SHARE_RECORD_LOCK_DURATION_MS, "15000").is_ok());
        assert!(one(SHARE_DELIVERY_COUNT_LIMIT, "3").is_ok());
        // Streams groups' tags and assignor, with Kafka 4.4's words.
        assert!(one(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, " zone , cluster ").is_ok());
        assert!(one(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, "").is_ok());
        let bad = one(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, "zone,,cluster").unwrap_err();
        assert!(format!("{bad:?}").contains("Configuration 'streams.rack.aware.assignment.tags' values must not be empty."), "{bad:?}");
        let bad = one(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, "zone, zone").unwrap_err();
        assert!(format!("{bad:?}").contains("streams.rack.aware.assignment.tags must not contain duplicate tag keys."), "{bad:?}");
        assert!(one(STREAMS_ASSIGNOR_NAME, "sticky").is_ok());
        let bad = one(STREAMS_ASSIGNOR_NAME, "mine").unwrap_err();
        assert!(format!("{bad:?}").contains("streams.assignor.name 'mine' is not a registered task assignor. Registered assignors are: [sticky]."), "{bad:?}");
        let tagged = image_with(g.clone(), &[(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, "zone, rack")]);
        assert_eq!(streams_rack_aware_assignment_tags(&tagged, "g"), Some(vec!["zone".to_string(), "rack".to_string()]));
        assert_eq!(streams_rack_aware_assignment_tags(&tagged, "other"), None, "the broker's apply");
        let emptied = image_with(g.clone(), &[(STREAMS_RACK_AWARE_ASSIGNMENT_TAGS, "")]);
        assert_eq!(streams_rack_aware_assignment_tags(&emptied, "g"), Some(vec![]), "set empty: no tags, whatever the broker's");
        let img = image_with(g, &[(CONSUMER_SESSION_TIMEOUT_MS, "50000")]);
        assert_eq!(group_consumer_timeouts(&img, "g", 45_000, 5_000), (50_000, 5_000));
        assert_eq!(group_consumer_timeouts(&img, "other", 45_000, 5_000), (45_000, 5_000));
        let d = describe_group(&Config::default(), &img, "g");
        let sources: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.source)).take(2).collect();
        assert_eq!(sources, vec![(CONSUMER_HEARTBEAT_INTERVAL_MS, source::DEFAULT_CONFIG), (CONSUMER_SESSION_TIMEOUT_MS, source::GROUP_CONFIG)]);
        assert_eq!(d.len(), GROUP_KEYS.len());
        assert!(GROUP_KEYS.windows(2).all(|w| w[0].name < w[1].name), "sorted by name");
    }

    #[test]
    fn share_auto_offset_reset_reads_as_kafka_reads_it() {
        use ShareAutoOffsetReset::*;
        for (text, want) in [
            ("latest", Some(Latest)),
            ("EARLIEST", Some(Earliest)),
            ("by_duration:PT1H", Some(ByDuration(3_600_000))),
            ("by_duration:P1DT2M0.5S", Some(ByDuration(86_400_000 + 120_000 + 500))),
            ("by_duration:P2D", Some(ByDuration(172_800_000))),
            ("by_duration:PT", None),
            ("by_duration:P", None),
            ("by_duration:1H", None),
            ("by_duration:PT1X", None),
            ("by_duration:", None),
        ] {
            assert_eq!(ShareAutoOffsetReset::parse(text).ok(), want, "{text}");
        }
        let img = image_with(ConfigResource::Group("g".into()), &[(SHARE_AUTO_OFFSET_RESET, "earliest"), (SHARE_RECORD_LOCK_DURATION_MS, "20000")]);
        assert_eq!((share_auto_offset_reset(&img, "g"), share_auto_offset_reset(&img, "h")), (Earliest, Latest));
        assert_eq!((group_int(&img, "g", SHARE_RECORD_LOCK_DURATION_MS), group_int(&img, "h", SHARE_RECORD_LOCK_DURATION_MS)), (Some(20_000), None));
    }
}
