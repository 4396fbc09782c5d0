//! How this node proves itself to a peer's listener, and checks the peer: a follower to its
//! leader's inter-broker listener, a node to the controllers' listener. Kafka configures
//! both ends of a listener with the same keys (`listener.name.<l>.ssl.*`, the listener's
//! JAAS `username`/`password`), so this is built from the listener's own settings.
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use super::listeners::SecurityProtocol;

/// The client side of one listener's security protocol.
#[derive(Clone, Debug)]
pub struct PeerSecurity {
    /// The listener's name: which of a peer's registered endpoints to connect to.
    pub listener: String,
    pub protocol: SecurityProtocol,
    /// Set when the protocol uses TLS.
    pub tls: Option<Arc<ClientConfig>>,
    /// Set when the protocol uses SASL.
    pub sasl: Option<SaslCredentials>,
    /// The TLS handshake (and SASL exchange) must finish within this.
    pub handshake_timeout: Duration,
}

/// The mechanism and credentials this node authenticates with (Kafka's
/// `sasl.mechanism.inter.broker.protocol` and the listener's JAAS `username`/`password`).
#[derive(Clone)]
pub struct SaslCredentials {
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    // Never the password, not even in a debug log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials").field("mechanism", &self.mechanism).field("username", &self.username).finish_non_exhaustive()
    }
}

impl PeerSecurity {
    /// Plaintext towards `listener`: nothing to prove, nothing to check.
    pub fn plaintext(listener: &str) -> PeerSecurity {
        PeerSecurity {
            listener: listener.to_string(),
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }

    /// The name the peer's certificate must carry, from the host it is reached at.
    pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
        ServerName::try_from(host.to_string()).map_err(|e| format!("{host} cannot be checked against a certificate: {e}"))
    }
}

/// A listener both ends of which prove themselves by certificate (the controller
/// listener over SSL with `ssl.client.auth=required`): the server and client TLS
/// configurations and how a certificate names its principal.
#[derive(Clone, Debug)]
pub struct MutualTls {
    pub listener: String,
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<ClientConfig>,
    pub principals: Arc<super::ssl_principal::SslPrincipalMapper>,
    pub handshake_timeout: Duration,
}
