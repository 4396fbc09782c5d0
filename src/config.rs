//! One config struct for the broker. Values come from, in order: built-in defaults
//! (Apache Kafka 4.1's where Kafka has the setting), a TOML profile (`--config
//! tuning/<profile>.toml`), then command-line flags. Every key is also a flag.

/// Kafka's controller.listener.names, resolved into the controller listener.
pub mod controller_listener;
/// A listener's own settings (`listener.name.<listener>.<key>`).
pub mod listener_overrides;
/// How this node authenticates to its peers' listeners (inter-broker).
mod peer_security;

use std::net::SocketAddr;
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub listen: SocketAddr,
    /// host:port clients are told to connect to; defaults to `listen`.
    pub advertised_listener: Option<String>,
    /// listeners: `NAME://host:port,...` (Kafka's syntax; an empty host binds every interface). Empty: `listen` is the one PLAINTEXT listener.
    pub listeners: String,
    /// advertised.listeners: `NAME://host:port,...`, what clients connecting to each listener are told. Empty: the `listeners` addresses.
    pub advertised_listeners: String,
    /// listener.security.protocol.map: `NAME:PROTOCOL,...` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); Kafka's default maps each protocol name to itself.
    pub listener_security_protocol_map: String,
    /// inter.broker.listener.name: the listener other brokers fetch from (registered as this broker's address). Empty: the PLAINTEXT listener. Must be a PLAINTEXT listener for now.
    pub inter_broker_listener_name: String,
    /// controller.listener.names: listeners of `listeners` that are the controller's (the first becomes controller_listener, and leaves the client listeners); PLAINTEXT only so far.
    pub controller_listener_names: String,
    /// ssl.keystore.type: PEM or PKCS12 (JKS, Kafka's default, cannot be read: convert it).
    pub ssl_keystore_type: String,
    /// ssl.keystore.location: the SSL listeners' key and certificate chain.
    pub ssl_keystore_location: String,
    /// ssl.keystore.password: opens a PKCS12 key store.
    pub ssl_keystore_password: String,
    /// ssl.key.password: decrypts an encrypted PEM private key.
    pub ssl_key_password: String,
    /// ssl.truststore.type: PEM or PKCS12.
    pub ssl_truststore_type: String,
    /// ssl.truststore.location: CA certificates client certificates are checked against (ssl.client.auth).
    pub ssl_truststore_location: String,
    /// ssl.truststore.password: opens a PKCS12 trust store.
    pub ssl_truststore_password: String,
    /// ssl.client.auth: none, requested or required (mutual TLS).
    pub ssl_client_auth: String,
    /// ssl.enabled.protocols: TLSv1.2 and/or TLSv1.3.
    pub ssl_enabled_protocols: String,
    /// ssl.cipher.suites: IANA suite names; empty = every suite rustls offers.
    pub ssl_cipher_suites: String,
    /// ssl.endpoint.identification.algorithm: https (default) = when this node connects to a peer's SSL listener (inter-broker, controller) the peer's certificate must name the host; empty = any name, as long as a trusted CA signed it.
    pub ssl_endpoint_identification_algorithm: String,
    /// ssl.principal.mapping.rules: how a client certificate's subject (RFC 2253) becomes the principal's name on SSL listeners: RULE:<regex>/<replacement>/[LU], ..., DEFAULT.
    pub ssl_principal_mapping_rules: String,
    /// sasl.enabled.mechanisms: the mechanisms SASL listeners offer. PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are served; GSSAPI (Kafka's default) is refused at start.
    pub sasl_enabled_mechanisms: String,
    /// sasl.oauthbearer.jwks.endpoint.url: the JWKS (a file: `file:///path` or a path) whose keys sign OAUTHBEARER tokens; needed when OAUTHBEARER is enabled (Kafka's unsecured default validator, which takes unsigned tokens, is not offered).
    pub sasl_oauthbearer_jwks_endpoint_url: String,
    /// sasl.oauthbearer.jwks.endpoint.refresh.ms: how often an https JWKS is fetched again (Kafka: 1 hour).
    pub sasl_oauthbearer_jwks_endpoint_refresh_ms: u64,
    /// sasl.oauthbearer.jwks.endpoint.retry.backoff.ms: the shortest gap between JWKS fetches (after a failure, or when a token names an unknown key id).
    pub sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: u64,
    /// sasl.oauthbearer.expected.audience: comma-separated; when set, a token's `aud` must name one of them.
    pub sasl_oauthbearer_expected_audience: String,
    /// sasl.oauthbearer.expected.issuer: when set, a token's `iss` must be it.
    pub sasl_oauthbearer_expected_issuer: String,
    /// sasl.oauthbearer.sub.claim.name: the claim that names the principal.
    pub sasl_oauthbearer_sub_claim_name: String,
    /// sasl.oauthbearer.clock.skew.seconds: leeway on `exp` and `nbf`.
    pub sasl_oauthbearer_clock_skew_seconds: u64,
    /// Kafka's `listener.name.<listener>.plain.sasl.jaas.config` (one for every SASL listener; needed when PLAIN is enabled): `org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\" ...;`. SCRAM users are not here: they live in the metadata log (kafka-configs.sh --entity-type users).
    pub sasl_jaas_config: String,
    /// Kafka's `listener.name.<listener>.scram-sha-256.sasl.jaas.config` / `scram-sha-512.sasl.jaas.config` (per listener only): `org.apache.kafka.common.security.scram.ScramLoginModule required username=\"<u>\" password=\"<p>\";`, this broker's own credentials when it authenticates to that listener on a peer with SCRAM.
    pub scram_sasl_jaas_config: String,
    /// sasl.mechanism.inter.broker.protocol: the mechanism brokers authenticate to each other with on a SASL inter-broker listener (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is refused at start when it would be used). The credentials are the listener's JAAS `username`/`password`.
    pub sasl_mechanism_inter_broker_protocol: String,
    /// shardlog's own: a TLS client that has not finished its handshake this long after connecting is disconnected (Kafka waits up to connections.max.idle.ms).
    pub ssl_handshake_timeout_ms: u64,
    /// authorizer.class.name: empty (no authorization; the ACL APIs answer SECURITY_DISABLED) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log, Kafka's semantics).
    pub authorizer_class_name: String,
    /// super.users: principals allowed everything, `;`-separated (User:admin;User:broker).
    pub super_users: String,
    /// delegation.token.secret.key: the secret every broker derives delegation tokens' HMACs from (the same on every broker); empty = delegation tokens disabled (DELEGATION_TOKEN_AUTH_DISABLED).
    pub delegation_token_secret_key: String,
    /// delegation.token.max.lifetime.ms: no token lives longer (Kafka: 7 days).
    pub delegation_token_max_lifetime_ms: i64,
    /// delegation.token.expiry.time.ms: a token's life until it must be renewed (Kafka: 1 day).
    pub delegation_token_expiry_time_ms: i64,
    /// delegation.token.expiry.check.interval.ms: how often the quorum leader removes expired tokens (Kafka: 1 hour).
    pub delegation_token_expiry_check_interval_ms: u64,
    /// allow.everyone.if.no.acl.found: whether a resource no ACL is bound to is open to all.
    pub allow_everyone_if_no_acl_found: bool,
    /// log.dir: the one log dir when `log_dirs` is empty.
    pub data_dir: PathBuf,
    /// log.dirs: the log dirs partitions are spread over (JBOD; storage/log_dirs.rs). When
    /// set, `data_dir` is not used (as Kafka's log.dirs overrides log.dir); the first dir
    /// also holds the metadata (Kafka's metadata.log.dir default). Empty: `[data_dir]`.
    pub log_dirs: Vec<PathBuf>,
    /// node.id: this node's id in the cluster (broker id and controller/raft voter id).
    pub node_id: i32,
    /// process.roles: "broker", "controller" or both (a combined node). A controller-only
    /// node is a quorum voter that runs no shards and never registers as a broker; a
    /// broker-only node follows the metadata log as an openraft learner (an observer in
    /// DescribeQuorum) and needs a controller_listener the quorum leader replicates to,
    /// but is not a voter.
    pub process_roles: Vec<String>,
    /// The controller listener (Kafka's CONTROLLER listener in `listeners`): host:port the
    /// metadata quorum's raft RPCs are served on. None = a single node whose controller
    /// runs in-process with no peers (the default, and the behaviour before issue 11).
    pub controller_listener: Option<String>,
    /// The controller listener as the quorum reaches it (Kafka's advertised.listeners entry
    /// for the CONTROLLER listener, KIP-853): what a broker-only node announces to the
    /// quorum leader, which replicates the metadata log to it there. Defaults to
    /// `controller_listener`; needed when that binds a wildcard (0.0.0.0) or a private
    /// address. (Voters are reached at their `controller_quorum_voters` entries.)
    pub advertised_controller_listener: Option<String>,
    /// controller.quorum.voters: `id@host:port,...`, every voter's node id and controller
    /// listener. Empty = single node. Must name this node (with its controller_listener's
    /// port) when process_roles has "controller", and must not name a broker-only node.
    pub controller_quorum_voters: String,
    /// controller.quorum.bootstrap.servers (KIP-853): `host:port,...` of controllers to
    /// ask when joining an existing quorum. A node with the controller role that is not in
    /// controller_quorum_voters (or with no voters set) joins as an observer through them,
    /// catches up, and becomes a voter when an operator adds it (AddRaftVoter,
    /// `kafka-metadata-quorum.sh add-controller`). Empty = the voters' addresses.
    pub controller_quorum_bootstrap_servers: String,
    /// Take a metadata snapshot (and purge the metadata log before it) every this many
    /// committed entries (Kafka: metadata.log.max.record.bytes.between.snapshots, in bytes).
    pub metadata_snapshot_every_entries: u64,
    /// broker.rack: this broker's rack (rack-aware replica placement); None = no rack.
    pub broker_rack: Option<String>,
    /// broker.session.timeout.ms: a broker whose heartbeats stop this long is fenced and
    /// loses its leaderships. 3000 (Kafka: 9000): leadership leaves a hung or cut-off
    /// broker within ~3 s; heartbeats go every timeout / 6 (500 ms), so fencing a live
    /// broker takes six heartbeats lost or late in a row. Combined nodes never fence
    /// themselves. A crashed broker does not wait for it: its closed heartbeat connection
    /// fences it 100 ms later (`controller/liveness.rs`), so a lower default would only
    /// speed up hangs and network cuts, at the price of fencing live brokers on a loaded
    /// machine (a 2-core box running three nodes delays heartbeats by hundreds of ms).
    pub broker_session_timeout_ms: u64,
    /// auto.leader.rebalance.enable: the quorum leader moves leadership back to preferred
    /// replicas (the first of each partition) when leaders are imbalanced.
    pub auto_leader_rebalance_enable: bool,
    /// leader.imbalance.check.interval.seconds: how often the quorum leader checks.
    pub leader_imbalance_check_interval_seconds: u64,
    /// leader.imbalance.per.broker.percentage: a broker's share (%) of the partitions it is
    /// the preferred leader of but does not lead, above which they are moved back to it.
    pub leader_imbalance_per_broker_percentage: u32,
    /// replica.lag.time.max.ms: a follower that has not caught up with its leader's log
    /// end for this long leaves the ISR (the leader proposes AlterPartition).
    pub replica_lag_time_max_ms: u64,
    /// replica.fetch.wait.max.ms: how long a leader holds a follower's fetch that finds no
    /// new data.
    pub replica_fetch_wait_max_ms: i32,
    /// replica.fetch.max.bytes: record bytes a follower asks per partition (the first
    /// batch may exceed it).
    pub replica_fetch_max_bytes: i32,
    /// replica.fetch.response.max.bytes: record bytes per follower fetch response.
    pub replica_fetch_response_max_bytes: i32,
    /// replica.fetch.backoff.ms: a follower's pause after a fetch error.
    pub replica_fetch_backoff_ms: u64,
    /// replica.socket.timeout.ms: a follower drops its connection to a leader that has not
    /// answered a fetch for this long.
    pub replica_socket_timeout_ms: u64,
    /// replica.selector.class (KIP-392): empty (Kafka's default: consumers always read
    /// from the leader) or `org.apache.kafka.common.replica.RackAwareReplicaSelector`
    /// (also `rack-aware`): a consumer with `client.rack` reads from an in-sync replica in
    /// its rack.
    pub replica_selector_class: String,
    /// min.insync.replicas: the default of the topic key: acks=all needs at least this
    /// many in-sync replicas (NOT_ENOUGH_REPLICAS otherwise).
    pub min_insync_replicas: i32,
    /// unclean.leader.election.enable: the default of the topic key: the controller may
    /// elect a live replica outside the ISR when no ISR member is live (acknowledged
    /// records may be lost). As Kafka, the active controller's value applies.
    pub unclean_leader_election_enable: bool,
    /// Number of shards (one pinned executor each); 0 = one per available core.
    pub shards: usize,
    /// Core for the controller thread; -1 = a core no shard uses if there is one, else
    /// unpinned.
    pub controller_core: i64,
    pub flush: FlushMode,
    /// log.flush.interval.messages: with flush = never, fdatasync in the background once
    /// this many messages of a partition are unsynced. Kafka's default: never.
    pub log_flush_interval_messages: i64,
    /// log.flush.interval.ms: with flush = never, fdatasync in the background once a
    /// partition's unsynced data is this old. Kafka's default: never.
    pub log_flush_interval_ms: i64,
    /// Test hook (`storage_fault = "drop-unsynced"`): see `StorageFault`.
    pub storage_fault: StorageFault,
    /// socket.request.max.bytes: frames above this are refused before allocation.
    pub socket_request_max_bytes: usize,
    /// queued.max.request.bytes, per shard: bytes of requests being received or handled
    /// that all of a shard's connections may hold together; a connection whose next frame
    /// does not fit stops reading until memory is released. Kafka's default is -1
    /// (unbounded); ours is a limit.
    pub queued_max_request_bytes: usize,
    /// Connections a shard accepts at once; further ones are closed at accept.
    pub max_connections_per_shard: usize,
    /// max.connections: connections the broker holds at once on all its listeners; at
    /// the limit, listeners stop accepting until one closes (Kafka's default: no limit).
    pub max_connections: usize,
    /// max.connections.per.ip: connections from one address; more are closed at accept.
    pub max_connections_per_ip: usize,
    /// max.connections.per.ip.overrides: `host-or-ip:count,...`.
    pub max_connections_per_ip_overrides: String,
    /// quota.window.num: samples a client quota's rate is measured over.
    pub quota_window_num: usize,
    /// quota.window.size.seconds: the length of each sample.
    pub quota_window_size_seconds: u64,
    /// controller.quota.window.num: with the window size, the burst of partition
    /// mutations a client may make at once (samples × size × controller_mutation_rate).
    pub controller_quota_window_num: usize,
    /// controller.quota.window.size.seconds.
    pub controller_quota_window_size_seconds: u64,
    /// connections.max.idle.ms: a connection with nothing received and no request in flight
    /// for this long is closed, as Kafka does (clients reconnect when they need to).
    pub connections_max_idle_ms: u64,
    /// connections.max.reauth.ms (KIP-368): a SASL session lasts at most this long (0: until its credential expires, else for ever); the client re-authenticates on the connection before then, or its next request closes it.
    pub connections_max_reauth_ms: u64,
    /// Kafka's per-listener settings, `listener.name.<listener>.<key>=<value>` each (flag `--listener-setting`, repeatable): a listener's SASL and SSL settings over the broker's (see src/config/listener_overrides.rs for the keys).
    pub listener_settings: Vec<String>,
    /// Requests read ahead of their responses on one connection.
    pub max_inflight_requests_per_connection: usize,
    /// fetch.max.bytes: the most record bytes one Fetch response carries, whatever the
    /// request asks (the first batch of the first partition with data may exceed it, as
    /// in Kafka, so consumers make progress).
    pub fetch_max_bytes: usize,
    /// How long a shard runs ready tasks before it polls io_uring for completions again
    /// (glommio's preempt timer, microseconds). A busy shard notices finished writes and
    /// socket reads at least this often, so it bounds the stall a burst of CPU work adds to
    /// every in-flight request's latency.
    pub shard_preempt_timer_us: u64,
    pub auto_create_topics_enable: bool,
    /// num.partitions: partitions of an auto-created topic or a CreateTopics with -1.
    pub num_partitions: i32,
    /// default.replication.factor: replicas of an auto-created topic or a CreateTopics with -1.
    pub default_replication_factor: i16,
    /// Partitions one shard may own (a limit, as on everything).
    pub max_partitions_per_shard: usize,
    /// Bytes of recent batches each partition keeps in memory for zero-copy fetch.
    pub batch_cache_bytes_per_partition: usize,
    /// Bytes of batch cache per shard, across its partitions.
    pub batch_cache_bytes_per_shard: usize,
    /// Written page-cache segment bytes a shard leaves in the page cache (`flush =
    /// never`); older written-back ranges are dropped from it (storage/page_cache.rs).
    /// 0 = the kernel decides, as with Apache Kafka.
    pub page_cache_bytes_per_shard: u64,
    /// Topic defaults (Kafka's broker-level log.* settings).
    pub log_segment_bytes: u64,
    pub log_roll_ms: i64,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub message_max_bytes: i32,
    pub log_message_timestamp_type: String,
    /// log.message.timestamp.before.max.ms: CreateTime records older than now minus this
    /// are refused (INVALID_TIMESTAMP). Kafka's default: unlimited.
    pub log_message_timestamp_before_max_ms: i64,
    /// log.message.timestamp.after.max.ms: CreateTime records newer than now plus this are
    /// refused (INVALID_TIMESTAMP). Kafka 4.x default: 1 hour.
    pub log_message_timestamp_after_max_ms: i64,
    pub log_retention_check_interval_ms: u64,
    /// log.cleaner.backoff.ms: how often each shard looks for compacted partitions to clean.
    pub log_cleaner_backoff_ms: u64,
    /// An offset index entry every this many bytes (index.interval.bytes).
    pub log_index_interval_bytes: usize,
    /// Log level filter (tracing EnvFilter syntax); RUST_LOG overrides it.
    pub log_level: String,
    /// `text` (one line per event; ANSI colour only when stderr is a terminal) or `json`
    /// (one JSON object per line: timestamp, level, target, fields, the thread's shard).
    pub log_format: String,
    /// The HTTP admin listener (host:port) serving /metrics, /v1/status/live and
    /// /v1/status/ready on its own thread; empty = off.
    pub admin_listener: String,
    /// A task that runs this long on a shard without yielding is counted and logged as a
    /// reactor stall (`shardlog_shard_stalls_total`); 0 = off.
    pub shard_stall_threshold_ms: u64,
    /// offsets.topic.num.partitions: partitions of `__consumer_offsets` (created at
    /// start-up if missing; an existing topic keeps its count).
    pub offsets_topic_num_partitions: i32,
    /// offsets.topic.segment.bytes: segment size of `__consumer_offsets` (set at creation).
    pub offsets_topic_segment_bytes: i32,
    /// offsets.topic.replication.factor: replicas of `__consumer_offsets`, at most the
    /// brokers registered when it is created (set at creation).
    pub offsets_topic_replication_factor: i16,
    /// transaction.state.log.num.partitions: partitions of `__transaction_state` (created
    /// when the first transactional id looks for its coordinator).
    pub transaction_state_log_num_partitions: i32,
    /// transaction.state.log.replication.factor: its replicas, at most the brokers
    /// registered when it is created.
    pub transaction_state_log_replication_factor: i16,
    /// transaction.state.log.min.isr: its min.insync.replicas.
    pub transaction_state_log_min_isr: i32,
    /// transaction.state.log.segment.bytes.
    pub transaction_state_log_segment_bytes: i32,
    /// transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask.
    pub transaction_max_timeout_ms: i32,
    /// add.partitions.to.txn.retry.backoff.ms: the longest pause between two tries of a
    /// produce's transaction verification the coordinator answered CONCURRENT_TRANSACTIONS
    /// (its previous transaction's markers still being written); shardlog starts at 1 ms
    /// and doubles up to this.
    pub add_partitions_to_txn_retry_backoff_ms: u64,
    /// add.partitions.to.txn.retry.backoff.max.ms: how long in all those tries may take
    /// before the producer gets the retriable error.
    pub add_partitions_to_txn_retry_backoff_max_ms: u64,
    /// transactional.id.expiration.ms: a transactional id idle this long is forgotten.
    pub transactional_id_expiration_ms: i64,
    /// producer.id.expiration.ms: a producer idle this long leaves the partitions' producer state.
    pub producer_id_expiration_ms: i64,
    /// transaction.abort.timed.out.transaction.cleanup.interval.ms.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// Transactional ids one shard coordinates at most (a bound on the table clients grow).
    pub max_transactional_ids_per_shard: usize,
    /// Producer ids one partition remembers at most (idempotence and transactions): past
    /// it the least recently writing ones without an open transaction are forgotten early,
    /// as producer.id.expiration.ms would (a bound on the table clients grow).
    pub max_producer_ids_per_partition: usize,
    /// group.min.session.timeout.ms / group.max.session.timeout.ms.
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// group.initial.rebalance.delay.ms: how long a new group waits for more members.
    pub group_initial_rebalance_delay_ms: u64,
    /// group.max.size (classic groups), also used as group.consumer.max.size (KIP-848
    /// groups); Kafka's default is unbounded, ours is a limit.
    pub group_max_size: usize,
    /// Groups one shard coordinates at most (a limit, as on everything).
    pub max_groups_per_shard: usize,
    /// group.consumer.session.timeout.ms: a KIP-848 member silent this long is removed.
    pub group_consumer_session_timeout_ms: u64,
    /// group.consumer.heartbeat.interval.ms: how often KIP-848 members heartbeat.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// unstable.feature.versions.enable (Kafka's name, for testing): feature levels still
    /// being built become supported, so `kafka-features.sh upgrade` can turn them on
    /// (today share.version 1: share groups in progress, not durable yet).
    pub unstable_feature_versions_enable: bool,
    /// offset.metadata.max.bytes: longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
    pub offset_metadata_max_bytes: usize,
    /// offsets.retention.minutes: committed offsets of a group without members expire this
    /// long after the group emptied (or after their commit, if later).
    pub offsets_retention_minutes: u64,
    /// offsets.retention.check.interval.ms: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: u64,
}

/// The part of a request memory pool of `queued_max_request_bytes` that frames above
/// 64 KiB may use: 7/8 of it. The last 1/8 is kept for small requests (Metadata,
/// heartbeats, small produces), so clients holding large frames never starve them
/// (`server/request_memory.rs`).
pub const fn request_pool_large_limit_bytes(queued_max_request_bytes: usize) -> usize {
    queued_max_request_bytes - queued_max_request_bytes / 8
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_listener: None,
            listeners: String::new(),
            advertised_listeners: String::new(),
            listener_security_protocol_map: crate::security::listeners::DEFAULT_PROTOCOL_MAP.to_string(),
            inter_broker_listener_name: String::new(),
            controller_listener_names: String::new(),
            ssl_keystore_type: "JKS".to_string(),
            ssl_keystore_location: String::new(),
            ssl_keystore_password: String::new(),
            ssl_key_password: String::new(),
            ssl_truststore_type: "JKS".to_string(),
            ssl_truststore_location: String::new(),
            ssl_truststore_password: String::new(),
            ssl_client_auth: "none".to_string(),
            ssl_enabled_protocols: "TLSv1.2,TLSv1.3".to_string(),
            ssl_cipher_suites: String::new(),
            ssl_endpoint_identification_algorithm: "https".to_string(),
            ssl_handshake_timeout_ms: 10_000,
            sasl_enabled_mechanisms: "GSSAPI".to_string(),
            sasl_oauthbearer_jwks_endpoint_url: String::new(),
            sasl_oauthbearer_jwks_endpoint_refresh_ms: 3_600_000,
            sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: 100,
            sasl_oauthbearer_expected_audience: String::new(),
            sasl_oauthbearer_expected_issuer: String::new(),
            sasl_oauthbearer_sub_claim_name: "sub".to_string(),
            sasl_oauthbearer_clock_skew_seconds: 30,
            sasl_jaas_config: String::new(),
            scram_sasl_jaas_config: String::new(),
            sasl_mechanism_inter_broker_protocol: "GSSAPI".to_string(),
            ssl_principal_mapping_rules: "DEFAULT".to_string(),
            authorizer_class_name: String::new(),
            super_users: String::new(),
            delegation_token_secret_key: String::new(),
            delegation_token_max_lifetime_ms: 7 * 24 * 3600 * 1000,
            delegation_token_expiry_time_ms: 24 * 3600 * 1000,
            delegation_token_expiry_check_interval_ms: 3600 * 1000,
            allow_everyone_if_no_acl_found: false,
            data_dir: PathBuf::from("./data"),
            log_dirs: Vec::new(),
            node_id: 1,
            process_roles: vec!["broker".into(), "controller".into()],
            controller_listener: None,
            advertised_controller_listener: None,
            controller_quorum_voters: String::new(),
            controller_quorum_bootstrap_servers: String::new(),
            broker_rack: None,
            broker_session_timeout_ms: 3000,
            metadata_snapshot_every_entries: 1024,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            leader_imbalance_per_broker_percentage: 10,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_max_bytes: 1_048_576,
            replica_fetch_response_max_bytes: 10_485_760,
            replica_fetch_backoff_ms: 1000,
            replica_socket_timeout_ms: 30_000,
            replica_selector_class: String::new(),
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            shards: 0,
            controller_core: -1,
            flush: FlushMode::Always,
            log_flush_interval_messages: i64::MAX,
            log_flush_interval_ms: i64::MAX,
            storage_fault: StorageFault::None,
            socket_request_max_bytes: 100 * 1024 * 1024,
            queued_max_request_bytes: 512 * 1024 * 1024,
            max_connections_per_shard: 10_000,
            max_connections: i32::MAX as usize,
            max_connections_per_ip: i32::MAX as usize,
            max_connections_per_ip_overrides: String::new(),
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            controller_quota_window_num: 11,
            controller_quota_window_size_seconds: 1,
            connections_max_idle_ms: 600_000,
            connections_max_reauth_ms: 0,
            listener_settings: Vec::new(),
            max_inflight_requests_per_connection: 64,
            fetch_max_bytes: 57_671_680,
            shard_preempt_timer_us: 100_000,
            auto_create_topics_enable: true,
            num_partitions: 1,
            default_replication_factor: 1,
            max_partitions_per_shard: 10_000,
            batch_cache_bytes_per_partition: 8 * 1024 * 1024,
            batch_cache_bytes_per_shard: 512 * 1024 * 1024,
            page_cache_bytes_per_shard: 2 << 30,
            log_segment_bytes: 1024 * 1024 * 1024,
            log_roll_ms: 7 * 24 * 3600 * 1000,
            log_retention_ms: 7 * 24 * 3600 * 1000,
            log_retention_bytes: -1,
            message_max_bytes: 1_048_588,
            log_message_timestamp_type: "CreateTime".into(),
            log_message_timestamp_before_max_ms: i64::MAX,
            log_message_timestamp_after_max_ms: 3_600_000,
            log_retention_check_interval_ms: 300_000,
            log_cleaner_backoff_ms: 15_000,
            log_index_interval_bytes: 4096,
            log_level: "info".into(),
            log_format: "text".into(),
            admin_listener: "127.0.0.1:9644".into(),
            shard_stall_threshold_ms: 50,
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            offsets_topic_replication_factor: 3,
            transaction_state_log_num_partitions: 50,
            transaction_state_log_replication_factor: 3,
            transaction_state_log_min_isr: 2,
            transaction_state_log_segment_bytes: 104_857_600,
            transaction_max_timeout_ms: 900_000,
            add_partitions_to_txn_retry_backoff_ms: 20,
            add_partitions_to_txn_retry_backoff_max_ms: 100,
            transactional_id_expiration_ms: 604_800_000,
            producer_id_expiration_ms: 86_400_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            max_transactional_ids_per_shard: 100_000,
            max_producer_ids_per_partition: 10_000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3000,
            group_max_size: 10_000,
            max_groups_per_shard: 100_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            unstable_feature_versions_enable: false,
            offset_metadata_max_bytes: 4096,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
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
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.into(), source })?;
        toml::from_str(&text)
            .map_err(|e| ConfigError::Parse { path: path.into(), message: e.to_string() })
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
        let mechanisms: Vec<String> =
            self.sasl_enabled_mechanisms.split(',').map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty()).collect();
        if mechanisms.is_empty() {
            return Err(bad("sasl_enabled_mechanisms", "names no mechanism".into()));
        }
        let served = |m: &str| m == "PLAIN" || m == "OAUTHBEARER" || crate::security::scram::ScramMechanism::from_name(m).is_some();
        if let Some(m) = mechanisms.iter().find(|m| !served(m)) {
            return Err(bad("sasl_enabled_mechanisms", format!("{m} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are; {m} would need {})", match m.as_str() {
                "GSSAPI" => "Kerberos, which shardlog does not speak; GSSAPI is Kafka's default: set sasl_enabled_mechanisms = \"SCRAM-SHA-512\" (or PLAIN)",
                _ => "a mechanism Kafka does not define",
            })));
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
                return Err(ConfigError::Invalid { key: "authorizer_class_name", message: format!("{other} is not served: use {STANDARD} (ACLs in the metadata log) or leave it empty") })
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
        crate::security::quota_rate::RateWindow {
            samples: self.controller_quota_window_num,
            window_ms: self.controller_quota_window_size_seconds * 1000,
        }
    }

    /// max.connections, max.connections.per.ip and its overrides.
    pub fn connection_limits(&self) -> Result<crate::security::connection_limits::ConnectionLimits, ConfigError> {
        crate::security::connection_limits::ConnectionLimits::new(self.max_connections, self.max_connections_per_ip, &self.max_connections_per_ip_overrides, self.quota_window())
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
        let dirs: Vec<PathBuf> =
            self.resolved_log_dirs().iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())).collect();
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
            return bad("queued_max_request_bytes", "must be at least 8/7 of socket_request_max_bytes (the largest frame must fit the 7/8 of the pool that frames above 64 KiB may use)");
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return bad("log_format", "must be text or json");
        }
        if !self.admin_listener.is_empty() && self.admin_listener.parse::<std::net::SocketAddr>().is_err() {
            return bad("admin_listener", "must be host:port with an IP address (127.0.0.1:9644), or empty for none");
        }
        if !(100..=1_000_000).contains(&self.shard_preempt_timer_us) {
            return bad("shard_preempt_timer_us", "must be between 100 and 1000000");
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
        if self.group_max_size == 0 || self.max_groups_per_shard == 0 {
            return bad("group_max_size", "group_max_size and max_groups_per_shard must be at least 1");
        }
        if self.group_consumer_heartbeat_interval_ms < 1 || self.group_consumer_session_timeout_ms <= self.group_consumer_heartbeat_interval_ms as u64 {
            return bad("group_consumer_session_timeout_ms", "must be above group_consumer_heartbeat_interval_ms (which must be positive)");
        }
        if let Some(adv) = &self.advertised_listener {
            if adv.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).is_none() {
                return bad("advertised_listener", "must be host:port");
            }
        }
        self.validate_quorum()
    }

    /// Roles, controller listener and voters must describe one consistent node.
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
        let voters = parse_quorum_voters(&self.controller_quorum_voters)
            .map_err(|message| ConfigError::Invalid { key: "controller_quorum_voters", message })?;
        let bootstrap = parse_bootstrap_servers(&self.controller_quorum_bootstrap_servers)
            .map_err(|message| ConfigError::Invalid { key: "controller_quorum_bootstrap_servers", message })?;
        let combined = self.has_role("broker") && self.has_role("controller");
        if voters.is_empty() && bootstrap.is_empty() {
            if !combined {
                return bad("controller_quorum_voters", format!(
                    "process_roles = {:?} needs a quorum: set controller_quorum_voters (id@host:port,...) to the controller nodes; \
                     only a combined node (broker and controller) runs alone", self.process_roles));
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
            return bad("controller_listener", format!(
                "a broker-only node's controller listener is where the quorum leader connects: \
                 give an address the controllers can reach, not {host}, or set advertised_controller_listener"));
        }
        match me {
            None if self.has_role("controller") && bootstrap.is_empty() => bad("controller_quorum_voters", format!(
                "node_id {} has the controller role but is not a voter: list it in controller_quorum_voters, or set \
                 controller_quorum_bootstrap_servers to join the quorum as an observer and then add it as a voter \
                 (kafka-metadata-quorum.sh add-controller)", self.node_id)),
            Some(me) if !self.has_role("controller") => bad("controller_quorum_voters", format!(
                "node_id {} is broker-only but is listed as voter {}@{}:{}; a broker-only node follows the quorum \
                 as an observer: remove it from controller_quorum_voters or add the controller role",
                self.node_id, me.id, me.host, me.port)),
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
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Most voters a quorum may list (a limit, as on everything; Kafka quorums have 3 or 5).
pub const MAX_QUORUM_VOTERS: usize = 64;

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
        let (id, addr) = entry
            .split_once('@')
            .ok_or_else(|| format!("'{entry}' is not id@host:port"))?;
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

/// Command-line overrides for `shardlog serve`: one flag per config key.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ConfigArgs {
    /// TOML profile to load (e.g. tuning/latency.toml) before applying flags.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    #[arg(long)]
    pub advertised_listener: Option<String>,
    #[arg(long)]
    pub listeners: Option<String>,
    #[arg(long)]
    pub advertised_listeners: Option<String>,
    #[arg(long)]
    pub listener_security_protocol_map: Option<String>,
    #[arg(long)]
    pub inter_broker_listener_name: Option<String>,
    #[arg(long)]
    pub controller_listener_names: Option<String>,
    #[arg(long)]
    pub ssl_keystore_type: Option<String>,
    #[arg(long)]
    pub ssl_keystore_location: Option<String>,
    #[arg(long)]
    pub ssl_keystore_password: Option<String>,
    #[arg(long)]
    pub ssl_key_password: Option<String>,
    #[arg(long)]
    pub ssl_truststore_type: Option<String>,
    #[arg(long)]
    pub ssl_truststore_location: Option<String>,
    #[arg(long)]
    pub ssl_truststore_password: Option<String>,
    #[arg(long)]
    pub ssl_client_auth: Option<String>,
    #[arg(long)]
    pub ssl_enabled_protocols: Option<String>,
    #[arg(long)]
    pub ssl_cipher_suites: Option<String>,
    #[arg(long)]
    pub ssl_endpoint_identification_algorithm: Option<String>,
    #[arg(long)]
    pub ssl_handshake_timeout_ms: Option<u64>,
    #[arg(long)]
    pub sasl_enabled_mechanisms: Option<String>,
    #[arg(long)]
    pub sasl_jaas_config: Option<String>,
    #[arg(long)]
    pub sasl_mechanism_inter_broker_protocol: Option<String>,
    #[arg(long)]
    pub sasl_oauthbearer_jwks_endpoint_url: Option<String>,
    #[arg(long)]
    pub sasl_oauthbearer_jwks_endpoint_refresh_ms: Option<u64>,
    #[arg(long)]
    pub sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: Option<u64>,
    #[arg(long)]
    pub sasl_oauthbearer_expected_audience: Option<String>,
    #[arg(long)]
    pub sasl_oauthbearer_expected_issuer: Option<String>,
    #[arg(long)]
    pub sasl_oauthbearer_sub_claim_name: Option<String>,
    #[arg(long)]
    pub sasl_oauthbearer_clock_skew_seconds: Option<u64>,
    #[arg(long)]
    pub ssl_principal_mapping_rules: Option<String>,
    #[arg(long)]
    pub authorizer_class_name: Option<String>,
    #[arg(long)]
    pub super_users: Option<String>,
    #[arg(long)]
    pub delegation_token_secret_key: Option<String>,
    #[arg(long)]
    pub delegation_token_max_lifetime_ms: Option<i64>,
    #[arg(long)]
    pub delegation_token_expiry_time_ms: Option<i64>,
    #[arg(long)]
    pub delegation_token_expiry_check_interval_ms: Option<u64>,
    #[arg(long)]
    pub allow_everyone_if_no_acl_found: Option<bool>,
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Log dirs, comma-separated (Kafka's log.dirs); overrides --data-dir.
    #[arg(long, value_delimiter = ',')]
    pub log_dirs: Option<Vec<PathBuf>>,
    #[arg(long)]
    pub node_id: Option<i32>,
    /// Comma-separated: broker,controller (the default) / broker / controller.
    #[arg(long, value_delimiter = ',')]
    pub process_roles: Option<Vec<String>>,
    #[arg(long)]
    pub controller_listener: Option<String>,
    #[arg(long)]
    pub advertised_controller_listener: Option<String>,
    /// `id@host:port,...` (Kafka's controller.quorum.voters).
    #[arg(long)]
    pub controller_quorum_voters: Option<String>,
    /// `host:port,...` of controllers a joining node asks (Kafka's controller.quorum.bootstrap.servers).
    #[arg(long)]
    pub controller_quorum_bootstrap_servers: Option<String>,
    #[arg(long)]
    pub broker_rack: Option<String>,
    #[arg(long)]
    pub broker_session_timeout_ms: Option<u64>,
    #[arg(long)]
    pub metadata_snapshot_every_entries: Option<u64>,
    #[arg(long)]
    pub auto_leader_rebalance_enable: Option<bool>,
    #[arg(long)]
    pub leader_imbalance_check_interval_seconds: Option<u64>,
    #[arg(long)]
    pub leader_imbalance_per_broker_percentage: Option<u32>,
    #[arg(long)]
    pub replica_lag_time_max_ms: Option<u64>,
    #[arg(long)]
    pub replica_fetch_wait_max_ms: Option<i32>,
    #[arg(long)]
    pub replica_fetch_max_bytes: Option<i32>,
    #[arg(long)]
    pub replica_fetch_response_max_bytes: Option<i32>,
    #[arg(long)]
    pub replica_fetch_backoff_ms: Option<u64>,
    #[arg(long)]
    pub replica_socket_timeout_ms: Option<u64>,
    #[arg(long)]
    pub replica_selector_class: Option<String>,
    #[arg(long)]
    pub min_insync_replicas: Option<i32>,
    #[arg(long)]
    pub unclean_leader_election_enable: Option<bool>,
    #[arg(long)]
    pub shards: Option<usize>,
    #[arg(long)]
    pub controller_core: Option<i64>,
    #[arg(long, value_enum)]
    pub flush: Option<FlushMode>,
    #[arg(long)]
    pub log_flush_interval_messages: Option<i64>,
    #[arg(long)]
    pub log_flush_interval_ms: Option<i64>,
    /// Test hook: `drop-unsynced` keeps unsynced segment writes in memory (kill -9 = power loss).
    #[arg(long, value_enum)]
    pub storage_fault: Option<StorageFault>,
    #[arg(long)]
    pub socket_request_max_bytes: Option<usize>,
    #[arg(long)]
    pub queued_max_request_bytes: Option<usize>,
    #[arg(long)]
    pub max_connections_per_shard: Option<usize>,
    #[arg(long)]
    pub max_connections: Option<usize>,
    #[arg(long)]
    pub max_connections_per_ip: Option<usize>,
    #[arg(long)]
    pub max_connections_per_ip_overrides: Option<String>,
    #[arg(long)]
    pub quota_window_num: Option<usize>,
    #[arg(long)]
    pub quota_window_size_seconds: Option<u64>,
    #[arg(long)]
    pub controller_quota_window_num: Option<usize>,
    #[arg(long)]
    pub controller_quota_window_size_seconds: Option<u64>,
    #[arg(long)]
    pub connections_max_idle_ms: Option<u64>,
    #[arg(long)]
    pub connections_max_reauth_ms: Option<u64>,
    #[arg(long = "listener-setting", action = clap::ArgAction::Append)]
    pub listener_settings: Option<Vec<String>>,
    #[arg(long)]
    pub max_inflight_requests_per_connection: Option<usize>,
    #[arg(long)]
    pub fetch_max_bytes: Option<usize>,
    #[arg(long)]
    pub shard_preempt_timer_us: Option<u64>,
    #[arg(long)]
    pub auto_create_topics_enable: Option<bool>,
    #[arg(long)]
    pub num_partitions: Option<i32>,
    #[arg(long)]
    pub default_replication_factor: Option<i16>,
    #[arg(long)]
    pub max_partitions_per_shard: Option<usize>,
    #[arg(long)]
    pub batch_cache_bytes_per_partition: Option<usize>,
    #[arg(long)]
    pub batch_cache_bytes_per_shard: Option<usize>,
    #[arg(long)]
    pub page_cache_bytes_per_shard: Option<u64>,
    #[arg(long)]
    pub log_segment_bytes: Option<u64>,
    #[arg(long)]
    pub log_roll_ms: Option<i64>,
    #[arg(long)]
    pub log_retention_ms: Option<i64>,
    #[arg(long)]
    pub log_retention_bytes: Option<i64>,
    #[arg(long)]
    pub message_max_bytes: Option<i32>,
    #[arg(long)]
    pub log_message_timestamp_type: Option<String>,
    #[arg(long)]
    pub log_message_timestamp_before_max_ms: Option<i64>,
    #[arg(long)]
    pub log_message_timestamp_after_max_ms: Option<i64>,
    #[arg(long)]
    pub log_retention_check_interval_ms: Option<u64>,
    #[arg(long)]
    pub log_cleaner_backoff_ms: Option<u64>,
    #[arg(long)]
    pub log_index_interval_bytes: Option<usize>,
    #[arg(long)]
    pub log_level: Option<String>,
    /// text | json
    #[arg(long)]
    pub log_format: Option<String>,
    /// host:port of the HTTP admin listener (/metrics, /v1/status/*); empty = off
    #[arg(long)]
    pub admin_listener: Option<String>,
    /// A shard task running longer than this without yielding counts as a stall (0 = off)
    #[arg(long)]
    pub shard_stall_threshold_ms: Option<u64>,
    #[arg(long)]
    pub offsets_topic_num_partitions: Option<i32>,
    #[arg(long)]
    pub offsets_topic_segment_bytes: Option<i32>,
    #[arg(long)]
    pub offsets_topic_replication_factor: Option<i16>,
    #[arg(long)]
    pub transaction_state_log_num_partitions: Option<i32>,
    #[arg(long)]
    pub transaction_state_log_replication_factor: Option<i16>,
    #[arg(long)]
    pub transaction_state_log_min_isr: Option<i32>,
    #[arg(long)]
    pub transaction_state_log_segment_bytes: Option<i32>,
    #[arg(long)]
    pub transaction_max_timeout_ms: Option<i32>,
    #[arg(long)]
    pub add_partitions_to_txn_retry_backoff_ms: Option<u64>,
    #[arg(long)]
    pub add_partitions_to_txn_retry_backoff_max_ms: Option<u64>,
    #[arg(long)]
    pub transactional_id_expiration_ms: Option<i64>,
    #[arg(long)]
    pub producer_id_expiration_ms: Option<i64>,
    #[arg(long)]
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: Option<u64>,
    #[arg(long)]
    pub max_transactional_ids_per_shard: Option<usize>,
    #[arg(long)]
    pub max_producer_ids_per_partition: Option<usize>,
    #[arg(long)]
    pub group_min_session_timeout_ms: Option<i32>,
    #[arg(long)]
    pub group_max_session_timeout_ms: Option<i32>,
    #[arg(long)]
    pub group_initial_rebalance_delay_ms: Option<u64>,
    #[arg(long)]
    pub group_max_size: Option<usize>,
    #[arg(long)]
    pub max_groups_per_shard: Option<usize>,
    #[arg(long)]
    pub group_consumer_session_timeout_ms: Option<u64>,
    #[arg(long)]
    pub group_consumer_heartbeat_interval_ms: Option<i32>,
    /// Support feature levels still being built (testing only; Kafka's unstable.feature.versions.enable).
    #[arg(long)]
    pub unstable_feature_versions_enable: Option<bool>,
    #[arg(long)]
    pub offset_metadata_max_bytes: Option<usize>,
    #[arg(long)]
    pub offsets_retention_minutes: Option<u64>,
    #[arg(long)]
    pub offsets_retention_check_interval_ms: Option<u64>,
}

impl ConfigArgs {
    /// Defaults, then the profile, then the flags.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = &self.$f { c.$f = v.clone(); } )* };
        }
        set!(listeners, advertised_listeners, listener_security_protocol_map, inter_broker_listener_name, ssl_keystore_type, ssl_keystore_location, ssl_keystore_password, ssl_key_password, ssl_truststore_type, ssl_truststore_location, ssl_truststore_password, ssl_client_auth, ssl_enabled_protocols, ssl_cipher_suites, ssl_endpoint_identification_algorithm, ssl_handshake_timeout_ms, sasl_enabled_mechanisms, sasl_jaas_config, sasl_mechanism_inter_broker_protocol);
        set!(listener_settings, controller_listener_names);
        set!(sasl_oauthbearer_jwks_endpoint_refresh_ms, sasl_oauthbearer_jwks_endpoint_retry_backoff_ms);
        set!(sasl_oauthbearer_jwks_endpoint_url, sasl_oauthbearer_expected_audience, sasl_oauthbearer_expected_issuer,
            sasl_oauthbearer_sub_claim_name, sasl_oauthbearer_clock_skew_seconds);
        set!(authorizer_class_name, super_users, allow_everyone_if_no_acl_found, ssl_principal_mapping_rules);
        set!(delegation_token_secret_key, delegation_token_max_lifetime_ms, delegation_token_expiry_time_ms, delegation_token_expiry_check_interval_ms);
        set!(max_connections, max_connections_per_ip, max_connections_per_ip_overrides, quota_window_num, quota_window_size_seconds,
            controller_quota_window_num, controller_quota_window_size_seconds);
        set!(listen, data_dir, log_dirs, node_id, process_roles, controller_quorum_voters, controller_quorum_bootstrap_servers,
            broker_session_timeout_ms, metadata_snapshot_every_entries, auto_leader_rebalance_enable, leader_imbalance_check_interval_seconds,
            leader_imbalance_per_broker_percentage, replica_lag_time_max_ms, replica_fetch_wait_max_ms, replica_fetch_max_bytes,
            replica_fetch_response_max_bytes, replica_fetch_backoff_ms, replica_socket_timeout_ms, replica_selector_class, min_insync_replicas,
            unclean_leader_election_enable, shards, controller_core, flush, log_flush_interval_messages,
            log_flush_interval_ms, storage_fault, socket_request_max_bytes,
            queued_max_request_bytes,
            max_connections_per_shard, connections_max_idle_ms, connections_max_reauth_ms, max_inflight_requests_per_connection, fetch_max_bytes, shard_preempt_timer_us,
            auto_create_topics_enable, num_partitions, default_replication_factor, max_partitions_per_shard,
            batch_cache_bytes_per_partition, batch_cache_bytes_per_shard, page_cache_bytes_per_shard, log_segment_bytes,
            log_roll_ms, log_retention_ms, log_retention_bytes, message_max_bytes,
            log_message_timestamp_type, log_message_timestamp_before_max_ms,
            log_message_timestamp_after_max_ms, log_retention_check_interval_ms, log_cleaner_backoff_ms,
            log_index_interval_bytes, log_level, log_format, admin_listener, shard_stall_threshold_ms, offsets_topic_num_partitions, offsets_topic_segment_bytes,
            offsets_topic_replication_factor,
            transaction_state_log_num_partitions, transaction_state_log_replication_factor, transaction_state_log_min_isr,
            transaction_state_log_segment_bytes, transaction_max_timeout_ms,
            add_partitions_to_txn_retry_backoff_ms, add_partitions_to_txn_retry_backoff_max_ms, transactional_id_expiration_ms,
            producer_id_expiration_ms, transaction_abort_timed_out_transaction_cleanup_interval_ms,
            max_transactional_ids_per_shard, max_producer_ids_per_partition,
            group_min_session_timeout_ms, group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms, group_max_size, max_groups_per_shard,
            group_consumer_session_timeout_ms, group_consumer_heartbeat_interval_ms, unstable_feature_versions_enable,
            offset_metadata_max_bytes, offsets_retention_minutes,
            offsets_retention_check_interval_ms);
        if let Some(a) = &self.advertised_listener {
            c.advertised_listener = Some(a.clone());
        }
        if let Some(a) = &self.controller_listener {
            c.controller_listener = Some(a.clone());
        }
        if let Some(a) = &self.advertised_controller_listener {
            c.advertised_controller_listener = Some(a.clone());
        }
        if let Some(a) = &self.broker_rack {
            c.broker_rack = Some(a.clone());
        }
        controller_listener::apply(&mut c).map_err(|message| ConfigError::Invalid { key: "controller_listener_names", message })?;
        c.validate()?;
        Ok(c)
    }
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
        assert_eq!((c.replica_lag_time_max_ms, c.offsets_topic_replication_factor, c.min_insync_replicas, c.unclean_leader_election_enable), (30_000, 3, 1, false));
        let args = ConfigArgs { replica_lag_time_max_ms: Some(500), unclean_leader_election_enable: Some(true), offsets_topic_replication_factor: Some(1), ..Default::default() };
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
