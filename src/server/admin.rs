//! What the admin listener (`metrics/admin_listener.rs`) serves for this broker: a scrape
//! asks every shard for its counters and gauges (`shard/metrics_scrape.rs`), waits a
//! bounded time for the answers, and adds the broker's and cluster's gauges read from the
//! committed metadata image and the quorum; readiness is computed from the same answers.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::shard::ScrapeRequest;
use crate::cluster::image::{broker_epoch, NO_LEADER};
use crate::cluster::topic_config::MIN_INSYNC_REPLICAS;
use crate::controller::ControllerHandle;
use crate::metrics::admin_listener::AdminSource;
use crate::metrics::exposition::{self, Scrape};
use crate::metrics::gauges::{BrokerGauges, GroupLag, LogDirGauges, RegisteredBroker, ShardGauges, VoterLag};
use crate::metrics::shard_metrics::ShardMetrics;
use std::collections::HashMap;

/// How long a scrape waits for all shards together (a stalled shard is left out of
/// that scrape rather than holding it up).
const SHARD_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

pub struct BrokerAdmin {
    pub node_id: i32,
    /// Set once the controller recovered the metadata log (the listener answers before:
    /// live, and not ready).
    pub controller: Arc<OnceLock<ControllerHandle>>,
    /// Each shard's scrape inbox.
    pub shards: Vec<async_channel::Sender<ScrapeRequest>>,
    pub log_dirs: Vec<PathBuf>,
    /// min.insync.replicas of topics that do not set it.
    pub default_min_insync_replicas: i32,
    /// Set once every shard listens (start-up done).
    pub listening: Arc<AtomicBool>,
    /// False on a controller-only node (no shards, no registration): ready once the
    /// quorum has a leader.
    pub broker: bool,
}

impl BrokerAdmin {
    /// Starts the admin listener on `addr` (empty: none) serving this broker.
    pub fn serve(self, addr: &str) -> anyhow::Result<()> {
        if addr.is_empty() {
            return Ok(());
        }
        let listener = crate::metrics::admin_listener::start(addr, Arc::new(self))?;
        tracing::info!(addr = %listener.local_addr, "admin listener: GET /metrics, /v1/status/live, /v1/status/ready, /v1/cluster/shards");
        Ok(())
    }

    /// Every shard's answer that came within `SHARD_ANSWER_TIMEOUT`, in shard order.
    fn gather(&self) -> Vec<(ShardMetrics, ShardGauges)> {
        if !self.listening.load(Ordering::Acquire) {
            // Shards still starting would answer only after recovering their partitions.
            return Vec::new();
        }
        let (reply, answers) = std::sync::mpsc::sync_channel(self.shards.len().max(1));
        let asked = self.shards.iter().filter(|s| s.try_send(ScrapeRequest { reply: reply.clone() }).is_ok()).count();
        drop(reply);
        let deadline = Instant::now() + SHARD_ANSWER_TIMEOUT;
        let mut got = Vec::with_capacity(asked);
        while got.len() < asked {
            match answers.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(a) => got.push(a),
                Err(_) => {
                    tracing::warn!(answered = got.len(), shards = asked, "metrics scrape: not every shard answered in time");
                    break;
                }
            }
        }
        got.sort_by_key(|(_, g)| g.shard);
        got
    }

    fn broker_gauges(&self, controller: &ControllerHandle) -> BrokerGauges {
        let image = controller.image();
        let me = self.node_id;
        let mut b = BrokerGauges { node_id: me, ..Default::default() };
        let quorum = controller.quorum_status();
        b.active_controller = quorum.as_ref().is_some_and(|q| q.is_leader);
        for topic in image.topics.values() {
            let min_isr = topic.configs.get(MIN_INSYNC_REPLICAS).and_then(|v| v.parse().ok()).unwrap_or(self.default_min_insync_replicas);
            for p in &topic.partitions {
                if p.replicas.iter().any(|r| r.broker == me) {
                    b.partition_count += 1;
                }
                if p.leader == me {
                    b.leader_count += 1;
                    let isr = p.isr.len() as i32;
                    b.under_replicated_partitions += u64::from(p.isr.len() < p.replicas.len());
                    b.under_min_isr_partitions += u64::from(isr < min_isr);
                    b.at_min_isr_partitions += u64::from(isr == min_isr);
                }
                if b.active_controller {
                    b.global_partition_count += 1;
                    b.offline_partitions += u64::from(p.leader == NO_LEADER);
                }
            }
        }
        if b.active_controller {
            b.global_topic_count = image.topics.len() as u64;
            b.fenced_brokers = image.brokers.values().filter(|x| x.fenced).count() as u64;
            b.active_brokers = image.brokers.values().filter(|x| !x.fenced).count() as u64;
        }
        b.registered_brokers =
            image.brokers.values().map(|x| RegisteredBroker { broker: x.id, epoch: broker_epoch(&x.incarnation), fenced: x.fenced }).collect();
        if let Some(q) = quorum {
            b.raft_leader = q.leader;
            b.raft_epoch = q.term;
            b.raft_high_watermark = q.high_watermark;
            b.raft_last_applied = q.last_applied_offset;
            b.raft_log_start_offset = q.log_start_offset;
            b.raft_snapshot_offset = q.snapshot_offset;
            b.raft_snapshots_installed = q.snapshots_installed;
            b.voter_lag = q.voter_lag.into_iter().map(|(voter, lag)| VoterLag { voter, lag }).collect();
        }
        b
    }

    fn log_dir_gauges(&self) -> Vec<LogDirGauges> {
        self.log_dirs
            .iter()
            .map(|d| {
                let dir = super::log_dir::log_dir_path(d);
                match super::log_dir::file_system_bytes(d) {
                    Ok((total_bytes, free_bytes)) => LogDirGauges { dir, free_bytes, total_bytes, online: true },
                    Err(_) => LogDirGauges { dir, online: false, ..Default::default() },
                }
            })
            .collect()
    }

    /// Why this broker is not ready yet, given the shards' answers.
    fn not_ready(&self, shards: &[(ShardMetrics, ShardGauges)]) -> Option<String> {
        let Some(controller) = self.controller.get() else {
            return Some("the controller is recovering the metadata log (it needs a quorum of voters)".into());
        };
        let image = controller.image();
        if !self.broker {
            return match controller.quorum_status() {
                Some(q) if q.leader.is_some() => None,
                _ => Some("the metadata quorum has no leader".into()),
            };
        }
        if !self.listening.load(Ordering::Acquire) {
            return Some("starting: the shards are not listening yet".into());
        }
        if shards.len() < self.shards.len() {
            return Some(format!("{} of {} shards answered", shards.len(), self.shards.len()));
        }
        match image.brokers.get(&self.node_id) {
            None => return Some("not registered with the controller".into()),
            Some(b) if b.fenced => return Some("fenced: not caught up with the metadata log or not heartbeating".into()),
            Some(_) => {}
        }
        let wanted = controller.shard_index();
        if let Some((_, g)) = shards.iter().find(|(_, g)| g.metadata_applied_index < wanted) {
            return Some(format!("shard {} applied metadata up to {} of {wanted}", g.shard, g.metadata_applied_index));
        }
        let leads = image.topics.values().flat_map(|t| &t.partitions).filter(|p| p.leader == self.node_id).count() as u64;
        let open: u64 = shards.iter().map(|(_, g)| g.leaders).sum();
        if open < leads {
            return Some(format!("{open} of the {leads} partitions this broker leads are open"));
        }
        None
    }
}

/// Consumer group lag of the groups this broker coordinates: against the partitions it
/// leads (log end offset and high watermark) and, for partitions led elsewhere, the high
/// watermark their leader answered (None when it did not).
fn group_lag(shards: &[(ShardMetrics, ShardGauges)]) -> Vec<GroupLag> {
    let ends: HashMap<(&str, i32), (Option<i64>, i64)> =
        shards.iter().flat_map(|(_, g)| &g.partition_offsets).map(|p| ((p.topic.as_str(), p.partition), (p.log_end_offset, p.high_watermark))).collect();
    let mut lag: Vec<GroupLag> = shards
        .iter()
        .flat_map(|(_, g)| &g.committed_offsets)
        .map(|c| {
            let end = ends.get(&(c.topic.as_str(), c.partition));
            GroupLag {
                group: c.group.clone(),
                topic: c.topic.clone(),
                partition: c.partition,
                committed_offset: c.committed_offset,
                log_end_offset: end.and_then(|e| e.0),
                high_watermark: end.map(|e| e.1),
            }
        })
        .collect();
    lag.sort_by(|a, b| (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition)));
    lag
}

impl AdminSource for BrokerAdmin {
    fn metrics(&self) -> String {
        let shards = self.gather();
        let mut broker = match self.controller.get() {
            Some(controller) => self.broker_gauges(controller),
            None => BrokerGauges { node_id: self.node_id, ..Default::default() },
        };
        broker.log_dirs = self.log_dir_gauges();
        broker.group_lag = group_lag(&shards);
        exposition::render(Scrape { shards, broker })
    }

    fn ready(&self) -> Result<(), String> {
        let shards = self.gather();
        match self.not_ready(&shards) {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    fn cluster_shards(&self) -> Result<String, String> {
        let controller = self.controller.get().ok_or("the controller is recovering the metadata log")?;
        let load = crate::cluster::shard_load::shard_load(&controller.image());
        serde_json::to_string(&serde_json::json!({ "brokers": load })).map_err(|e| e.to_string())
    }

    fn remote_log(&self) -> Result<String, String> {
        let controller = self.controller.get().ok_or("the controller is recovering the metadata log")?;
        let image = controller.image();
        let names: std::collections::HashMap<[u8; 16], &str> = image.topics.values().map(|t| (t.topic_id, t.name.as_str())).collect();
        serde_json::to_string(&serde_json::json!({ "partitions": image.remote_log.summaries(&names) })).map_err(|e| e.to_string())
    }
}
