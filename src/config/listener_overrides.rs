//! Kafka's per-listener settings, `listener.name.<listener>.<key>=<value>` (the
//! `listener_settings` list): a listener's security settings over the broker's, so one
//! broker can offer SCRAM on one listener and PLAIN on another, or serve two key stores.
//!
//! Keys taken (Kafka's names): `sasl.enabled.mechanisms`, `plain.sasl.jaas.config` (the
//! PLAIN users; Kafka's `<mechanism>.sasl.jaas.config`), `scram-sha-256|512.sasl.jaas.config`
//! (this broker's SCRAM credentials towards that listener), `connections.max.reauth.ms`,
//! `ssl.keystore.*`, `ssl.key.password`, `ssl.truststore.*`, `ssl.client.auth`,
//! `ssl.enabled.protocols`, `ssl.cipher.suites`, `ssl.endpoint.identification.algorithm`,
//! `ssl.principal.mapping.rules`. Any other
//! key, or a listener the broker does not have, stops the broker at start with the entry
//! named (a setting silently ignored is a security hole).
use super::Config;

/// One `listener.name.<listener>.<key>=<value>` entry, split.
struct Entry<'a> {
    listener: &'a str,
    key: &'a str,
    value: &'a str,
}

fn parse(entry: &str) -> Result<Entry<'_>, String> {
    let (name, value) = entry.split_once('=').ok_or_else(|| format!("{entry:?} is not key=value"))?;
    let rest = name.trim().strip_prefix("listener.name.").ok_or_else(|| format!("{name:?} does not start with listener.name."))?;
    let (listener, key) = rest.split_once('.').ok_or_else(|| format!("{name:?} names no key after the listener"))?;
    Ok(Entry { listener, key, value: value.trim() })
}

/// Sets `key` on `config`; Err when the key is not one a listener may override.
fn set(config: &mut Config, key: &str, value: &str) -> Result<(), String> {
    let v = value.to_string();
    match key {
        "sasl.enabled.mechanisms" => config.sasl_enabled_mechanisms = v,
        "plain.sasl.jaas.config" => config.sasl_jaas_config = v,
        "scram-sha-256.sasl.jaas.config" | "scram-sha-512.sasl.jaas.config" => config.scram_sasl_jaas_config = v,
        "sasl.mechanism.inter.broker.protocol" => config.sasl_mechanism_inter_broker_protocol = v,
        "connections.max.reauth.ms" => config.connections_max_reauth_ms = value.parse().map_err(|_| format!("{key}: {value:?} is not a number of ms"))?,
        "ssl.keystore.type" => config.ssl_keystore_type = v,
        "ssl.keystore.location" => config.ssl_keystore_location = v,
        "ssl.keystore.password" => config.ssl_keystore_password = v,
        "ssl.key.password" => config.ssl_key_password = v,
        "ssl.truststore.type" => config.ssl_truststore_type = v,
        "ssl.truststore.location" => config.ssl_truststore_location = v,
        "ssl.truststore.password" => config.ssl_truststore_password = v,
        "ssl.client.auth" => config.ssl_client_auth = v,
        "ssl.enabled.protocols" => config.ssl_enabled_protocols = v,
        "ssl.cipher.suites" => config.ssl_cipher_suites = v,
        "ssl.endpoint.identification.algorithm" => config.ssl_endpoint_identification_algorithm = v,
        "ssl.principal.mapping.rules" => config.ssl_principal_mapping_rules = v,
        _ => return Err(format!("{key} cannot be set per listener (not served, or not a per-listener setting)")),
    }
    Ok(())
}

/// `config` as `listener` sees it: its `listener.name.<listener>.*` entries applied
/// (listener names compare without case, as Kafka lower-cases them in the prefix).
pub fn for_listener(config: &Config, listener: &str) -> Result<Config, String> {
    let mut own = config.clone();
    for entry in &config.listener_settings {
        let e = parse(entry)?;
        if e.listener.eq_ignore_ascii_case(listener) {
            set(&mut own, e.key, e.value).map_err(|why| format!("listener.name.{}.{}: {why}", e.listener, e.key))?;
        }
    }
    Ok(own)
}

/// Every entry well formed, naming one of `listeners` and a key that may be set.
pub fn check(config: &Config, listeners: &[&str]) -> Result<(), String> {
    for entry in &config.listener_settings {
        let e = parse(entry)?;
        if !listeners.iter().any(|l| l.eq_ignore_ascii_case(e.listener)) {
            return Err(format!("{entry:?}: the broker has no listener {} (listeners: {})", e.listener, listeners.join(", ")));
        }
        set(&mut config.clone(), e.key, e.value).map_err(|why| format!("{entry:?}: {why}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[&str]) -> Config {
        Config {
            sasl_enabled_mechanisms: "PLAIN,SCRAM-SHA-512".into(),
            listener_settings: entries.iter().map(|e| e.to_string()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn a_listener_sees_its_own_settings_over_the_brokers() {
        let c = config(&["listener.name.SASL_PLAINTEXT.sasl.enabled.mechanisms=SCRAM-SHA-512", "listener.name.other.connections.max.reauth.ms=5000"]);
        assert_eq!(for_listener(&c, "sasl_plaintext").unwrap().sasl_enabled_mechanisms, "SCRAM-SHA-512");
        assert_eq!(for_listener(&c, "SASL_SSL").unwrap().sasl_enabled_mechanisms, "PLAIN,SCRAM-SHA-512");
        assert_eq!(for_listener(&c, "OTHER").unwrap().connections_max_reauth_ms, 5000);
        assert!(check(&c, &["SASL_PLAINTEXT", "OTHER"]).is_ok());
    }

    #[test]
    fn unknown_listeners_keys_and_malformed_entries_are_refused() {
        assert!(check(&config(&["listener.name.nope.sasl.enabled.mechanisms=PLAIN"]), &["SASL_PLAINTEXT"]).unwrap_err().contains("no listener nope"));
        assert!(check(&config(&["listener.name.x.log.retention.ms=1"]), &["X"]).unwrap_err().contains("cannot be set per listener"));
        assert!(check(&config(&["listener.name.x.connections.max.reauth.ms=soon"]), &["X"]).is_err());
        assert!(check(&config(&["sasl.enabled.mechanisms=PLAIN"]), &["X"]).is_err());
        assert!(check(&config(&["listener.name.x"]), &["X"]).is_err());
        assert!(check(&config(&["listener.name.x=1"]), &["X"]).is_err());
    }
}
