//! Kafka's dynamic per-broker key stores: `listener.name.<listener>.ssl.keystore.location`
//! (with its `.type`, `.password` and `ssl.key.password`) altered with
//! `kafka-configs.sh --entity-type brokers --entity-name <id>` replaces a listener's
//! certificate without a restart. The receiving broker loads the new store before
//! anything is committed (a store that cannot serve TLS is INVALID_REQUEST, as Kafka
//! answers it); the values go
//! to the metadata log as this broker's dynamic configs, and each shard rebuilds the
//! listener's TLS configuration when they reach it (and at start, from the persisted
//! values). New connections get the new certificate; open ones keep theirs, as in Kafka.
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustls::ServerConfig;

use crate::cluster::image::{ConfigResource, MetadataImage};
use crate::config::Config;
use crate::controller::ConfigOp;
use crate::protocol::ErrorCode;
use crate::security::tls_config::{self, dynamic_listener_key as listener_key, TlsSettings};

/// The listener's `ssl.*` settings with `dynamic` (key → value, this listener's dynamic
/// keys) over its static ones.
fn settings(config: &Config, listener: &str, dynamic: &BTreeMap<String, String>) -> Result<TlsSettings, String> {
    let mut settings = config.for_listener(listener).map_err(|e| e.to_string())?.tls_settings();
    for (key, value) in dynamic {
        let v = value.clone();
        match key.as_str() {
            "ssl.keystore.location" => settings.keystore_location = v,
            "ssl.keystore.type" => settings.keystore_type = v,
            "ssl.keystore.password" => settings.keystore_password = v,
            "ssl.key.password" => settings.key_password = v,
            _ => {}
        }
    }
    Ok(settings)
}

/// The listener's TLS server configuration with `dynamic` over its static settings.
pub fn server_config(config: &Config, listener: &str, dynamic: &BTreeMap<String, String>) -> Result<Arc<ServerConfig>, String> {
    tls_config::server_config(&settings(config, listener, dynamic)?).map_err(|e| e.to_string())
}

/// This broker's dynamic keys of `listener` in the image (listener names compare without
/// case: Kafka lower-cases them in the prefix).
pub fn dynamic_of(image: &MetadataImage, node_id: i32, listener: &str) -> BTreeMap<String, String> {
    image
        .configs_of(&ConfigResource::Broker(node_id.to_string()))
        .iter()
        .filter_map(|(name, value)| match listener_key(name) {
            Some((l, key)) if l.eq_ignore_ascii_case(listener) => Some((key.to_string(), value.clone())),
            _ => None,
        })
        .collect()
}

/// One TLS listener's configuration on one shard, replaced when its dynamic keys change.
pub struct ListenerTls {
    current: RefCell<Arc<ServerConfig>>,
    /// The dynamic keys `current` was built with.
    applied: RefCell<BTreeMap<String, String>>,
}

impl ListenerTls {
    pub fn new(config: Arc<ServerConfig>) -> ListenerTls {
        ListenerTls { current: RefCell::new(config), applied: RefCell::new(BTreeMap::new()) }
    }

    /// The configuration a new connection handshakes with.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.borrow().clone()
    }

    /// Rebuilds the configuration if the image's dynamic keys for `listener` differ from
    /// the ones applied. A store that no longer loads keeps the old one (logged).
    pub fn update(&self, config: &Config, image: &MetadataImage, listener: &str, shard: u16) {
        let dynamic = dynamic_of(image, config.node_id, listener);
        if *self.applied.borrow() == dynamic {
            return;
        }
        match server_config(config, listener, &dynamic) {
            Ok(tls) => {
                *self.current.borrow_mut() = tls;
                tracing::info!(shard, listener, keystore = dynamic.get("ssl.keystore.location").map(String::as_str), "listener key store reloaded");
            }
            Err(why) => tracing::warn!(shard, listener, error = %why, "listener key store not reloaded; the previous one stays"),
        }
        *self.applied.borrow_mut() = dynamic;
    }
}

/// Before an alteration of `resource` is committed: every listener whose key store it
/// changes must still serve TLS with the result (Kafka validates the new SslFactory the
/// same way). `replace`: the ops are the whole new set (legacy AlterConfigs).
pub fn check_key_stores(config: &Config, image: &MetadataImage, resource: &ConfigResource, ops: &[ConfigOp], replace: bool) -> Result<(), (ErrorCode, String)> {
    let ConfigResource::Broker(id) = resource else { return Ok(()) };
    let touched: BTreeSet<String> = ops.iter().filter_map(|op| listener_key(op.key()).map(|(l, _)| l.to_ascii_uppercase())).collect();
    // A cluster-wide default is refused by the controller's check, with Kafka's words.
    if touched.is_empty() || id.is_empty() {
        return Ok(());
    }
    let listeners = config.listeners().map_err(|e| (ErrorCode::INVALID_CONFIG, e.to_string()))?;
    for listener in touched {
        if !listeners.all.iter().any(|l| l.name == listener && l.protocol.uses_tls()) {
            return Err((ErrorCode::INVALID_REQUEST, format!("{listener} is not an SSL or SASL_SSL listener of this broker: it has no key store")));
        }
        let current = dynamic_of(image, config.node_id, &listener);
        let mut dynamic = if replace { BTreeMap::new() } else { current.clone() };
        for op in ops {
            let Some((l, key)) = listener_key(op.key()) else { continue };
            if !l.eq_ignore_ascii_case(&listener) {
                continue;
            }
            match op {
                ConfigOp::Set(_, v) => dynamic.insert(key.to_string(), v.clone()),
                _ => dynamic.remove(key),
            };
        }
        // Kafka 4.4's code and words (INVALID_REQUEST, its ConfigException's text).
        let refused = |why: String| {
            (
                ErrorCode::INVALID_REQUEST,
                format!("Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic config update of SSLFactory failed: {why}"),
            )
        };
        server_config(config, &listener, &dynamic).map_err(refused)?;
        // A renewal keeps the identity: the same subject and names (Kafka's check).
        let identity = |d: &BTreeMap<String, String>| settings(config, &listener, d).and_then(|s| tls_config::keystore_identity(&s).map_err(|e| e.to_string()));
        let (before, after) = (identity(&current).map_err(refused)?, identity(&dynamic).map_err(refused)?);
        if before.0 != after.0 {
            return Err(refused(format!("Keystore DistinguishedName does not match: existing={}, new={}", before.0, after.0)));
        }
        if before.1 != after.1 {
            return Err(refused(format!("Keystore SubjectAltNames do not match: existing={:?}, new={:?}", before.1, after.1)));
        }
    }
    Ok(())
}
