//! A listener's TLS server configuration (rustls, ring provider) from Kafka's `ssl.*`
//! settings: key store and trust store as PEM or PKCS12 files, `ssl.key.password`,
//! `ssl.client.auth`, `ssl.enabled.protocols`, `ssl.cipher.suites`; and the client
//! configuration a node uses towards its peers' listeners (inter-broker, controller) from
//! the same settings plus `ssl.endpoint.identification.algorithm`.
//!
//! JKS (Kafka's default store type) cannot be read here: the error says how to convert.
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::pki_types::{ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<ClientAuth> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// Kafka's `ssl.*` settings of one listener, as configured.
#[derive(Clone, Debug, Default)]
pub struct TlsSettings {
    pub keystore_type: String,
    pub keystore_location: String,
    pub keystore_password: String,
    pub key_password: String,
    pub truststore_type: String,
    pub truststore_location: String,
    pub truststore_password: String,
    pub client_auth: String,
    pub enabled_protocols: String,
    pub cipher_suites: String,
    /// `https` (Kafka's default): a client checks the server's certificate names the host
    /// it connected to; empty: only that a trusted CA signed it.
    pub endpoint_identification_algorithm: String,
}

/// Why a TLS configuration cannot be built: the Kafka key and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct TlsConfigError {
    pub key: &'static str,
    pub message: String,
}

fn err(key: &'static str, message: impl Into<String>) -> TlsConfigError {
    TlsConfigError { key, message: message.into() }
}

/// The per-listener SSL keys that may change at run time (Kafka's reconfigurable
/// SslFactory keys that shardlog reads): `listener.name.<listener>.<key>`.
pub const DYNAMIC_KEYS: &[&str] = &["ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password"];

/// `(listener, key)` of a dynamic `listener.name.<listener>.<key>` config name.
pub fn dynamic_listener_key(name: &str) -> Option<(&str, &str)> {
    let (listener, key) = name.strip_prefix("listener.name.")?.split_once('.')?;
    DYNAMIC_KEYS.contains(&key).then_some((listener, key))
}

/// Builds the rustls server configuration of a listener.
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, TlsConfigError> {
    let provider = Arc::new(provider_with_suites(&s.cipher_suites)?);
    let versions = protocol_versions(&s.enabled_protocols)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| err("ssl_enabled_protocols", format!("no cipher suite of ssl_cipher_suites works with these versions: {e}")))?;
    let auth = ClientAuth::parse(&s.client_auth).ok_or_else(|| err("ssl_client_auth", "must be none, requested or required"))?;
    let builder = if auth == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let roots = trust_store(s)?;
        if roots.is_empty() {
            return Err(err("ssl_truststore_location", "ssl_client_auth needs a trust store with the CA certificates clients are signed by"));
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
        builder.with_client_cert_verifier(verifier.build().map_err(|e| err("ssl_truststore_location", e.to_string()))?)
    };
    let (chain, key) = key_store(s)?;
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| err("ssl_keystore_location", format!("the key and the certificate do not make a usable pair: {e}")))?;
    // No session tickets: a ticket is a post-handshake message, and a connection moved to
    // kernel TLS must see none (resumption saves little for long-lived Kafka connections).
    config.send_tls13_tickets = 0;
    // The secrets go to the kernel when it can do TLS (`ktls.rs`).
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

/// Builds the rustls client configuration a node uses towards a peer's listener: the
/// peer's certificate checked against the trust store (and its name, unless
/// `ssl.endpoint.identification.algorithm` is empty); the key store, when set, is this
/// node's certificate for mutual TLS.
pub fn client_config(s: &TlsSettings) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let provider = Arc::new(provider_with_suites(&s.cipher_suites)?);
    let versions = protocol_versions(&s.enabled_protocols)?;
    let roots = trust_store(s)?;
    if roots.is_empty() {
        return Err(err("ssl_truststore_location", "holds no CA certificate to check the peer's certificate against"));
    }
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().map_err(|e| err("ssl_truststore_location", e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| err("ssl_enabled_protocols", format!("no cipher suite of ssl_cipher_suites works with these versions: {e}")))?;
    let builder = match s.endpoint_identification_algorithm.trim().to_ascii_lowercase().as_str() {
        "https" => builder.with_webpki_verifier(verifier),
        "" => builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyNameVerifier(verifier))),
        other => return Err(err("ssl_endpoint_identification_algorithm", format!("{other} is not served (https, or empty for none)"))),
    };
    let config = if s.keystore_location.is_empty() {
        builder.with_no_client_auth()
    } else {
        let (chain, key) = key_store(s)?;
        builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| err("ssl_keystore_location", format!("the key and the certificate do not make a usable pair: {e}")))?
    };
    Ok(Arc::new(config))
}

/// Kafka's empty `ssl.endpoint.identification.algorithm`: the chain must lead to a trusted
/// CA and be valid now, but may name any host. Everything else is webpki's check.
#[derive(Debug)]
struct AnyNameVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The subject (RFC 2253) and subject alternative names of the key store's certificate:
/// what Kafka keeps unchanged when a key store is replaced at run time (a renewal, not a
/// different identity; its `ssl.allow.dn.changes` / `ssl.allow.san.changes` are not served).
pub fn keystore_identity(s: &TlsSettings) -> Result<(String, Vec<String>), TlsConfigError> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (chain, _) = key_store(s)?;
    let leaf = chain.first().ok_or_else(|| err("ssl_keystore_location", "holds no certificate"))?;
    let dn = super::ssl_principal::subject_rfc2253(leaf.as_ref()).map_err(|e| err("ssl_keystore_location", e))?;
    let (_, cert) = X509Certificate::from_der(leaf.as_ref()).map_err(|e| err("ssl_keystore_location", e.to_string()))?;
    let mut sans: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext.value.general_names.iter().map(|n| n.to_string()).collect(),
        _ => Vec::new(),
    };
    sans.sort();
    Ok((dn, sans))
}

/// The ring provider, keeping only the suites `ssl.cipher.suites` names (empty: all of
/// rustls's defaults). Names as Kafka's (IANA, as Java spells them), e.g.
/// `TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`.
fn provider_with_suites(cipher_suites: &str) -> Result<CryptoProvider, TlsConfigError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let wanted: Vec<&str> = cipher_suites.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if wanted.is_empty() {
        return Ok(provider);
    }
    for name in &wanted {
        if !provider.cipher_suites.iter().any(|s| suite_name(s) == *name) {
            let known: Vec<String> = provider.cipher_suites.iter().map(suite_name).collect();
            return Err(err("ssl_cipher_suites", format!("{name} is not a suite shardlog offers ({})", known.join(", "))));
        }
    }
    provider.cipher_suites.retain(|s| wanted.contains(&suite_name(s).as_str()));
    Ok(provider)
}

/// A suite's IANA name (rustls spells TLS 1.3 suites `TLS13_…`).
fn suite_name(s: &rustls::SupportedCipherSuite) -> String {
    let name = format!("{:?}", s.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

fn protocol_versions(enabled: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, TlsConfigError> {
    let mut out = Vec::new();
    for v in enabled.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        match v {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.1" | "TLSv1" | "SSLv3" => {
                return Err(err("ssl_enabled_protocols", format!("{v} is not offered (insecure; rustls speaks TLSv1.2 and TLSv1.3)")))
            }
            other => return Err(err("ssl_enabled_protocols", format!("{other} is not a TLS version (TLSv1.2, TLSv1.3)"))),
        }
    }
    if out.is_empty() {
        return Err(err("ssl_enabled_protocols", "names no version"));
    }
    Ok(out)
}

fn read(key: &'static str, location: &str) -> Result<Vec<u8>, TlsConfigError> {
    if location.is_empty() {
        return Err(err(key, "is not set"));
    }
    std::fs::read(Path::new(location)).map_err(|e| err(key, format!("cannot read {location}: {e}")))
}

/// `ssl.keystore.*`: the certificate chain and private key.
fn key_store(s: &TlsSettings) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsConfigError> {
    let bytes = read("ssl_keystore_location", &s.keystore_location)?;
    match s.keystore_type.trim().to_ascii_uppercase().as_str() {
        "PEM" => {
            let chain = pem_certificates(&bytes).map_err(|m| err("ssl_keystore_location", m))?;
            if chain.is_empty() {
                return Err(err("ssl_keystore_location", "holds no certificate (a PEM key store holds the key and its certificate chain)"));
            }
            Ok((chain, pem_private_key(&bytes, &s.key_password)?))
        }
        "PKCS12" => {
            // Kafka opens the store with ssl.keystore.password and the key with
            // ssl.key.password; PKCS12 files keep one password for both.
            let store = p12_keystore::KeyStore::from_pkcs12(&bytes, &s.keystore_password)
                .map_err(|e| err("ssl_keystore_location", format!("cannot open the PKCS12 key store (wrong ssl_keystore_password?): {e}")))?;
            let (_, entry) = store.private_key_chain().ok_or_else(|| err("ssl_keystore_location", "the PKCS12 key store holds no private key"))?;
            let chain = entry.chain().iter().map(|c| CertificateDer::from(c.as_der().to_vec())).collect();
            Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.key().to_vec()))))
        }
        other => Err(store_type_error("ssl_keystore_type", other)),
    }
}

/// `ssl.truststore.*`: the CA certificates client certificates are checked against.
fn trust_store(s: &TlsSettings) -> Result<RootCertStore, TlsConfigError> {
    let bytes = read("ssl_truststore_location", &s.truststore_location)?;
    let certs: Vec<CertificateDer<'static>> = match s.truststore_type.trim().to_ascii_uppercase().as_str() {
        "PEM" => pem_certificates(&bytes).map_err(|m| err("ssl_truststore_location", m))?,
        "PKCS12" => {
            let store = p12_keystore::KeyStore::from_pkcs12(&bytes, &s.truststore_password)
                .map_err(|e| err("ssl_truststore_location", format!("cannot open the PKCS12 trust store (wrong ssl_truststore_password?): {e}")))?;
            store
                .entries()
                .filter_map(|(_, e)| match e {
                    p12_keystore::KeyStoreEntry::Certificate(c) => Some(CertificateDer::from(c.as_der().to_vec())),
                    _ => None,
                })
                .collect()
        }
        other => return Err(store_type_error("ssl_truststore_type", other)),
    };
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| err("ssl_truststore_location", format!("a certificate cannot be a trust anchor: {e}")))?;
    }
    Ok(roots)
}

fn store_type_error(key: &'static str, kind: &str) -> TlsConfigError {
    if kind == "JKS" {
        err(
            key,
            "JKS (Kafka's default) cannot be read: use PKCS12 (`keytool -importkeystore -srckeystore x.jks -destkeystore x.p12 -deststoretype PKCS12`) or PEM",
        )
    } else {
        err(key, format!("{kind} is not a store type (PEM or PKCS12)"))
    }
}

fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| format!("bad PEM certificate: {e}"))
}

/// The PEM key store's private key: PKCS#8, PKCS#1 or SEC1, or encrypted PKCS#8 opened
/// with `ssl.key.password`, as Kafka's PEM key stores allow.
fn pem_private_key(pem: &[u8], key_password: &str) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    use pkcs8::der::Decode;
    let encrypted = pem_sections(pem, "ENCRYPTED PRIVATE KEY");
    if let Some(der) = encrypted.first() {
        if key_password.is_empty() {
            return Err(err("ssl_key_password", "the PEM private key is encrypted: set ssl_key_password"));
        }
        let info = pkcs8::EncryptedPrivateKeyInfo::from_der(der).map_err(|e| err("ssl_keystore_location", format!("bad encrypted private key: {e}")))?;
        let doc = info.decrypt(key_password).map_err(|_| err("ssl_key_password", "cannot decrypt the private key (wrong password?)"))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(doc.as_bytes().to_vec())));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| err("ssl_keystore_location", format!("holds no usable private key: {e}")))
}

/// The DER bodies of every PEM section labelled `label`.
fn pem_sections(pem: &[u8], label: &str) -> Vec<Vec<u8>> {
    pem::parse_many(pem).map(|all| all.into_iter().filter(|p| p.tag() == label).map(|p| p.into_contents()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod dynamic_key_tests {
    use super::*;

    #[test]
    fn only_the_key_store_keys_of_a_named_listener_are_dynamic() {
        assert_eq!(dynamic_listener_key("listener.name.ssl.ssl.keystore.location"), Some(("ssl", "ssl.keystore.location")));
        assert_eq!(dynamic_listener_key("listener.name.external.ssl.key.password"), Some(("external", "ssl.key.password")));
        assert_eq!(dynamic_listener_key("listener.name.ssl.ssl.truststore.location"), None);
        assert_eq!(dynamic_listener_key("ssl.keystore.location"), None);
    }
}
