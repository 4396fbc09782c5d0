//! Start-up: controller thread first (it recovers the metadata), then one executor per
//! shard; each shard applies the recovered image (opening and recovering its partitions)
//! before it accepts connections. One log line says where the broker listens.
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use glommio::{LocalExecutorBuilder, Placement as GlommioPlacement};

use super::connection;
use super::shard::{cleaner_loop, follow_metadata, retention_loop, ShardContext};
use crate::cluster::topic_config::{TimestampType, TopicConfigDefaults};
use crate::config::Config;
use crate::controller::{self, ControllerConfig};
use crate::runtime::{enter_shard, mesh::Mesh, placement};
use crate::storage::dma;

pub fn topic_defaults(config: &Config) -> TopicConfigDefaults {
    TopicConfigDefaults {
        retention_ms: config.log_retention_ms,
        retention_bytes: config.log_retention_bytes,
        segment_bytes: config.log_segment_bytes,
        segment_ms: config.log_roll_ms,
        max_message_bytes: config.message_max_bytes,
        timestamp_type: if config.log_message_timestamp_type == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        ..TopicConfigDefaults::default()
    }
}

/// glommio registers io memory per executor; lift RLIMIT_MEMLOCK so that works (best
/// effort: without it glommio falls back with a warning).
fn raise_memlock_limit() {
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads a valid rlimit struct; failure is reported by return value.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// Creates `__consumer_offsets` (offsets_topic_num_partitions, compacted) if the
/// recovered metadata lacks it, before the shards start: the group coordinator needs it.
/// Runs on the start-up thread; the controller thread answers.
fn ensure_offsets_topic(controller: &controller::ControllerHandle, config: &Config) -> anyhow::Result<()> {
    if controller.image().topic(crate::group::OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    // Kafka's offsets topic settings: compacted, segment.bytes = offsets.topic.segment.bytes
    // (small segments so the cleaner, which never touches the active one, can work).
    let configs = std::collections::BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), config.offsets_topic_segment_bytes.to_string()),
    ]);
    let created = futures::executor::block_on(controller.create_topic(
        crate::group::OFFSETS_TOPIC.to_string(),
        config.offsets_topic_num_partitions,
        1,
        configs,
        false,
    ));
    match created {
        Ok(_) | Err(controller::ControllerError::TopicAlreadyExists(_)) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", crate::group::OFFSETS_TOPIC)),
    }
}

pub fn run_broker(config: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    raise_memlock_limit();
    dma::write_iopoll_probe(&config.data_dir)
        .with_context(|| format!("cannot write to data dir {}", config.data_dir.display()))?;
    let usable = placement::usable_cores();
    let plan = placement::plan(&usable, config.shards, config.controller_core);
    let shard_count = plan.shard_cores.len();
    let defaults = topic_defaults(&config);
    let (controller, updates) = controller::start(ControllerConfig {
        data_dir: config.data_dir.clone(),
        node_id: config.node_id,
        shard_count: u16::try_from(shard_count).context("too many shards")?,
        core: plan.controller_core,
        default_num_partitions: config.num_partitions,
        topic_defaults: defaults.clone(),
        ..ControllerConfig::default()
    })
    .context("starting the controller")?;
    ensure_offsets_topic(&controller, &config)?;
    let (mesh, inboxes) = Mesh::new(shard_count);
    let config = Arc::new(config);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let mut handles = Vec::new();
    for (shard, ((core, updates), inbox)) in plan.shard_cores.iter().zip(updates).zip(inboxes).enumerate() {
        let (config, controller, mesh, defaults, ready) =
            (config.clone(), controller.clone(), mesh.clone(), defaults.clone(), ready_tx.clone());
        let placement = if usable.len() > 1 { GlommioPlacement::Fixed(*core) } else { GlommioPlacement::Unbound };
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{shard}"))
            .preempt_timer(std::time::Duration::from_micros(config.shard_preempt_timer_us))
            .spawn(move || async move {
                let shard = shard as u16;
                enter_shard(shard);
                if let Err(e) = dma::open_iopoll_probe(&config.data_dir).await {
                    let _ = ready.send(Err(anyhow::anyhow!("shard {shard}: {e}")));
                    return;
                }
                if config.storage_fault == crate::config::StorageFault::DropUnsynced {
                    tracing::warn!(shard, "storage_fault = drop-unsynced (test hook): unsynced segment writes are kept in memory and lost on kill -9");
                    crate::storage::file::set_shard_fault_injector(Some(crate::storage::file::FaultInjector::new(u64::from(shard) + 1)));
                }
                let ctx = Rc::new(ShardContext::new(shard, config.clone(), controller, mesh, defaults));
                // Recover this shard's partitions before accepting clients.
                if let Ok(initial) = updates.recv().await {
                    ctx.apply_update(initial).await;
                }
                glommio::spawn_local(follow_metadata(ctx.clone(), updates)).detach();
                glommio::spawn_local(ctx.router.clone().serve_inbox(inbox)).detach();
                glommio::spawn_local(retention_loop(ctx.clone())).detach();
                glommio::spawn_local(cleaner_loop(ctx.clone())).detach();
                glommio::spawn_local(crate::group::tick_loop(ctx.coordinator.clone())).detach();
                glommio::spawn_local(crate::group::expiry_loop(ctx.coordinator.clone())).detach();
                let listener = match glommio::net::TcpListener::bind(config.listen) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready.send(Err(anyhow::anyhow!("shard {shard} cannot listen on {}: {e}", config.listen)));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                connection::accept_loop(ctx, listener).await;
            })
            .map_err(|e| anyhow::anyhow!("starting shard {shard}: {e}"))?;
        handles.push(handle);
    }
    drop(ready_tx);
    for _ in 0..shard_count {
        ready_rx.recv().context("a shard stopped during start-up")??;
    }
    tracing::info!(
        "shardlog listening on {} with {} shards (controller core {:?}, data dir {}, flush {:?}), started in {} ms",
        config.listen,
        shard_count,
        plan.controller_core,
        config.data_dir.display(),
        config.flush,
        started.elapsed().as_millis()
    );
    for h in handles {
        let _ = h.join();
    }
    controller.shutdown();
    Ok(())
}
