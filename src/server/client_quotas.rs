//! Client quotas enforced on one shard (issue 24, point 5): the meters of the clients
//! that have a quota, the throttle time their requests get, and the muting of their
//! connections while throttled (Kafka's ClientQuotaManager and KIP-219).
//!
//! Per shard and without locks: each shard meters the requests its own connections
//! bring, so a client's quota holds per shard of each broker (Kafka's holds per broker;
//! a client's connections to one broker land on one shard unless it opens several).
//!
//! Without any quota in the image (the common case) a request costs one pointer
//! comparison: `ConnectionQuota::refresh` finds nothing to meter.
//!
//! How a throttled client is slowed, as Kafka does: its response carries
//! `throttle_time_ms` at once (the client waits that long before its next request), and
//! the broker reads nothing more from its connections until then (a client that ignores
//! the hint gains nothing). A Produce is recorded as it arrives (its request size) and
//! still appended; a Fetch over the quota gets an empty response; a request over the
//! request-time quota is served and its successors wait.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, RequestKind};

use super::dispatch::RequestMeta;
use super::shard::ShardContext;
use crate::protocol::DecodedRequest;
use crate::runtime::poll_time::PollTimed;
use crate::security::client_quotas::{ClientQuotas, QuotaKey, QuotaTags};
use crate::security::principal::Principal;
use crate::security::quota_rate::{RateWindow, SampledRate, TokenBucket};

/// Kafka forgets a client's meters after an hour without use; ours go once they hold
/// nothing (every sample expired) and no connection uses them.
const FORGET_AFTER_IDLE_WINDOWS: u64 = 1;

/// One client's (or group of clients') measure against one quota.
pub struct Meter {
    measure: RefCell<Measure>,
    /// Until when the connections of these clients are muted (ms on the shard's clock).
    muted_until_ms: Cell<u64>,
}

/// Byte and request-time quotas are rates; the controller mutation quota is a token
/// bucket (as in Kafka).
enum Measure {
    Rate(SampledRate),
    Tokens(TokenBucket),
}

impl Meter {
    fn new(measure: Measure) -> Meter {
        Meter { measure: RefCell::new(measure), muted_until_ms: Cell::new(0) }
    }

    fn last_record_ms(&self) -> Option<u64> {
        match &*self.measure.borrow() {
            Measure::Rate(r) => r.last_record_ms(),
            Measure::Tokens(t) => t.last_record_ms(),
        }
    }
}

/// A key's quota for a connection's client, and the meter it is measured by.
#[derive(Clone)]
struct Bound {
    quota: f64,
    meter: Rc<Meter>,
}

pub struct ClientQuotaManager {
    window: RateWindow,
    /// controller.quota.window.*: the burst of the controller mutation quota.
    mutation_window: RateWindow,
    /// The longest throttle a client is given (Kafka: one quota window).
    max_throttle_ms: u64,
    started: Instant,
    /// The quotas the meters were resolved against; bumping `epoch` when they change
    /// makes every connection resolve again.
    quotas: RefCell<ClientQuotas>,
    epoch: Cell<u64>,
    meters: RefCell<HashMap<(QuotaKey, QuotaTags), Rc<Meter>>>,
}

/// The quota keys metered for a user and client id (connection quotas are by IP).
const CLIENT_KEYS: [QuotaKey; 4] = [QuotaKey::ProducerByteRate, QuotaKey::ConsumerByteRate, QuotaKey::RequestPercentage, QuotaKey::ControllerMutationRate];

fn slot(key: QuotaKey) -> usize {
    CLIENT_KEYS.iter().position(|k| *k == key).expect("a client quota key")
}

impl ClientQuotaManager {
    pub fn new(window: RateWindow, mutation_window: RateWindow) -> ClientQuotaManager {
        ClientQuotaManager {
            window,
            mutation_window,
            max_throttle_ms: window.window_ms,
            started: Instant::now(),
            quotas: RefCell::new(ClientQuotas::default()),
            epoch: Cell::new(0),
            meters: RefCell::new(HashMap::new()),
        }
    }

    /// Milliseconds on this shard's clock.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Takes the image's quotas; true when any client quota is set.
    fn sync(&self, current: &ClientQuotas) -> bool {
        if !self.quotas.borrow().same_as(current) {
            *self.quotas.borrow_mut() = current.clone();
            self.epoch.set(self.epoch.get() + 1);
            self.forget_idle_meters();
        }
        !current.is_empty()
    }

    /// The quota of `key` for this client and the meter it shares; None when unlimited.
    fn bound(&self, key: QuotaKey, principal: Principal, client_id: &str) -> Option<Bound> {
        let (quota, tags) = self.quotas.borrow().client_quota(key, principal.name(), client_id)?;
        let measure = || match key {
            QuotaKey::ControllerMutationRate => Measure::Tokens(TokenBucket::new(self.mutation_window)),
            _ => Measure::Rate(SampledRate::new(self.window)),
        };
        let meter = self.meters.borrow_mut().entry((key, tags)).or_insert_with(|| Rc::new(Meter::new(measure()))).clone();
        Some(Bound { quota, meter })
    }

    fn forget_idle_meters(&self) {
        let now = self.now_ms();
        let span = |w: RateWindow| w.window_ms * (w.samples as u64 + FORGET_AFTER_IDLE_WINDOWS);
        let idle_ms = span(self.window).max(span(self.mutation_window));
        self.meters.borrow_mut().retain(|_, m| Rc::strong_count(m) > 1 || m.last_record_ms().is_some_and(|t| now.saturating_sub(t) < idle_ms));
    }

    /// Records `value` against the bound and mutes its clients for the throttle time it
    /// earns; returns that time.
    fn record(&self, bound: &Bound, value: f64) -> u64 {
        let now = self.now_ms();
        let throttle = self.record_unmuted(bound, value, now);
        self.mute(bound, now, throttle);
        throttle
    }

    /// Records `value`; returns the throttle time it earns, muting nobody.
    fn record_unmuted(&self, bound: &Bound, value: f64, now: u64) -> u64 {
        match &mut *bound.meter.measure.borrow_mut() {
            Measure::Rate(rate) => {
                rate.record(value, now);
                rate.throttle_ms(bound.quota, now, self.max_throttle_ms)
            }
            Measure::Tokens(bucket) => {
                bucket.record(value, bound.quota, now);
                bucket.throttle_ms(bound.quota, now)
            }
        }
    }

    /// The throttle time the bound's clients have earned so far (nothing recorded).
    fn pending(&self, bound: &Bound) -> u64 {
        let now = self.now_ms();
        let throttle = match &mut *bound.meter.measure.borrow_mut() {
            Measure::Rate(rate) => rate.throttle_ms(bound.quota, now, self.max_throttle_ms),
            Measure::Tokens(bucket) => bucket.throttle_ms(bound.quota, now),
        };
        self.mute(bound, now, throttle);
        throttle
    }

    fn mute(&self, bound: &Bound, now: u64, throttle: u64) {
        if throttle > 0 {
            let until = &bound.meter.muted_until_ms;
            until.set(until.get().max(now + throttle));
        }
    }

    /// A consumer's Fetch response of `bytes`, checked as Kafka checks it before sending:
    /// recorded, and if that puts the client over its consumer_byte_rate, taken back and
    /// the throttle time returned (the response is then sent empty, and the client's
    /// connections muted for that long). 0: send it.
    pub fn check_fetch_response(&self, principal: Principal, client_id: &str, bytes: usize, quotas: &ClientQuotas) -> u64 {
        if !self.sync(quotas) {
            return 0;
        }
        let Some(bound) = self.bound(QuotaKey::ConsumerByteRate, principal, client_id) else { return 0 };
        let throttle = self.record(&bound, bytes as f64);
        if throttle > 0 {
            let now = self.now_ms();
            self.record_unmuted(&bound, -(bytes as f64), now);
        }
        throttle
    }

    /// Partition mutations (CreateTopics, CreatePartitions, DeleteTopics) of a client.
    /// `strict` (the versions Kafka is strict in): refused with Err(the time to wait) when
    /// the client's bucket is already below zero, nothing recorded; else taken, Ok(0)
    /// (the response carries the wait only of a refusal, as Kafka's). Not strict: always
    /// taken, Ok(the time to wait after it).
    pub fn record_mutations(&self, principal: Principal, client_id: &str, partitions: u32, strict: bool, quotas: &ClientQuotas) -> Result<u64, u64> {
        if !self.sync(quotas) {
            return Ok(0);
        }
        let Some(bound) = self.bound(QuotaKey::ControllerMutationRate, principal, client_id) else { return Ok(0) };
        if strict {
            let over = self.pending(&bound);
            if over > 0 {
                return Err(over);
            }
            // An overdraft mutes nobody: the next mutation is refused instead.
            self.record_unmuted(&bound, f64::from(partitions), self.now_ms());
            return Ok(0);
        }
        Ok(self.record(&bound, f64::from(partitions)))
    }
}

/// A connection's quotas: resolved once per client id and quota change, so a request of
/// a client without quotas costs a comparison.
pub struct ConnectionQuota {
    principal: Principal,
    client_id: String,
    /// The manager's epoch the bounds were resolved at (0: never).
    epoch: u64,
    bounds: [Option<Bound>; 4],
    /// Whether any bound is set.
    limited: bool,
}

/// How a request was throttled before it was handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttle {
    /// The throttle_time_ms its response carries.
    pub ms: u64,
    /// Measure the handler's time against the request quota.
    pub time_the_handler: bool,
}

impl Throttle {
    /// As the wire's int32 (a throttle is at most one quota window).
    pub fn ms_i32(self) -> i32 {
        i32::try_from(self.ms).unwrap_or(i32::MAX)
    }
}

impl ConnectionQuota {
    pub fn new(principal: Principal) -> ConnectionQuota {
        ConnectionQuota { principal, client_id: String::new(), epoch: 0, bounds: Default::default(), limited: false }
    }

    /// Resolves the bounds again if the client id or the quotas changed; false when this
    /// client has no quota at all (nothing else need be called).
    pub fn refresh(&mut self, manager: &ClientQuotaManager, quotas: &ClientQuotas, client_id: &str) -> bool {
        if !manager.sync(quotas) {
            self.limited = false;
            self.epoch = 0;
            return false;
        }
        if self.epoch != manager.epoch.get() || self.client_id != client_id {
            self.client_id.clear();
            self.client_id.push_str(client_id);
            self.epoch = manager.epoch.get();
            for key in CLIENT_KEYS {
                self.bounds[slot(key)] = manager.bound(key, self.principal, client_id);
            }
            self.limited = self.bounds.iter().any(Option::is_some);
        }
        self.limited
    }

    /// Until when (ms on the manager's clock) this connection must not be read: the
    /// latest mute of any of its meters.
    pub fn muted_until_ms(&self) -> u64 {
        self.bounds.iter().flatten().map(|b| b.meter.muted_until_ms.get()).max().unwrap_or(0)
    }

    /// Before a request is handled: records a Produce's size, and tells the throttle time
    /// earned by it and by the request time so far. `exempt`: requests Kafka never
    /// throttles (ApiVersions, replication, cluster actions). A Fetch's bytes are checked
    /// by its handler, which knows them before it answers (`check_fetch_response`).
    pub fn before(&self, manager: &ClientQuotaManager, produce_bytes: Option<usize>, exempt: bool) -> Throttle {
        if !self.limited || exempt {
            return Throttle::default();
        }
        let bound = |k| self.bounds[slot(k)].as_ref();
        let produce = match (produce_bytes, bound(QuotaKey::ProducerByteRate)) {
            (Some(bytes), Some(b)) => manager.record(b, bytes as f64),
            _ => 0,
        };
        let request = bound(QuotaKey::RequestPercentage).map_or(0, |b| manager.pending(b));
        Throttle { ms: produce.max(request), time_the_handler: bound(QuotaKey::RequestPercentage).is_some() }
    }

    /// After a request was handled: the handler's thread time (nanoseconds), recorded for
    /// the next requests.
    pub fn after(&self, manager: &ClientQuotaManager, handler_nanos: u64) {
        if !self.limited {
            return;
        }
        if let Some(b) = &self.bounds[slot(QuotaKey::RequestPercentage)] {
            // Kafka: percent of one thread, so a second of thread time is 100.
            manager.record(b, handler_nanos as f64 * 100.0 / 1e9);
        }
    }
}

/// The controller mutation quota of one CreateTopics, CreatePartitions or DeleteTopics
/// request (Kafka's KIP-599): each topic's partitions are counted as it is handled; once
/// the client is over its quota, the request's remaining topics are refused with
/// THROTTLING_QUOTA_EXCEEDED (from the versions Kafka is strict in; older versions are
/// only throttled).
pub struct MutationQuota<'a> {
    ctx: &'a ShardContext,
    principal: Principal,
    client_id: &'a str,
    strict: bool,
    quotas: ClientQuotas,
    throttle_ms: Cell<u64>,
}

impl<'a> MutationQuota<'a> {
    pub fn new(ctx: &'a ShardContext, meta: &RequestMeta, client_id: &'a str, strict_since_version: i16) -> MutationQuota<'a> {
        let quotas = ctx.image().security.client_quotas.clone();
        MutationQuota { ctx, principal: meta.principal, client_id, strict: meta.version >= strict_since_version, quotas, throttle_ms: Cell::new(0) }
    }

    /// Whether a change of `partitions` partitions may go ahead (then it is counted).
    pub fn admit(&self, partitions: u32) -> bool {
        match self.ctx.client_quotas.record_mutations(self.principal, self.client_id, partitions, self.strict, &self.quotas) {
            Ok(throttle) => {
                self.throttle_ms.set(self.throttle_ms.get().max(throttle));
                true
            }
            Err(throttle) => {
                self.throttle_ms.set(self.throttle_ms.get().max(throttle));
                false
            }
        }
    }

    /// `meta` with the throttle time the mutations earned.
    pub fn throttled(&self, meta: RequestMeta) -> RequestMeta {
        let ms = i32::try_from(self.throttle_ms.get()).unwrap_or(i32::MAX);
        RequestMeta { throttle_time_ms: meta.throttle_time_ms.max(ms), ..meta }
    }
}

/// What a request is to the client quotas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaUse {
    /// A Produce of this many bytes (the request frame, as Kafka counts it).
    Produce(usize),
    /// Never throttled (Kafka: ApiVersions, SASL, replication and cluster actions).
    Exempt,
    /// Any other request (the request-time quota).
    Other,
}

impl QuotaUse {
    pub fn of(req: &DecodedRequest, frame_len: usize) -> QuotaUse {
        match &req.body {
            RequestKind::Produce(_) => QuotaUse::Produce(frame_len),
            // A follower's fetch (replica id >= 0) is replication, never throttled.
            RequestKind::Fetch(f) if f.replica_id.0 >= 0 || f.replica_state.replica_id.0 >= 0 => QuotaUse::Exempt,
            _ if matches!(req.api_key, ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate | ApiKey::WriteTxnMarkers) => QuotaUse::Exempt,
            _ => QuotaUse::Other,
        }
    }
}

/// A connection's quota state as its reader keeps it: nothing until the client has a
/// quota (the common case costs a pointer check per request).
#[derive(Default)]
pub struct ConnectionQuotaState {
    quota: Option<Rc<RefCell<ConnectionQuota>>>,
}

impl ConnectionQuotaState {
    /// Before reading a request: waits out the throttle time this client earned (KIP-219's
    /// muted channel).
    pub async fn wait_while_muted(&self, ctx: &ShardContext) {
        let Some(q) = &self.quota else { return };
        loop {
            let (until, now) = (q.borrow().muted_until_ms(), ctx.client_quotas.now_ms());
            if until <= now {
                return;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(until - now)).await;
        }
    }

    /// Before a request is handled: its throttle time.
    pub fn before(&mut self, ctx: &ShardContext, principal: Principal, client_id: &str, usage: QuotaUse) -> Throttle {
        let image = ctx.image();
        let quotas = &image.security.client_quotas;
        if quotas.is_empty() && self.quota.is_none() {
            return Throttle::default();
        }
        let q = self.quota.get_or_insert_with(|| Rc::new(RefCell::new(ConnectionQuota::new(principal))));
        if !q.borrow_mut().refresh(&ctx.client_quotas, quotas, client_id) {
            return Throttle::default();
        }
        let (produce, exempt) = match usage {
            QuotaUse::Produce(bytes) => (Some(bytes), false),
            QuotaUse::Exempt => (None, true),
            QuotaUse::Other => (None, false),
        };
        q.borrow().before(&ctx.client_quotas, produce, exempt)
    }

    /// What the request's task records when it is done.
    pub fn timer(&self, throttle: Throttle) -> RequestTimer {
        let spent = throttle.time_the_handler.then(|| Rc::new(Cell::new(0)));
        RequestTimer { quota: self.quota.clone().filter(|_| spent.is_some()), spent }
    }
}

/// Measures a request's handler time against the client's request quota.
pub struct RequestTimer {
    quota: Option<Rc<RefCell<ConnectionQuota>>>,
    /// The handler's thread time so far (request-time quota).
    spent: Option<Rc<Cell<u64>>>,
}

impl RequestTimer {
    pub async fn run<F: std::future::Future>(&self, handler: F) -> F::Output {
        match &self.spent {
            Some(spent) => PollTimed::new(handler, spent.clone()).await,
            None => handler.await,
        }
    }

    /// Records the handler's time.
    pub fn after(&self, ctx: &ShardContext) {
        if let (Some(q), Some(spent)) = (&self.quota, &self.spent) {
            q.borrow().after(&ctx.client_quotas, spent.get());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::client_quotas::{EntityName, QuotaEntity};

    fn quotas(user: &str, key: QuotaKey, value: f64) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        q.alter(&QuotaEntity { user: Some(EntityName::Named(user.into())), ..Default::default() }, &[(key, Some(value))]);
        q
    }

    #[test]
    fn without_quotas_nothing_is_metered() {
        let m = ClientQuotaManager::new(RateWindow::KAFKA_DEFAULT, RateWindow::KAFKA_DEFAULT);
        let mut c = ConnectionQuota::new(Principal::intern("User:alice"));
        assert!(!c.refresh(&m, &ClientQuotas::default(), "app"));
        assert_eq!(c.before(&m, Some(1 << 30), false), Throttle::default());
        assert!(m.meters.borrow().is_empty());
    }

    #[test]
    fn a_producer_over_its_rate_is_throttled_and_muted() {
        let m = ClientQuotaManager::new(RateWindow::KAFKA_DEFAULT, RateWindow::KAFKA_DEFAULT);
        let q = quotas("alice", QuotaKey::ProducerByteRate, 1000.0);
        let mut c = ConnectionQuota::new(Principal::intern("User:alice"));
        assert!(c.refresh(&m, &q, "app"));
        // 10 windows' worth is within the first span.
        assert_eq!(c.before(&m, Some(10_000), false).ms, 0);
        let t = c.before(&m, Some(5_000), false);
        assert!(t.ms > 0 && t.ms <= 1000, "{t:?}");
        assert!(c.muted_until_ms() >= m.now_ms());
        // Another user is not limited.
        let mut other = ConnectionQuota::new(Principal::intern("User:bob"));
        assert!(!other.refresh(&m, &q, "app"));
    }

    #[test]
    fn connections_of_one_user_share_the_meter() {
        let m = ClientQuotaManager::new(RateWindow::KAFKA_DEFAULT, RateWindow::KAFKA_DEFAULT);
        let q = quotas("carol", QuotaKey::ProducerByteRate, 1000.0);
        let mut a = ConnectionQuota::new(Principal::intern("User:carol"));
        let mut b = ConnectionQuota::new(Principal::intern("User:carol"));
        assert!(a.refresh(&m, &q, "one") && b.refresh(&m, &q, "two"));
        assert_eq!(a.before(&m, Some(10_000), false).ms, 0);
        assert!(b.before(&m, Some(5_000), false).ms > 0, "the user's quota is shared by its clients");
    }

    #[test]
    fn strict_mutations_are_refused_once_over() {
        let m = ClientQuotaManager::new(RateWindow::KAFKA_DEFAULT, RateWindow::KAFKA_DEFAULT);
        let q = quotas("dave", QuotaKey::ControllerMutationRate, 1.0);
        let p = Principal::intern("User:dave");
        assert_eq!(m.record_mutations(p, "admin", 30, true, &q), Ok(0), "a full bucket takes a large request");
        let refused = m.record_mutations(p, "admin", 1, true, &q);
        assert!(matches!(refused, Err(ms) if ms > 18_000 && ms <= 19_000), "refused for the deficit: {refused:?}");
        assert!(matches!(m.record_mutations(p, "admin", 1, false, &q), Ok(ms) if ms > 19_000), "permissive versions are taken and throttled");
        assert_eq!(m.record_mutations(p, "someone", 100, true, &quotas("eve", QuotaKey::ControllerMutationRate, 1.0)), Ok(0));
    }
}
