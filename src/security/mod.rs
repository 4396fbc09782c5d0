//! The broker's perimeter: listeners and their security protocols, TLS.
//!
//! - `listeners.rs`  Kafka's named listeners, resolved into sockets and advertised endpoints
//! - `tls_config.rs` a listener's rustls server configuration from Kafka's `ssl.*` settings
//! - `tls_stream.rs` TLS in user space over a glommio connection (handshake, read and write halves)
//! - `ktls.rs`       whether the kernel can take over TLS records (kTLS)
//! - `jaas.rs`       one line of Kafka's sasl.jaas.config: login module and options
//! - `sasl_plain.rs` SASL/PLAIN: the users of Kafka's PlainLoginModule JAAS options, token check
//! - `acl.rs`        ACL bindings, filters and the authorization decision (StandardAuthorizer)
//! - `principal.rs`  a session's principal (`User:alice`), interned
//! - `ssl_principal.rs` the principal of a client certificate (ssl.principal.mapping.rules)
//! - `scram.rs`      SASL/SCRAM-SHA-256/512: stored credentials and the server's exchange
//! - `scram_client.rs` the client's half of a SCRAM exchange (this broker to a peer)
//! - `oauthbearer.rs` SASL/OAUTHBEARER: the client's initial response, JWT validation against a JWKS
//! - `delegation_token.rs` delegation tokens: lifetimes, the HMAC, the SCRAM credential of a token
//! - `client_quotas.rs` client quotas by user/client id/IP, and which one applies (Kafka precedence)
//! - `quota_rate.rs` the sampled rate a quota is checked against, and the throttle time
//! - `connection_limits.rs` max.connections and max.connections.per.ip, counted across shards
//! - `peer_security.rs` how this node authenticates to a peer's listener (inter-broker, controller)
//!
//! Names only `runtime` and `config` below it; `server` builds on it.
pub mod acl;
pub mod client_quotas;
pub mod connection_limits;
pub mod delegation_token;
pub mod jaas;
pub mod ktls;
pub mod listeners;
pub mod oauthbearer;
pub mod peer_security;
pub mod principal;
pub mod quota_rate;
pub mod sasl_plain;
pub mod scram;
pub mod scram_client;
pub mod ssl_principal;
pub mod tls_config;
pub mod tls_stream;
