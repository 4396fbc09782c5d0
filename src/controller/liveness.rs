//! Broker liveness as the quorum leader sees it: when it last heard each broker's
//! heartbeat. In memory only (as Kafka's BrokerHeartbeatManager): a new leader starts with
//! no history, so it gives every broker one session timeout from the moment it began
//! leading before fencing anybody (else an election would fence the whole cluster).
//!
//! The controller thread calls `on_heartbeat` for each heartbeat that reaches it while it
//! leads and `on_fencing_tick` on a timer, and commits the commands they return; the clock
//! is passed in, so this is tested without threads or sleeps, and the seeded simulation
//! (`simulation_brokers.rs`) drives the very same decisions on a virtual clock.
//!
//! A broker is fenced when it has been silent for the session timeout, or sooner when the
//! connection its latest heartbeat came on has closed and no heartbeat came since for
//! `disconnect_grace` (`on_connection_closed`): a crashed process (kill -9, OOM) closes its
//! sockets at once, so its partitions move in well under a session timeout. A stopped
//! (SIGSTOP) or cut-off broker closes nothing and still waits out the session timeout. A
//! live broker whose connection merely reset is fenced at worst, and its next heartbeat
//! (on a new connection) unfences it, as after any fencing.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::cluster::image::{BrokerId, BrokerMeta, MetadataImage};

use super::types::Command;

pub struct Liveness {
    session_timeout: Duration,
    /// This controller's static `unclean_leader_election_enable`, carried by the liveness
    /// records it writes (their apply may elect leaders: `leadership::UncleanPolicy`).
    unclean_default: bool,
    /// This controller's static `min_insync_replicas`, carried the same way (the ELR rules:
    /// `eligible_leaders::ElrPolicy`).
    min_isr_default: i32,
    /// The term this node leads and since when; None while it does not lead.
    leading_since: Option<(u64, Instant)>,
    /// Last heartbeat heard while leading, by broker.
    heard: HashMap<BrokerId, Heard>,
    /// How long a broker whose heartbeat connection closed may take to heartbeat again
    /// before it is fenced.
    disconnect_grace: Duration,
    /// Incarnations that asked for a controlled shutdown in this term: a heartbeat of
    /// theirs still in flight must not unfence them.
    shutting_down: HashMap<BrokerId, [u8; 16]>,
}

/// A broker's latest heartbeat as the leader saw it.
#[derive(Clone, Copy, Debug)]
struct Heard {
    incarnation: [u8; 16],
    at: Instant,
    /// The controller connection it came on (None: from this node's own broker, or a path
    /// with no connection to watch).
    via: Option<u64>,
    /// When that connection closed, if it did. Invariant: only ever set for the connection
    /// of the latest heartbeat (`via`), so a close of an older connection is no news, and a
    /// heartbeat on a new connection replaces the whole entry.
    closed_at: Option<Instant>,
}

impl Liveness {
    pub fn new(session_timeout: Duration, unclean_default: bool) -> Liveness {
        let disconnect_grace = disconnect_grace(session_timeout);
        Liveness {
            session_timeout,
            unclean_default,
            min_isr_default: 1,
            leading_since: None,
            heard: HashMap::new(),
            disconnect_grace,
            shutting_down: HashMap::new(),
        }
    }

    /// The static min.insync.replicas the liveness records carry (1 unless set).
    pub fn with_min_isr_default(mut self, min_isr_default: i32) -> Liveness {
        self.min_isr_default = min_isr_default;
        self
    }

    /// Called on every timer tick and heartbeat with the term this node leads now (None:
    /// it does not lead). A new term starts from nothing, even if this node led before:
    /// in between, heartbeats went to another leader.
    pub fn set_leading(&mut self, term: Option<u64>, now: Instant) {
        if self.leading_since.map(|(t, _)| t) != term {
            self.leading_since = term.map(|t| (t, now));
            self.heard.clear();
            self.shutting_down.clear();
        }
    }

    /// `broker` was unregistered: its heartbeats so far are no news (a later one
    /// registers it again).
    pub fn forget(&mut self, broker: BrokerId) {
        self.heard.remove(&broker);
    }

    pub fn heard(&mut self, broker: BrokerId, incarnation: [u8; 16], via: Option<u64>, now: Instant) {
        self.heard.insert(broker, Heard { incarnation, at: now, via, closed_at: None });
    }

    /// Controller connection `conn` closed at `now`: a broker whose latest heartbeat came on
    /// it is fenced unless it heartbeats again within `disconnect_grace` (on another
    /// connection). A connection that carried no heartbeat in this term is no news.
    pub fn on_connection_closed(&mut self, conn: u64, now: Instant) {
        if self.leading_since.is_none() {
            return;
        }
        for (broker, h) in self.heard.iter_mut().filter(|(_, h)| h.via == Some(conn) && h.closed_at.is_none()) {
            tracing::info!(broker = *broker, "controller: a broker's heartbeat connection closed");
            h.closed_at = Some(now);
        }
    }

    /// When the next broker whose connection closed is due for fencing, if any comes due
    /// after `checked` (when the controller last checked): the controller checks then
    /// rather than at its next regular tick. A deadline already checked is not returned
    /// again (a fencing that did not commit is retried by the regular ticks).
    pub fn next_disconnect_deadline(&self, checked: Instant) -> Option<Instant> {
        self.heard.values().filter_map(|h| h.closed_at).map(|at| at + self.disconnect_grace).filter(|d| *d > checked).min()
    }

    /// Unfenced brokers (other than `me`, whose controller is this very process) silent
    /// for a session timeout, or disconnected for `disconnect_grace`: (id, incarnation) to
    /// fence. Empty unless leading.
    pub fn expired(&self, image: &MetadataImage, me: BrokerId, now: Instant) -> Vec<(BrokerId, [u8; 16])> {
        let Some((_, since)) = self.leading_since else { return Vec::new() };
        image
            .live_brokers()
            .filter(|b| b.id != me)
            .filter(|b| match self.heard.get(&b.id) {
                Some(h) if h.incarnation == b.incarnation => {
                    let disconnected = h.closed_at.is_some_and(|at| now.saturating_duration_since(at) >= self.disconnect_grace);
                    disconnected || now.saturating_duration_since(h.at.max(since)) > self.session_timeout
                }
                _ => now.saturating_duration_since(since) > self.session_timeout,
            })
            .map(|b| (b.id, b.incarnation))
            .collect()
    }

    /// A heartbeat that reached this node while it leads `term`: remembers it and says
    /// what to commit, if anything: a registration (unknown broker or new incarnation), an
    /// unfencing (a fenced broker of the same incarnation heartbeats again), or nothing.
    /// `via`: the controller connection it came on (see `on_connection_closed`);
    /// `clean_shutdown_of`: the incarnation whose clean shutdown the broker found recorded.
    pub fn on_heartbeat(
        &mut self,
        term: u64,
        image: &MetadataImage,
        broker: &BrokerMeta,
        clean_shutdown_of: Option<[u8; 16]>,
        via: Option<u64>,
        now: Instant,
    ) -> Option<Command> {
        self.set_leading(Some(term), now);
        if self.shutting_down.get(&broker.id) == Some(&broker.incarnation) {
            return None;
        }
        self.heard(broker.id, broker.incarnation, via, now);
        match image.brokers.get(&broker.id) {
            Some(b) if b.incarnation == broker.incarnation && !b.fenced => None,
            Some(b) if b.incarnation == broker.incarnation => {
                tracing::info!(broker = broker.id, "controller: unfencing a broker that heartbeats again");
                Some(Command::UnfenceBroker {
                    broker: broker.id,
                    incarnation: broker.incarnation,
                    unclean_default: self.unclean_default,
                    min_isr_default: self.min_isr_default,
                })
            }
            _ => {
                tracing::info!(broker = broker.id, host = %broker.host, port = broker.port, "controller: registering a broker");
                Some(Command::RegisterBroker {
                    broker: broker.clone(),
                    unclean_default: self.unclean_default,
                    min_isr_default: self.min_isr_default,
                    clean_shutdown_of,
                })
            }
        }
    }

    /// `broker`'s process `incarnation` is stopping (a controlled shutdown): fence it now
    /// (its leaderships move to other in-sync replicas and it leaves the ISRs, as any
    /// fencing) and ignore its heartbeats from here on. Nothing to commit when the image
    /// names another incarnation or has it fenced already.
    pub fn on_controlled_shutdown(&mut self, term: u64, image: &MetadataImage, broker: BrokerId, incarnation: [u8; 16], now: Instant) -> Option<Command> {
        self.set_leading(Some(term), now);
        self.shutting_down.insert(broker, incarnation);
        self.heard.remove(&broker);
        let b = image.brokers.get(&broker)?;
        if b.incarnation != incarnation || b.fenced {
            return None;
        }
        tracing::info!(broker, "controller: controlled shutdown of a broker: fencing it");
        Some(Command::FenceBroker { broker, incarnation, unclean_default: self.unclean_default, min_isr_default: self.min_isr_default })
    }

    /// The fencing timer of node `me`, which leads `leading` (None: it does not): one
    /// FenceBroker record per broker silent for a session timeout.
    pub fn on_fencing_tick(&mut self, leading: Option<u64>, image: &MetadataImage, me: BrokerId, now: Instant) -> Vec<Command> {
        self.set_leading(leading, now);
        let (unclean_default, min_isr_default) = (self.unclean_default, self.min_isr_default);
        self.expired(image, me, now)
            .into_iter()
            .map(|(broker, incarnation)| {
                tracing::info!(broker, "controller: fencing a broker that missed its heartbeats or disconnected");
                Command::FenceBroker { broker, incarnation, unclean_default, min_isr_default }
            })
            .collect()
    }
}

/// How often a broker heartbeats: six per session timeout, so a broker is fenced only
/// after missing about six in a row (a loaded 2-core machine can delay one or two).
pub fn heartbeat_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 6).max(Duration::from_millis(10))
}

/// How long a broker whose heartbeat connection closed has to heartbeat again before it is
/// fenced. Short: a crashed broker's partitions are leaderless until then, while a live
/// broker's heartbeat connection closes only on a reset or a heartbeat call that timed
/// out, after which it heartbeats again at once on a new connection (`heartbeat_sender.rs`;
/// that unfences it, if it was fenced meanwhile). Never more than the session timeout,
/// which fences it anyway.
pub fn disconnect_grace(session_timeout: Duration) -> Duration {
    Duration::from_millis(100).min(session_timeout)
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
            img.brokers.insert(
                *id,
                BrokerMeta {
                    id: *id,
                    incarnation: [*id as u8; 16],
                    host: "h".into(),
                    port: 1,
                    rack: None,
                    shard_count: 1,
                    listeners: Vec::new(),
                    fenced: false,
                },
            );
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
        l.heard(2, [2; 16], None, t0 + s);
        assert_eq!(l.expired(&img, 1, t0 + s + Duration::from_millis(1)), vec![(3, [3; 16])]);
        // A heartbeat of an older incarnation does not keep the new one alive.
        l.heard(3, [9; 16], None, t0 + s * 2);
        assert_eq!(l.expired(&img, 1, t0 + s * 2 + Duration::from_millis(1)), vec![(2, [2; 16]), (3, [3; 16])]);
        // Losing leadership forgets; leading again restarts the grace period.
        l.set_leading(None, t0 + s * 3);
        l.set_leading(Some(2), t0 + s * 4);
        assert!(l.expired(&img, 1, t0 + s * 5).is_empty());
        // So does a new term seen without the loss in between (re-elected between ticks).
        l.heard(2, [2; 16], None, t0 + s * 5);
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
        assert_eq!(l.on_heartbeat(1, &img, &two, None, None, t0), None, "live, same incarnation");
        img.brokers.get_mut(&2).unwrap().fenced = true;
        assert_eq!(
            l.on_heartbeat(1, &img, &two, None, None, t0),
            Some(Command::UnfenceBroker { broker: 2, incarnation: two.incarnation, unclean_default: true, min_isr_default: 1 })
        );
        let restarted = BrokerMeta { incarnation: [7; 16], ..two.clone() };
        assert_eq!(
            l.on_heartbeat(1, &img, &restarted, None, None, t0),
            Some(Command::RegisterBroker { broker: restarted.clone(), unclean_default: true, min_isr_default: 1, clean_shutdown_of: None })
        );
        let new = BrokerMeta { id: 3, ..restarted };
        assert!(matches!(l.on_heartbeat(1, &img, &new, None, None, t0), Some(Command::RegisterBroker { .. })));
        // The fencing timer: nothing while not leading, then the silent broker 1 (not me = 2).
        assert!(l.on_fencing_tick(None, &img, 2, t0 + Duration::from_secs(9)).is_empty());
        assert!(l.on_fencing_tick(Some(2), &img, 2, t0 + Duration::from_secs(9)).is_empty(), "a new term's grace period");
        assert_eq!(
            l.on_fencing_tick(Some(2), &img, 2, t0 + Duration::from_secs(13)),
            vec![Command::FenceBroker { broker: 1, incarnation: [1; 16], unclean_default: true, min_isr_default: 1 }]
        );
    }

    #[test]
    fn a_controlled_shutdown_fences_at_once_and_no_later_heartbeat_unfences() {
        let t0 = Instant::now();
        let mut img = image(&[1, 2]);
        let mut l = Liveness::new(Duration::from_secs(3), false);
        let two = img.brokers[&2].clone();
        assert_eq!(l.on_controlled_shutdown(1, &img, 2, [9; 16], t0), None, "another incarnation's request");
        assert_eq!(
            l.on_controlled_shutdown(1, &img, 2, two.incarnation, t0),
            Some(Command::FenceBroker { broker: 2, incarnation: two.incarnation, unclean_default: false, min_isr_default: 1 })
        );
        img.brokers.get_mut(&2).unwrap().fenced = true;
        assert_eq!(l.on_controlled_shutdown(1, &img, 2, two.incarnation, t0), None, "fenced already");
        assert_eq!(l.on_heartbeat(1, &img, &two, None, None, t0), None, "a heartbeat in flight does not unfence it");
        // Its restart is a new incarnation: registered as usual.
        let restarted = BrokerMeta { incarnation: [7; 16], ..two };
        assert!(matches!(l.on_heartbeat(1, &img, &restarted, None, None, t0), Some(Command::RegisterBroker { .. })));
    }

    #[test]
    fn a_closed_heartbeat_connection_fences_after_the_grace_unless_the_broker_is_back() {
        let t0 = Instant::now();
        let s = Duration::from_secs(3);
        let g = disconnect_grace(s);
        let ms = Duration::from_millis;
        let img = image(&[1, 2, 3]);
        let mut l = Liveness::new(s, false);
        // Not leading: a close is ignored (nothing was heard in this term anyway).
        l.on_connection_closed(7, t0);
        assert_eq!(l.next_disconnect_deadline(t0), None);
        l.set_leading(Some(1), t0);
        assert_eq!(l.on_heartbeat(1, &img, &img.brokers[&2], None, Some(7), t0), None);
        assert_eq!(l.on_heartbeat(1, &img, &img.brokers[&3], None, Some(8), t0), None);
        // Closing a connection no heartbeat came on is no news.
        l.on_connection_closed(9, t0 + ms(10));
        assert_eq!(l.next_disconnect_deadline(t0), None);
        // Broker 2's connection closes: fenced once the grace has passed, not before, and
        // well before the session timeout; broker 3 is not.
        l.on_connection_closed(7, t0 + ms(20));
        assert_eq!(l.next_disconnect_deadline(t0 + ms(20)), Some(t0 + ms(20) + g));
        assert_eq!(l.next_disconnect_deadline(t0 + ms(20) + g), None, "checked already");
        assert!(l.on_fencing_tick(Some(1), &img, 1, t0 + ms(19) + g).is_empty(), "within the grace");
        assert_eq!(
            l.on_fencing_tick(Some(1), &img, 1, t0 + ms(20) + g),
            vec![Command::FenceBroker { broker: 2, incarnation: [2; 16], unclean_default: false, min_isr_default: 1 }]
        );
        assert!(g < s);
        // A transient reset: broker 3 heartbeats again on a new connection within the grace;
        // the close of its old one, seen after, changes nothing.
        assert_eq!(l.on_heartbeat(1, &img, &img.brokers[&3], None, Some(10), t0 + ms(30)), None);
        l.on_connection_closed(8, t0 + ms(31));
        assert!(!l.expired(&img, 1, t0 + ms(40) + g).iter().any(|(b, _)| *b == 3));
        // A broker fenced for a reset is unfenced by its next heartbeat, and that new
        // connection is watched again.
        let mut fenced = img.clone();
        fenced.brokers.get_mut(&2).unwrap().fenced = true;
        assert_eq!(
            l.on_heartbeat(1, &fenced, &img.brokers[&2], None, Some(11), t0 + ms(500)),
            Some(Command::UnfenceBroker { broker: 2, incarnation: [2; 16], unclean_default: false, min_isr_default: 1 })
        );
        assert!(l.expired(&img, 1, t0 + ms(600)).is_empty());
        l.on_connection_closed(11, t0 + ms(600));
        assert_eq!(l.expired(&img, 1, t0 + ms(601) + g), vec![(2, [2; 16])]);
        // A restarted broker (a new incarnation) registers as before; its old incarnation's
        // closed connection does not fence the new one.
        let restarted = BrokerMeta { incarnation: [22; 16], ..img.brokers[&2].clone() };
        assert!(matches!(l.on_heartbeat(1, &img, &restarted, None, Some(12), t0 + ms(700)), Some(Command::RegisterBroker { .. })));
        let mut reg = img.clone();
        reg.brokers.insert(2, restarted);
        l.on_connection_closed(11, t0 + ms(701));
        assert!(l.expired(&reg, 1, t0 + ms(800) + g).is_empty());
        // A new term forgets connections along with heartbeats.
        l.on_connection_closed(12, t0 + ms(900));
        l.set_leading(Some(2), t0 + ms(901));
        assert_eq!(l.next_disconnect_deadline(t0), None);
        assert!(l.expired(&reg, 1, t0 + ms(1000) + g).is_empty());
    }
}
