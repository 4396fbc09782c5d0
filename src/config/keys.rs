//! Every config key, defined once: its field and type, default, Kafka name, whether it is
//! dynamic, and its documentation (the first line, one sentence, is the flag's help; the
//! rest is the long help and the details in `docs/configuration.md`). `config_keys!`
//! (`key_def.rs`) makes `Config`, its `Default`, the `ConfigArgs` flags and `KEYS` from it.
//!
//! A new key is one entry here (and its validation in `Config::validate`, if it needs one);
//! then regenerate the reference: `SHARDLOG_WRITE_DOCS=1 cargo test --lib configuration_reference`.
use std::net::SocketAddr;
use std::path::PathBuf;

use super::key_def::config_keys;
use super::{FlushMode, StorageFault};

config_keys! {
    // Listeners and addresses.

    /// The address every shard binds (SO_REUSEPORT) when `listeners` is empty.
    static listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9092));
    /// The host:port clients are told to connect to, when `listeners` is empty; unset: `listen`.
    static advertised_listener: Option<String> = None;
    /// The listeners, `NAME://host:port,...` (Kafka's syntax; an empty host binds every interface).
    /// Empty: `listen` is the one PLAINTEXT listener. See docs/security.md.
    static listeners: String = String::new(), kafka = "listeners" as String;
    /// What clients connecting to each listener are told, `NAME://host:port,...`.
    /// Empty: the `listeners` addresses.
    static advertised_listeners: String = String::new(), kafka = "advertised.listeners" as List;
    /// Each listener's security protocol, `NAME:PROTOCOL,...` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
    /// Kafka's default maps each protocol name to itself.
    static listener_security_protocol_map: String = crate::security::listeners::DEFAULT_PROTOCOL_MAP.to_string(), kafka = "listener.security.protocol.map";
    /// The listener other brokers fetch from (registered as this broker's address).
    /// Empty: the PLAINTEXT listener. Must be a PLAINTEXT listener for now.
    static inter_broker_listener_name: String = String::new(), kafka = "inter.broker.listener.name";
    /// The listeners of `listeners` that are the controller's.
    /// The first becomes `controller_listener` and leaves the client listeners; PLAINTEXT only so
    /// far.
    static controller_listener_names: String = String::new(), kafka = "controller.listener.names";
    /// A listener's own settings, `listener.name.<listener>.<key>=<value>` each (repeatable flag).
    /// Kafka's per-listener settings: a listener's SASL and SSL settings over the broker's (see
    /// `src/config/listener_overrides.rs` for the keys, and docs/security.md).
    static listener_settings: Vec<String> = Vec::new(), flag = |arg| arg.long("listener-setting").value_delimiter(None);

    // TLS.

    /// The key store's format: PEM or PKCS12.
    /// JKS, Kafka's default, cannot be read: convert it (the broker says how at start).
    static ssl_keystore_type: String = "JKS".to_string(), kafka = "ssl.keystore.type";
    /// The SSL listeners' key and certificate chain.
    static ssl_keystore_location: String = String::new(), kafka = "ssl.keystore.location";
    /// The password that opens a PKCS12 key store.
    static ssl_keystore_password: String = String::new(), kafka = "ssl.keystore.password";
    /// The password that decrypts an encrypted (PKCS#8) PEM private key.
    static ssl_key_password: String = String::new(), kafka = "ssl.key.password";
    /// The trust store's format: PEM or PKCS12.
    static ssl_truststore_type: String = "JKS".to_string(), kafka = "ssl.truststore.type";
    /// The CA certificates client certificates are checked against (see `ssl_client_auth`).
    static ssl_truststore_location: String = String::new(), kafka = "ssl.truststore.location";
    /// The password that opens a PKCS12 trust store.
    static ssl_truststore_password: String = String::new(), kafka = "ssl.truststore.password";
    /// Whether SSL clients must present a certificate: none, requested or required (mutual TLS).
    static ssl_client_auth: String = "none".to_string(), kafka = "ssl.client.auth";
    /// The TLS versions served: TLSv1.2 and/or TLSv1.3.
    static ssl_enabled_protocols: String = "TLSv1.2,TLSv1.3".to_string(), kafka = "ssl.enabled.protocols";
    /// The cipher suites served, by IANA name; empty: every suite rustls offers.
    static ssl_cipher_suites: String = String::new(), kafka = "ssl.cipher.suites";
    /// Whether a peer's certificate must name the host this node connects to: https (yes) or empty.
    /// With https (the default), when this node connects to a peer's SSL listener
    /// (inter-broker, controller) the peer's certificate must name the host; empty = any name, as
    /// long as a trusted CA signed it.
    static ssl_endpoint_identification_algorithm: String = "https".to_string(), kafka = "ssl.endpoint.identification.algorithm";
    /// How a client certificate's subject becomes the principal's name on SSL listeners.
    /// `RULE:<regex>/<replacement>/[LU], ..., DEFAULT`, applied to the subject in RFC 2253 form, as
    /// Java prints it (`O=org,OU=unit,CN=name` for a subject written CN first).
    static ssl_principal_mapping_rules: String = "DEFAULT".to_string(), kafka = "ssl.principal.mapping.rules";
    /// Disconnect a TLS client that has not finished its handshake this long after connecting.
    /// shardlog's own (Kafka waits up to connections.max.idle.ms).
    static ssl_handshake_timeout_ms: u64 = 10_000;

    // SASL.

    /// The mechanisms SASL listeners offer.
    /// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are served; GSSAPI (Kafka's default) is
    /// refused at start with the reason.
    static sasl_enabled_mechanisms: String = "GSSAPI".to_string(), kafka = "sasl.enabled.mechanisms";
    /// The PLAIN users of every SASL listener (Kafka's `listener.name.<listener>.plain.sasl.jaas.config`).
    /// Needed when PLAIN is enabled:
    /// `org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>="<password>" ...;`.
    /// SCRAM users are not here: they live in the metadata log (kafka-configs.sh --entity-type
    /// users).
    static sasl_jaas_config: String = String::new();
    /// This broker's own SCRAM credentials, when it authenticates to a peer's listener with SCRAM.
    /// Kafka's `listener.name.<listener>.scram-sha-256.sasl.jaas.config` /
    /// `scram-sha-512.sasl.jaas.config` (per listener in Kafka):
    /// `org.apache.kafka.common.security.scram.ScramLoginModule required username="<u>" password="<p>";`.
    static scram_sasl_jaas_config: String = String::new();
    /// The mechanism brokers authenticate to each other with on a SASL inter-broker listener.
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is refused at start when it
    /// would be used. The credentials are the listener's JAAS `username`/`password`.
    static sasl_mechanism_inter_broker_protocol: String = "GSSAPI".to_string(), kafka = "sasl.mechanism.inter.broker.protocol";
    /// The JWKS whose keys sign OAUTHBEARER tokens: an https URL, `file:///path` or a path.
    /// Needed when OAUTHBEARER is enabled (Kafka's unsecured default validator, which takes unsigned
    /// tokens, is not offered).
    static sasl_oauthbearer_jwks_endpoint_url: String = String::new(), kafka = "sasl.oauthbearer.jwks.endpoint.url";
    /// How often an https JWKS is fetched again (Kafka: 1 hour).
    static sasl_oauthbearer_jwks_endpoint_refresh_ms: u64 = 3_600_000, kafka = "sasl.oauthbearer.jwks.endpoint.refresh.ms";
    /// The shortest gap between JWKS fetches (after a failure, or when a token names an unknown key id).
    static sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: u64 = 100, kafka = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms";
    /// Comma-separated audiences; when set, a token's `aud` must name one of them.
    static sasl_oauthbearer_expected_audience: String = String::new(), kafka = "sasl.oauthbearer.expected.audience";
    /// When set, a token's `iss` must be it.
    static sasl_oauthbearer_expected_issuer: String = String::new(), kafka = "sasl.oauthbearer.expected.issuer";
    /// The token claim that names the principal.
    static sasl_oauthbearer_sub_claim_name: String = "sub".to_string(), kafka = "sasl.oauthbearer.sub.claim.name";
    /// Leeway on a token's `exp` and `nbf`, in seconds.
    static sasl_oauthbearer_clock_skew_seconds: u64 = 30, kafka = "sasl.oauthbearer.clock.skew.seconds";
    /// The longest a SASL session lasts (KIP-368); 0: until its credential expires, else for ever.
    /// The client re-authenticates on the connection before then, or its next request closes it.
    static connections_max_reauth_ms: u64 = 0, kafka = "connections.max.reauth.ms";

    // Authorization and delegation tokens.

    /// The authorizer: empty (none) or org.apache.kafka.metadata.authorizer.StandardAuthorizer.
    /// Empty: no authorization, and the ACL APIs answer SECURITY_DISABLED (as Kafka without an
    /// authorizer). StandardAuthorizer: ACLs kept in the metadata log, Kafka's semantics.
    static authorizer_class_name: String = String::new(), kafka = "authorizer.class.name";
    /// Principals allowed everything, `;`-separated (`User:admin;User:broker`).
    static super_users: String = String::new(), kafka = "super.users";
    /// Whether a resource no ACL is bound to is open to everyone.
    static allow_everyone_if_no_acl_found: bool = false, kafka = "allow.everyone.if.no.acl.found";
    /// The secret every broker derives delegation tokens' HMACs from; empty: tokens disabled.
    /// The same on every broker. Empty: delegation tokens are disabled
    /// (DELEGATION_TOKEN_AUTH_DISABLED).
    static delegation_token_secret_key: String = String::new(), kafka = "delegation.token.secret.key";
    /// No delegation token lives longer (Kafka: 7 days).
    static delegation_token_max_lifetime_ms: i64 = 7 * 24 * 3600 * 1000, kafka = "delegation.token.max.lifetime.ms";
    /// A delegation token's life until it must be renewed (Kafka: 1 day).
    static delegation_token_expiry_time_ms: i64 = 24 * 3600 * 1000, kafka = "delegation.token.expiry.time.ms";
    /// How often the quorum leader removes expired delegation tokens (Kafka: 1 hour).
    static delegation_token_expiry_check_interval_ms: u64 = 3600 * 1000, kafka = "delegation.token.expiry.check.interval.ms";

    // Connections and requests.

    /// Frames above this many bytes are refused before allocation.
    static socket_request_max_bytes: usize = 100 * 1024 * 1024, kafka = "socket.request.max.bytes" as Int;
    /// Bytes of requests a shard's connections may hold together (per shard).
    /// Bytes of requests being received or handled; a connection whose next frame does not fit stops
    /// reading until memory is released. Frames above 64 KiB may use 7/8 of it (the rest is kept for
    /// small requests), so it must be at least 8/7 × `socket_request_max_bytes`. Kafka's default is
    /// -1 (unbounded); ours is a limit.
    static queued_max_request_bytes: usize = 512 * 1024 * 1024, kafka = "queued.max.request.bytes" as Long;
    /// Connections a shard accepts at once; further ones are closed at accept.
    static max_connections_per_shard: usize = 10_000;
    /// Connections the broker holds at once on all its listeners.
    /// At the limit, listeners stop accepting until one closes (the inter-broker listener excepted).
    /// Kafka's default: no limit.
    static max_connections: usize = i32::MAX as usize, kafka = "max.connections";
    /// Connections from one address; more are closed at accept.
    static max_connections_per_ip: usize = i32::MAX as usize, kafka = "max.connections.per.ip";
    /// Per-address exceptions to `max_connections_per_ip`, `host-or-address:count,...`.
    static max_connections_per_ip_overrides: String = String::new(), kafka = "max.connections.per.ip.overrides";
    /// Samples a client quota's rate is measured over (see docs/security.md).
    static quota_window_num: usize = 11, kafka = "quota.window.num";
    /// The length of each client quota sample, in seconds.
    static quota_window_size_seconds: u64 = 1, kafka = "quota.window.size.seconds";
    /// Samples of the controller mutation quota.
    /// With the window size, the burst of partition mutations a client may make at once
    /// (samples × size × controller_mutation_rate).
    static controller_quota_window_num: usize = 11, kafka = "controller.quota.window.num";
    /// The length of each controller mutation quota sample, in seconds.
    static controller_quota_window_size_seconds: u64 = 1, kafka = "controller.quota.window.size.seconds";
    /// A connection with nothing received and no request in flight for this long is closed.
    /// As Kafka does (clients reconnect when they need to).
    static connections_max_idle_ms: u64 = 600_000, kafka = "connections.max.idle.ms";
    /// Requests read ahead of their responses on one connection (pipelining depth).
    static max_inflight_requests_per_connection: usize = 64;
    /// Messages a shard's inbox holds for it from other shards (one per request and shard).
    /// A sender finding it full waits for room, and its request with it (backpressure).
    static cross_shard_inbox_capacity: usize = 1024;
    /// The most record bytes one Fetch response carries, whatever the request asks.
    /// The first batch of the first partition with data may exceed it, as in Kafka, so consumers
    /// make progress.
    static fetch_max_bytes: usize = 57_671_680, kafka = "fetch.max.bytes" as Int;

    // Storage.

    /// The one log dir when `log_dirs` is empty: partition logs and the controller's metadata.
    /// Partitions are in `<topic>-<partition>/`, the metadata in `controller/`.
    static data_dir: PathBuf = PathBuf::from("./data"), kafka = "log.dir";
    /// The log dirs partitions are spread over (JBOD, one per disk for example); empty: `[data_dir]`.
    /// When set, `data_dir` is not used (as Kafka's log.dirs overrides log.dir); new partitions go
    /// to the dir with the fewest, and the first dir also holds the metadata (Kafka's
    /// metadata.log.dir default). A TOML list; the flag takes `--log-dirs a,b`. See "Log dirs" in
    /// docs/durability.md.
    static log_dirs: Vec<PathBuf> = Vec::new(), kafka = "log.dirs" as String;
    /// When a produce is acknowledged relative to the disk: `always` or `never`.
    /// `always`: segments are written O_DIRECT and acks=all is acknowledged after a
    /// group-committed fdatasync. `never`: Kafka's default, segments are written through the page
    /// cache and acknowledged once the kernel has the bytes (they survive a process crash, not a
    /// power loss), fdatasync in the background. See docs/durability.md.
    static flush: FlushMode = FlushMode::Always;
    /// Default of the topic key flush.messages: fdatasync once this many messages are unsynced.
    /// With `flush = never`, in the background, per partition; a topic with flush.messages = 1 is
    /// flushed as with `flush = always`, which syncs every write (the key then reads 1 and is
    /// read-only). Kafka's default: never.
    dynamic log_flush_interval_messages: i64 = i64::MAX, kafka = "log.flush.interval.messages" as Long;
    /// Default of the topic key flush.ms: fdatasync once a partition's unsynced data is this old.
    /// With `flush = never`, in the background. Kafka's default: never.
    dynamic log_flush_interval_ms: i64 = i64::MAX, kafka = "log.flush.interval.ms" as Long;
    /// Test hook, never for production: `drop-unsynced` loses unsynced writes on kill -9.
    /// `drop-unsynced` keeps segment writes in memory until their fdatasync, so `kill -9` loses
    /// exactly what was not synced, as a power loss would (crash-recovery tests). Unsynced data is
    /// held in memory without bound (with flush = never, until the next segment roll). Runs only
    /// with `SHARDLOG_TEST_HOOKS=1` in the environment; without it the broker refuses to start
    /// (`src/server/test_hooks.rs`).
    static storage_fault: StorageFault = StorageFault::None;
    /// Bytes of recent batches each partition keeps in memory for zero-copy fetch.
    static batch_cache_bytes_per_partition: usize = 8 * 1024 * 1024;
    /// Bytes of batch cache per shard, split evenly over its partitions.
    /// Each partition's share is capped by `batch_cache_bytes_per_partition`.
    static batch_cache_bytes_per_shard: usize = 512 * 1024 * 1024;
    /// Written segment bytes a shard leaves in the page cache with `flush = never`; 0: the kernel decides.
    /// Writeback starts every 1 MiB, up to the last whole page (never the page the next append
    /// writes), at most 2 in flight per shard, and older written-back ranges are dropped
    /// (`posix_fadvise(DONTNEED)`) so pages are reused, both on the shard's blocking thread
    /// (`storage/page_cache.rs`). 0 = the kernel decides, as with Apache Kafka.
    static page_cache_bytes_per_shard: u64 = 2 << 30;
    /// Default of the topic key segment.bytes: a segment this large is rolled.
    dynamic log_segment_bytes: u64 = 1024 * 1024 * 1024, kafka = "log.segment.bytes" as Int;
    /// Default of the topic key segment.ms: a segment this old is rolled.
    dynamic log_roll_ms: i64 = 7 * 24 * 3600 * 1000, kafka = "log.roll.ms" as Long;
    /// Default of the topic key retention.ms: older segments are deleted (-1: unlimited).
    dynamic log_retention_ms: i64 = 7 * 24 * 3600 * 1000, kafka = "log.retention.ms" as Long;
    /// Default of the topic key retention.bytes: a partition's size above which old segments go (-1: unlimited).
    dynamic log_retention_bytes: i64 = -1, kafka = "log.retention.bytes" as Long;
    /// How often retention is enforced.
    static log_retention_check_interval_ms: u64 = 300_000, kafka = "log.retention.check.interval.ms" as Long;

    // Tiered storage (KIP-405, src/remote/; docs/tiered-storage.md).

    /// Tiered storage is on: topics may set remote.storage.enable (every controller needs it too, as Kafka's).
    static remote_log_storage_system_enable: bool = false, kafka = "remote.log.storage.system.enable" as Boolean;
    /// How often each shard looks for closed segments of its tiered leaders to upload.
    static remote_log_manager_task_interval_ms: u64 = 30_000, kafka = "remote.log.manager.task.interval.ms" as Long;
    /// How long a consumer's fetch waits for a read from remote storage; then it answers empty and the consumer asks again.
    static remote_fetch_max_wait_ms: u64 = 500, kafka = "remote.fetch.max.wait.ms" as Int;
    /// Bytes per second this broker uploads to remote storage, shared equally by its shards (a copy waits while over it).
    static remote_log_manager_copy_max_bytes_per_second: i64 = i64::MAX, kafka = "remote.log.manager.copy.max.bytes.per.second" as Long;
    /// Bytes per second this broker reads back from remote storage for consumers, shared equally by its shards (over it, a fetch answers empty and the consumer asks again).
    static remote_log_manager_fetch_max_bytes_per_second: i64 = i64::MAX, kafka = "remote.log.manager.fetch.max.bytes.per.second" as Long;
    /// Partitions uploading to remote storage at once on this broker, shared by its shards (at least one each).
    static remote_log_manager_copier_thread_pool_size: u32 = 10, kafka = "remote.log.manager.copier.thread.pool.size" as Int;
    /// Reads from remote storage in flight at once on this broker (more wait their turn, up to remote.fetch.max.wait.ms).
    static remote_log_reader_threads: u32 = 10, kafka = "remote.log.reader.threads" as Int;
    /// Bytes of decoded remote `.indexes` objects kept in memory (least recently used out first).
    static remote_log_index_file_cache_total_size_bytes: u64 = 1 << 30, kafka = "remote.log.index.file.cache.total.size.bytes" as Long;
    /// Default of the topic key local.retention.ms: how long uploaded segments stay on disk (-2: retention.ms).
    dynamic log_local_retention_ms: i64 = -2, kafka = "log.local.retention.ms" as Long;
    /// Default of the topic key local.retention.bytes: what a partition keeps on disk once uploaded (-2: retention.bytes).
    dynamic log_local_retention_bytes: i64 = -2, kafka = "log.local.retention.bytes" as Long;
    /// The remote store's bucket (the Aiven S3 plugin's name for it, which Kafka users already set).
    static rsm_config_storage_s3_bucket_name: String = String::new(), kafka = "rsm.config.storage.s3.bucket.name";
    /// The bucket's region.
    static rsm_config_storage_s3_region: String = "us-east-1".to_string(), kafka = "rsm.config.storage.s3.region";
    /// The S3 endpoint (an S3-compatible server's URL); empty: AWS's endpoint of the region.
    static rsm_config_storage_s3_endpoint_url: String = String::new(), kafka = "rsm.config.storage.s3.endpoint.url";
    /// Path-style requests (`endpoint/bucket/key`), which most S3-compatible servers need: true, false or empty.
    /// Empty: path style with an endpoint URL, virtual-hosted style on AWS.
    static rsm_config_storage_s3_path_style_access_enabled: String = String::new(), kafka = "rsm.config.storage.s3.path.style.access.enabled";
    /// The access key id; empty: AWS_ACCESS_KEY_ID from the environment, or the credentials file.
    static rsm_config_storage_aws_access_key_id: String = String::new(), kafka = "rsm.config.storage.aws.access.key.id";
    /// The secret access key; empty: AWS_SECRET_ACCESS_KEY from the environment, or the credentials file.
    static rsm_config_storage_aws_secret_access_key: String = String::new(), kafka = "rsm.config.storage.aws.secret.access.key";
    /// An AWS shared credentials file (`[default]` or AWS_PROFILE's section: aws_access_key_id, aws_secret_access_key).
    static rsm_config_storage_aws_credentials_file: String = String::new(), kafka = "rsm.config.storage.aws.credentials.file";
    /// Prepended to every object key as is (`prefix/` for a folder).
    static rsm_config_key_prefix: String = String::new(), kafka = "rsm.config.key.prefix";
    /// Longest wait for one object-store call, retries included; then the upload is tried again later.
    static rsm_config_storage_s3_api_call_timeout: u64 = 120_000, kafka = "rsm.config.storage.s3.api.call.timeout";
    /// Bytes of remote segments kept in memory for consumers reading history, in 4 MiB chunks (0: none; the Aiven plugin's name).
    static rsm_config_fetch_chunk_cache_size: u64 = 256 << 20, kafka = "rsm.config.fetch.chunk.cache.size";
    /// Bytes read ahead of each remote read, in 4 MiB chunks, into the chunk cache (the Aiven plugin's name; its default is 0).
    static rsm_config_fetch_chunk_cache_prefetch_max_size: u64 = 8 << 20, kafka = "rsm.config.fetch.chunk.cache.prefetch.max.size";
    /// Default of the topic key max.message.bytes: the largest record batch accepted.
    dynamic message_max_bytes: i32 = 1_048_588, kafka = "message.max.bytes" as Int;
    /// Default of the topic key message.timestamp.type: CreateTime or LogAppendTime.
    dynamic log_message_timestamp_type: String = "CreateTime".into(), kafka = "log.message.timestamp.type" as String;
    /// Default of the topic key message.timestamp.before.max.ms: older CreateTime records are refused.
    /// A CreateTime record older than now minus this is refused (INVALID_TIMESTAMP). Kafka's
    /// default: unlimited.
    dynamic log_message_timestamp_before_max_ms: i64 = i64::MAX, kafka = "log.message.timestamp.before.max.ms" as Long;
    /// Default of the topic key message.timestamp.after.max.ms: newer CreateTime records are refused.
    /// A CreateTime record newer than now plus this is refused (INVALID_TIMESTAMP). Kafka 4.x
    /// default: 1 hour.
    dynamic log_message_timestamp_after_max_ms: i64 = 3_600_000, kafka = "log.message.timestamp.after.max.ms" as Long;
    /// How often each shard looks for compacted partitions to clean.
    static log_cleaner_backoff_ms: u64 = 15_000, kafka = "log.cleaner.backoff.ms" as Long;
    /// Memory one clean pass may hold for its key map (distinct key bytes plus 64 per key).
    /// The map holds the keys of a partition's sealed segments; a partition with more is not
    /// cleaned (a warning at each pass). Kafka splits its buffer over the cleaner threads; here
    /// each shard cleans one partition at a time.
    static log_cleaner_dedupe_buffer_size: u64 = 256 << 20, kafka = "log.cleaner.dedupe.buffer.size" as Long;
    /// An offset index entry every this many bytes (the sparse index's interval).
    static log_index_interval_bytes: usize = 4096, kafka = "log.index.interval.bytes" as Int;

    // Shards and threads.

    /// Number of shards (one pinned executor each); 0: one per available core.
    static shards: usize = 0;
    /// Core for the controller thread; -1: a core no shard uses if there is one, else unpinned.
    static controller_core: i64 = -1;
    /// How long a shard runs ready tasks before it polls io_uring again, in microseconds.
    /// glommio's preempt timer: a busy shard notices finished writes and socket reads at least this
    /// often, so it bounds the stall a burst of CPU work adds to every in-flight request's latency.
    static shard_preempt_timer_us: u64 = 100_000;
    /// How long an idle shard keeps polling for work before it parks, in microseconds.
    /// 0: it parks (sleeps in io_uring) at once. glommio's spin_before_park: a request or
    /// cross-shard message arriving within the spin is served without a wake-up (a context
    /// switch, the largest per-request cost at low load), for CPU spent polling while idle.
    static shard_spin_before_park_us: u64 = 0;
    /// Registered I/O memory per shard, in bytes: the pool O_DIRECT writes take buffers from.
    /// glommio's io_memory, pinned and registered with io_uring at start-up (resident for
    /// the process's life); a write that finds the pool used up takes an ordinary aligned
    /// buffer instead. 4 MiB, not glommio's 10: W2 with and without fsync measured no
    /// slower (docs/benchmarks.md), and an empty broker is 12 MiB smaller.
    static shard_io_memory_bytes: usize = 4 << 20;
    /// A task running this long on a shard without yielding counts as a stall; 0: off.
    /// Counted in `shardlog_shard_stalls_total` and logged as a reactor stall.
    static shard_stall_threshold_ms: u64 = 50;
    /// Partitions one shard may own (a limit, as on everything).
    static max_partitions_per_shard: usize = 10_000;

    // Topics.

    /// Create a topic when a client asks for metadata of an unknown one.
    static auto_create_topics_enable: bool = true, kafka = "auto.create.topics.enable" as Boolean;
    /// Partitions of an auto-created topic or a CreateTopics with -1.
    static num_partitions: i32 = 1, kafka = "num.partitions" as Int;
    /// Replicas of an auto-created topic or a CreateTopics with -1.
    /// Static, as in Kafka. `shardlog topic create --replication-factor N` asks for N,
    /// `--replica-assignment 1:2:3,2:3:1` places each partition as kafka-topics.sh does.
    static default_replication_factor: i16 = 1, kafka = "default.replication.factor" as Int;

    // Cluster: roles, the metadata quorum, brokers.

    /// This node's id in the cluster: its broker id and its controller (raft voter) id.
    static node_id: i32 = 1, kafka = "node.id" as Int;
    /// This node's roles: broker, controller, or both (a combined node, the default).
    /// A controller-only node is a quorum voter that runs no shards and never registers as a
    /// broker; a broker-only node follows the metadata log as an openraft learner (an observer in
    /// DescribeQuorum) and needs a `controller_listener` the quorum leader replicates to, but is
    /// not a voter. Both split roles need `controller_quorum_voters`. The flag takes
    /// `--process-roles broker,controller`.
    static process_roles: Vec<String> = vec!["broker".into(), "controller".into()], kafka = "process.roles";
    /// The host:port the metadata quorum's raft RPCs are served on (Kafka's CONTROLLER listener).
    /// Unset: a single node whose controller runs in-process with no peers. A broker-only node
    /// needs one too, reachable from the controllers: the quorum leader replicates the metadata log
    /// to it there.
    static controller_listener: Option<String> = None;
    /// The controller listener as the quorum reaches it; unset: `controller_listener`.
    /// Kafka's advertised.listeners entry for the CONTROLLER listener (KIP-853): what a broker-only
    /// node announces to the quorum leader, which replicates the metadata log to it there. Needed
    /// when `controller_listener` binds a wildcard (0.0.0.0) or a private address. (Voters are
    /// reached at their `controller_quorum_voters` entries.)
    static advertised_controller_listener: Option<String> = None;
    /// Every voter's node id and controller listener, `id@host:port,...`; empty: a single node.
    /// Must name this node (with its `controller_listener`'s port) when `process_roles` has
    /// "controller", and must not name a broker-only node. At most 64. The voter with the lowest
    /// id initializes the quorum when its log is empty.
    static controller_quorum_voters: String = String::new(), kafka = "controller.quorum.voters";
    /// Controllers to ask when joining an existing quorum (KIP-853), `host:port,...`.
    /// A node with the controller role that is not in `controller_quorum_voters` (or with no voters
    /// set) joins as an observer through them, catches up, and becomes a voter when an operator
    /// adds it (AddRaftVoter, `kafka-metadata-quorum.sh add-controller`). Empty: the voters'
    /// addresses.
    static controller_quorum_bootstrap_servers: String = String::new(), kafka = "controller.quorum.bootstrap.servers";
    /// Take a metadata snapshot, and purge the metadata log before it, every this many committed entries.
    /// The snapshot is rkyv with a CRC-32C; a replica or observer behind the purge point installs
    /// it. Kafka counts bytes instead (metadata.log.max.record.bytes.between.snapshots).
    static metadata_snapshot_every_entries: u64 = 1024;
    /// This broker's rack, for rack-aware replica placement; unset: no rack.
    /// Registered with the broker and listed in Metadata and DescribeCluster; replicas of one
    /// partition go to distinct racks while an unused rack is left.
    static broker_rack: Option<String> = None, kafka = "broker.rack";
    /// A broker whose heartbeats stop this long is fenced and loses its leaderships.
    /// 3000 (Kafka: 9000): leadership leaves a hung or cut-off broker within ~3 s; heartbeats go
    /// every timeout / 6 (500 ms), so fencing a live broker takes six heartbeats lost or late in a
    /// row. A new quorum leader waits one timeout before fencing anybody; combined nodes never
    /// fence themselves. A crashed broker does not wait for it: its closed heartbeat connection
    /// fences it 100 ms later (`controller/liveness.rs`), so a lower default would only speed up
    /// hangs and network cuts, at the price of fencing live brokers on a loaded machine (a 2-core
    /// box running three nodes delays heartbeats by hundreds of ms).
    static broker_session_timeout_ms: u64 = 3000, kafka = "broker.session.timeout.ms";
    /// The active controller moves leadership back to preferred replicas when leaders are imbalanced.
    /// The preferred replica is each partition's first; it gets leadership back only when it is
    /// live and in the ISR (see "Leader election" in docs/cluster.md).
    static auto_leader_rebalance_enable: bool = true, kafka = "auto.leader.rebalance.enable" as Boolean;
    /// How often the active controller checks whether leaders are imbalanced.
    /// The first check comes one interval after it becomes the active controller.
    static leader_imbalance_check_interval_seconds: u64 = 300, kafka = "leader.imbalance.check.interval.seconds" as Long;
    /// A broker's share (%) of partitions it should lead but does not, above which preferred leaders are elected.
    /// Kafka 4.1's KRaft controller ignores it and balances every partition; shardlog honours it,
    /// as the ZooKeeper controller did.
    static leader_imbalance_per_broker_percentage: u32 = 10, kafka = "leader.imbalance.per.broker.percentage" as Int;

    // Replication.

    /// A follower not caught up with its leader for this long leaves the ISR.
    /// Caught up means at the leader's log end; the leader proposes the AlterPartition through the
    /// controller.
    static replica_lag_time_max_ms: u64 = 30_000, kafka = "replica.lag.time.max.ms" as Long;
    /// How long a leader holds a follower's fetch that finds no new data.
    static replica_fetch_wait_max_ms: i32 = 500, kafka = "replica.fetch.wait.max.ms";
    /// Record bytes a follower asks per partition (the first batch may exceed it).
    static replica_fetch_max_bytes: i32 = 1_048_576, kafka = "replica.fetch.max.bytes";
    /// Record bytes per follower fetch response.
    static replica_fetch_response_max_bytes: i32 = 10_485_760, kafka = "replica.fetch.response.max.bytes";
    /// A follower's pause after a fetch error.
    static replica_fetch_backoff_ms: u64 = 1000, kafka = "replica.fetch.backoff.ms";
    /// A follower drops its connection to a leader that has not answered a fetch for this long.
    static replica_socket_timeout_ms: u64 = 30_000, kafka = "replica.socket.timeout.ms";
    /// Where consumers read (KIP-392): empty, the leader; or RackAwareReplicaSelector, a replica in their rack.
    /// Empty is Kafka's default. `org.apache.kafka.common.replica.RackAwareReplicaSelector` (also
    /// `rack-aware`): a consumer with `client.rack` is sent to an in-sync replica in its rack
    /// (`broker_rack`) and reads there up to that replica's high watermark.
    static replica_selector_class: String = String::new(), kafka = "replica.selector.class";
    /// Default of the topic key min.insync.replicas: acks=all needs at least this many in-sync replicas.
    /// NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND after.
    dynamic min_insync_replicas: i32 = 1, kafka = "min.insync.replicas" as Int;
    /// Default of the topic key unclean.leader.election.enable: elect a replica outside the ISR when no in-sync replica is live.
    /// When a partition's leader is fenced and no ISR member is live, or a replica comes back to a
    /// leaderless partition, the controller elects the first live replica, alone in the ISR: it
    /// may lack acknowledged records. The active controller's value applies, as in Kafka.
    dynamic unclean_leader_election_enable: bool = false, kafka = "unclean.leader.election.enable" as Boolean;

    // Internal topics and transactions.

    /// Partitions of `__consumer_offsets` (created at start-up if missing; an existing topic keeps its count).
    static offsets_topic_num_partitions: i32 = 50, kafka = "offsets.topic.num.partitions" as Int;
    /// Segment size of `__consumer_offsets` (compacted; set when it is created).
    static offsets_topic_segment_bytes: i32 = 104_857_600, kafka = "offsets.topic.segment.bytes" as Int;
    /// Replicas of `__consumer_offsets`, at most the brokers registered when it is created.
    static offsets_topic_replication_factor: i16 = 3, kafka = "offsets.topic.replication.factor" as Short;
    /// Partitions of `__transaction_state` (created when the first transactional id looks for its coordinator).
    static transaction_state_log_num_partitions: i32 = 50, kafka = "transaction.state.log.num.partitions" as Int;
    /// Replicas of `__transaction_state`, at most the brokers registered when it is created.
    static transaction_state_log_replication_factor: i16 = 3, kafka = "transaction.state.log.replication.factor" as Short;
    /// The min.insync.replicas of `__transaction_state`, capped by its replicas.
    /// The cap lets one node work unchanged.
    static transaction_state_log_min_isr: i32 = 2, kafka = "transaction.state.log.min.isr" as Int;
    /// Segment size of `__transaction_state`.
    static transaction_state_log_segment_bytes: i32 = 104_857_600, kafka = "transaction.state.log.segment.bytes" as Int;
    /// Partitions of `__share_group_state` (created when the first share-coordinator key is looked up).
    static share_coordinator_state_topic_num_partitions: i32 = 50, kafka = "share.coordinator.state.topic.num.partitions" as Int;
    /// Replicas of `__share_group_state`, at most the brokers registered when it is created.
    static share_coordinator_state_topic_replication_factor: i16 = 3, kafka = "share.coordinator.state.topic.replication.factor" as Short;
    /// The min.insync.replicas of `__share_group_state`, capped by its replicas.
    static share_coordinator_state_topic_min_isr: i32 = 2, kafka = "share.coordinator.state.topic.min.isr" as Int;
    /// Segment size of `__share_group_state`.
    static share_coordinator_state_topic_segment_bytes: i32 = 104_857_600, kafka = "share.coordinator.state.topic.segment.bytes" as Int;
    /// Updates of a share-partition's state between two whole snapshots of it in `__share_group_state` (0 to 500).
    static share_coordinator_snapshot_update_records_per_snapshot: u32 = 500, kafka = "share.coordinator.snapshot.update.records.per.snapshot" as Int;
    /// The longest transaction.timeout.ms a producer may ask for (longer: INVALID_TRANSACTION_TIMEOUT).
    static transaction_max_timeout_ms: i32 = 900_000, kafka = "transaction.max.timeout.ms" as Int;
    /// The longest pause between tries of a transactional produce's verification while its coordinator ends the previous transaction.
    /// The coordinator answers CONCURRENT_TRANSACTIONS while it still writes the previous
    /// transaction's markers; shardlog tries again inside the broker after 1 ms, doubling up to
    /// this.
    static add_partitions_to_txn_retry_backoff_ms: u64 = 20, kafka = "add.partitions.to.txn.retry.backoff.ms" as Int;
    /// How long those tries may take in all before the producer gets a retriable error.
    /// The error is NOT_ENOUGH_REPLICAS.
    static add_partitions_to_txn_retry_backoff_max_ms: u64 = 100, kafka = "add.partitions.to.txn.retry.backoff.max.ms" as Int;
    /// A transactional id idle this long is forgotten.
    static transactional_id_expiration_ms: i64 = 604_800_000, kafka = "transactional.id.expiration.ms" as Int;
    /// A producer that wrote nothing to a partition for this long leaves its producer state.
    /// Only producers with no open transaction; checked with retention.
    static producer_id_expiration_ms: i64 = 86_400_000, kafka = "producer.id.expiration.ms" as Int;
    /// How often timed-out transactions are aborted and expired transactional ids forgotten.
    static transaction_abort_timed_out_transaction_cleanup_interval_ms: u64 = 10_000, kafka = "transaction.abort.timed.out.transaction.cleanup.interval.ms" as Int;
    /// Transactional ids one shard coordinates at most (a bound on the table clients grow).
    /// A new one beyond it gets COORDINATOR_NOT_AVAILABLE.
    static max_transactional_ids_per_shard: usize = 100_000;
    /// Producer ids one partition remembers at most (a bound on the table clients grow).
    /// Idempotence and transactions: past it the least recently writing ones without an open
    /// transaction are forgotten early, as producer.id.expiration.ms would (counted in
    /// `shardlog_producer_ids_evicted_total`).
    static max_producer_ids_per_partition: usize = 10_000;

    // Consumer groups.

    /// The shortest session timeout a classic group member may ask for.
    static group_min_session_timeout_ms: i32 = 6000, kafka = "group.min.session.timeout.ms" as Int;
    /// The longest session timeout a classic group member may ask for.
    static group_max_session_timeout_ms: i32 = 1_800_000, kafka = "group.max.session.timeout.ms" as Int;
    /// How long a new classic group waits for more members before its first rebalance.
    static group_initial_rebalance_delay_ms: u64 = 3000, kafka = "group.initial.rebalance.delay.ms" as Int;
    /// The most members of a group, classic or KIP-848 (more: GROUP_MAX_SIZE_REACHED).
    /// Also reported as group.consumer.max.size (KIP-848 groups). Kafka's default is unbounded;
    /// ours is a limit.
    static group_max_size: usize = 10_000, kafka = "group.max.size" as Int;
    /// How a non-empty group may move between the classic and KIP-848 consumer protocols.
    /// bidirectional (default), upgrade (classic to consumer only), downgrade (consumer to
    /// classic only) or disabled; an empty group always takes its next member's protocol.
    static group_consumer_migration_policy: String = "bidirectional".into(), kafka = "group.consumer.migration.policy" as String;
    /// Groups one shard coordinates at most (a limit, as on everything).
    static max_groups_per_shard: usize = 100_000;
    /// Share sessions (KIP-932) the broker keeps at most; one more is SHARE_SESSION_LIMIT_REACHED.
    /// Divided evenly among the shards (a member's session lives on its connection's shard).
    static group_share_max_share_sessions: usize = 2000, kafka = "group.share.max.share.sessions" as Int;
    /// How long a share-group record acquired by a member stays locked to it (KIP-932).
    /// Not acknowledged by then, it is delivered again (1000-3600000, between the min and max below).
    static group_share_record_lock_duration_ms: i32 = 30_000, kafka = "group.share.record.lock.duration.ms" as Int;
    /// Lower bound of a share group's record lock duration (1000-30000).
    static group_share_min_record_lock_duration_ms: i32 = 15_000, kafka = "group.share.min.record.lock.duration.ms" as Int;
    /// Upper bound of a share group's record lock duration (30000-3600000).
    static group_share_max_record_lock_duration_ms: i32 = 60_000, kafka = "group.share.max.record.lock.duration.ms" as Int;
    /// Deliveries of a share-group record before it is archived instead of delivered again.
    /// 2-10, between the min and max below.
    static group_share_delivery_count_limit: i32 = 5, kafka = "group.share.delivery.count.limit" as Int;
    /// Lower bound of a share group's delivery count limit (2-5).
    static group_share_min_delivery_count_limit: i32 = 2, kafka = "group.share.min.delivery.count.limit" as Int;
    /// Upper bound of a share group's delivery count limit (5-25).
    static group_share_max_delivery_count_limit: i32 = 10, kafka = "group.share.max.delivery.count.limit" as Int;
    /// KIP-1191: whether a missing share-group dead-letter queue topic is created.
    /// With the broker's default partitions and replication factor; off, the group's
    /// records are archived without a dead letter.
    static errors_deadletterqueue_auto_create_topics_enable: bool = false, kafka = "errors.deadletterqueue.auto.create.topics.enable" as Boolean;
    /// KIP-1191: the prefix every share group's dead-letter queue topic name must have.
    /// Blank allows any name.
    static errors_deadletterqueue_topic_name_prefix: String = "dlq.".into(), kafka = "errors.deadletterqueue.topic.name.prefix" as String;
    /// Records in flight (delivered and not yet done) per share-partition at most.
    /// The bound on a share-partition's state (100-10000, between the min and max below).
    static group_share_partition_max_record_locks: i32 = 2000, kafka = "group.share.partition.max.record.locks" as Int;
    /// Lower bound of a share group's in-flight records per share-partition (100-2000).
    static group_share_min_partition_max_record_locks: i32 = 100, kafka = "group.share.min.partition.max.record.locks" as Int;
    /// Upper bound of a share group's in-flight records per share-partition (2000-10000).
    static group_share_max_partition_max_record_locks: i32 = 4000, kafka = "group.share.max.partition.max.record.locks" as Int;
    /// A KIP-848 member silent this long is removed (default of the group config consumer.session.timeout.ms).
    static group_consumer_session_timeout_ms: u64 = 45_000, kafka = "group.consumer.session.timeout.ms" as Int;
    /// How often KIP-848 members heartbeat (default of the group config consumer.heartbeat.interval.ms).
    static group_consumer_heartbeat_interval_ms: i32 = 5_000, kafka = "group.consumer.heartbeat.interval.ms" as Int;
    /// A streams-group (KIP-1071) member silent this long is removed.
    /// Default of the group config streams.session.timeout.ms (45000-60000).
    static group_streams_session_timeout_ms: i32 = 45_000, kafka = "group.streams.session.timeout.ms" as Int;
    /// How often streams-group members heartbeat.
    /// Default of the group config streams.heartbeat.interval.ms (5000-15000).
    static group_streams_heartbeat_interval_ms: i32 = 5_000, kafka = "group.streams.heartbeat.interval.ms" as Int;
    /// Standby replicas of each stateful task of a streams group.
    /// Default of the group config streams.num.standby.replicas (0-2).
    static group_streams_num_standby_replicas: i32 = 0, kafka = "group.streams.num.standby.replicas" as Int;
    /// Client tag keys (`client.tag.<key>`) every streams-group member should send, comma separated.
    /// Kept in the group's assignment configs for an assignor that places standbys by them;
    /// the built-in sticky assignor does not, as Kafka 4.4's. A member missing one is told
    /// MISSING_CLIENT_TAGS (a warning). Empty: none.
    static group_streams_rack_aware_assignment_tags: String = String::new(), kafka = "group.streams.rack.aware.assignment.tags" as List;
    /// How long a new streams group waits for more members before its first assignment.
    /// Default of the group config streams.initial.rebalance.delay.ms.
    static group_streams_initial_rebalance_delay_ms: i32 = 3_000, kafka = "group.streams.initial.rebalance.delay.ms" as Int;
    /// Longer offset commit metadata gets OFFSET_METADATA_TOO_LARGE.
    static offset_metadata_max_bytes: usize = 4096, kafka = "offset.metadata.max.bytes" as Int;
    /// Committed offsets of an empty group expire this long after it emptied.
    /// Or after their commit, if later (standalone commits: after the commit); an empty group left
    /// without offsets is deleted.
    static offsets_retention_minutes: u64 = 10_080, kafka = "offsets.retention.minutes" as Int;
    /// How often expired committed offsets are looked for.
    static offsets_retention_check_interval_ms: u64 = 600_000, kafka = "offsets.retention.check.interval.ms" as Long;

    // Features, logging, the admin listener.

    /// Testing only: feature levels still being built are supported.
    /// `kafka-features.sh upgrade` can then turn them on (today there are none).
    static unstable_feature_versions_enable: bool = false, kafka = "unstable.feature.versions.enable" as Boolean;
    /// The log level filter (tracing EnvFilter syntax); RUST_LOG overrides it.
    static log_level: String = "info".into();
    /// The log format: `text` or `json`.
    /// `text`: one line per event, ANSI colour only when stderr is a terminal. `json`: one JSON
    /// object per line (timestamp, level, target, fields, the thread's shard).
    static log_format: String = "text".into();
    /// The HTTP admin listener (host:port); empty: off.
    /// It serves /metrics, /v1/status/*, /v1/cluster/shards and /v1/remote-log on its own thread, never on a shard.
    static admin_listener: String = "127.0.0.1:9644".into();
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::super::key_def::{reference_markdown, serve_command};
    use super::super::{Config, ConfigArgs, FlushMode, KEYS};

    #[test]
    fn configuration_reference() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
        let want = reference_markdown();
        if std::env::var_os("SHARDLOG_WRITE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/configuration.md differs from the definition in src/config/keys.rs; regenerate it with \
             SHARDLOG_WRITE_DOCS=1 cargo test --lib configuration_reference, or put this in it:\n{want}"
        );
    }

    #[test]
    fn readme_links_the_reference_instead_of_listing_keys() {
        let readme = include_str!("../../README.md");
        let section = readme.split_once("\n## Configuration\n").and_then(|(_, rest)| rest.split("\n## ").next()).unwrap();
        assert!(section.contains("(docs/configuration.md)"), "README's Configuration section must link docs/configuration.md");
        for k in KEYS {
            let row = format!("| `{}` |", k.name);
            assert!(!section.contains(&row), "README lists {} in a table of its own: the keys are documented in docs/configuration.md", k.name);
        }
    }

    #[test]
    fn every_key_has_a_one_sentence_help_and_a_unique_name() {
        let mut names = BTreeSet::new();
        let mut kafka = BTreeSet::new();
        for k in KEYS {
            assert!(names.insert(k.name), "{} is defined twice", k.name);
            if let Some(n) = k.kafka {
                assert!(kafka.insert(n), "two keys have the Kafka name {n}");
            }
            assert!(k.help.len() > 10 && k.help.ends_with('.'), "{}: the first doc line is the help, one whole sentence: {:?}", k.name, k.help);
            assert!(!k.help[..k.help.len() - 1].contains(". "), "{}: the help is one sentence: {:?}", k.name, k.help);
            assert!(!k.doc().contains("  "), "{}", k.name);
        }
    }

    /// Every flag of `shardlog serve -h` is one of the keys (or --config/--help), every key
    /// has its flag there, and each flag's line carries the key's help.
    #[test]
    fn serve_help_shows_every_key_with_its_help() {
        let help = serve_command().render_help().to_string();
        let mut entries: Vec<(String, String)> = Vec::new(); // (flag, text after it)
        for line in help.lines() {
            let trimmed = line.trim_start();
            let starts_entry = line.starts_with(' ') && trimmed.starts_with('-');
            if starts_entry {
                let long = trimmed.split_whitespace().find(|w| w.starts_with("--")).unwrap_or_default();
                let spec_end = trimmed.find("  ").unwrap_or(trimmed.len());
                entries.push((long.trim_start_matches("--").to_string(), trimmed[spec_end..].trim().to_string()));
            } else if let (Some(last), true) = (entries.last_mut(), line.starts_with(' ')) {
                last.1.push(' ');
                last.1.push_str(trimmed);
            }
        }
        let shown: BTreeSet<&str> = entries.iter().map(|(f, _)| f.as_str()).filter(|f| *f != "config" && *f != "help").collect();
        let defined: BTreeSet<&str> = KEYS.iter().map(|k| k.flag()).collect();
        assert_eq!(shown.len(), entries.len() - 2, "a flag is shown twice:\n{help}");
        assert_eq!(shown, defined, "the flags of `shardlog serve -h` and the keys differ:\n{help}");
        let listener_setting = KEYS.iter().find(|k| k.name == "listener_settings").unwrap();
        assert_eq!(listener_setting.flag(), "listener-setting");
        for k in KEYS {
            let (_, text) = entries.iter().find(|(f, _)| f == k.flag()).unwrap();
            assert!(text.contains(k.help), "--{}: its help line should carry {:?}, shows {:?}", k.flag(), k.help, text);
        }
    }

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ConfigArgs,
    }

    /// The flags keep their syntax: lists comma-separated and repeatable, the repeatable
    /// `--listener-setting` not split at commas, value enums, `true`/`false`, options.
    #[test]
    fn flags_parse_as_before() {
        let argv = [
            "serve",
            "--log-dirs",
            "/a,/b",
            "--log-dirs",
            "/c",
            "--process-roles",
            "broker",
            "--listener-setting",
            "listener.name.x.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            "--listener-setting",
            "listener.name.y.ssl.client.auth=required",
            "--flush",
            "never",
            "--storage-fault",
            "drop-unsynced",
            "--auto-create-topics-enable",
            "false",
            "--num-partitions",
            "6",
            "--broker-rack",
            "r1",
            "--listen",
            "127.0.0.1:19092",
            "--controller-core",
            "1",
        ];
        let args = Serve::try_parse_from(argv).unwrap().args;
        assert_eq!(args.log_dirs.as_deref(), Some(&["/a".into(), "/b".into(), "/c".into()][..]));
        assert_eq!(args.listener_settings.as_ref().map(Vec::len), Some(2));
        let mut c = Config::default();
        args.apply_flags(&mut c); // what resolve does after loading the profile
        assert_eq!(c.process_roles, vec!["broker"]);
        assert_eq!(c.listener_settings[0], "listener.name.x.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512");
        assert_eq!(
            (c.flush, c.storage_fault, c.auto_create_topics_enable, c.num_partitions),
            (FlushMode::Never, super::super::StorageFault::DropUnsynced, false, 6)
        );
        assert_eq!((c.broker_rack.as_deref(), c.listen.port(), c.controller_core), (Some("r1"), 19092, 1));
        // Unchanged keys keep their defaults; flags not given are None.
        assert_eq!(c.log_segment_bytes, Config::default().log_segment_bytes);
        assert!(Serve::try_parse_from(["serve"]).unwrap().args.num_partitions.is_none());
        for bad in [&["serve", "--flush", "sometimes"][..], &["serve", "--num-partitions", "x"], &["serve", "--no-such-flag", "1"], &["serve", "--broker-rack"]]
        {
            assert!(Serve::try_parse_from(bad).is_err(), "{bad:?}");
        }
        // The derive-free FromArgMatches agrees with clap's update path.
        let m = Serve::command().try_get_matches_from(["serve", "--num-partitions", "3"]).unwrap();
        assert_eq!(ConfigArgs::from_arg_matches(&m).unwrap().num_partitions, Some(3));
    }

    /// Every key loads from TOML under its name: the defaults written as TOML read back the same.
    #[test]
    fn every_key_round_trips_through_toml() {
        // Options are left out of TOML when unset: set them.
        let c = Config {
            broker_rack: Some("r1".into()),
            advertised_listener: Some("h:1".into()),
            controller_listener: Some("h:2".into()),
            advertised_controller_listener: Some("h:3".into()),
            ..Config::default()
        };
        let text = toml::to_string(&c).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let written: BTreeSet<&str> = table.keys().map(String::as_str).collect();
        assert_eq!(written, KEYS.iter().map(|k| k.name).collect::<BTreeSet<_>>());
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), c);
    }
}
