//! Typed, validated view of a topic's configs.
//!
//! The metadata image stores only the keys set on a topic (`TopicMeta::configs`, strings, as
//! Kafka's ConfigRecord does). The controller validates them with this module before
//! committing (CreateTopics, IncrementalAlterConfigs); shards resolve them against the
//! broker defaults to get a `TopicConfig` they act on.
//!
//! Validators and defaults follow Apache Kafka 4.1 `LogConfig`, except `segment.bytes`
//! whose lower bound is 14 (Kafka 4 requires 1 MiB unless an internal test key is set; we
//! keep small segments usable for tests).
use std::collections::BTreeMap;

use super::config_defs::ConfigType;

pub const RETENTION_MS: &str = "retention.ms";
pub const RETENTION_BYTES: &str = "retention.bytes";
pub const SEGMENT_BYTES: &str = "segment.bytes";
pub const SEGMENT_MS: &str = "segment.ms";
pub const FLUSH_MESSAGES: &str = "flush.messages";
pub const FLUSH_MS: &str = "flush.ms";
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";
/// Kafka's `Topic.INTERNAL_TOPICS`: written only by the broker's own coordinators (a
/// client's Produce is refused with INVALID_TOPIC_EXCEPTION) and reported internal by
/// Metadata.
pub const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state", "__share_group_state"];

pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

pub const MESSAGE_TIMESTAMP_BEFORE_MAX_MS: &str = "message.timestamp.before.max.ms";
pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS: &str = "message.timestamp.after.max.ms";
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";
/// KIP-1191: whether share groups may write their dead-letter records to this topic.
pub const ERRORS_DEADLETTERQUEUE_GROUP_ENABLE: &str = "errors.deadletterqueue.group.enable";
pub const COMPRESSION_TYPE: &str = "compression.type";
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
pub const MAX_COMPACTION_LAG_MS: &str = "max.compaction.lag.ms";
pub const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
/// Tiered storage (KIP-405, `topic_remote_storage.rs`): the topic's closed segments go to
/// the remote store; local.retention.* (-2: as retention.*) bound what stays on disk.
pub const REMOTE_STORAGE_ENABLE: &str = "remote.storage.enable";
pub const LOCAL_RETENTION_MS: &str = "local.retention.ms";
pub const LOCAL_RETENTION_BYTES: &str = "local.retention.bytes";
/// KIP-950: stop uploading (remote data stays readable) / delete remote data on disable.
pub const REMOTE_LOG_COPY_DISABLE: &str = "remote.log.copy.disable";
pub const REMOTE_LOG_DELETE_ON_DISABLE: &str = "remote.log.delete.on.disable";
/// Kafka 4.1 defaults of the two (log.cleaner.min.cleanable.ratio,
/// log.cleaner.delete.retention.ms).
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 86_400_000;

/// Smallest accepted `segment.bytes` (a v0 record's overhead, Kafka's old lower bound).
pub const MIN_SEGMENT_BYTES: i64 = 14;

/// Longest accepted config value: values land in the replicated metadata log.
pub const MAX_VALUE_LEN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// The effective configuration of one topic: broker defaults with the topic's overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    /// -1 = unlimited.
    pub retention_ms: i64,
    /// -1 = unlimited.
    pub retention_bytes: i64,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub max_message_bytes: i32,
    /// CreateTime records older than now minus this are refused on produce.
    pub timestamp_before_max_ms: i64,
    /// CreateTime records newer than now plus this are refused on produce.
    pub timestamp_after_max_ms: i64,
    /// Each item is "delete" or "compact"; never empty.
    pub cleanup_policy: Vec<String>,
    pub timestamp_type: TimestampType,
    pub min_insync_replicas: i32,
    /// uncompressed, zstd, lz4, snappy, gzip or producer.
    pub compression_type: String,
    /// Compaction: clean when dirty bytes reach this share of the log.
    pub min_cleanable_dirty_ratio: f64,
    /// Compaction: how long tombstones are kept.
    pub delete_retention_ms: i64,
    /// flush.messages: fdatasync once this many messages are unsynced (1: every write,
    /// i.e. flush = always for the topic).
    pub flush_messages: i64,
    /// flush.ms: fdatasync once unsynced data is this old.
    pub flush_ms: i64,
    /// May the controller elect a replica outside the ISR when no ISR member is live
    /// (it may lack acknowledged records). Read by the controller (`leadership.rs`).
    pub unclean_leader_election_enable: bool,
    /// remote.storage.enable: closed segments are uploaded to the remote store.
    pub remote_storage_enable: bool,
    /// local.retention.ms / .bytes as set (-2: retention.ms / .bytes); see
    /// `local_retention_ms()`.
    pub local_retention_ms: i64,
    pub local_retention_bytes: i64,
    pub remote_log_copy_disable: bool,
    pub remote_log_delete_on_disable: bool,
}

/// Broker-level defaults for topic configs (Kafka's `log.*` server settings).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfigDefaults {
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub max_message_bytes: i32,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub cleanup_policy: Vec<String>,
    pub timestamp_type: TimestampType,
    pub min_insync_replicas: i32,
    pub compression_type: String,
    /// log.flush.interval.messages / log.flush.interval.ms.
    pub flush_messages: i64,
    pub flush_ms: i64,
    /// unclean.leader.election.enable (Kafka's default: false).
    pub unclean_leader_election_enable: bool,
    /// log.local.retention.ms / log.local.retention.bytes (Kafka's default: -2).
    pub local_retention_ms: i64,
    pub local_retention_bytes: i64,
}

impl Default for TopicConfigDefaults {
    /// Apache Kafka 4.1 defaults.
    fn default() -> Self {
        TopicConfigDefaults {
            retention_ms: 604_800_000,
            retention_bytes: -1,
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            max_message_bytes: 1_048_588,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            cleanup_policy: vec!["delete".to_string()],
            timestamp_type: TimestampType::CreateTime,
            min_insync_replicas: 1,
            compression_type: "producer".to_string(),
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            unclean_leader_election_enable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
        }
    }
}

/// One line of a DescribeConfigs answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    /// True when the value comes from the broker defaults (not set on the topic).
    pub is_default: bool,
}

/// How a key's value is checked.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// i64 with an inclusive lower bound.
    Long(i64),
    /// i32 with an inclusive lower bound.
    Int(i32),
    /// f64 in an inclusive range.
    Ratio(f64, f64),
    Bool,
    /// Comma-separated list whose items are in the set.
    List(&'static [&'static str]),
    /// One of the set (case-sensitive, as Kafka's ValidString).
    OneOf(&'static [&'static str]),
    /// Kafka's ThrottledReplicaListValidator: `*` or `partition:broker,...` (may be empty).
    ReplicaList,
}

const CLEANUP_POLICIES: &[&str] = &["delete", "compact"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// A known key: how to validate it and, for keys this broker only stores, its Kafka
/// default (typed keys take their default from `TopicConfigDefaults`).
struct KeySpec {
    name: &'static str,
    /// DescribeConfigs documentation (short, shardlog's own words).
    doc: &'static str,
    kind: Kind,
    stored_default: &'static str,
}

const I64_MAX: &str = "9223372036854775807";

/// Every topic config key we accept, sorted by name (DescribeConfigs lists them in order).
const KEYS: &[KeySpec] = &[
    KeySpec {
        name: CLEANUP_POLICY,
        doc: "delete (by retention), compact (keep the last record per key), or both.",
        kind: Kind::List(CLEANUP_POLICIES),
        stored_default: "",
    },
    KeySpec {
        name: COMPRESSION_TYPE,
        doc: "Compression of stored batches; shardlog keeps the producer's.",
        kind: Kind::OneOf(COMPRESSION_TYPES),
        stored_default: "",
    },
    KeySpec { name: DELETE_RETENTION_MS, doc: "Compacted topics: how long tombstones are kept.", kind: Kind::Long(0), stored_default: "86400000" },
    KeySpec {
        name: ERRORS_DEADLETTERQUEUE_GROUP_ENABLE,
        doc: "Share groups may use this topic as their dead-letter queue (KIP-1191); one that names it while false has records archived without a copy there.",
        kind: Kind::Bool,
        stored_default: "false",
    },
    KeySpec { name: "file.delete.delay.ms", doc: "Stored only: shardlog removes deleted segments at once.", kind: Kind::Long(0), stored_default: "60000" },
    KeySpec { name: FLUSH_MESSAGES, doc: "fdatasync once this many messages are unsynced (1: every write).", kind: Kind::Long(1), stored_default: I64_MAX },
    KeySpec { name: FLUSH_MS, doc: "fdatasync once unsynced data is this old.", kind: Kind::Long(0), stored_default: I64_MAX },
    KeySpec {
        name: "follower.replication.throttled.replicas",
        doc: "Stored only: replication is not throttled (kafka-reassign-partitions sets and clears it).",
        kind: Kind::ReplicaList,
        stored_default: "",
    },
    KeySpec { name: "index.interval.bytes", doc: "Stored only: the broker's log.index.interval.bytes applies.", kind: Kind::Int(0), stored_default: "4096" },
    KeySpec {
        name: "leader.replication.throttled.replicas",
        doc: "Stored only: replication is not throttled (kafka-reassign-partitions sets and clears it).",
        kind: Kind::ReplicaList,
        stored_default: "",
    },
    KeySpec {
        name: LOCAL_RETENTION_BYTES,
        doc: "Tiered topics: local segments beyond this size per partition go once uploaded (-2: retention.bytes).",
        kind: Kind::Long(-2),
        stored_default: "",
    },
    KeySpec {
        name: LOCAL_RETENTION_MS,
        doc: "Tiered topics: local segments older than this go once uploaded (-2: retention.ms).",
        kind: Kind::Long(-2),
        stored_default: "",
    },
    KeySpec { name: MAX_COMPACTION_LAG_MS, doc: "Stored only: longest time a record stays uncompacted.", kind: Kind::Long(1), stored_default: I64_MAX },
    KeySpec { name: MAX_MESSAGE_BYTES, doc: "Largest record batch accepted.", kind: Kind::Int(0), stored_default: "" },
    KeySpec { name: MESSAGE_TIMESTAMP_AFTER_MAX_MS, doc: "CreateTime records newer than now plus this are refused.", kind: Kind::Long(0), stored_default: "" },
    KeySpec {
        name: MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
        doc: "CreateTime records older than now minus this are refused.",
        kind: Kind::Long(0),
        stored_default: "",
    },
    KeySpec {
        name: MESSAGE_TIMESTAMP_TYPE,
        doc: "CreateTime (producer's timestamp) or LogAppendTime (broker's).",
        kind: Kind::OneOf(TIMESTAMP_TYPES),
        stored_default: "",
    },
    KeySpec {
        name: MIN_CLEANABLE_DIRTY_RATIO,
        doc: "Compacted topics: clean when dirty bytes reach this share of the log.",
        kind: Kind::Ratio(0.0, 1.0),
        stored_default: "0.5",
    },
    KeySpec { name: MIN_COMPACTION_LAG_MS, doc: "Stored only: shortest time a record stays uncompacted.", kind: Kind::Long(0), stored_default: "0" },
    KeySpec {
        name: MIN_INSYNC_REPLICAS,
        doc: "acks=all needs at least this many in-sync replicas (else NOT_ENOUGH_REPLICAS).",
        kind: Kind::Int(1),
        stored_default: "",
    },
    KeySpec { name: "preallocate", doc: "Stored only: segments are not preallocated.", kind: Kind::Bool, stored_default: "false" },
    KeySpec {
        name: REMOTE_LOG_COPY_DISABLE,
        doc: "Tiered topics: stop uploading; what is remote stays readable (KIP-950).",
        kind: Kind::Bool,
        stored_default: "false",
    },
    KeySpec {
        name: REMOTE_LOG_DELETE_ON_DISABLE,
        doc: "Turning remote.storage.enable off deletes the remote data (it must be set to do so, KIP-950).",
        kind: Kind::Bool,
        stored_default: "false",
    },
    KeySpec {
        name: REMOTE_STORAGE_ENABLE,
        doc: "Upload closed segments to the remote store (the broker needs remote.log.storage.system.enable).",
        kind: Kind::Bool,
        stored_default: "false",
    },
    KeySpec {
        name: RETENTION_BYTES,
        doc: "Delete old segments beyond this size per partition (-1: unlimited).",
        kind: Kind::Long(i64::MIN),
        stored_default: "",
    },
    KeySpec { name: RETENTION_MS, doc: "Delete segments older than this (-1: unlimited).", kind: Kind::Long(-1), stored_default: "" },
    KeySpec { name: SEGMENT_BYTES, doc: "Roll a segment at this size.", kind: Kind::Int(MIN_SEGMENT_BYTES as i32), stored_default: "" },
    KeySpec { name: "segment.index.bytes", doc: "Stored only: index files grow as needed.", kind: Kind::Int(4), stored_default: "10485760" },
    KeySpec { name: "segment.jitter.ms", doc: "Stored only: no roll jitter.", kind: Kind::Long(0), stored_default: "0" },
    KeySpec { name: SEGMENT_MS, doc: "Roll a segment this old.", kind: Kind::Long(1), stored_default: "" },
    KeySpec {
        name: UNCLEAN_LEADER_ELECTION_ENABLE,
        doc: "Elect a replica outside the ISR when no in-sync replica is live (acknowledged records may be lost).",
        kind: Kind::Bool,
        stored_default: "",
    },
];

/// The Kafka config type of a topic key and its documentation, for DescribeConfigs.
pub fn type_and_doc(key: &str) -> Option<(ConfigType, &'static str)> {
    let s = spec(key)?;
    let ty = match s.kind {
        Kind::Long(_) => ConfigType::Long,
        Kind::Int(_) => ConfigType::Int,
        Kind::Ratio(..) => ConfigType::Double,
        Kind::Bool => ConfigType::Boolean,
        Kind::List(_) | Kind::ReplicaList => ConfigType::List,
        Kind::OneOf(_) => ConfigType::String,
    };
    Some((ty, s.doc))
}

fn spec(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == key)
}

/// True if `key` is a topic config this broker knows.
pub fn is_known_key(key: &str) -> bool {
    spec(key).is_some()
}

/// True for list-typed configs (the only ones IncrementalAlterConfigs may APPEND/SUBTRACT).
pub fn is_list_key(key: &str) -> bool {
    matches!(spec(key).map(|s| s.kind), Some(Kind::List(_)))
}

/// Splits a list value the way Kafka does: comma-separated, items trimmed, empty items dropped.
pub fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Checks one key and value; the error names the key and says why.
pub fn validate_key_value(key: &str, value: &str) -> Result<(), String> {
    let Some(spec) = spec(key) else {
        return Err(format!("Unknown topic config name: {key}"));
    };
    if value.len() > MAX_VALUE_LEN {
        return Err(format!("Invalid value for configuration {key}: longer than {MAX_VALUE_LEN} bytes"));
    }
    check_kind(key, spec.kind, value)
}

fn check_kind(key: &str, kind: Kind, value: &str) -> Result<(), String> {
    let v = value.trim();
    match kind {
        Kind::Long(min) => {
            let n: i64 = v.parse().map_err(|_| format!("Invalid value {value} for configuration {key}: Not a number of type LONG"))?;
            if n < min {
                return Err(format!("Invalid value {n} for configuration {key}: Value must be at least {min}"));
            }
        }
        Kind::Int(min) => {
            let n: i32 = v.parse().map_err(|_| format!("Invalid value {value} for configuration {key}: Not a number of type INT"))?;
            if n < min {
                return Err(format!("Invalid value {n} for configuration {key}: Value must be at least {min}"));
            }
        }
        Kind::Ratio(lo, hi) => {
            let n: f64 = v.parse().map_err(|_| format!("Invalid value {value} for configuration {key}: Not a number of type DOUBLE"))?;
            // `!(..)` also rejects NaN.
            if !(lo..=hi).contains(&n) {
                return Err(format!("Invalid value {n} for configuration {key}: Value must be between {lo} and {hi}"));
            }
        }
        Kind::Bool => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(format!("Invalid value {value} for configuration {key}: Expected value to be either true or false"));
            }
        }
        Kind::List(allowed) => {
            let items = split_list(v);
            if items.is_empty() {
                return Err(format!("Invalid value {value} for configuration {key}: must contain at least one of {}", allowed.join(", ")));
            }
            if let Some(bad) = items.iter().find(|i| !allowed.contains(&i.as_str())) {
                return Err(format!("Invalid value {bad} for configuration {key}: String must be one of: {}", allowed.join(", ")));
            }
        }
        Kind::ReplicaList => {
            let replica = |i: &str| i.split_once(':').is_some_and(|(p, b)| p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok());
            if v != "*" && !split_list(v).iter().all(|i| replica(i)) {
                return Err(format!(
                    "Invalid value {value} for configuration {key}: must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                ));
            }
        }
        Kind::OneOf(allowed) => {
            if !allowed.contains(&v) {
                return Err(format!("Invalid value {value} for configuration {key}: String must be one of: {}", allowed.join(", ")));
            }
        }
    }
    Ok(())
}

/// The override of `key` parsed as a number (validated first), or `default`.
fn parse_num<T: std::str::FromStr>(overrides: &BTreeMap<String, String>, key: &str, default: T) -> Result<T, String> {
    match overrides.get(key) {
        None => Ok(default),
        Some(v) => {
            validate_key_value(key, v)?;
            v.trim().parse().map_err(|_| format!("Invalid value {v} for configuration {key}"))
        }
    }
}

/// A boolean override (validated before: true or false, any case); absent = false.
fn parse_bool(overrides: &BTreeMap<String, String>, key: &str) -> bool {
    overrides.get(key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn parse_i32(overrides: &BTreeMap<String, String>, key: &str, default: i32) -> Result<i32, String> {
    match overrides.get(key) {
        None => Ok(default),
        Some(v) => {
            validate_key_value(key, v)?;
            v.trim().parse().map_err(|_| format!("Invalid value {v} for configuration {key}"))
        }
    }
}

impl TopicConfig {
    /// Validates every override (unknown keys, bad values, cross-key conflicts) and returns
    /// the effective config.
    pub fn resolve(defaults: &TopicConfigDefaults, overrides: &BTreeMap<String, String>) -> Result<TopicConfig, String> {
        for (k, v) in overrides {
            validate_key_value(k, v)?;
        }
        let segment_bytes = match overrides.get(SEGMENT_BYTES) {
            None => defaults.segment_bytes,
            Some(v) => {
                let n = parse_i32(overrides, SEGMENT_BYTES, 0)?;
                u64::try_from(n).map_err(|_| format!("Invalid value {v} for configuration {SEGMENT_BYTES}"))?
            }
        };
        let cleanup_policy = match overrides.get(CLEANUP_POLICY) {
            None => defaults.cleanup_policy.clone(),
            Some(v) => split_list(v),
        };
        let timestamp_type = match overrides.get(MESSAGE_TIMESTAMP_TYPE).map(|v| v.trim()) {
            None => defaults.timestamp_type,
            Some("LogAppendTime") => TimestampType::LogAppendTime,
            Some(_) => TimestampType::CreateTime,
        };
        let compression_type = match overrides.get(COMPRESSION_TYPE) {
            None => defaults.compression_type.clone(),
            Some(v) => v.trim().to_string(),
        };
        // Kafka's LogConfig.validateValues: the compaction lag window must not be inverted.
        let min_lag = parse_num(overrides, MIN_COMPACTION_LAG_MS, 0)?;
        let max_lag = parse_num(overrides, MAX_COMPACTION_LAG_MS, i64::MAX)?;
        if min_lag > max_lag {
            return Err(format!("conflict topic configs: {MIN_COMPACTION_LAG_MS}={min_lag} must not be greater than {MAX_COMPACTION_LAG_MS}={max_lag}"));
        }
        Ok(TopicConfig {
            retention_ms: parse_num(overrides, RETENTION_MS, defaults.retention_ms)?,
            retention_bytes: parse_num(overrides, RETENTION_BYTES, defaults.retention_bytes)?,
            segment_bytes,
            segment_ms: parse_num(overrides, SEGMENT_MS, defaults.segment_ms)?,
            max_message_bytes: parse_i32(overrides, MAX_MESSAGE_BYTES, defaults.max_message_bytes)?,
            timestamp_before_max_ms: parse_num(overrides, MESSAGE_TIMESTAMP_BEFORE_MAX_MS, defaults.timestamp_before_max_ms)?,
            timestamp_after_max_ms: parse_num(overrides, MESSAGE_TIMESTAMP_AFTER_MAX_MS, defaults.timestamp_after_max_ms)?,
            cleanup_policy,
            timestamp_type,
            min_insync_replicas: parse_i32(overrides, MIN_INSYNC_REPLICAS, defaults.min_insync_replicas)?,
            compression_type,
            min_cleanable_dirty_ratio: parse_num(overrides, MIN_CLEANABLE_DIRTY_RATIO, DEFAULT_MIN_CLEANABLE_DIRTY_RATIO)?,
            delete_retention_ms: parse_num(overrides, DELETE_RETENTION_MS, DEFAULT_DELETE_RETENTION_MS)?,
            flush_messages: parse_num(overrides, FLUSH_MESSAGES, defaults.flush_messages)?,
            flush_ms: parse_num(overrides, FLUSH_MS, defaults.flush_ms)?,
            unclean_leader_election_enable: match overrides.get(UNCLEAN_LEADER_ELECTION_ENABLE) {
                None => defaults.unclean_leader_election_enable,
                // Validated above: true or false, any case.
                Some(v) => v.trim().eq_ignore_ascii_case("true"),
            },
            remote_storage_enable: parse_bool(overrides, REMOTE_STORAGE_ENABLE),
            local_retention_ms: parse_num(overrides, LOCAL_RETENTION_MS, defaults.local_retention_ms)?,
            local_retention_bytes: parse_num(overrides, LOCAL_RETENTION_BYTES, defaults.local_retention_bytes)?,
            remote_log_copy_disable: parse_bool(overrides, REMOTE_LOG_COPY_DISABLE),
            remote_log_delete_on_disable: parse_bool(overrides, REMOTE_LOG_DELETE_ON_DISABLE),
        })
    }

    /// These values as the defaults of other topics (dynamic broker configs are resolved
    /// as a topic's overrides, then used as defaults).
    pub fn as_defaults(&self) -> TopicConfigDefaults {
        TopicConfigDefaults {
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms,
            max_message_bytes: self.max_message_bytes,
            timestamp_before_max_ms: self.timestamp_before_max_ms,
            timestamp_after_max_ms: self.timestamp_after_max_ms,
            cleanup_policy: self.cleanup_policy.clone(),
            timestamp_type: self.timestamp_type,
            min_insync_replicas: self.min_insync_replicas,
            compression_type: self.compression_type.clone(),
            flush_messages: self.flush_messages,
            flush_ms: self.flush_ms,
            unclean_leader_election_enable: self.unclean_leader_election_enable,
            local_retention_ms: self.local_retention_ms,
            local_retention_bytes: self.local_retention_bytes,
        }
    }

    /// Kafka's LogConfig.localRetentionMs: local.retention.ms, -2 meaning retention.ms.
    pub fn local_retention_ms(&self) -> i64 {
        if self.local_retention_ms == -2 {
            self.retention_ms
        } else {
            self.local_retention_ms
        }
    }

    /// Kafka's LogConfig.localRetentionBytes: local.retention.bytes, -2 meaning retention.bytes.
    pub fn local_retention_bytes(&self) -> i64 {
        if self.local_retention_bytes == -2 {
            self.retention_bytes
        } else {
            self.local_retention_bytes
        }
    }

    pub fn is_compacted(&self) -> bool {
        self.cleanup_policy.iter().any(|p| p == "compact")
    }

    pub fn is_delete(&self) -> bool {
        self.cleanup_policy.iter().any(|p| p == "delete")
    }
}

/// The default value of `key` as a string (what DescribeConfigs shows when it is not set).
pub fn default_value(defaults: &TopicConfigDefaults, key: &str) -> Option<String> {
    let s = spec(key)?;
    Some(match key {
        RETENTION_MS => defaults.retention_ms.to_string(),
        RETENTION_BYTES => defaults.retention_bytes.to_string(),
        SEGMENT_BYTES => defaults.segment_bytes.to_string(),
        SEGMENT_MS => defaults.segment_ms.to_string(),
        MAX_MESSAGE_BYTES => defaults.max_message_bytes.to_string(),
        MESSAGE_TIMESTAMP_BEFORE_MAX_MS => defaults.timestamp_before_max_ms.to_string(),
        MESSAGE_TIMESTAMP_AFTER_MAX_MS => defaults.timestamp_after_max_ms.to_string(),
        CLEANUP_POLICY => defaults.cleanup_policy.join(","),
        MESSAGE_TIMESTAMP_TYPE => defaults.timestamp_type.as_str().to_string(),
        MIN_INSYNC_REPLICAS => defaults.min_insync_replicas.to_string(),
        COMPRESSION_TYPE => defaults.compression_type.clone(),
        FLUSH_MESSAGES => defaults.flush_messages.to_string(),
        FLUSH_MS => defaults.flush_ms.to_string(),
        UNCLEAN_LEADER_ELECTION_ENABLE => defaults.unclean_leader_election_enable.to_string(),
        LOCAL_RETENTION_MS => defaults.local_retention_ms.to_string(),
        LOCAL_RETENTION_BYTES => defaults.local_retention_bytes.to_string(),
        _ => s.stored_default.to_string(),
    })
}

/// For DescribeConfigs: every known key with its effective value, and whether it is a
/// default or set on the topic. Sorted by key.
pub fn describe(defaults: &TopicConfigDefaults, overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    KEYS.iter()
        .map(|s| match overrides.get(s.name) {
            Some(v) => ConfigEntry { name: s.name.to_string(), value: v.clone(), is_default: false },
            None => ConfigEntry { name: s.name.to_string(), value: default_value(defaults, s.name).unwrap_or_default(), is_default: true },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn throttled_replica_lists_as_kafka_validates_them() {
        for ok in ["", "*", "0:1", "0:1, 1:2,2:3"] {
            assert_eq!(validate_key_value("leader.replication.throttled.replicas", ok), Ok(()), "{ok:?}");
        }
        for bad in ["x", "0:", "0:1,*", "1-2"] {
            assert!(validate_key_value("follower.replication.throttled.replicas", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_sorted_and_unique() {
        for w in KEYS.windows(2) {
            assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn defaults_resolve_to_kafka_defaults() {
        let d = TopicConfigDefaults::default();
        let c = TopicConfig::resolve(&d, &BTreeMap::new()).unwrap();
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.cleanup_policy, vec!["delete"]);
        assert_eq!(c.timestamp_type, TimestampType::CreateTime);
        assert_eq!(c.compression_type, "producer");
        assert!(c.is_delete() && !c.is_compacted());
        assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(default_value(&d, MIN_CLEANABLE_DIRTY_RATIO).as_deref(), Some("0.5"));
        assert_eq!(default_value(&d, DELETE_RETENTION_MS).as_deref(), Some("86400000"));
        assert!(!c.unclean_leader_election_enable);
        assert_eq!(default_value(&d, UNCLEAN_LEADER_ELECTION_ENABLE).as_deref(), Some("false"));
    }

    #[test]
    fn unclean_leader_election_is_a_validated_boolean() {
        let on = TopicConfigDefaults { unclean_leader_election_enable: true, ..TopicConfigDefaults::default() };
        assert!(TopicConfig::resolve(&on, &BTreeMap::new()).unwrap().unclean_leader_election_enable);
        assert_eq!(default_value(&on, UNCLEAN_LEADER_ELECTION_ENABLE).as_deref(), Some("true"));
        let d = TopicConfigDefaults::default();
        assert!(TopicConfig::resolve(&d, &m(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "TRUE")])).unwrap().unclean_leader_election_enable);
        assert!(!TopicConfig::resolve(&on, &m(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "false")])).unwrap().unclean_leader_election_enable);
        let err = validate_key_value(UNCLEAN_LEADER_ELECTION_ENABLE, "yes").unwrap_err();
        assert!(err.contains(UNCLEAN_LEADER_ELECTION_ENABLE), "{err}");
        assert_eq!(type_and_doc(UNCLEAN_LEADER_ELECTION_ENABLE).unwrap().0, ConfigType::Boolean);
    }

    #[test]
    fn overrides_apply() {
        let d = TopicConfigDefaults::default();
        let c = TopicConfig::resolve(
            &d,
            &m(&[
                ("retention.ms", "-1"),
                ("segment.bytes", "1024"),
                ("cleanup.policy", "compact, delete"),
                ("message.timestamp.type", "LogAppendTime"),
                ("compression.type", "zstd"),
                ("flush.ms", "10"),
                ("min.cleanable.dirty.ratio", "0.01"),
                ("delete.retention.ms", "0"),
            ]),
        )
        .unwrap();
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        assert_eq!(c.delete_retention_ms, 0);
        assert_eq!(c.retention_ms, -1);
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.cleanup_policy, vec!["compact", "delete"]);
        assert_eq!(c.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(c.compression_type, "zstd");
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            ("retention.ms", "-2"),
            ("retention.ms", "abc"),
            ("segment.bytes", "13"),
            ("segment.bytes", "3000000000"),
            ("segment.ms", "0"),
            ("cleanup.policy", "delete,bogus"),
            ("cleanup.policy", ""),
            ("message.timestamp.type", "createtime"),
            ("min.insync.replicas", "0"),
            ("compression.type", "brotli"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.cleanable.dirty.ratio", "NaN"),
            ("preallocate", "yes"),
            ("no.such.key", "1"),
        ];
        for (k, v) in cases {
            let err = validate_key_value(k, v).expect_err(k);
            assert!(err.contains(k), "{err}");
        }
    }

    #[test]
    fn types_follow_kafka() {
        assert_eq!(type_and_doc(RETENTION_MS).unwrap().0, ConfigType::Long);
        assert_eq!(type_and_doc(SEGMENT_BYTES).unwrap().0, ConfigType::Int);
        assert_eq!(type_and_doc(CLEANUP_POLICY).unwrap().0, ConfigType::List);
        assert_eq!(type_and_doc(MIN_CLEANABLE_DIRTY_RATIO).unwrap().0, ConfigType::Double);
        assert_eq!(type_and_doc(COMPRESSION_TYPE).unwrap().0, ConfigType::String);
        assert_eq!(type_and_doc("preallocate").unwrap().0, ConfigType::Boolean);
        assert!(KEYS.iter().all(|k| !k.doc.is_empty()));
    }

    #[test]
    fn compaction_lag_conflict() {
        let d = TopicConfigDefaults::default();
        let err = TopicConfig::resolve(&d, &m(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")])).unwrap_err();
        assert!(err.contains("min.compaction.lag.ms"));
    }

    #[test]
    fn describe_marks_overrides() {
        let d = TopicConfigDefaults::default();
        let entries = describe(&d, &m(&[("retention.ms", "1000")]));
        assert_eq!(entries.len(), KEYS.len());
        let r = entries.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!((r.value.as_str(), r.is_default), ("1000", false));
        let s = entries.iter().find(|e| e.name == "segment.bytes").unwrap();
        assert_eq!((s.value.as_str(), s.is_default), ("1073741824", true));
        let f = entries.iter().find(|e| e.name == "flush.messages").unwrap();
        assert_eq!(f.value, I64_MAX);
        // Every default is a value, but the throttled-replica lists' (Kafka's is empty).
        assert!(entries.iter().filter(|e| !e.name.ends_with(".replication.throttled.replicas")).all(|e| !e.value.is_empty()));
        assert_eq!(entries.iter().filter(|e| e.value.is_empty()).count(), 2);
    }
}
