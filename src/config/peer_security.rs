//! How this node authenticates to its peers' listeners, from Kafka's settings: the
//! inter-broker listener (`inter.broker.listener.name`, its `listener.name.<l>.ssl.*`
//! key and trust stores, `sasl.mechanism.inter.broker.protocol` with the listener's
//! JAAS `username`/`password`), and the controller listener (SSL with client
//! certificates required, its `listener.name.<l>.ssl.*` stores). Kafka configures both
//! ends of a listener with the same keys; so does shardlog.
use std::time::Duration;

use super::{Config, ConfigError};
use crate::security::jaas;
use crate::security::listeners::SecurityProtocol;
use crate::security::peer_security::{MutualTls, PeerSecurity, SaslCredentials};
use crate::security::sasl_plain::PLAIN_LOGIN_MODULE;
use crate::security::scram::ScramMechanism;
use crate::security::tls_config;

const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

impl Config {
    /// The client side of the inter-broker listener: what replica fetchers and the
    /// transaction coordinator's calls use. Errors name the Kafka key.
    pub fn inter_broker_security(&self) -> Result<PeerSecurity, ConfigError> {
        let listeners = self.listeners()?;
        let l = listeners.inter_broker();
        let own = self.for_listener(&l.name)?;
        let invalid = |key: &'static str, message: String| ConfigError::Invalid { key, message: format!("inter-broker listener {}: {message}", l.name) };
        let tls = if l.protocol.uses_tls() { Some(tls_config::client_config(&own.tls_settings()).map_err(|e| invalid(e.key, e.message))?) } else { None };
        let sasl = if l.protocol.uses_sasl() {
            let mechanism = own.sasl_mechanism_inter_broker_protocol.trim().to_ascii_uppercase();
            let (enabled, _) = own.sasl_mechanisms()?;
            if !enabled.contains(&mechanism) {
                return Err(invalid(
                    "sasl_mechanism_inter_broker_protocol",
                    format!("{mechanism} is not among the listener's sasl_enabled_mechanisms ({}): brokers authenticate to each other with PLAIN or SCRAM-SHA-256/512", enabled.join(", ")),
                ));
            }
            let (module, jaas_text, key) = if mechanism == "PLAIN" {
                (PLAIN_LOGIN_MODULE, &own.sasl_jaas_config, "plain.sasl.jaas.config")
            } else if ScramMechanism::from_name(&mechanism).is_some() {
                (SCRAM_LOGIN_MODULE, &own.scram_sasl_jaas_config, "scram-sha-256|512.sasl.jaas.config")
            } else {
                return Err(invalid(
                    "sasl_mechanism_inter_broker_protocol",
                    format!("{mechanism} cannot be used between brokers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
                ));
            };
            let line = jaas::parse(jaas_text, &[module])
                .map_err(|m| invalid("listener_settings", format!("listener.name.{}.{key}: {m}", l.name.to_ascii_lowercase())))?;
            let (username, password) = line.client_credentials().ok_or_else(|| {
                invalid(
                    "listener_settings",
                    format!("listener.name.{}.{key} needs username=\"...\" password=\"...\": this broker's own credentials", l.name.to_ascii_lowercase()),
                )
            })?;
            Some(SaslCredentials { mechanism, username: username.to_string(), password: password.to_string() })
        } else {
            None
        };
        Ok(PeerSecurity { listener: l.name.clone(), protocol: l.protocol, tls, sasl, handshake_timeout: Duration::from_millis(self.ssl_handshake_timeout_ms) })
    }

    /// The controller listener's name (the first of `controller_listener_names`) and its
    /// protocol in `listener_security_protocol_map` (PLAINTEXT when it has no entry).
    pub fn controller_listener_protocol(&self) -> Result<(String, SecurityProtocol), ConfigError> {
        let name =
            self.controller_listener_names.split(',').map(|n| n.trim().to_ascii_uppercase()).find(|n| !n.is_empty()).unwrap_or_else(|| "CONTROLLER".into());
        for entry in self.listener_security_protocol_map.split(',') {
            if let Some((n, p)) = entry.split_once(':') {
                if n.trim().eq_ignore_ascii_case(&name) {
                    let protocol = SecurityProtocol::parse(p).ok_or_else(|| ConfigError::Invalid {
                        key: "listener_security_protocol_map",
                        message: format!("{} is not a security protocol", p.trim()),
                    })?;
                    return Ok((name, protocol));
                }
            }
        }
        Ok((name, SecurityProtocol::Plaintext))
    }

    /// The controller listener's mutual TLS, when it is an SSL listener (None: PLAINTEXT).
    /// Both ends must show a certificate: a peer is who its certificate says, and a
    /// quorum that let strangers in would take their votes and their registrations.
    pub fn controller_tls(&self) -> Result<Option<MutualTls>, ConfigError> {
        let (name, protocol) = self.controller_listener_protocol()?;
        let invalid = |key: &'static str, message: String| ConfigError::Invalid { key, message: format!("controller listener {name}: {message}") };
        match protocol {
            SecurityProtocol::Plaintext => return Ok(None),
            SecurityProtocol::Ssl => {}
            other => {
                return Err(invalid(
                    "listener_security_protocol_map",
                    format!("{other} is not served on the controller listener: use SSL with ssl.client.auth=required (mutual TLS) or PLAINTEXT"),
                ))
            }
        }
        let own = self.for_listener(&name)?;
        if crate::security::tls_config::ClientAuth::parse(&own.ssl_client_auth) != Some(crate::security::tls_config::ClientAuth::Required) {
            return Err(invalid(
                "ssl_client_auth",
                format!("is {:?}: the controller listener needs required (nodes prove themselves by certificate)", own.ssl_client_auth),
            ));
        }
        let settings = own.tls_settings();
        let server = tls_config::server_config(&settings).map_err(|e| invalid(e.key, e.message))?;
        let client = tls_config::client_config(&settings).map_err(|e| invalid(e.key, e.message))?;
        let principals = std::sync::Arc::new(own.ssl_principal_mapper()?);
        Ok(Some(MutualTls { listener: name, server, client, principals, handshake_timeout: Duration::from_millis(self.ssl_handshake_timeout_ms) }))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::security::listeners::SecurityProtocol;

    fn sasl_config(mechanism: &str, extra: &[&str]) -> Config {
        let mut settings = vec![format!(
            "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"b-secret\" user_broker=\"b-secret\";"
        )];
        settings.extend(extra.iter().map(|s| s.to_string()));
        Config {
            listeners: "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093".into(),
            listener_security_protocol_map: "INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT".into(),
            inter_broker_listener_name: "INTERNAL".into(),
            sasl_enabled_mechanisms: "PLAIN,SCRAM-SHA-512".into(),
            sasl_mechanism_inter_broker_protocol: mechanism.into(),
            listener_settings: settings,
            ..Config::default()
        }
    }

    #[test]
    fn plain_and_scram_take_the_brokers_credentials_from_the_listeners_jaas() {
        let s = sasl_config("PLAIN", &[]).inter_broker_security().unwrap();
        assert_eq!((s.listener.as_str(), s.protocol), ("INTERNAL", SecurityProtocol::SaslPlaintext));
        let c = s.sasl.unwrap();
        assert_eq!((c.mechanism.as_str(), c.username.as_str(), c.password.as_str()), ("PLAIN", "broker", "b-secret"));
        let scram = "listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"a\";";
        let c = sasl_config("SCRAM-SHA-512", &[scram]).inter_broker_security().unwrap().sasl.unwrap();
        assert_eq!((c.mechanism.as_str(), c.username.as_str()), ("SCRAM-SHA-512", "admin"));
    }

    #[test]
    fn a_mechanism_the_listener_does_not_offer_or_missing_credentials_stop_the_broker() {
        // Kafka's default GSSAPI; a mechanism not enabled; SCRAM without its JAAS line.
        for (mechanism, key) in [
            ("GSSAPI", "sasl_mechanism_inter_broker_protocol"),
            ("SCRAM-SHA-256", "sasl_mechanism_inter_broker_protocol"),
            ("SCRAM-SHA-512", "listener_settings"),
        ] {
            match sasl_config(mechanism, &[]).inter_broker_security() {
                Err(crate::config::ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{mechanism}"),
                other => panic!("{mechanism}: {other:?}"),
            }
        }
        assert!(Config::default().inter_broker_security().unwrap().sasl.is_none());
    }
}
