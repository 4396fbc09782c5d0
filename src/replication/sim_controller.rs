//! What both replication simulations (`simulation.rs`, the model; `real_parts_simulation.rs`,
//! the real parts) share: the scenario's constants and its controller — one authority
//! applying the real metadata commands (`controller::sim_api::apply`) to a
//! `MetadataImage` in order, with broker sessions (heartbeats, fencing on timeout,
//! unfencing on the next heartbeat of the registered process).
use std::collections::BTreeMap;

use crate::cluster::image::{BrokerId, BrokerMeta, MetadataImage, PartitionMeta, ReplicaMeta};
use crate::controller::sim_api::{apply, Applied, Command, Rejection};

pub const TICK_MS: u64 = 10;
pub const TOPIC: &str = "t";
pub const TOPIC_ID: [u8; 16] = [7; 16];
/// replica_lag_time_max_ms, as tests set it low.
pub const LAG_MS: u64 = 300;
pub const SESSION_TIMEOUT_MS: u64 = 450;
/// A request with no answer by then is given up (the connection's request timeout).
pub const REQUEST_TIMEOUT_MS: u64 = 200;
/// replica_fetch_backoff_ms, scaled as the lag.
pub const FETCH_BACKOFF_MS: u64 = 50;
/// `isr::RETRY_BACKOFF`.
pub const ALTER_RETRY_MS: u64 = 200;
/// The address of the controller in a simulation's network.
pub const CONTROLLER: BrokerId = -100;

/// A broker process's incarnation id. The counter goes in the first 8 bytes: the broker
/// epoch (`broker_epoch`, KIP-903's check in fetches and AlterPartition) is read from them,
/// as from a real process's random id. (It was in the last 8: every incarnation of a
/// broker then had one broker epoch and the check never refused anything, which let
/// kills-only seeds 45, 57 and 111 of 300 of the model report finding 1.)
pub fn incarnation_bytes(id: BrokerId, incarnation: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&incarnation.to_be_bytes());
    b[8..12].copy_from_slice(&id.to_be_bytes());
    b
}

pub fn broker_meta(id: BrokerId, incarnation: u64) -> BrokerMeta {
    BrokerMeta {
        id,
        incarnation: incarnation_bytes(id, incarnation),
        host: "sim".into(),
        port: 9092,
        rack: None,
        shard_count: 1,
        listeners: Vec::new(),
        fenced: false,
    }
}

/// What a command changed that brokers must hear of.
pub struct Published {
    /// The command, as text (for traces).
    pub text: String,
    /// The partition as it now is.
    pub meta: PartitionMeta,
    /// Its leader moved.
    pub leader_changed: bool,
}

pub struct SimController {
    rf: usize,
    pub image: MetadataImage,
    index: u64,
    last_heartbeat: BTreeMap<BrokerId, u64>,
}

impl SimController {
    /// RF brokers (ids 0..rf, incarnation 1) registered, and the topic created on them with
    /// `min_isr` as its min.insync.replicas (the controller's KIP-966 rules read it too).
    pub fn new(rf: usize, min_isr: usize) -> SimController {
        let mut c = SimController { rf, image: MetadataImage::default(), index: 0, last_heartbeat: BTreeMap::new() };
        for id in 0..rf as BrokerId {
            let (registered, _) =
                c.command(Command::RegisterBroker { broker: broker_meta(id, 1), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
            assert!(registered.is_ok(), "{registered:?}");
            c.last_heartbeat.insert(id, 0);
        }
        let replicas = vec![(0..rf as BrokerId).map(|b| ReplicaMeta { broker: b, shard: 0 }).collect()];
        let configs = [(crate::cluster::topic_config::MIN_INSYNC_REPLICAS.to_string(), min_isr.to_string())].into();
        let (created, _) = c.command(Command::CreateTopic { name: TOPIC.into(), topic_id: TOPIC_ID, shards: vec![0], replicas, configs });
        assert!(created.is_ok(), "{created:?}");
        c
    }

    pub fn meta(&self) -> Option<&PartitionMeta> {
        self.image.topics.get(TOPIC).and_then(|t| t.partition(0))
    }

    /// Every broker's (incarnation counter, fenced) in the image, by broker id.
    pub fn brokers(&self) -> Vec<(u64, bool)> {
        (0..self.rf as BrokerId)
            .map(|b| self.image.brokers.get(&b).map_or((0, true), |m| (u64::from_be_bytes(m.incarnation[..8].try_into().expect("8 bytes")), m.fenced)))
            .collect()
    }

    /// Applies `cmd` (the real `apply`): its answer, and what to publish when the
    /// partition or a broker changed.
    pub fn command(&mut self, cmd: Command) -> (Result<Applied, Rejection>, Option<Published>) {
        let before = self.meta().cloned();
        let brokers_before = self.brokers();
        self.index += 1;
        let text = cmd.to_string();
        let (resp, _deltas) = apply(&mut self.image, self.index, &cmd);
        let published = self.meta().cloned().filter(|m| before.as_ref() != Some(m) || brokers_before != self.brokers()).map(|meta| Published {
            text,
            leader_changed: before.as_ref().is_some_and(|b| b.leader != meta.leader),
            meta,
        });
        (resp.0, published)
    }

    /// A heartbeat of `from`'s process `incarnation` at `now`: the unfencing it brings
    /// (a fenced broker's registered process is back), if any.
    pub fn heartbeat(&mut self, from: BrokerId, incarnation: u64, now: u64) -> Option<Command> {
        let b = self.image.brokers.get(&from)?;
        if b.incarnation != incarnation_bytes(from, incarnation) {
            return None;
        }
        let fenced = b.fenced;
        self.last_heartbeat.insert(from, now);
        fenced.then(|| Command::UnfenceBroker { broker: from, incarnation: incarnation_bytes(from, incarnation), unclean_default: false, min_isr_default: 0 })
    }

    /// A process registering (a restart) counts as its first heartbeat.
    pub fn registered(&mut self, id: BrokerId, now: u64) {
        self.last_heartbeat.insert(id, now);
    }

    /// The session timeouts at `now` (the quorum leader's liveness check): a fencing for
    /// every unfenced broker silent for longer than SESSION_TIMEOUT_MS.
    pub fn expired(&self, now: u64) -> Vec<Command> {
        self.image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter(|b| now.saturating_sub(self.last_heartbeat.get(&b.id).copied().unwrap_or(0)) > SESSION_TIMEOUT_MS)
            .map(|b| Command::FenceBroker { broker: b.id, incarnation: b.incarnation, unclean_default: false, min_isr_default: 0 })
            .collect()
    }

    /// AlterPartition from `from` as the command the controller applies.
    pub fn alter_partition(from: BrokerId, leader_epoch: i32, partition_epoch: i32, isr: Vec<BrokerId>, epochs: Vec<i64>) -> Command {
        Command::AlterPartition { topic_id: TOPIC_ID, partition: 0, leader: from, leader_epoch, partition_epoch, new_isr: isr, new_isr_epochs: epochs }
    }

    /// The answer to an AlterPartition (`alter_partition`) the controller applied.
    pub fn altered(result: Result<Applied, Rejection>) -> Result<PartitionMeta, Rejection> {
        match result {
            Ok(Applied::PartitionAltered(meta)) => Ok(meta),
            Ok(other) => panic!("AlterPartition applied as {other:?}"),
            Err(e) => Err(e),
        }
    }
}

/// A message in flight to `to` (`CONTROLLER` for the controller), for the process
/// incarnation `incarnation` of the receiver (a restarted process has new connections:
/// what was sent to the old one is gone).
pub struct InFlight<M> {
    pub at: u64,
    pub seq: u64,
    pub to: BrokerId,
    pub incarnation: u64,
    pub msg: M,
}

/// The simulated network: messages delivered at their time, in send order among equal
/// times; metadata to one broker in order.
pub struct SimNetwork<M> {
    queue: Vec<InFlight<M>>,
    seq: u64,
    /// When the last metadata delivery to each broker is due.
    meta_clock: BTreeMap<BrokerId, u64>,
}

impl<M> SimNetwork<M> {
    pub fn new() -> SimNetwork<M> {
        SimNetwork { queue: Vec::new(), seq: 0, meta_clock: BTreeMap::new() }
    }

    pub fn push(&mut self, at: u64, to: BrokerId, incarnation: u64, msg: M) {
        self.seq += 1;
        self.queue.push(InFlight { at, seq: self.seq, to, incarnation, msg });
    }

    /// A metadata update to `to` at `now`: usually prompt, sometimes late (its observer
    /// reconnecting), never before an earlier one.
    pub fn push_metadata(&mut self, rng: &mut impl rand::Rng, now: u64, to: BrokerId, incarnation: u64, msg: M) {
        use rand::RngExt;
        let delay = if rng.random_bool(0.05) { rng.random_range(1..=600u64) } else { rng.random_range(1..=60u64) };
        let at = (now + delay).max(self.meta_clock.get(&to).copied().unwrap_or(0));
        self.meta_clock.insert(to, at);
        self.push(at, to, incarnation, msg);
    }

    /// The next message due at `now`, if any.
    pub fn next_due(&mut self, now: u64) -> Option<InFlight<M>> {
        let i = self.queue.iter().enumerate().filter(|(_, m)| m.at <= now).min_by_key(|(_, m)| (m.at, m.seq)).map(|(i, _)| i)?;
        Some(self.queue.swap_remove(i))
    }

    /// `m` again, due at `at` (a paused receiver reads it when it runs again).
    pub fn delay(&mut self, mut m: InFlight<M>, at: u64) {
        m.at = at;
        self.queue.push(m);
    }
}
