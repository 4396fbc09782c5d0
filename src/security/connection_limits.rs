//! Kafka's connection limits (its ConnectionQuotas): `max.connections` for the whole
//! broker, `max.connections.per.ip` and `max.connections.per.ip.overrides` per client
//! address. Counted across all shards in one small map, touched only when a connection
//! opens or closes (never per request).
//!
//! At `max.connections` a listener stops accepting (the client waits in the backlog, as
//! Kafka's acceptor blocks) until a connection closes; the inter-broker listener is not
//! held back by it (Kafka exempts it so the cluster keeps replicating). Over its
//! address's limit a new connection is closed at once.
//!
//! The `connection_creation_rate` quota of an address (KIP-612, set with
//! `kafka-configs.sh --entity-type ips`): new connections from it are counted over the
//! quota window; one that puts it over its rate is refused, and closed only after the
//! throttle time (as Kafka does, so the client does not reconnect at once).
use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::quota_rate::{RateWindow, SampledRate};

/// Addresses whose connection rate is remembered before idle ones are forgotten.
const RATES_KEPT: usize = 1024;

#[derive(Debug)]
pub struct ConnectionLimits {
    max_connections: usize,
    max_per_ip: usize,
    per_ip_overrides: HashMap<IpAddr, usize>,
    /// quota.window.*: how connection rates are measured.
    window: RateWindow,
    started: Instant,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
    /// New connections by address, for those with a connection_creation_rate.
    rates: HashMap<IpAddr, SampledRate>,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its address holds this many connections already (the limit).
    TooManyFromAddress(usize),
    /// The broker holds `max.connections` already.
    TooManyConnections(usize),
    /// Its address is over its connection_creation_rate: close it after this long.
    Throttled { throttle_ms: u64 },
}

/// An admitted connection's place in the counts; given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: Option<IpAddr>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.limits.lock();
        open.total -= 1;
        if let Some(ip) = self.ip {
            let n = open.by_ip.get_mut(&ip).expect("an admitted address is counted");
            *n -= 1;
            if *n == 0 {
                open.by_ip.remove(&ip);
            }
        }
    }
}

impl ConnectionLimits {
    /// `overrides`: Kafka's `host-or-address:count` list, comma-separated; host names
    /// are resolved now (as Kafka resolves them when the setting is read).
    pub fn new(max_connections: usize, max_per_ip: usize, overrides: &str, window: RateWindow) -> Result<ConnectionLimits, String> {
        let mut per_ip_overrides = HashMap::new();
        for entry in overrides.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, count) = entry.rsplit_once(':').ok_or_else(|| format!("{entry:?} is not host:count"))?;
            let count: usize = count.trim().parse().map_err(|_| format!("{entry:?}: the count is not a number"))?;
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                Err(_) => (host, 0).to_socket_addrs().map_err(|e| format!("{entry:?}: cannot resolve {host}: {e}"))?.map(|a| a.ip()).collect(),
            };
            for ip in ips {
                per_ip_overrides.insert(ip, count);
            }
        }
        Ok(ConnectionLimits { max_connections, max_per_ip, per_ip_overrides, window, started: Instant::now(), open: Mutex::new(Open::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn limit_of(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides.get(&ip).copied().unwrap_or(self.max_per_ip)
    }

    /// Whether the broker holds `max.connections` (a listener waits before accepting).
    pub fn at_broker_limit(&self) -> bool {
        self.lock().total >= self.max_connections
    }

    /// Counts a new connection from `ip` in, or says why it is refused. `exempt_from_total`:
    /// on the inter-broker listener. `creation_rate`: the address's
    /// connection_creation_rate quota, if it has one.
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>, exempt_from_total: bool, creation_rate: Option<f64>) -> Result<ConnectionSlot, Refusal> {
        let mut open = self.lock();
        if !exempt_from_total && open.total >= self.max_connections {
            return Err(Refusal::TooManyConnections(self.max_connections));
        }
        if let (Some(ip), Some(quota)) = (ip, creation_rate) {
            // Kafka records the connection even when it is refused for it.
            let now = self.started.elapsed().as_millis() as u64;
            if open.rates.len() >= RATES_KEPT && !open.rates.contains_key(&ip) {
                let idle_ms = self.window.window_ms * self.window.samples as u64;
                open.rates.retain(|_, r| r.last_record_ms().is_some_and(|t| now.saturating_sub(t) < idle_ms));
            }
            let rate = open.rates.entry(ip).or_insert_with(|| SampledRate::new(self.window));
            rate.record(1.0, now);
            let throttle_ms = rate.throttle_ms(quota, now, self.window.window_ms);
            if throttle_ms > 0 {
                return Err(Refusal::Throttled { throttle_ms });
            }
        }
        if let Some(ip) = ip {
            let limit = self.limit_of(ip);
            let n = open.by_ip.entry(ip).or_insert(0);
            if *n >= limit {
                if *n == 0 {
                    open.by_ip.remove(&ip);
                }
                return Err(Refusal::TooManyFromAddress(limit));
            }
            *n += 1;
        }
        open.total += 1;
        Ok(ConnectionSlot { limits: self.clone(), ip })
    }

    /// Connections open now (all listeners).
    pub fn open_connections(&self) -> usize {
        self.lock().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: RateWindow = RateWindow { samples: 3, window_ms: 1000 };

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn per_address_limits_and_overrides() {
        let l = Arc::new(ConnectionLimits::new(100, 2, "10.0.0.9:0, 127.0.0.2:3", W).unwrap());
        let a = l.admit(ip("10.0.0.1"), false, None).unwrap();
        let _b = l.admit(ip("10.0.0.1"), false, None).unwrap();
        assert_eq!(l.admit(ip("10.0.0.1"), false, None).unwrap_err(), Refusal::TooManyFromAddress(2));
        drop(a);
        assert!(l.admit(ip("10.0.0.1"), false, None).is_ok(), "a closed connection frees its place");
        assert_eq!(l.admit(ip("10.0.0.9"), false, None).unwrap_err(), Refusal::TooManyFromAddress(0), "an override of 0 refuses all");
        let held: Vec<_> = (0..3).map(|_| l.admit(ip("127.0.0.2"), false, None).unwrap()).collect();
        assert!(l.admit(ip("127.0.0.2"), false, None).is_err());
        assert_eq!(held.len(), 3);
    }

    #[test]
    fn the_broker_limit_spares_the_inter_broker_listener() {
        let l = Arc::new(ConnectionLimits::new(2, 100, "", W).unwrap());
        let _a = l.admit(ip("10.0.0.1"), false, None).unwrap();
        let _b = l.admit(ip("10.0.0.2"), false, None).unwrap();
        assert!(l.at_broker_limit());
        assert_eq!(l.admit(ip("10.0.0.3"), false, None).unwrap_err(), Refusal::TooManyConnections(2));
        let c = l.admit(ip("10.0.0.3"), true, None).unwrap();
        assert_eq!(l.open_connections(), 3);
        drop(c);
        assert_eq!(l.open_connections(), 2);
    }

    #[test]
    fn bad_overrides_are_refused() {
        assert!(ConnectionLimits::new(1, 1, "10.0.0.1", W).is_err());
        assert!(ConnectionLimits::new(1, 1, "10.0.0.1:many", W).is_err());
        assert!(ConnectionLimits::new(1, 1, "localhost:5", W).is_ok());
    }

    #[test]
    fn an_address_over_its_creation_rate_is_throttled() {
        // 2 a second over 3 windows: the rate is measured over at least 2 s, so four
        // connections pass at once and the fifth is over (counted even so).
        let l = Arc::new(ConnectionLimits::new(100, 100, "", W).unwrap());
        let held: Vec<_> = (0..4).map(|_| l.admit(ip("10.0.0.1"), false, Some(2.0)).unwrap()).collect();
        assert!(matches!(l.admit(ip("10.0.0.1"), false, Some(2.0)), Err(Refusal::Throttled { throttle_ms }) if throttle_ms > 0));
        assert!(l.admit(ip("10.0.0.2"), false, Some(2.0)).is_ok(), "another address has its own rate");
        assert!(l.admit(ip("10.0.0.1"), false, None).is_ok(), "without a quota, no rate");
        assert_eq!(l.open_connections(), 4, "the refused connection holds no place (the others were dropped)");
        drop(held);
    }
}
