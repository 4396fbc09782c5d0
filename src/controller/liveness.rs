//! Broker liveness as the quorum leader sees it: when it last heard each broker's
//! heartbeat. In memory only (as Kafka's BrokerHeartbeatManager): a new leader starts with
//! no history, so it gives every broker one session timeout from the moment it began
//! leading before fencing anybody (else an election would fence the whole cluster).
//!
//! The controller thread calls `on_heartbeat` for each heartbeat that reaches it while it
//! leads and `on_fencing_tick` on a timer, and commits the commands they return; the clock
//! is passed in, so this is tested without threads or sleeps, and the seeded simulation
//! (`simulation_brokers.rs`) drives the very same decisions on a virtual clock.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::cluster::image::{BrokerId, BrokerMeta, MetadataImage};

use super::types::Command;

pub struct Liveness {
    session_timeout: Duration,
    /// This controller's static `unclean_leader_election_enable`, carried by the liveness
    /// records it writes (their apply may elect leaders: `leadership::UncleanPolicy`).
    unclean_default: bool,
    /// The term this node leads and since when; None while it does not lead.
    leading_since: Option<(u64, Instant)>,
    /// Last heartbeat heard while leading, by broker (incarnation, when).
    heard: HashMap<BrokerId, ([u8; 16], Instant)>,
}

impl Liveness {
    pub fn new(session_timeout: Duration, unclean_default: bool) -> Liveness {
        Liveness { session_timeout, unclean_default, leading_since: None, heard: HashMap::new() }
    }

    /// Called on every timer tick and heartbeat with the term this node leads now (None:
    /// it does not lead). A new term starts from nothing, even if this node led before:
    /// in between, heartbeats went to another leader.
    pub fn set_leading(&mut self, term: Option<u64>, now: Instant) {
        if self.leading_since.map(|(t, _)| t) != term {
            self.leading_since = term.map(|t| (t, now));
            self.heard.clear();
        }
    }

    pub fn heard(&mut self, broker: BrokerId, incarnation: [u8; 16], now: Instant) {
        self.heard.insert(broker, (incarnation, now));
    }

    /// Unfenced brokers (other than `me`, whose controller is this very process) silent
    /// for a session timeout: (id, incarnation) to fence. Empty unless leading.
    pub fn expired(&self, image: &MetadataImage, me: BrokerId, now: Instant) -> Vec<(BrokerId, [u8; 16])> {
        let Some((_, since)) = self.leading_since else { return Vec::new() };
        image
            .live_brokers()
            .filter(|b| b.id != me)
            .filter(|b| {
                let last = match self.heard.get(&b.id) {
                    Some((inc, at)) if *inc == b.incarnation => (*at).max(since),
                    _ => since,
                };
                now.saturating_duration_since(last) > self.session_timeout
            })
            .map(|b| (b.id, b.incarnation))
            .collect()
    }

    /// A heartbeat that reached this node while it leads `term`: remembers it and says
    /// what to commit, if anything: a registration (unknown broker or new incarnation), an
    /// unfencing (a fenced broker of the same incarnation heartbeats again), or nothing.
    pub fn on_heartbeat(&mut self, term: u64, image: &MetadataImage, broker: &BrokerMeta, now: Instant) -> Option<Command> {
        self.set_leading(Some(term), now);
        self.heard(broker.id, broker.incarnation, now);
        match image.brokers.get(&broker.id) {
            Some(b) if b.incarnation == broker.incarnation && !b.fenced => None,
            Some(b) if b.incarnation == broker.incarnation => {
                tracing::info!(broker = broker.id, "controller: unfencing a broker that heartbeats again");
                Some(Command::UnfenceBroker { broker: broker.id, incarnation: broker.incarnation, unclean_default: self.unclean_default })
            }
            _ => {
                tracing::info!(broker = broker.id, host = %broker.host, port = broker.port, "controller: registering a broker");
                Some(Command::RegisterBroker { broker: broker.clone(), unclean_default: self.unclean_default })
            }
        }
    }

    /// The fencing timer of node `me`, which leads `leading` (None: it does not): one
    /// FenceBroker record per broker silent for a session timeout.
    pub fn on_fencing_tick(&mut self, leading: Option<u64>, image: &MetadataImage, me: BrokerId, now: Instant) -> Vec<Command> {
        self.set_leading(leading, now);
        let unclean_default = self.unclean_default;
        self.expired(image, me, now)
            .into_iter()
            .map(|(broker, incarnation)| {
                tracing::info!(broker, "controller: fencing a broker that missed its heartbeats");
                Command::FenceBroker { broker, incarnation, unclean_default }
            })
            .collect()
    }
}

/// How often a broker heartbeats: six per session timeout, so a broker is fenced only
/// after missing about six in a row (a loaded 2-core machine can delay one or two).
pub fn heartbeat_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 6).max(Duration::from_millis(10))
}

/// How often the leader looks for silent brokers: fencing lags the session timeout by
/// at most this.
pub fn fencing_check_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 10).max(Duration::from_millis(10))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::BrokerMeta;

    fn image(ids: &[BrokerId]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in ids {
            img.brokers.insert(*id, BrokerMeta { id: *id, incarnation: [*id as u8; 16], host: "h".into(), port: 1, rack: None, shard_count: 1, fenced: false });
        }
        img
    }

    #[test]
    fn fences_the_silent_after_a_grace_period_never_itself() {
        let t0 = Instant::now();
        let s = Duration::from_secs(3);
        let img = image(&[1, 2, 3]);
        let mut l = Liveness::new(s, false);
        assert!(l.expired(&img, 1, t0 + s * 10).is_empty(), "not leading");
        l.set_leading(Some(1), t0);
        assert!(l.expired(&img, 1, t0 + s).is_empty(), "grace period");
        l.heard(2, [2; 16], t0 + s);
        assert_eq!(l.expired(&img, 1, t0 + s + Duration::from_millis(1)), vec![(3, [3; 16])]);
        // A heartbeat of an older incarnation does not keep the new one alive.
        l.heard(3, [9; 16], t0 + s * 2);
        assert_eq!(l.expired(&img, 1, t0 + s * 2 + Duration::from_millis(1)), vec![(2, [2; 16]), (3, [3; 16])]);
        // Losing leadership forgets; leading again restarts the grace period.
        l.set_leading(None, t0 + s * 3);
        l.set_leading(Some(2), t0 + s * 4);
        assert!(l.expired(&img, 1, t0 + s * 5).is_empty());
        // So does a new term seen without the loss in between (re-elected between ticks).
        l.heard(2, [2; 16], t0 + s * 5);
        l.set_leading(Some(4), t0 + s * 5);
        l.set_leading(Some(4), t0 + s * 6);
        assert!(l.expired(&img, 1, t0 + s * 6).is_empty());
    }

    #[test]
    fn a_heartbeat_registers_unfences_or_changes_nothing() {
        let t0 = Instant::now();
        let mut img = image(&[1, 2]);
        let mut l = Liveness::new(Duration::from_secs(3), true);
        let two = img.brokers[&2].clone();
        assert_eq!(l.on_heartbeat(1, &img, &two, t0), None, "live, same incarnation");
        img.brokers.get_mut(&2).unwrap().fenced = true;
        assert_eq!(l.on_heartbeat(1, &img, &two, t0), Some(Command::UnfenceBroker { broker: 2, incarnation: two.incarnation, unclean_default: true }));
        let restarted = BrokerMeta { incarnation: [7; 16], ..two.clone() };
        assert_eq!(l.on_heartbeat(1, &img, &restarted, t0), Some(Command::RegisterBroker { broker: restarted.clone(), unclean_default: true }));
        let new = BrokerMeta { id: 3, ..restarted };
        assert!(matches!(l.on_heartbeat(1, &img, &new, t0), Some(Command::RegisterBroker { .. })));
        // The fencing timer: nothing while not leading, then the silent broker 1 (not me = 2).
        assert!(l.on_fencing_tick(None, &img, 2, t0 + Duration::from_secs(9)).is_empty());
        assert!(l.on_fencing_tick(Some(2), &img, 2, t0 + Duration::from_secs(9)).is_empty(), "a new term's grace period");
        assert_eq!(
            l.on_fencing_tick(Some(2), &img, 2, t0 + Duration::from_secs(13)),
            vec![Command::FenceBroker { broker: 1, incarnation: [1; 16], unclean_default: true }]
        );
    }
}
