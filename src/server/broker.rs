//! Start-up: controller thread first (it recovers the metadata), then one executor per
//! shard; each shard applies the recovered image (opening and recovering its partitions)
//! before it accepts connections. One log line says where the broker listens.
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use glommio::{CpuSet, LocalExecutorBuilder, Placement as GlommioPlacement, PoolPlacement};

use super::connection;
use super::shard::{cleaner_loop, close_on_shutdown, follow_metadata, retention_loop, serve_scrapes, ShardContext};
use crate::metrics::stall::{probe_task_queue_delay, watched};

/// A shard's long-lived task (boxed so tasks of different types share one spawn helper).
type LocalTask = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;
use super::shutdown::{self, TerminationSignals};
use super::stray_partitions;
use crate::cluster::topic_config::{TimestampType, TopicConfigDefaults};
use crate::config::Config;
use crate::controller::{self, ControllerConfig};
use crate::runtime::{enter_shard, mesh::Mesh, placement};
use crate::storage::dma;
use crate::storage::log_dirs::LogDirs;

pub fn topic_defaults(config: &Config) -> TopicConfigDefaults {
    TopicConfigDefaults {
        retention_ms: config.log_retention_ms,
        retention_bytes: config.log_retention_bytes,
        segment_bytes: config.log_segment_bytes,
        segment_ms: config.log_roll_ms,
        max_message_bytes: config.message_max_bytes,
        timestamp_before_max_ms: config.log_message_timestamp_before_max_ms,
        timestamp_after_max_ms: config.log_message_timestamp_after_max_ms,
        flush_messages: config.log_flush_interval_messages,
        flush_ms: config.log_flush_interval_ms,
        min_insync_replicas: config.min_insync_replicas,
        unclean_leader_election_enable: config.unclean_leader_election_enable,
        local_retention_ms: config.log_local_retention_ms,
        local_retention_bytes: config.log_local_retention_bytes,
        timestamp_type: if config.log_message_timestamp_type == "LogAppendTime" { TimestampType::LogAppendTime } else { TimestampType::CreateTime },
        ..TopicConfigDefaults::default()
    }
}

/// How long the first node of a cluster waits for the others' brokers before it creates
/// `__consumer_offsets` (then it creates it on the brokers registered so far).
const OFFSETS_TOPIC_WAIT_FOR_BROKERS: std::time::Duration = std::time::Duration::from_secs(10);
/// Broker-only nodes do not know how many brokers the cluster has: they take the broker
/// set as complete once no broker has registered for this long (or at the deadline above).
const OFFSETS_TOPIC_BROKERS_SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// Creates `__consumer_offsets` (offsets_topic_num_partitions, compacted) if the
/// recovered metadata lacks it, before the shards start: the group coordinator needs it.
/// Runs on the start-up thread; the controller thread answers.
///
/// In a cluster the first broker up creates it (controller-only nodes never do: they run
/// no broker). It first waits (up to `OFFSETS_TOPIC_WAIT_FOR_BROKERS`) for the other
/// brokers to register, so the coordinators spread over the cluster rather than all landing
/// on the first broker: for `expected_brokers` of them (combined nodes: one per voter), or,
/// when unknown (broker-only nodes), until the broker set has settled.
fn ensure_offsets_topic(controller: &controller::ControllerHandle, config: &Config, expected_brokers: Option<usize>) -> anyhow::Result<()> {
    if controller.image().topic(crate::group::OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let now = std::time::Instant::now;
    let deadline = now() + OFFSETS_TOPIC_WAIT_FOR_BROKERS;
    let (mut seen, mut changed_at) = (0, now());
    while now() < deadline {
        let live = controller.image().live_brokers().count();
        if live != seen {
            (seen, changed_at) = (live, now());
        }
        let done = match expected_brokers {
            Some(n) => live >= n,
            None => live > 0 && now() >= changed_at + OFFSETS_TOPIC_BROKERS_SETTLED,
        };
        if done {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if controller.image().topic(crate::group::OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    // Kafka's offsets topic settings: compacted, segment.bytes = offsets.topic.segment.bytes
    // (small segments so the cleaner, which never touches the active one, can work).
    let configs = std::collections::BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), config.offsets_topic_segment_bytes.to_string()),
    ]);
    // offsets_topic_replication_factor, as far as the live brokers allow (issue 12:
    // default min(3, brokers)); the group coordinator then survives the loss of a broker.
    let live = controller.image().live_brokers().count().max(1);
    let replication_factor = config.offsets_topic_replication_factor.min(i16::try_from(live).unwrap_or(i16::MAX));
    let created = futures::executor::block_on(controller.create_topic(
        crate::group::OFFSETS_TOPIC.to_string(),
        config.offsets_topic_num_partitions,
        replication_factor,
        configs,
        false,
    ));
    match created {
        Ok(_) | Err(controller::ControllerError::TopicAlreadyExists(_)) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", crate::group::OFFSETS_TOPIC)),
    }
}

/// `log_dirs` overrides `data_dir` (as Kafka's log.dirs overrides log.dir): say so when a
/// data_dir other than the default is set but not among the log dirs, so its partitions
/// are not thought lost.
fn warn_if_data_dir_ignored(config: &Config) {
    let ignored = !config.log_dirs.is_empty() && config.data_dir != Config::default().data_dir && !config.log_dirs.contains(&config.data_dir);
    if ignored {
        tracing::warn!(data_dir = %config.data_dir.display(),
            "data_dir is not used because log_dirs is set; add it to log_dirs to keep serving the partitions it holds");
    }
}

/// Invariant 5: a panic on any thread (a shard, the controller, a task that tokio or
/// glommio would otherwise catch and drop) aborts the whole process after one clear log
/// line naming the thread and shard. A broker with a dead shard would keep accepting
/// connections for partitions nobody serves.
///
/// A hook rather than `panic = "abort"` in Cargo.toml: the hook runs at the panic site
/// before any unwinding or catching, so it also stops panics that tokio catches in the
/// controller's tasks; it logs through tracing (the broker's log) before aborting; and
/// `cargo test` keeps unwinding, which libtest and proptest's shrinking need. The CLI
/// tools (bench, topic, group) keep Rust's default behaviour.
fn abort_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let thread_name = thread.name().unwrap_or("unnamed");
        let shard = crate::runtime::current_shard();
        let location = info.location().map(|l| l.to_string()).unwrap_or_default();
        let message = info.payload_as_str().unwrap_or("(no message)");
        // One line, so the log says what happened even when grepped.
        let message = message.replace('\n', " ");
        tracing::error!(thread = thread_name, shard = ?shard,
            "fatal: panic on thread {thread_name} (shard {shard:?}) at {location}: {message}; aborting the broker so no shard is lost silently");
        default_hook(info);
        std::process::abort();
    }));
}

/// `controller_quorum_voters` as the controller takes it: raft id → controller listener.
fn quorum_voters(config: &Config) -> anyhow::Result<std::collections::BTreeMap<u64, String>> {
    Ok(crate::config::parse_quorum_voters(&config.controller_quorum_voters)
        .map_err(|e| anyhow::anyhow!("controller_quorum_voters: {e}"))?
        .into_iter()
        .map(|v| (v.id as u64, v.addr())) // ids are >= 0 (checked by the parser)
        .collect())
}

/// The controller's settings from the node's config (shards and core: the caller's).
/// What a SASL listener accepts, from its settings (`config.for_listener`).
fn sasl_settings(listener: &str, config: &Config) -> anyhow::Result<Arc<crate::server::sasl_authenticator::SaslSettings>> {
    let (mechanisms, plain) = config.sasl_mechanisms()?;
    let oauthbearer = config.oauthbearer_validator(&mechanisms)?.map(Arc::new);
    if let Some(v) = &oauthbearer {
        v.start_refreshing();
    }
    tracing::info!(listener, mechanisms = ?mechanisms, plain_users = plain.as_ref().map_or(0, |p| p.len()), oauthbearer = ?oauthbearer, "SASL listener authenticates clients");
    let connections_max_reauth_ms = config.connections_max_reauth_ms;
    let delegation_token_secret = config.delegation_tokens()?.map(|(secret, _)| secret);
    Ok(Arc::new(crate::server::sasl_authenticator::SaslSettings { mechanisms, plain, oauthbearer, connections_max_reauth_ms, delegation_token_secret }))
}

/// Each listener's security (index as in `config.listeners()`), from the broker's settings
/// and the listener's own `listener.name.<listener>.*` ones; logs whether the kernel
/// could take over TLS records (it is not used yet: `security/ktls.rs`).
fn listener_security(config: &Config) -> anyhow::Result<Vec<connection::ListenerSecurity>> {
    let listeners = config.listeners()?;
    if listeners.all.iter().any(|l| l.protocol.uses_tls()) {
        match crate::security::ktls::kernel_tls_available() {
            Ok(()) => tracing::info!("TLS listeners encrypt in user space (rustls); fetches over TLS are copied, not sent with sendfile"),
            Err(why) => tracing::info!(
                "kernel TLS unavailable ({why}): TLS listeners encrypt in user space (rustls); fetches over TLS are copied, not sent with sendfile"
            ),
        }
    }
    listeners
        .all
        .iter()
        .map(|l| {
            let own = config.for_listener(&l.name)?;
            let tls = if l.protocol.uses_tls() { Some(crate::security::tls_config::server_config(&own.tls_settings())?) } else { None };
            let sasl = if l.protocol.uses_sasl() { Some(sasl_settings(&l.name, &own)?) } else { None };
            // Kafka: an SSL listener's principal comes from the certificate, a SASL_SSL
            // one's from SASL.
            let cert_principals = if l.protocol.uses_tls() && !l.protocol.uses_sasl() { Some(Arc::new(own.ssl_principal_mapper()?)) } else { None };
            Ok(connection::ListenerSecurity { tls, sasl, cert_principals })
        })
        .collect()
}

fn controller_config(config: &Config, voters: std::collections::BTreeMap<u64, String>) -> anyhow::Result<ControllerConfig> {
    let rpc_tls = match config.controller_tls()? {
        Some(m) => {
            tracing::info!(listener = m.listener, "controller listener: mutual TLS (peers prove themselves by certificate)");
            Some(Arc::new(crate::controller::rpc_tls::RpcTls::new(m, config.authorizer()?)))
        }
        None => None,
    };
    Ok(ControllerConfig {
        data_dir: config.metadata_dir().to_path_buf(),
        node_id: config.node_id,
        default_num_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        topic_defaults: topic_defaults(config),
        snapshot_every_entries: config.metadata_snapshot_every_entries,
        listener: config.controller_listener.clone(),
        advertised_listener: config.advertised_controller_listener.clone(),
        voters,
        // Checked by Config::validate.
        bootstrap_servers: crate::config::parse_bootstrap_servers(&config.controller_quorum_bootstrap_servers).unwrap_or_default(),
        controller_role: config.has_role("controller"),
        broker: config.has_role("broker"),
        advertised_host: config.advertised().0,
        advertised_port: config.advertised().1,
        listeners: config.listeners().map(|l| l.endpoints()).unwrap_or_default(),
        rack: config.broker_rack.clone(),
        session_timeout: std::time::Duration::from_millis(config.broker_session_timeout_ms),
        auto_leader_rebalance_enable: config.auto_leader_rebalance_enable,
        leader_imbalance_check_interval: std::time::Duration::from_secs(config.leader_imbalance_check_interval_seconds),
        leader_imbalance_per_broker_percentage: config.leader_imbalance_per_broker_percentage,
        rpc_tls,
        delegation_token_expiry_check_interval: std::time::Duration::from_millis(config.delegation_token_expiry_check_interval_ms),
        unstable_feature_versions: config.unstable_feature_versions_enable,
        remote_storage_system_enabled: config.remote_log_storage_system_enable,
        ..ControllerConfig::default()
    })
}

/// A controller-only node: the quorum voter alone, on its own (pinned) thread; no shards,
/// no client listener, no broker registration. The main thread waits on the controller
/// until it stops.
fn run_controller_only(config: Config, signals: TerminationSignals) -> anyhow::Result<()> {
    let started = Instant::now();
    std::fs::create_dir_all(config.metadata_dir()).with_context(|| format!("cannot create the metadata dir {}", config.metadata_dir().display()))?;
    let plan = placement::plan(&placement::usable_cores(), config.shards, config.controller_core);
    let admin_controller = Arc::new(std::sync::OnceLock::new());
    super::admin::BrokerAdmin {
        node_id: config.node_id,
        controller: admin_controller.clone(),
        shards: Vec::new(),
        log_dirs: Vec::new(),
        default_min_insync_replicas: config.min_insync_replicas,
        listening: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        broker: false,
    }
    .serve(&config.admin_listener)?;
    let (controller, _no_shards) =
        controller::start(ControllerConfig { shard_count: 0, core: plan.controller_core, ..controller_config(&config, quorum_voters(&config)?)? })
            .context("starting the controller")?;
    admin_controller.get_or_init(|| controller.clone());
    tracing::info!(
        "shardlog node {} is a controller only (no client listener), controller listener {}, metadata in {}, started in {} ms",
        config.node_id,
        config.controller_listener.as_deref().unwrap_or("none"),
        config.metadata_dir().display(),
        started.elapsed().as_millis()
    );
    let sig = signals.wait();
    tracing::info!(signal = sig, "shutting down (a second signal exits at once)");
    signals.exit_on_next();
    controller.shutdown();
    controller.join();
    Ok(())
}

pub fn run_broker(config: Config) -> anyhow::Result<()> {
    // A log that goes offline halts the broker (storage/log_dir_failure.rs says why).
    crate::storage::log_dir_failure::install(shutdown::halt_on_offline_log);
    let started = Instant::now();
    // Before any thread starts: every thread inherits the blocked mask.
    let signals = TerminationSignals::block();
    abort_on_panic();
    let hooks = super::test_hooks::requested(&config, |k| std::env::var(k).ok()).map_err(|e| anyhow::anyhow!(e))?;
    if !config.has_role("broker") {
        return run_controller_only(config, signals);
    }
    let (test_panic_shard, test_stall_ms) = (hooks.panic_shard, hooks.stall_ms);
    let storage_faults_file = hooks.storage_faults_file.clone();
    let listening = Arc::new(std::sync::atomic::AtomicBool::new(false));
    super::resource_limits::raise_memlock_limit();
    let log_dir_paths = config.resolved_log_dirs();
    // What `shardlog tune --check` calls required (kernel, io_uring, O_DIRECT for
    // flush = always): refused now, with its words, rather than failing later.
    let host = crate::tune::TuneInputs { log_dirs: log_dir_paths.clone(), flush_always: config.flush == crate::config::FlushMode::Always };
    if let Some(why) = crate::tune::required_failures(&crate::tune::Host::real(), &host) {
        anyhow::bail!(why);
    }
    // Each log dir may sit on its own device: glommio probes each device's first DMA file.
    for dir in &log_dir_paths {
        dma::write_iopoll_probe(dir).with_context(|| format!("cannot write to log dir {}", dir.display()))?;
    }
    let log_dirs = Arc::new(LogDirs::open(&log_dir_paths).context("scanning the log dirs")?);
    warn_if_data_dir_ignored(&config);
    let usable = placement::usable_cores();
    let plan = placement::plan(&usable, config.shards, config.controller_core);
    let shard_count = plan.shard_cores.len();
    let open_segment_files = super::resource_limits::raise_open_files_limit().map(|limit| {
        let per_shard = super::resource_limits::segment_files_per_shard(limit, shard_count);
        tracing::info!(limit, segment_files_per_shard = per_shard, "open-files limit; idle segment files beyond the per-shard budget are closed");
        per_shard
    });
    let defaults = topic_defaults(&config);
    let voters = quorum_voters(&config)?;
    // Each shard's scrape inbox: the admin listener asks every shard for its metrics.
    let (scrape_senders, scrape_inboxes): (Vec<_>, Vec<_>) = (0..shard_count).map(|_| async_channel::bounded(1)).unzip();
    // Up before the controller recovers and the shards open their partitions:
    // /v1/status/live answers during a long start, /v1/status/ready says what is missing.
    let admin_controller = Arc::new(std::sync::OnceLock::new());
    super::admin::BrokerAdmin {
        node_id: config.node_id,
        controller: admin_controller.clone(),
        shards: scrape_senders,
        log_dirs: log_dir_paths.clone(),
        default_min_insync_replicas: config.min_insync_replicas,
        listening: listening.clone(),
        broker: true,
    }
    .serve(&config.admin_listener)?;
    // Combined nodes: one broker per voter. Broker-only nodes cannot know the count.
    let expected_brokers = config.has_role("controller").then_some(voters.len());
    let (controller, updates) = controller::start(ControllerConfig {
        shard_count: u16::try_from(shard_count).context("too many shards")?,
        core: plan.controller_core,
        ..controller_config(&config, voters)?
    })
    .context("starting the controller")?;
    admin_controller.get_or_init(|| controller.clone());
    // The recovered image holds every change committed before this start: remove the
    // partitions it no longer gives this broker before a shard could open one.
    let checking = Instant::now();
    let strays = match stray_partitions::check_log_dirs_and_remove_strays(&controller.image(), config.node_id, &log_dirs, &controller.directory_id_text()) {
        Ok(removed) => removed,
        Err(e) => {
            controller.shutdown();
            anyhow::bail!("log dirs: {e}");
        }
    };
    // Partitions of topics deleted while this broker was down: their remote objects go
    // once the store is up (first shard).
    let remote_orphans: Vec<super::shard::DeletedPartition> =
        strays.iter().filter_map(|s| s.deleted_incarnation()).map(|(t, p, id)| (t.to_string(), p, id)).collect();
    tracing::info!(took_ms = checking.elapsed().as_millis() as u64, "log dirs checked for stray partitions");
    ensure_offsets_topic(&controller, &config, expected_brokers)?;
    let security = Arc::new(listener_security(&config)?);
    let connection_limits = Arc::new(config.connection_limits()?);
    let inter_broker = Arc::new(config.inter_broker_security()?);
    let remote_store = match crate::remote::settings::RemoteStoreSettings::from_config(&config) {
        Ok(Some(settings)) => {
            tracing::info!(?settings, "tiered storage: remote store");
            Some(crate::remote::store::RemoteStore::start(settings).context("tiered storage")?)
        }
        Ok(None) => None,
        Err(e) => {
            controller.shutdown();
            anyhow::bail!("tiered storage: {e}");
        }
    };
    let (mesh, inboxes) = Mesh::new(shard_count, config.cross_shard_inbox_capacity);
    let config = Arc::new(config);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let shutdown_requested = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<u16>();
    let mut handles = Vec::new();
    for (shard, (((core, updates), inbox), scrapes)) in plan.shard_cores.iter().zip(updates).zip(inboxes).zip(scrape_inboxes).enumerate() {
        let (config, controller, mesh, defaults, ready, log_dirs) =
            (config.clone(), controller.clone(), mesh.clone(), defaults.clone(), ready_tx.clone(), log_dirs.clone());
        let security = security.clone();
        let (connection_limits, inter_broker) = (connection_limits.clone(), inter_broker.clone());
        let remote_store = remote_store.clone();
        let remote_orphans = if shard == 0 { remote_orphans.clone() } else { Vec::new() };
        let listening = listening.clone();
        let storage_faults_file = storage_faults_file.clone();
        let (shutdown_requested, closed) = (shutdown_requested.clone(), closed_tx.clone());
        let placement = if usable.len() > 1 { GlommioPlacement::Fixed(*core) } else { GlommioPlacement::Unbound };
        let mut builder = LocalExecutorBuilder::new(placement.clone())
            .blocking_thread_pool_placement(blocking_pool(placement))
            .name(&format!("shard-{shard}"))
            .preempt_timer(std::time::Duration::from_micros(config.shard_preempt_timer_us))
            .io_memory(config.shard_io_memory_bytes);
        if config.shard_spin_before_park_us > 0 {
            builder = builder.spin_before_park(std::time::Duration::from_micros(config.shard_spin_before_park_us));
        }
        let handle = builder
            .spawn(move || async move {
                let shard = shard as u16;
                enter_shard(shard);
                crate::metrics::stall::set_threshold(std::time::Duration::from_millis(config.shard_stall_threshold_ms));
                for dir in log_dirs.dirs() {
                    if let Err(e) = dma::open_iopoll_probe(dir).await {
                        let _ = ready.send(Err(anyhow::anyhow!("shard {shard}: {e}")));
                        return;
                    }
                }
                if config.storage_fault == crate::config::StorageFault::DropUnsynced {
                    tracing::warn!(shard, "storage_fault = drop-unsynced (test hook): unsynced segment writes are kept in memory and lost on kill -9");
                    crate::storage::file::set_shard_fault_injector(Some(crate::storage::file::FaultInjector::new(u64::from(shard) + 1)));
                }
                crate::storage::page_cache::set_shard_page_cache_budget(config.page_cache_bytes_per_shard);
                crate::storage::open_files::set_shard_open_segment_files(open_segment_files);
                let ctx =
                    Rc::new(ShardContext::new(shard, config.clone(), controller, mesh, defaults, log_dirs, connection_limits, inter_broker, remote_store));
                // Recover this shard's partitions before accepting clients.
                if let Some((initial, _)) = updates.recv().await {
                    let opening = Instant::now();
                    ctx.apply_update(initial).await;
                    let replicas = ctx.partitions.open_count();
                    tracing::info!(shard, replicas, took_ms = opening.elapsed().as_millis() as u64, "replicas opened");
                }
                // The shard's long-lived tasks, each watched for stalls under its name.
                let spawn = |name, task| glommio::spawn_local(watched(name, task)).detach();
                spawn("metadata updates", Box::pin(follow_metadata(ctx.clone(), updates)) as LocalTask);
                spawn("shard inbox", Box::pin(ctx.router.clone().serve_inbox(inbox)));
                spawn("retention", Box::pin(retention_loop(ctx.clone())));
                spawn("log cleaner", Box::pin(cleaner_loop(ctx.clone())));
                if let Some(store) = ctx.remote_store.clone() {
                    spawn("remote copy", Box::pin(super::shard::remote_copy_loop(ctx.clone(), store.clone())));
                    if !remote_orphans.is_empty() {
                        spawn("remote orphans", Box::pin(super::shard::delete_remote_orphans(store, remote_orphans)));
                    }
                }
                spawn(
                    "isr",
                    Box::pin(crate::replication::isr::isr_loop(
                        ctx.partitions.clone(),
                        ctx.controller.clone(),
                        ctx.config.node_id,
                        ctx.config.replica_lag_time_max_ms,
                    )),
                );
                spawn("group ticks", Box::pin(crate::group::tick_loop(ctx.coordinator.clone())));
                spawn("group expiry", Box::pin(crate::group::expiry_loop(ctx.coordinator.clone())));
                spawn("transaction ticks", Box::pin(crate::txn::coordinator::tick_loop(ctx.txn_coordinator.clone())));
                spawn("metrics scrapes", Box::pin(serve_scrapes(ctx.clone(), scrapes)));
                spawn("task queue probe", Box::pin(probe_task_queue_delay()));
                if let Some(path) = storage_faults_file {
                    spawn("storage fault control", Box::pin(super::storage_fault_control::control_loop(shard, path)));
                }
                glommio::spawn_local(close_on_shutdown(ctx.clone(), shutdown_requested, closed)).detach();
                let mut sockets = Vec::with_capacity(ctx.listeners.all.len());
                for (index, l) in ctx.listeners.all.iter().enumerate() {
                    match glommio::net::TcpListener::bind(l.bind) {
                        Ok(socket) => {
                            let info = connection::ListenerInfo::new(index, l, &security[index]);
                            ctx.register_listener(info.clone());
                            sockets.push((socket, info));
                        }
                        Err(e) => {
                            let _ = ready.send(Err(anyhow::anyhow!("shard {shard} cannot listen on {} ({}): {e}", l.bind, l.name)));
                            return;
                        }
                    }
                }
                let _ = ready.send(Ok(()));
                if let (Some(ms), 0) = (test_stall_ms, shard) {
                    let listening = listening.clone();
                    glommio::spawn_local(watched("test stall (SHARDLOG_TEST_STALL_MS)", async move {
                        while !listening.load(std::sync::atomic::Ordering::Acquire) {
                            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                        }
                        let start = Instant::now();
                        while start.elapsed() < std::time::Duration::from_millis(ms) {
                            std::hint::spin_loop();
                        }
                    }))
                    .detach();
                }
                if test_panic_shard == Some(shard) {
                    glommio::spawn_local(async move {
                        while !listening.load(std::sync::atomic::Ordering::Acquire) {
                            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                        }
                        panic!("{}={shard}: shard {shard} panics on purpose (test hook)", super::test_hooks::PANIC_SHARD_ENV);
                    })
                    .detach();
                }
                futures::future::join_all(sockets.into_iter().map(|(socket, info)| connection::accept_loop(ctx.clone(), socket, info))).await;
            })
            .map_err(|e| anyhow::anyhow!("starting shard {shard}: {e}"))?;
        handles.push(handle);
    }
    drop(ready_tx);
    for _ in 0..shard_count {
        ready_rx.recv().context("a shard stopped during start-up")??;
    }
    tracing::info!(
        "shardlog node {} listening on {} with {} shards (controller core {:?}, controller listener {}, log dirs {}, flush {:?}), started in {} ms",
        config.node_id,
        config.listeners().map(|l| l.all.iter().map(|l| format!("{} ({} {})", l.bind, l.name, l.protocol)).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
        shard_count,
        plan.controller_core,
        config.controller_listener.as_deref().unwrap_or("none"),
        log_dir_paths.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        config.flush,
        started.elapsed().as_millis()
    );
    listening.store(true, std::sync::atomic::Ordering::Release);
    // The shards run until the process exits (a shard panic aborts it).
    drop(handles);
    let sig = signals.wait();
    let stopping = Instant::now();
    tracing::info!(signal = sig, "controlled shutdown (a second signal exits at once)");
    signals.exit_on_next();
    // Leaderships move first, while this broker still serves: producers and consumers
    // follow the new leaders before its replicas close.
    shutdown::controlled_shutdown(&controller, config.node_id, shutdown::FENCE_DEADLINE);
    shutdown_requested.store(true, std::sync::atomic::Ordering::Release);
    let closed = shutdown::wait_for_shards(&closed_rx, shard_count, stopping + shutdown::CLOSE_DEADLINE);
    if closed < shard_count {
        tracing::warn!(closed, shards = shard_count, "not every shard closed its replicas in time; the next start recovers them");
    }
    controller.shutdown();
    shutdown::join_within(&controller, shutdown::CONTROLLER_DEADLINE);
    if closed == shard_count && config.has_role("broker") {
        // Every replica closed cleanly: the next start registers as after a clean
        // shutdown, and stays an eligible leader replica where it is one (KIP-966).
        if let Err(e) = crate::controller::record_clean_shutdown(config.metadata_dir(), controller.incarnation()) {
            tracing::warn!(error = %e, "cannot record the clean shutdown; the next start counts it as unclean");
        }
    }
    tracing::info!("shut down cleanly in {} ms", stopping.elapsed().as_millis());
    Ok(())
}

/// Threads of a shard's blocking pool (glommio's default is one): the file work that has
/// no io_uring form here (checkpoint files written then fsync'ed and renamed, directory
/// fsyncs, reads of small files) waits on the disk there, one call per thread. With one,
/// a restart opening thousands of partitions paid every new leader epoch's checkpoint
/// fsyncs in a row; these threads wait, they do not compete for the core.
const BLOCKING_THREADS_PER_SHARD: usize = 16;

/// The shard's blocking pool, on the shard's own core when it has one.
fn blocking_pool(shard: GlommioPlacement) -> PoolPlacement {
    match shard {
        GlommioPlacement::Fixed(core) => match CpuSet::online() {
            Ok(online) => PoolPlacement::Custom(vec![online.filter(|l| l.cpu == core); BLOCKING_THREADS_PER_SHARD]),
            Err(_) => PoolPlacement::from(GlommioPlacement::Fixed(core)),
        },
        _ => PoolPlacement::Unbound(BLOCKING_THREADS_PER_SHARD),
    }
}
