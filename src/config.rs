//! One config struct for the broker. Values come from, in order: built-in defaults
//! (Apache Kafka 4.1's where Kafka has the setting), a TOML profile (`--config
//! tuning/<profile>.toml`), then command-line flags. Every key is also a flag.
//!
//! The keys are defined once, in `config/keys.rs` (struct, defaults, flags, docs); this
//! file checks and interprets them (`validate` and the accessors).

/// Kafka's controller.listener.names, resolved into the controller listener.
pub mod controller_listener;
/// The machinery of the one config definition (`config_keys!`, `KeyDef`).
pub mod key_def;
/// Every config key, defined once: `Config`, its defaults, the flags, `KEYS`.
pub mod keys;
/// A listener's own settings (`listener.name.<listener>.<key>`).
pub mod listener_overrides;
/// How this node authenticates to its peers' listeners (inter-broker).
mod peer_security;

pub use key_def::{ConfigType, KeyDef};
pub use keys::{key, Config, ConfigArgs, KEYS};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// When a produce is acknowledged relative to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FlushMode {
    /// Segments are written O_DIRECT (several aligned writes in flight); acks=all is
    /// acknowledged only after fdatasync (group-committed across producers); acks=1 after
    /// the O_DIRECT write completed.
    Always,
    /// Kafka's default: segments are written through the page cache and a produce is
    /// acknowledged once the kernel has the bytes (they survive a process crash, not a
    /// power loss). fdatasync runs in the background: at segment roll and as
    /// log.flush.interval.messages / log.flush.interval.ms (topic flush.messages /
    /// flush.ms) ask; a topic with flush.messages=1 behaves as `Always`.
    Never,
}

/// Test hook: storage fault injection (`storage/file.rs`). Never for production.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StorageFault {
    /// Segment writes go straight to the file (production).
    None,
    /// Segment writes stay in memory until their fdatasync, so a kill -9 loses exactly
    /// what was not synced, as a power loss would (crash-recovery tests). Unsynced data
    /// is held in memory without bound (with flush=never, until the next segment roll).
    DropUnsynced,
}

/// The part of a request memory pool of `queued_max_request_bytes` that frames above
/// 64 KiB may use: 7/8 of it. The last 1/8 is kept for small requests (Metadata,
/// heartbeats, small produces), so clients holding large frames never starve them
/// (`server/request_memory.rs`).
pub const fn request_pool_large_limit_bytes(queued_max_request_bytes: usize) -> usize {
    queued_max_request_bytes - queued_max_request_bytes / 8
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid setting {key}: {message}")]
    Invalid { key: &'static str, message: String },
}

impl Config {
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.into(), message: e.to_string() })
    }

    /// The log dirs in use: `log_dirs`, or `data_dir` alone when that is empty.
    pub fn resolved_log_dirs(&self) -> Vec<PathBuf> {
        if self.log_dirs.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.log_dirs.clone()
        }
    }

    /// Where the controller keeps the metadata: the first log dir, as Kafka's
    /// metadata.log.dir defaults to the first of log.dirs.
    pub fn metadata_dir(&self) -> &Path {
        self.log_dirs.first().unwrap_or(&self.data_dir)
    }

    /// The address other brokers reach this one at (registered as its host and port).
    pub fn advertised(&self) -> (String, i32) {
        // The inter-broker listener's endpoint (what followers fetch from); `listen` when
        // the listeners do not resolve (validate reports why).
        match self.listeners() {
            Ok(l) => (l.inter_broker().advertised_host.clone(), l.inter_broker().advertised_port),
            Err(_) => (self.listen.ip().to_string(), i32::from(self.listen.port())),
        }
    }

    /// The client listeners, resolved (`security::listeners`).
    pub fn listeners(&self) -> Result<crate::security::listeners::Listeners, ConfigError> {
        crate::security::listeners::resolve(&crate::security::listeners::ListenerSettings {
            listen: self.listen,
            advertised_listener: self.advertised_listener.as_deref(),
            listeners: &self.listeners,
            advertised_listeners: &self.advertised_listeners,
            protocol_map: &self.listener_security_protocol_map,
            inter_broker_listener_name: &self.inter_broker_listener_name,
        })
        .map_err(|(key, message)| ConfigError::Invalid { key, message })
    }

    /// The SASL mechanisms SASL listeners offer (`sasl_enabled_mechanisms`), and the PLAIN
    /// users (`sasl_jaas_config`, when PLAIN is enabled), checked.
    pub fn sasl_mechanisms(&self) -> Result<(Vec<String>, Option<crate::security::sasl_plain::PlainUsers>), ConfigError> {
        let bad = |key, message: String| ConfigError::Invalid { key, message };
        let mechanisms: Vec<String> = self.sasl_enabled_mechanisms.split(',').map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty()).collect();
        if mechanisms.is_empty() {
            return Err(bad("sasl_enabled_mechanisms", "names no mechanism".into()));
        }
        let served = |m: &str| m == "PLAIN" || m == "OAUTHBEARER" || crate::security::scram::ScramMechanism::from_name(m).is_some();
        if let Some(m) = mechanisms.iter().find(|m| !served(m)) {
            return Err(bad(
                "sasl_enabled_mechanisms",
                format!(
                    "{m} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are; {m} would need {})",
                    match m.as_str() {
                        "GSSAPI" =>
                            "Kerberos, which shardlog does not speak; GSSAPI is Kafka's default: set sasl_enabled_mechanisms = \"SCRAM-SHA-512\" (or PLAIN)",
                        _ => "a mechanism Kafka does not define",
                    }
                ),
            ));
        }
        let plain = if mechanisms.iter().any(|m| m == "PLAIN") {
            Some(crate::security::sasl_plain::PlainUsers::from_jaas(&self.sasl_jaas_config).map_err(|m| bad("sasl_jaas_config", m))?)
        } else {
            None
        };
        Ok((mechanisms, plain))
    }

    /// The OAUTHBEARER token validator (its JWKS read), when OAUTHBEARER is enabled.
    pub fn oauthbearer_validator(&self, mechanisms: &[String]) -> Result<Option<crate::security::oauthbearer::OAuthBearerValidator>, ConfigError> {
        use crate::security::oauthbearer::{audience_list, OAuthBearerSettings, OAuthBearerValidator};
        if !mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            return Ok(None);
        }
        let settings = OAuthBearerSettings {
            jwks_endpoint_url: self.sasl_oauthbearer_jwks_endpoint_url.clone(),
            jwks_refresh_ms: self.sasl_oauthbearer_jwks_endpoint_refresh_ms,
            jwks_retry_backoff_ms: self.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms,
            expected_audience: audience_list(&self.sasl_oauthbearer_expected_audience),
            expected_issuer: Some(self.sasl_oauthbearer_expected_issuer.trim().to_string()).filter(|s| !s.is_empty()),
            sub_claim_name: self.sasl_oauthbearer_sub_claim_name.clone(),
            clock_skew_seconds: self.sasl_oauthbearer_clock_skew_seconds,
        };
        OAuthBearerValidator::load(settings).map(Some).map_err(|message| ConfigError::Invalid { key: "sasl_oauthbearer_jwks_endpoint_url", message })
    }

    /// Kafka's StandardAuthorizer settings, or None when `authorizer_class_name` is empty
    /// (no authorization).
    pub fn authorizer(&self) -> Result<Option<crate::security::acl::AuthorizerSettings>, ConfigError> {
        const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
        match self.authorizer_class_name.trim() {
            "" => return Ok(None),
            STANDARD | "kafka.security.authorizer.AclAuthorizer" => {}
            other => {
                return Err(ConfigError::Invalid {
                    key: "authorizer_class_name",
                    message: format!("{other} is not served: use {STANDARD} (ACLs in the metadata log) or leave it empty"),
                })
            }
        }
        let mut super_users = std::collections::HashSet::new();
        for p in self.super_users.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            crate::security::acl::check_principal(p).map_err(|message| ConfigError::Invalid { key: "super_users", message })?;
            super_users.insert(p.to_string());
        }
        Ok(Some(crate::security::acl::AuthorizerSettings { super_users, allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found }))
    }

    /// Delegation tokens' secret and lifetimes; None when tokens are disabled (no secret).
    pub fn delegation_tokens(&self) -> Result<Option<(std::sync::Arc<[u8]>, crate::security::delegation_token::TokenLifetimes)>, ConfigError> {
        if self.delegation_token_secret_key.is_empty() {
            return Ok(None);
        }
        if self.delegation_token_max_lifetime_ms < 1 || self.delegation_token_expiry_time_ms < 1 {
            return Err(ConfigError::Invalid { key: "delegation_token_max_lifetime_ms", message: "delegation token lifetimes must be at least 1 ms".into() });
        }
        let lifetimes = crate::security::delegation_token::TokenLifetimes {
            max_lifetime_ms: self.delegation_token_max_lifetime_ms,
            expiry_time_ms: self.delegation_token_expiry_time_ms,
        };
        Ok(Some((self.delegation_token_secret_key.as_bytes().into(), lifetimes)))
    }

    /// How client quotas' rates are sampled (quota.window.num, quota.window.size.seconds).
    pub fn quota_window(&self) -> crate::security::quota_rate::RateWindow {
        crate::security::quota_rate::RateWindow { samples: self.quota_window_num, window_ms: self.quota_window_size_seconds * 1000 }
    }

    /// The window of the controller mutation quota (controller.quota.window.num, .size.seconds).
    pub fn controller_quota_window(&self) -> crate::security::quota_rate::RateWindow {
        crate::security::quota_rate::RateWindow { samples: self.controller_quota_window_num, window_ms: self.controller_quota_window_size_seconds * 1000 }
    }

    /// max.connections, max.connections.per.ip and its overrides.
    pub fn connection_limits(&self) -> Result<crate::security::connection_limits::ConnectionLimits, ConfigError> {
        crate::security::connection_limits::ConnectionLimits::new(
            self.max_connections,
            self.max_connections_per_ip,
            &self.max_connections_per_ip_overrides,
            self.quota_window(),
        )
        .map_err(|message| ConfigError::Invalid { key: "max_connections_per_ip_overrides", message })
    }

    /// `ssl_principal_mapping_rules`, parsed.
    /// This config as a listener sees it: its `listener.name.<listener>.*` settings applied.
    pub fn for_listener(&self, listener: &str) -> Result<Config, ConfigError> {
        listener_overrides::for_listener(self, listener).map_err(|message| ConfigError::Invalid { key: "listener_settings", message })
    }

    pub fn ssl_principal_mapper(&self) -> Result<crate::security::ssl_principal::SslPrincipalMapper, ConfigError> {
        crate::security::ssl_principal::SslPrincipalMapper::parse(&self.ssl_principal_mapping_rules)
            .map_err(|message| ConfigError::Invalid { key: "ssl_principal_mapping_rules", message })
    }

    /// The `ssl.*` settings the SSL and SASL_SSL listeners use.
    pub fn tls_settings(&self) -> crate::security::tls_config::TlsSettings {
        crate::security::tls_config::TlsSettings {
            keystore_type: self.ssl_keystore_type.clone(),
            keystore_location: self.ssl_keystore_location.clone(),
            keystore_password: self.ssl_keystore_password.clone(),
            key_password: self.ssl_key_password.clone(),
            truststore_type: self.ssl_truststore_type.clone(),
            truststore_location: self.ssl_truststore_location.clone(),
            truststore_password: self.ssl_truststore_password.clone(),
            client_auth: self.ssl_client_auth.clone(),
            enabled_protocols: self.ssl_enabled_protocols.clone(),
            cipher_suites: self.ssl_cipher_suites.clone(),
            endpoint_identification_algorithm: self.ssl_endpoint_identification_algorithm.clone(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key, message: &str| Err(ConfigError::Invalid { key, message: message.into() });
        let listeners = self.listeners()?;
        self.authorizer()?;
        self.ssl_principal_mapper()?;
        self.connection_limits()?;
        if self.quota_window_num < 2 {
            return bad("quota_window_num", "must be at least 2");
        }
        if !(1..=3600).contains(&self.quota_window_size_seconds) {
            return bad("quota_window_size_seconds", "must be between 1 and 3600");
        }
        if self.controller_quota_window_num < 1 {
            return bad("controller_quota_window_num", "must be at least 1");
        }
        if !(1..=3600).contains(&self.controller_quota_window_size_seconds) {
            return bad("controller_quota_window_size_seconds", "must be between 1 and 3600");
        }
        let controller = self.controller_listener_protocol()?.0;
        let mut names: Vec<&str> = listeners.all.iter().map(|l| l.name.as_str()).collect();
        if self.controller_listener.is_some() {
            names.push(&controller);
        }
        listener_overrides::check(self, &names).map_err(|message| ConfigError::Invalid { key: "listener_settings", message })?;
        for l in &listeners.all {
            let own = self.for_listener(&l.name)?;
            if l.protocol.uses_sasl() {
                let (mechanisms, _) = own.sasl_mechanisms()?;
                own.oauthbearer_validator(&mechanisms)?;
            }
            if l.protocol.uses_tls() {
                // Read the key material now: a broker that cannot serve TLS refuses to start.
                crate::security::tls_config::server_config(&own.tls_settings())
                    .map_err(|e| ConfigError::Invalid { key: e.key, message: format!("listener {}: {}", l.name, e.message) })?;
            }
            own.ssl_principal_mapper()?;
        }
        self.delegation_tokens()?;
        // Nodes refuse to start when they could not reach each other.
        self.inter_broker_security()?;
        if self.controller_listener.is_some() {
            self.controller_tls()?;
        }
        let dirs: Vec<PathBuf> = self.resolved_log_dirs().iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())).collect();
        if dirs.iter().any(|d| d.as_os_str().is_empty()) {
            return bad("log_dirs", "a log dir path is empty");
        }
        if (1..dirs.len()).any(|i| dirs[..i].contains(&dirs[i])) {
            return bad("log_dirs", "a directory is listed twice");
        }
        if self.socket_request_max_bytes < 1024 {
            return bad("socket_request_max_bytes", "must be at least 1024");
        }
        // The largest frame must fit the part of the pool large frames may use.
        if request_pool_large_limit_bytes(self.queued_max_request_bytes) < self.socket_request_max_bytes {
            return bad(
                "queued_max_request_bytes",
                "must be at least 8/7 of socket_request_max_bytes (the largest frame must fit the 7/8 of the pool that frames above 64 KiB may use)",
            );
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return bad("log_format", "must be text or json");
        }
        if !self.admin_listener.is_empty() && self.admin_listener.parse::<std::net::SocketAddr>().is_err() {
            return bad("admin_listener", "must be host:port with an IP address (127.0.0.1:9644), or empty for none");
        }
        self.validate_share_groups()?;
        if !(100..=1_000_000).contains(&self.shard_preempt_timer_us) {
            return bad("shard_preempt_timer_us", "must be between 100 and 1000000");
        }
        if !(64 << 10..=1 << 30).contains(&self.shard_io_memory_bytes) {
            return bad("shard_io_memory_bytes", "must be between 65536 and 1073741824");
        }
        if self.shard_spin_before_park_us > 10_000 {
            return bad("shard_spin_before_park_us", "must be at most 10000 (10 ms)");
        }
        if self.cross_shard_inbox_capacity == 0 {
            return bad("cross_shard_inbox_capacity", "must be at least 1");
        }
        if self.remote_log_manager_copier_thread_pool_size == 0 {
            return bad("remote_log_manager_copier_thread_pool_size", "must be at least 1");
        }
        if self.remote_log_reader_threads == 0 {
            return bad("remote_log_reader_threads", "must be at least 1");
        }
        if self.max_inflight_requests_per_connection == 0 {
            return bad("max_inflight_requests_per_connection", "must be at least 1");
        }
        if self.fetch_max_bytes > i32::MAX as usize {
            return bad("fetch_max_bytes", "must be at most 2147483647 (a Fetch response length is an i32)");
        }
        if self.num_partitions < 1 {
            return bad("num_partitions", "must be at least 1");
        }
        if self.default_replication_factor < 1 {
            return bad("default_replication_factor", "must be at least 1");
        }
        if self.log_segment_bytes < 14 {
            return bad("log_segment_bytes", "must be at least 14");
        }
        // Kafka: log.flush.interval.messages at least 1, log.flush.interval.ms at least 0.
        if self.log_flush_interval_messages < 1 {
            return bad("log_flush_interval_messages", "must be at least 1");
        }
        if self.log_flush_interval_ms < 0 {
            return bad("log_flush_interval_ms", "must not be negative");
        }
        if self.message_max_bytes < 0 {
            return bad("message_max_bytes", "must not be negative");
        }
        if !matches!(self.log_message_timestamp_type.as_str(), "CreateTime" | "LogAppendTime") {
            return bad("log_message_timestamp_type", "must be CreateTime or LogAppendTime");
        }
        if self.log_message_timestamp_before_max_ms < 0 {
            return bad("log_message_timestamp_before_max_ms", "must not be negative");
        }
        if self.log_message_timestamp_after_max_ms < 0 {
            return bad("log_message_timestamp_after_max_ms", "must not be negative");
        }
        if !(1..=10_000).contains(&self.offsets_topic_num_partitions) {
            return bad("offsets_topic_num_partitions", "must be between 1 and 10000");
        }
        if self.group_min_session_timeout_ms < 1 || self.group_max_session_timeout_ms < self.group_min_session_timeout_ms {
            return bad("group_max_session_timeout_ms", "must be at least group_min_session_timeout_ms (which must be positive)");
        }
        if self.offsets_topic_segment_bytes < 14 {
            return bad("offsets_topic_segment_bytes", "must be at least 14");
        }
        // Kafka: offsets.topic.replication.factor and min.insync.replicas at least 1,
        // replica.lag.time.max.ms positive here (0 would shrink every ISR at once).
        if self.transaction_state_log_num_partitions < 1 {
            return bad("transaction_state_log_num_partitions", "must be at least 1");
        }
        if self.transaction_state_log_replication_factor < 1 {
            return bad("transaction_state_log_replication_factor", "must be at least 1");
        }
        if self.share_coordinator_state_topic_num_partitions < 1 {
            return bad("share_coordinator_state_topic_num_partitions", "must be at least 1");
        }
        if self.share_coordinator_state_topic_replication_factor < 1 {
            return bad("share_coordinator_state_topic_replication_factor", "must be at least 1");
        }
        if self.share_coordinator_state_topic_min_isr < 1 {
            return bad("share_coordinator_state_topic_min_isr", "must be at least 1");
        }
        if self.share_coordinator_state_topic_segment_bytes < 14 {
            return bad("share_coordinator_state_topic_segment_bytes", "must be at least 14");
        }
        if self.share_coordinator_snapshot_update_records_per_snapshot > 500 {
            return bad("share_coordinator_snapshot_update_records_per_snapshot", "must be at most 500 (Kafka's range is 0 to 500)");
        }
        if self.transaction_max_timeout_ms < 1 {
            return bad("transaction_max_timeout_ms", "must be at least 1");
        }
        if self.offsets_topic_replication_factor < 1 {
            return bad("offsets_topic_replication_factor", "must be at least 1");
        }
        if self.min_insync_replicas < 1 {
            return bad("min_insync_replicas", "must be at least 1");
        }
        if self.replica_lag_time_max_ms == 0 {
            return bad("replica_lag_time_max_ms", "must be positive");
        }
        if self.replica_fetch_wait_max_ms < 0 || self.replica_socket_timeout_ms <= self.replica_fetch_wait_max_ms as u64 {
            return bad("replica_socket_timeout_ms", "must exceed replica_fetch_wait_max_ms (which must not be negative)");
        }
        if !matches!(self.replica_selector_class.as_str(), "" | RACK_AWARE_REPLICA_SELECTOR | "rack-aware") {
            return bad("replica_selector_class", "must be empty or org.apache.kafka.common.replica.RackAwareReplicaSelector");
        }
        if self.replica_fetch_max_bytes < 1 || self.replica_fetch_response_max_bytes < 1 {
            return bad("replica_fetch_max_bytes", "replica_fetch_max_bytes and replica_fetch_response_max_bytes must be positive");
        }
        if self.offsets_retention_minutes == 0 || self.offsets_retention_check_interval_ms == 0 {
            return bad("offsets_retention_minutes", "offsets_retention_minutes and offsets_retention_check_interval_ms must be positive");
        }
        // The values of group::consumer::migration::MigrationPolicy (config sits below group).
        if !matches!(self.group_consumer_migration_policy.to_ascii_lowercase().as_str(), "bidirectional" | "upgrade" | "downgrade" | "disabled") {
            return bad("group_consumer_migration_policy", "must be bidirectional, upgrade, downgrade or disabled");
        }
        if self.group_max_size == 0 || self.max_groups_per_shard == 0 {
            return bad("group_max_size", "group_max_size and max_groups_per_shard must be at least 1");
        }
        if self.group_consumer_heartbeat_interval_ms < 1 || self.group_consumer_session_timeout_ms <= self.group_consumer_heartbeat_interval_ms as u64 {
            return bad("group_consumer_session_timeout_ms", "must be above group_consumer_heartbeat_interval_ms (which must be positive)");
        }
        self.validate_streams_groups()?;
        if let Some(adv) = &self.advertised_listener {
            if adv.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).is_none() {
                return bad("advertised_listener", "must be host:port");
            }
        }
        self.validate_quorum()
    }

    /// Roles, controller listener and voters must describe one consistent node.
    /// Kafka's GroupCoordinatorConfig for streams groups: each default between the bounds
    /// Kafka 4.4 has by default (shardlog has no keys for the bounds), the session timeout
    /// above the heartbeat interval.
    fn validate_streams_groups(&self) -> Result<(), ConfigError> {
        use StreamsGroupBounds as B;
        let bad = |key: &'static str, message: String| Err(ConfigError::Invalid { key, message });
        let ranges: [(&'static str, i32, std::ops::RangeInclusive<i32>); 4] = [
            ("group_streams_session_timeout_ms", self.group_streams_session_timeout_ms, B::SESSION_TIMEOUT_MS),
            ("group_streams_heartbeat_interval_ms", self.group_streams_heartbeat_interval_ms, B::HEARTBEAT_INTERVAL_MS),
            ("group_streams_num_standby_replicas", self.group_streams_num_standby_replicas, B::NUM_STANDBY_REPLICAS),
            ("group_streams_initial_rebalance_delay_ms", self.group_streams_initial_rebalance_delay_ms, B::INITIAL_REBALANCE_DELAY_MS),
        ];
        for (name, value, range) in ranges {
            if !range.contains(&value) {
                return bad(name, format!("must be between {} and {}", range.start(), range.end()));
            }
        }
        if self.group_streams_session_timeout_ms <= self.group_streams_heartbeat_interval_ms {
            return bad("group_streams_session_timeout_ms", "must be above group_streams_heartbeat_interval_ms".into());
        }
        if let Err(e) = rack_aware_assignment_tags("group.streams.rack.aware.assignment.tags", &self.group_streams_rack_aware_assignment_tags) {
            return bad("group_streams_rack_aware_assignment_tags", e);
        }
        Ok(())
    }

    /// Kafka's ShareGroupConfig: each key in its range, each default between its bounds.
    fn validate_share_groups(&self) -> Result<(), ConfigError> {
        let bad = |key: &'static str, message: String| Err(ConfigError::Invalid { key, message });
        let ranges: [(&str, i32, std::ops::RangeInclusive<i32>); 9] = [
            ("group_share_record_lock_duration_ms", self.group_share_record_lock_duration_ms, 1000..=3_600_000),
            ("group_share_min_record_lock_duration_ms", self.group_share_min_record_lock_duration_ms, 1000..=30_000),
            ("group_share_max_record_lock_duration_ms", self.group_share_max_record_lock_duration_ms, 30_000..=3_600_000),
            ("group_share_delivery_count_limit", self.group_share_delivery_count_limit, 2..=10),
            ("group_share_min_delivery_count_limit", self.group_share_min_delivery_count_limit, 2..=5),
            ("group_share_max_delivery_count_limit", self.group_share_max_delivery_count_limit, 5..=25),
            ("group_share_partition_max_record_locks", self.group_share_partition_max_record_locks, 100..=10_000),
            ("group_share_min_partition_max_record_locks", self.group_share_min_partition_max_record_locks, 100..=2000),
            ("group_share_max_partition_max_record_locks", self.group_share_max_partition_max_record_locks, 2000..=10_000),
        ];
        for (name, value, range) in ranges {
            if !range.contains(&value) {
                return bad(name, format!("must be between {} and {}", range.start(), range.end()));
            }
        }
        let between = [
            (
                "group_share_record_lock_duration_ms",
                self.group_share_min_record_lock_duration_ms,
                self.group_share_record_lock_duration_ms,
                self.group_share_max_record_lock_duration_ms,
            ),
            (
                "group_share_delivery_count_limit",
                self.group_share_min_delivery_count_limit,
                self.group_share_delivery_count_limit,
                self.group_share_max_delivery_count_limit,
            ),
            (
                "group_share_partition_max_record_locks",
                self.group_share_min_partition_max_record_locks,
                self.group_share_partition_max_record_locks,
                self.group_share_max_partition_max_record_locks,
            ),
        ];
        for (name, min, value, max) in between {
            if !(min..=max).contains(&value) {
                return bad(name, format!("must be between its min ({min}) and max ({max}) settings"));
            }
        }
        // Kafka: every member of a full group must be able to hold a session.
        if self.group_share_max_share_sessions < SHARE_GROUP_MAX_SIZE {
            return bad("group_share_max_share_sessions", format!("must be greater than or equal to group.share.max.size ({SHARE_GROUP_MAX_SIZE})"));
        }
        Ok(())
    }

    fn validate_quorum(&self) -> Result<(), ConfigError> {
        let bad = |key, message: String| Err(ConfigError::Invalid { key, message });
        if self.node_id < 0 {
            return bad("node_id", format!("must be >= 0, got {}", self.node_id));
        }
        if self.process_roles.is_empty() {
            return bad("process_roles", "must name \"broker\", \"controller\" or both".into());
        }
        for r in &self.process_roles {
            if r != "broker" && r != "controller" {
                return bad("process_roles", format!("unknown role '{r}': expected \"broker\" or \"controller\""));
            }
        }
        if self.broker_session_timeout_ms == 0 {
            return bad("broker_session_timeout_ms", "must be positive".into());
        }
        if self.metadata_snapshot_every_entries == 0 {
            return bad("metadata_snapshot_every_entries", "must be positive".into());
        }
        // Kafka: leader.imbalance.check.interval.seconds at least 1, the percentage 0-100.
        if !(1..=86_400 * 365).contains(&self.leader_imbalance_check_interval_seconds) {
            return bad("leader_imbalance_check_interval_seconds", "must be between 1 and 31536000".into());
        }
        if self.leader_imbalance_per_broker_percentage > 100 {
            return bad("leader_imbalance_per_broker_percentage", "must be between 0 and 100".into());
        }
        if let Some(l) = &self.controller_listener {
            split_host_port(l).map_err(|m| ConfigError::Invalid { key: "controller_listener", message: m })?;
        }
        let voters =
            parse_quorum_voters(&self.controller_quorum_voters).map_err(|message| ConfigError::Invalid { key: "controller_quorum_voters", message })?;
        let bootstrap = parse_bootstrap_servers(&self.controller_quorum_bootstrap_servers)
            .map_err(|message| ConfigError::Invalid { key: "controller_quorum_bootstrap_servers", message })?;
        let combined = self.has_role("broker") && self.has_role("controller");
        if voters.is_empty() && bootstrap.is_empty() {
            if !combined {
                return bad(
                    "controller_quorum_voters",
                    format!(
                        "process_roles = {:?} needs a quorum: set controller_quorum_voters (id@host:port,...) to the controller nodes; \
                     only a combined node (broker and controller) runs alone",
                        self.process_roles
                    ),
                );
            }
            if self.controller_listener.is_some() {
                return bad("controller_quorum_voters", "must be set when controller_listener is (id@host:port,...)".into());
            }
            return Ok(());
        }
        let me = voters.iter().find(|v| v.id == self.node_id);
        let Some(listener) = &self.controller_listener else {
            let why = if self.has_role("controller") {
                "a controller in a quorum needs a controller_listener (host:port)"
            } else {
                "a broker-only node needs a controller_listener (host:port, reachable from the controllers): \
                 the quorum leader replicates the metadata log to it there"
            };
            return bad("controller_listener", why.into());
        };
        let (host, port) = split_host_port(listener).map_err(|m| ConfigError::Invalid { key: "controller_listener", message: m })?;
        if let Some(adv) = &self.advertised_controller_listener {
            let (adv_host, _) = split_host_port(adv).map_err(|m| ConfigError::Invalid { key: "advertised_controller_listener", message: m })?;
            if adv_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
                return bad("advertised_controller_listener", format!("must be an address the controllers can reach, not {adv_host}"));
            }
        }
        let unspecified = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        if !self.has_role("controller") && unspecified && self.advertised_controller_listener.is_none() {
            // The leader connects to the address the observer registers with.
            return bad(
                "controller_listener",
                format!(
                    "a broker-only node's controller listener is where the quorum leader connects: \
                 give an address the controllers can reach, not {host}, or set advertised_controller_listener"
                ),
            );
        }
        match me {
            None if self.has_role("controller") && bootstrap.is_empty() => bad(
                "controller_quorum_voters",
                format!(
                    "node_id {} has the controller role but is not a voter: list it in controller_quorum_voters, or set \
                 controller_quorum_bootstrap_servers to join the quorum as an observer and then add it as a voter \
                 (kafka-metadata-quorum.sh add-controller)",
                    self.node_id
                ),
            ),
            Some(me) if !self.has_role("controller") => bad(
                "controller_quorum_voters",
                format!(
                    "node_id {} is broker-only but is listed as voter {}@{}:{}; a broker-only node follows the quorum \
                 as an observer: remove it from controller_quorum_voters or add the controller role",
                    self.node_id, me.id, me.host, me.port
                ),
            ),
            Some(me) if port != me.port => {
                bad("controller_listener", format!("port {port} differs from this node's voter entry {}@{}:{}", me.id, me.host, me.port))
            }
            _ => Ok(()),
        }
    }

    pub fn has_role(&self, role: &str) -> bool {
        self.process_roles.iter().any(|r| r == role)
    }
}

/// One entry of controller.quorum.voters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

impl QuorumVoter {
    pub fn addr(&self) -> String {
        join_host_port(&self.host, self.port)
    }
}

/// `host:port`, an IPv6 host in brackets (what `split_host_port` reads back).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Most voters a quorum may list (a limit, as on everything; Kafka quorums have 3 or 5).
pub const MAX_QUORUM_VOTERS: usize = 64;

/// Members one share group may have: Kafka's `group.share.max.size` default, which shardlog
/// does not let an operator change.
pub const SHARE_GROUP_MAX_SIZE: usize = 200;

/// `host:port` (IPv6 hosts in brackets) → (host, port).
pub fn split_host_port(s: &str) -> Result<(String, u16), String> {
    let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("'{s}' is not host:port"))?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.is_empty() {
        return Err(format!("'{s}' has no host"));
    }
    let port = port.parse::<u16>().map_err(|_| format!("'{s}' has no valid port (0-65535)"))?;
    if port == 0 {
        return Err(format!("'{s}': port 0 is not a fixed port"));
    }
    Ok((host.to_string(), port))
}

/// Parses controller.quorum.bootstrap.servers: `host:port,...` (at most MAX_QUORUM_VOTERS).
pub fn parse_bootstrap_servers(s: &str) -> Result<Vec<String>, String> {
    let entries: Vec<&str> = s.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if entries.len() > MAX_QUORUM_VOTERS {
        return Err(format!("more than {MAX_QUORUM_VOTERS} servers"));
    }
    entries.into_iter().map(|e| split_host_port(e).map(|_| e.to_string())).collect()
}

/// Parses Kafka's controller.quorum.voters syntax, `id@host:port,id@host:port,...`.
/// Empty (or blank) = no voters. Ids must be unique and >= 0.
/// Kafka's rack-aware replica selector (KIP-392), the one `replica_selector_class` knows.
pub const RACK_AWARE_REPLICA_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

impl Config {
    /// Whether consumers with a rack may be sent to a same-rack follower (KIP-392).
    pub fn rack_aware_reads(&self) -> bool {
        !self.replica_selector_class.is_empty()
    }
}

pub fn parse_quorum_voters(s: &str) -> Result<Vec<QuorumVoter>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<QuorumVoter> = Vec::new();
    for entry in s.split(',') {
        let entry = entry.trim();
        let (id, addr) = entry.split_once('@').ok_or_else(|| format!("'{entry}' is not id@host:port"))?;
        let id: i32 = id.trim().parse().map_err(|_| format!("'{entry}': the id '{id}' is not a number"))?;
        if id < 0 {
            return Err(format!("'{entry}': the id must be >= 0"));
        }
        let (host, port) = split_host_port(addr.trim()).map_err(|m| format!("'{entry}': {m}"))?;
        if out.iter().any(|v| v.id == id) {
            return Err(format!("voter id {id} is listed twice"));
        }
        if out.len() == MAX_QUORUM_VOTERS {
            return Err(format!("more than {MAX_QUORUM_VOTERS} voters"));
        }
        out.push(QuorumVoter { id, host, port });
    }
    Ok(out)
}

impl ConfigArgs {
    /// Defaults, then the profile, then the flags.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        self.apply_flags(&mut c);
        controller_listener::apply(&mut c).map_err(|message| ConfigError::Invalid { key: "controller_listener_names", message })?;
        c.validate()?;
        Ok(c)
    }
}

/// A `rack.aware.assignment.tags` list (broker `group.streams.*` or group `streams.*`
/// key `name`) as Kafka's validators read it: comma separated, trimmed, no empty entry, no
/// duplicate; an empty value is no tags.
pub fn rack_aware_assignment_tags(name: &str, value: &str) -> Result<Vec<String>, String> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let tags: Vec<String> = value.split(',').map(|t| t.trim().to_string()).collect();
    if tags.iter().any(String::is_empty) {
        return Err(format!("Configuration '{name}' values must not be empty."));
    }
    let distinct: std::collections::BTreeSet<&String> = tags.iter().collect();
    if distinct.len() != tags.len() {
        return Err(format!("{name} must not contain duplicate tag keys."));
    }
    Ok(tags)
}

/// Kafka 4.4's default bounds of the streams-group keys (group.streams.min/max.*), which
/// shardlog keeps fixed: the group configs and the broker defaults stay within them.
pub struct StreamsGroupBounds;

impl StreamsGroupBounds {
    pub const SESSION_TIMEOUT_MS: std::ops::RangeInclusive<i32> = 45_000..=60_000;
    pub const HEARTBEAT_INTERVAL_MS: std::ops::RangeInclusive<i32> = 5_000..=15_000;
    pub const NUM_STANDBY_REPLICAS: std::ops::RangeInclusive<i32> = 0..=2;
    pub const INITIAL_REBALANCE_DELAY_MS: std::ops::RangeInclusive<i32> = 0..=i32::MAX;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_profile_and_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "flush = \"never\"\nnum_partitions = 3\n").unwrap();
        let args = ConfigArgs { config: Some(path), num_partitions: Some(6), ..Default::default() };
        let c = args.resolve().unwrap();
        assert_eq!(c.flush, FlushMode::Never);
        assert_eq!(c.num_partitions, 6);
        assert_eq!(c.socket_request_max_bytes, 100 * 1024 * 1024);
    }

    /// Kafka's ShareGroupConfig rules: each group.share.* limit in its range and between
    /// its min and max settings.
    #[test]
    fn share_group_limits_are_checked_as_kafka_checks_them() {
        assert!(Config::default().validate().is_ok());
        let long_locks = Config { group_share_record_lock_duration_ms: 3_600_000, group_share_max_record_lock_duration_ms: 3_600_000, ..Config::default() };
        assert!(long_locks.validate().is_ok(), "an hour is allowed with a max of an hour");
        let cases = [
            (Config { group_share_record_lock_duration_ms: 3_600_000, ..Config::default() }, "group_share_record_lock_duration_ms"),
            (Config { group_share_record_lock_duration_ms: 999, ..Config::default() }, "group_share_record_lock_duration_ms"),
            (Config { group_share_delivery_count_limit: 11, ..Config::default() }, "group_share_delivery_count_limit"),
            (Config { group_share_max_delivery_count_limit: 4, ..Config::default() }, "group_share_max_delivery_count_limit"),
            (Config { group_share_partition_max_record_locks: 5000, ..Config::default() }, "group_share_partition_max_record_locks"),
            (Config { group_share_min_partition_max_record_locks: 2001, ..Config::default() }, "group_share_min_partition_max_record_locks"),
            (Config { group_share_max_share_sessions: 199, ..Config::default() }, "group_share_max_share_sessions"),
        ];
        for (c, key) in cases {
            match c.validate() {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn streams_group_defaults_are_checked_as_kafka_checks_them() {
        assert!(Config { group_streams_initial_rebalance_delay_ms: 0, group_streams_num_standby_replicas: 2, ..Config::default() }.validate().is_ok());
        assert!(Config { group_streams_rack_aware_assignment_tags: "zone,cluster".into(), ..Config::default() }.validate().is_ok());
        for tags in ["zone,,cluster", "zone, zone"] {
            let e = Config { group_streams_rack_aware_assignment_tags: tags.into(), ..Config::default() }.validate().unwrap_err();
            assert!(format!("{e:?}").contains("group_streams_rack_aware_assignment_tags"), "{e:?}");
        }
        let cases = [
            (Config { group_streams_session_timeout_ms: 60_001, ..Config::default() }, "group_streams_session_timeout_ms"),
            (Config { group_streams_heartbeat_interval_ms: 4_999, ..Config::default() }, "group_streams_heartbeat_interval_ms"),
            (Config { group_streams_num_standby_replicas: 3, ..Config::default() }, "group_streams_num_standby_replicas"),
            (Config { group_streams_initial_rebalance_delay_ms: -1, ..Config::default() }, "group_streams_initial_rebalance_delay_ms"),
        ];
        for (c, key) in cases {
            match c.validate() {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn log_dirs_override_data_dir() {
        let mut c = Config::default();
        assert_eq!(c.resolved_log_dirs(), vec![PathBuf::from("./data")]);
        assert_eq!(c.metadata_dir(), Path::new("./data"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "log_dirs = [\"/d1\", \"/d2\"]\n").unwrap();
        c = ConfigArgs { config: Some(path.clone()), ..Default::default() }.resolve().unwrap();
        assert_eq!(c.resolved_log_dirs(), vec![PathBuf::from("/d1"), PathBuf::from("/d2")]);
        assert_eq!(c.metadata_dir(), Path::new("/d1"), "the metadata stays in the first log dir");
        let flags = ConfigArgs { config: Some(path), log_dirs: Some(vec!["/e1".into()]), ..Default::default() };
        assert_eq!(flags.resolve().unwrap().resolved_log_dirs(), vec![PathBuf::from("/e1")]);
        c.log_dirs = vec!["/d1".into(), "/d2".into(), "/d1".into()];
        assert!(matches!(c.validate(), Err(ConfigError::Invalid { key: "log_dirs", .. })));
    }

    #[test]
    fn remote_concurrency_is_at_least_one() {
        for c in [Config { remote_log_manager_copier_thread_pool_size: 0, ..Config::default() }, Config { remote_log_reader_threads: 0, ..Config::default() }] {
            assert!(matches!(c.validate(), Err(ConfigError::Invalid { message, .. }) if message == "must be at least 1"));
        }
        assert!(Config { remote_log_manager_copier_thread_pool_size: 1, remote_log_reader_threads: 1, ..Config::default() }.validate().is_ok());
    }

    #[test]
    fn unknown_profile_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "no_such_key = 1\n").unwrap();
        let args = ConfigArgs { config: Some(path), ..Default::default() };
        assert!(matches!(args.resolve(), Err(ConfigError::Parse { .. })));
    }

    #[test]
    fn request_pool_must_hold_the_largest_frame() {
        let mut c = Config::default();
        assert_eq!(c.queued_max_request_bytes, 512 * 1024 * 1024);
        c.validate().unwrap();
        // 7/8 of the pool (the part frames above 64 KiB may use) must hold the largest frame.
        c.queued_max_request_bytes = 114 * 1024 * 1024;
        assert!(request_pool_large_limit_bytes(c.queued_max_request_bytes) < c.socket_request_max_bytes);
        assert!(matches!(c.validate(), Err(ConfigError::Invalid { key: "queued_max_request_bytes", .. })));
        c.queued_max_request_bytes = 115 * 1024 * 1024;
        c.validate().unwrap();
    }

    #[test]
    fn quorum_voters_parse_kafka_syntax() {
        let v = parse_quorum_voters("1@127.0.0.1:19093, 2@[::1]:19094,3@ctl-3:9093").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], QuorumVoter { id: 1, host: "127.0.0.1".into(), port: 19093 });
        assert_eq!(v[1].addr(), "[::1]:19094");
        assert_eq!(v[2].addr(), "ctl-3:9093");
        assert!(parse_quorum_voters("  ").unwrap().is_empty());
        for bad in ["1", "x@h:1", "-1@h:1", "1@h", "1@h:99999", "1@:9", "1@h:0", "1@h:1,1@g:2", "1@h:1,", "@h:1"] {
            let err = parse_quorum_voters(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_QUORUM_VOTERS).map(|i| format!("{i}@h:{}", 1000 + i)).collect();
        assert!(parse_quorum_voters(&many.join(",")).unwrap_err().contains("more than"));
    }

    #[test]
    fn quorum_settings_must_agree() {
        let mut c = Config::default();
        assert_eq!(c.process_roles, vec!["broker", "controller"]);
        c.validate().unwrap();
        let key = |c: &Config| match c.validate() {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected an invalid setting, got {other:?}"),
        };
        c.controller_listener = Some("127.0.0.1:19093".into());
        assert_eq!(key(&c), "controller_quorum_voters");
        c.controller_quorum_voters = "1@127.0.0.1:19093,2@127.0.0.1:19094".into();
        c.validate().unwrap();
        c.node_id = 3;
        assert_eq!(key(&c), "controller_quorum_voters");
        c.node_id = 2;
        assert_eq!(key(&c), "controller_listener"); // port 19093 is node 1's
        c.controller_listener = None;
        assert_eq!(key(&c), "controller_listener");
        c.process_roles = vec!["borker".into()];
        assert_eq!(key(&c), "process_roles");
        c.process_roles.clear();
        assert_eq!(key(&c), "process_roles");
    }

    #[test]
    fn split_roles_must_agree_with_the_voters() {
        let key = |c: &Config| match c.validate() {
            Err(ConfigError::Invalid { key, message }) => {
                assert!(!message.is_empty());
                key
            }
            other => panic!("expected an invalid setting, got {other:?}"),
        };
        let voters = "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095";
        // A controller-only node: a voter with its voter entry's port.
        let mut c = Config { process_roles: vec!["controller".into()], node_id: 2, ..Config::default() };
        assert_eq!(key(&c), "controller_quorum_voters"); // both roles alone need voters
        c.controller_quorum_voters = voters.into();
        assert_eq!(key(&c), "controller_listener");
        c.controller_listener = Some("127.0.0.1:19094".into());
        c.validate().unwrap();
        c.node_id = 4;
        assert_eq!(key(&c), "controller_quorum_voters"); // a controller must be a voter
                                                         // A broker-only node: not a voter, but with a controller listener of its own.
        let mut b = Config { process_roles: vec!["broker".into()], node_id: 4, ..Config::default() };
        assert_eq!(key(&b), "controller_quorum_voters");
        b.controller_quorum_voters = voters.into();
        assert_eq!(key(&b), "controller_listener");
        b.controller_listener = Some("0.0.0.0:19096".into());
        assert_eq!(key(&b), "controller_listener"); // the leader cannot connect to 0.0.0.0
        b.advertised_controller_listener = Some("0.0.0.0:19096".into());
        assert_eq!(key(&b), "advertised_controller_listener");
        b.advertised_controller_listener = Some("10.0.0.4:19096".into());
        b.validate().unwrap(); // binds every interface, announces a reachable address
        b.advertised_controller_listener = None;
        b.controller_listener = Some("127.0.0.1:19096".into());
        b.validate().unwrap();
        b.node_id = 3;
        b.controller_listener = Some("127.0.0.1:19095".into());
        assert_eq!(key(&b), "controller_quorum_voters"); // a broker-only node must not vote
        b.node_id = 4;
        b.metadata_snapshot_every_entries = 0;
        assert_eq!(key(&b), "metadata_snapshot_every_entries");
    }

    #[test]
    fn replication_keys_default_as_kafka_and_are_checked() {
        let c = Config::default();
        assert_eq!(
            (c.replica_lag_time_max_ms, c.offsets_topic_replication_factor, c.min_insync_replicas, c.unclean_leader_election_enable),
            (30_000, 3, 1, false)
        );
        let args = ConfigArgs {
            replica_lag_time_max_ms: Some(500),
            unclean_leader_election_enable: Some(true),
            offsets_topic_replication_factor: Some(1),
            ..Default::default()
        };
        let c = args.resolve().unwrap();
        assert_eq!((c.replica_lag_time_max_ms, c.unclean_leader_election_enable, c.offsets_topic_replication_factor), (500, true, 1));
        let key = |c: Config| match c.validate() {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("{other:?}"),
        };
        assert_eq!(key(Config { replica_lag_time_max_ms: 0, ..Config::default() }), "replica_lag_time_max_ms");
        assert_eq!(key(Config { min_insync_replicas: 0, ..Config::default() }), "min_insync_replicas");
        assert_eq!(key(Config { offsets_topic_replication_factor: 0, ..Config::default() }), "offsets_topic_replication_factor");
    }

    #[test]
    fn every_tuning_profile_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Config::from_file(&path).unwrap().validate().unwrap();
                seen += 1;
            }
        }
        assert!(seen >= 3, "tuning/ must hold dev, throughput and latency profiles");
    }
}
