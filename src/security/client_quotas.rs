//! Client quotas as Kafka stores them (ClientQuotaRecords): an entity (a user, a client
//! id, both, or an IP address, each named or the default) and its quota values, and the
//! lookup of the quota that applies to a request (Kafka's DefaultQuotaCallback).
//!
//! Which quota applies to user U with client id C, first found (Kafka's precedence):
//! (1) user U, client C · (2) user U, default client · (3) user U · (4) default user,
//! client C · (5) default user, default client · (6) default user · (7) client C ·
//! (8) default client.
//!
//! The level found also says who shares the quota (Kafka's metric tags): a quota set for
//! user U alone is shared by all of U's clients; one set for client C alone by every user
//! of C; one for the default user is each user's own.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Kafka's entity type names (ClientQuotaEntity).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// One component of an entity: a given name, or the default of its type (Kafka's null
/// name, shown as `<default>`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// Kafka's wire form: `None` is the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        name.map_or(EntityName::Default, |n| EntityName::Named(n.to_string()))
    }

    pub fn as_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

/// What a quota is set for: a user, a client id or both; or an IP address alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    /// Its components as Kafka lists them: (entity type, name; None for the default).
    pub fn components(&self) -> impl Iterator<Item = (&'static str, Option<&str>)> {
        [(USER, &self.user), (CLIENT_ID, &self.client_id), (IP, &self.ip)].into_iter().filter_map(|(t, n)| n.as_ref().map(|n| (t, n.as_wire())))
    }

    fn of(user: Option<EntityName>, client_id: Option<EntityName>) -> QuotaEntity {
        QuotaEntity { user, client_id, ip: None }
    }
}

/// The quota keys Kafka defines (QuotaConfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum QuotaKey {
    /// Bytes per second of Produce requests.
    ProducerByteRate,
    /// Bytes per second of Fetch responses.
    ConsumerByteRate,
    /// Percent of one request-handling thread's time (100 = one whole thread).
    RequestPercentage,
    /// Partitions created or deleted per second (CreateTopics, CreatePartitions, DeleteTopics).
    ControllerMutationRate,
    /// Connections accepted per second from an IP address.
    ConnectionCreationRate,
}

impl QuotaKey {
    pub const ALL: [QuotaKey; 5] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
        QuotaKey::ConnectionCreationRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ControllerMutationRate => "controller_mutation_rate",
            QuotaKey::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    pub fn from_name(name: &str) -> Option<QuotaKey> {
        QuotaKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Kafka declares the byte rates and the connection rate as LONG (whole numbers), the
    /// others as DOUBLE.
    pub fn is_whole_number(self) -> bool {
        matches!(self, QuotaKey::ProducerByteRate | QuotaKey::ConsumerByteRate | QuotaKey::ConnectionCreationRate)
    }

    /// Whether the key applies to user/client-id entities (else to IP entities).
    pub fn is_client_key(self) -> bool {
        self != QuotaKey::ConnectionCreationRate
    }
}

/// A quota value; compared by its bits so images compare equal exactly when they are.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for QuotaValue {}

/// Every entity's quotas; an entity without values has no entry. Shared by pointer
/// between images (a shard rebuilds what it derived only when this changes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<(QuotaEntity, BTreeMap<QuotaKey, QuotaValue>)>", into = "Vec<(QuotaEntity, BTreeMap<QuotaKey, QuotaValue>)>")]
pub struct ClientQuotas {
    entries: Arc<BTreeMap<QuotaEntity, BTreeMap<QuotaKey, QuotaValue>>>,
}

impl From<Vec<(QuotaEntity, BTreeMap<QuotaKey, QuotaValue>)>> for ClientQuotas {
    fn from(v: Vec<(QuotaEntity, BTreeMap<QuotaKey, QuotaValue>)>) -> ClientQuotas {
        ClientQuotas { entries: Arc::new(v.into_iter().filter(|(_, q)| !q.is_empty()).collect()) }
    }
}

impl From<ClientQuotas> for Vec<(QuotaEntity, BTreeMap<QuotaKey, QuotaValue>)> {
    fn from(q: ClientQuotas) -> Self {
        q.entries.iter().map(|(e, v)| (e.clone(), v.clone())).collect()
    }
}

/// Who shares a quota found at a level (see the module's comment).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sharing {
    UserAndClient,
    User,
    Client,
}

/// Who a client-quota meter counts for (Kafka's `user` and `client-id` metric tags): the
/// level the quota was found at decides which of the two are kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuotaTags {
    pub user: String,
    pub client_id: String,
}

impl ClientQuotas {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `other` is this very set (not a copy): cheap change detection.
    pub fn same_as(&self, other: &ClientQuotas) -> bool {
        Arc::ptr_eq(&self.entries, &other.entries)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<QuotaKey, QuotaValue>)> {
        self.entries.iter()
    }

    pub fn get(&self, entity: &QuotaEntity, key: QuotaKey) -> Option<f64> {
        self.entries.get(entity)?.get(&key).map(|v| v.0)
    }

    /// Sets (`Some`) or removes (`None`) values of one entity.
    pub fn alter(&mut self, entity: &QuotaEntity, ops: &[(QuotaKey, Option<f64>)]) {
        let entries = Arc::make_mut(&mut self.entries);
        let values = entries.entry(entity.clone()).or_default();
        for (key, value) in ops {
            match value {
                Some(v) => {
                    values.insert(*key, QuotaValue(*v));
                }
                None => {
                    values.remove(key);
                }
            }
        }
        if values.is_empty() {
            entries.remove(entity);
        }
    }

    /// The quota of `key` for `user` (a principal's name) using `client_id`, with who
    /// shares it; None when no level sets it (unlimited).
    pub fn client_quota(&self, key: QuotaKey, user: &str, client_id: &str) -> Option<(f64, QuotaTags)> {
        debug_assert!(key.is_client_key());
        if self.entries.is_empty() {
            return None;
        }
        let named = |s: &str| Some(EntityName::Named(s.to_string()));
        let default = || Some(EntityName::Default);
        use Sharing::*;
        let levels = [
            (QuotaEntity::of(named(user), named(client_id)), UserAndClient),
            (QuotaEntity::of(named(user), default()), UserAndClient),
            (QuotaEntity::of(named(user), None), User),
            (QuotaEntity::of(default(), named(client_id)), UserAndClient),
            (QuotaEntity::of(default(), default()), UserAndClient),
            (QuotaEntity::of(default(), None), User),
            (QuotaEntity::of(None, named(client_id)), Client),
            (QuotaEntity::of(None, default()), Client),
        ];
        levels.into_iter().find_map(|(entity, sharing)| {
            let value = self.get(&entity, key)?;
            let keep = |kept: bool, s: &str| if kept { s.to_string() } else { String::new() };
            let tags = QuotaTags { user: keep(sharing != Client, user), client_id: keep(sharing != User, client_id) };
            Some((value, tags))
        })
    }

    /// The connection_creation_rate of `ip`: its own, else the default IP's.
    pub fn ip_connection_rate(&self, ip: IpAddr) -> Option<f64> {
        if self.entries.is_empty() {
            return None;
        }
        let own = QuotaEntity { ip: Some(EntityName::Named(ip.to_string())), ..Default::default() };
        let default = QuotaEntity { ip: Some(EntityName::Default), ..Default::default() };
        self.get(&own, QuotaKey::ConnectionCreationRate).or_else(|| self.get(&default, QuotaKey::ConnectionCreationRate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
        let name = |n: Option<&str>| EntityName::from_wire(n);
        QuotaEntity { user: user.map(name), client_id: client.map(name), ip: None }
    }

    #[test]
    fn precedence_and_sharing_follow_kafka() {
        let key = QuotaKey::ProducerByteRate;
        let levels = [
            (entity(Some(Some("u")), Some(Some("c"))), ("u", "c")),
            (entity(Some(Some("u")), Some(None)), ("u", "c")),
            (entity(Some(Some("u")), None), ("u", "")),
            (entity(Some(None), Some(Some("c"))), ("u", "c")),
            (entity(Some(None), Some(None)), ("u", "c")),
            (entity(Some(None), None), ("u", "")),
            (entity(None, Some(Some("c"))), ("", "c")),
            (entity(None, Some(None)), ("", "c")),
        ];
        // With levels i.. set, level i decides; removing it hands over to level i+1.
        let mut q = ClientQuotas::default();
        for (i, (e, _)) in levels.iter().enumerate() {
            q.alter(e, &[(key, Some(100.0 + i as f64))]);
        }
        for (i, (e, (user, client))) in levels.iter().enumerate() {
            let (value, tags) = q.client_quota(key, "u", "c").expect("a level is set");
            assert_eq!(value, 100.0 + i as f64, "level {}", i + 1);
            assert_eq!((tags.user.as_str(), tags.client_id.as_str()), (*user, *client), "level {}", i + 1);
            q.alter(e, &[(key, None)]);
        }
        assert!(q.client_quota(key, "u", "c").is_none());
        assert!(q.is_empty(), "an entity without values has no entry");
    }

    #[test]
    fn other_users_and_keys_are_not_matched() {
        let mut q = ClientQuotas::default();
        q.alter(&entity(Some(Some("alice")), None), &[(QuotaKey::ProducerByteRate, Some(10.0))]);
        assert!(q.client_quota(QuotaKey::ProducerByteRate, "bob", "c").is_none());
        assert!(q.client_quota(QuotaKey::ConsumerByteRate, "alice", "c").is_none());
        assert_eq!(q.client_quota(QuotaKey::ProducerByteRate, "alice", "c").map(|(v, _)| v), Some(10.0));
    }

    #[test]
    fn ip_rate_falls_back_to_the_default_ip() {
        let mut q = ClientQuotas::default();
        let ip = |n: Option<&str>| QuotaEntity { ip: Some(EntityName::from_wire(n)), ..Default::default() };
        q.alter(&ip(None), &[(QuotaKey::ConnectionCreationRate, Some(5.0))]);
        q.alter(&ip(Some("10.0.0.1")), &[(QuotaKey::ConnectionCreationRate, Some(50.0))]);
        assert_eq!(q.ip_connection_rate("10.0.0.1".parse().unwrap()), Some(50.0));
        assert_eq!(q.ip_connection_rate("10.0.0.2".parse().unwrap()), Some(5.0));
    }

    #[test]
    fn serde_round_trip_keeps_every_entry() {
        let mut q = ClientQuotas::default();
        q.alter(&entity(Some(None), Some(Some("c"))), &[(QuotaKey::RequestPercentage, Some(12.5))]);
        q.alter(&entity(Some(Some("u")), None), &[(QuotaKey::ProducerByteRate, Some(1024.0))]);
        let json = serde_json::to_string(&q).unwrap();
        let back: ClientQuotas = serde_json::from_str(&json).unwrap();
        assert_eq!(back, q);
    }
}
