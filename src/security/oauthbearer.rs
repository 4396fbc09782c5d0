//! SASL/OAUTHBEARER (RFC 7628, KIP-255/KIP-768): the client's initial response parsed, its
//! JWT validated as Kafka's `OAuthBearerValidatorCallbackHandler` validates it: signed by a
//! key of the JWKS (`sasl.oauthbearer.jwks.endpoint.url`: a file, or an https URL fetched
//! again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` and at once, at most every
//! `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`, when a token names a key id it does
//! not hold — a key rotation at the identity provider), an asymmetric algorithm,
//! not expired (`exp` and `iat` required, `sasl.oauthbearer.clock.skew.seconds` of leeway,
//! as for `nbf`), the expected issuer and one of the expected audiences when configured, and a
//! subject (`sasl.oauthbearer.sub.claim.name`, default `sub`) that becomes the principal.
//!
//! Signatures and keys are checked by the `jsonwebtoken` crate (ring), never here.
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// The broker's OAUTHBEARER settings, as Kafka names them.
#[derive(Clone, Debug, Default)]
pub struct OAuthBearerSettings {
    /// sasl.oauthbearer.jwks.endpoint.url: `https://...`, `file:///path` or a path.
    pub jwks_endpoint_url: String,
    /// sasl.oauthbearer.jwks.endpoint.refresh.ms: how often an https JWKS is fetched again.
    pub jwks_refresh_ms: u64,
    /// sasl.oauthbearer.jwks.endpoint.retry.backoff.ms: the shortest gap between fetches
    /// (after a failure, or asked for by an unknown key id).
    pub jwks_retry_backoff_ms: u64,
    /// sasl.oauthbearer.expected.audience (any one of them must be in `aud`).
    pub expected_audience: Vec<String>,
    /// sasl.oauthbearer.expected.issuer.
    pub expected_issuer: Option<String>,
    /// sasl.oauthbearer.sub.claim.name.
    pub sub_claim_name: String,
    /// sasl.oauthbearer.clock.skew.seconds.
    pub clock_skew_seconds: u64,
}

/// Why a token was refused (logged; the client is told Kafka's `invalid_token` only).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    Malformed(String),
    NoKey,
    Invalid(String),
    NoSubject(String),
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Malformed(why) => write!(f, "malformed token: {why}"),
            TokenError::NoKey => write!(f, "no key of the JWKS matches the token's kid and algorithm"),
            TokenError::Invalid(why) => write!(f, "token refused: {why}"),
            TokenError::NoSubject(claim) => write!(f, "the token has no string claim {claim:?}"),
        }
    }
}

/// Kafka's answer to a client whose token was refused (the server's RFC 7628 error
/// challenge, and later the authentication failure's message).
pub const INVALID_TOKEN_RESPONSE: &str = r#"{"status":"invalid_token"}"#;

/// The asymmetric algorithms a token may be signed with (a JWKS publishes public keys;
/// an HMAC secret in it would let anyone who reads it sign tokens).
const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// A token that passed: whom it names, and until when (its `exp`, Unix seconds).
#[derive(Debug, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    pub expires_at_s: u64,
}

struct Key {
    kid: Option<String>,
    /// The algorithm the JWK names, if it names one.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// Where the JWKS comes from.
#[derive(Clone, Debug)]
enum Source {
    File(PathBuf),
    Https(String),
}

impl Source {
    fn parse(url: &str) -> Result<Source, String> {
        let url = url.trim();
        if url.is_empty() {
            return Err("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (an https URL or a JWKS file)".into());
        }
        match url.strip_prefix("file://") {
            Some(p) => Ok(Source::File(PathBuf::from(p))),
            None if url.starts_with("https://") => Ok(Source::Https(url.to_string())),
            // Kafka takes https and file endpoints only: keys over plain http could be swapped.
            None if url.starts_with("http://") => Err(format!("{url}: a JWKS is fetched over https only")),
            None => Ok(Source::File(PathBuf::from(url))),
        }
    }

    /// The JWKS text: read, or fetched (bounded in time; ureq bounds the body to 10 MB).
    fn fetch(&self) -> Result<String, String> {
        match self {
            Source::File(path) => std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display())),
            Source::Https(url) => {
                ureq::get(url).timeout(Duration::from_secs(10)).call().map_err(|e| format!("{url}: {e}"))?.into_string().map_err(|e| format!("{url}: {e}"))
            }
        }
    }
}

/// The thread that fetches an https JWKS again.
struct Refresher {
    thread: std::thread::Thread,
    /// A token named a key id the JWKS does not hold: fetch now (at most every backoff).
    wanted: AtomicBool,
}

pub struct OAuthBearerValidator {
    settings: OAuthBearerSettings,
    source: Source,
    /// Replaced whole by each successful fetch; read per authentication (not the data path).
    keys: RwLock<Arc<Vec<Key>>>,
    refresher: OnceLock<Refresher>,
}

impl fmt::Debug for OAuthBearerValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthBearerValidator").field("settings", &self.settings).field("keys", &self.keys().len()).finish()
    }
}

impl OAuthBearerValidator {
    /// Reads (or fetches) the JWKS the settings name; an error names what is wrong with it.
    pub fn load(settings: OAuthBearerSettings) -> Result<OAuthBearerValidator, String> {
        let source = Source::parse(&settings.jwks_endpoint_url)?;
        let text = source.fetch()?;
        let keys = parse_jwks(&text).map_err(|e| format!("{}: {e}", settings.jwks_endpoint_url.trim()))?;
        Ok(OAuthBearerValidator { settings, source, keys: RwLock::new(Arc::new(keys)), refresher: OnceLock::new() })
    }

    pub fn from_jwks(settings: OAuthBearerSettings, jwks: &str) -> Result<OAuthBearerValidator, String> {
        let source = Source::File(PathBuf::new());
        Ok(OAuthBearerValidator { settings, source, keys: RwLock::new(Arc::new(parse_jwks(jwks)?)), refresher: OnceLock::new() })
    }

    fn keys(&self) -> Arc<Vec<Key>> {
        // A poisoned lock still holds the last keys written whole.
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// For an https JWKS: starts the thread that fetches it again (every refresh interval,
    /// and when a token names an unknown key id). It stops when the validator is dropped.
    pub fn start_refreshing(self: &Arc<Self>) {
        if !matches!(self.source, Source::Https(_)) || self.refresher.get().is_some() {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        let refresh = Duration::from_millis(self.settings.jwks_refresh_ms.max(1000));
        let backoff = Duration::from_millis(self.settings.jwks_retry_backoff_ms.max(10));
        let spawned = std::thread::Builder::new().name("jwks-refresh".into()).spawn(move || {
            let mut last_fetch = Instant::now();
            loop {
                std::thread::park_timeout(refresh.saturating_sub(last_fetch.elapsed()));
                let Some(v) = weak.upgrade() else { return };
                let wanted = v.refresher.get().is_some_and(|r| r.wanted.swap(false, Ordering::Relaxed));
                if !wanted && last_fetch.elapsed() < refresh {
                    continue;
                }
                if last_fetch.elapsed() < backoff {
                    std::thread::sleep(backoff - last_fetch.elapsed());
                }
                last_fetch = Instant::now();
                match v.source.fetch().and_then(|text| parse_jwks(&text)) {
                    Ok(keys) => {
                        tracing::info!(url = v.settings.jwks_endpoint_url.trim(), keys = keys.len(), wanted, "OAUTHBEARER: JWKS refreshed");
                        *v.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
                    }
                    // The keys held stay; the next try comes after the backoff.
                    Err(e) => {
                        tracing::warn!(error = %e, "OAUTHBEARER: JWKS refresh failed; the keys held stay");
                        last_fetch = Instant::now() - refresh + backoff;
                    }
                }
            }
        });
        match spawned {
            Ok(handle) => {
                let _ = self.refresher.set(Refresher { thread: handle.thread().clone(), wanted: AtomicBool::new(false) });
            }
            Err(e) => tracing::warn!(error = %e, "OAUTHBEARER: cannot start the JWKS refresh thread; the JWKS is not refreshed"),
        }
    }

    /// Validates a token.
    pub fn validate(&self, token: &str) -> Result<ValidToken, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        if !ALLOWED.contains(&header.alg) {
            return Err(TokenError::Invalid(format!("algorithm {:?} is not allowed", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.settings.clock_skew_seconds;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        if !self.settings.expected_audience.is_empty() {
            validation.set_audience(&self.settings.expected_audience);
        } else {
            validation.validate_aud = false;
        }
        if let Some(issuer) = &self.settings.expected_issuer {
            validation.set_issuer(&[issuer]);
        }
        let keys = self.keys();
        let candidates: Vec<&Key> =
            keys.iter().filter(|k| header.kid.as_ref().is_none_or(|kid| k.kid.as_ref() == Some(kid)) && k.alg.is_none_or(|a| a == header.alg)).collect();
        if candidates.is_empty() {
            // An unknown key id: the provider may have rotated its keys; fetch them again.
            if let Some(r) = self.refresher.get() {
                r.wanted.store(true, Ordering::Relaxed);
                r.thread.unpark();
            }
        }
        let mut last = TokenError::NoKey;
        for k in candidates {
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(token, &k.key, &validation) {
                Ok(data) => {
                    // Kafka's validator requires the issued-at time too.
                    if !data.claims.get("iat").is_some_and(|v| v.is_number()) {
                        return Err(TokenError::Invalid("no iat claim".into()));
                    }
                    let claim = &self.settings.sub_claim_name;
                    let expires_at_s = data.claims.get("exp").and_then(|v| v.as_f64()).map_or(0, |e| e.max(0.0) as u64);
                    return match data.claims.get(claim).and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty()) {
                        Some(sub) => Ok(ValidToken { principal: sub.to_string(), expires_at_s }),
                        None => Err(TokenError::NoSubject(claim.clone())),
                    };
                }
                Err(e) => last = TokenError::Invalid(e.to_string()),
            }
        }
        Err(last)
    }
}

/// The usable keys of a JWKS document (at least one).
fn parse_jwks(jwks: &str) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_str(jwks).map_err(|e| format!("not a JWKS: {e}"))?;
    let keys: Vec<Key> = set.keys.iter().filter_map(key_of).collect();
    if keys.is_empty() {
        return Err("the JWKS holds no public key (RSA, EC or OKP) usable for signatures".into());
    }
    Ok(keys)
}

fn key_of(jwk: &Jwk) -> Option<Key> {
    use jsonwebtoken::jwk::{AlgorithmParameters, KeyAlgorithm, PublicKeyUse};
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return None;
    }
    if jwk.common.public_key_use.as_ref().is_some_and(|u| *u != PublicKeyUse::Signature) {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(a) => Some(match a {
            KeyAlgorithm::RS256 => Algorithm::RS256,
            KeyAlgorithm::RS384 => Algorithm::RS384,
            KeyAlgorithm::RS512 => Algorithm::RS512,
            KeyAlgorithm::PS256 => Algorithm::PS256,
            KeyAlgorithm::PS384 => Algorithm::PS384,
            KeyAlgorithm::PS512 => Algorithm::PS512,
            KeyAlgorithm::ES256 => Algorithm::ES256,
            KeyAlgorithm::ES384 => Algorithm::ES384,
            KeyAlgorithm::EdDSA => Algorithm::EdDSA,
            _ => return None,
        }),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key { kid: jwk.common.key_id.clone(), alg, key })
}

/// A client's initial response (RFC 7628 §3.1): `n,[a=authzid],` then `\x01`-separated
/// `key=value` pairs, one of them `auth=Bearer <token>`, ended by `\x01\x01`.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientInitialResponse {
    pub authorization_id: String,
    pub token: String,
    /// SASL extensions (KIP-342), other than `auth`.
    pub extensions: Vec<(String, String)>,
}

impl ClientInitialResponse {
    pub fn parse(bytes: &[u8]) -> Result<ClientInitialResponse, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "the initial response is not UTF-8".to_string())?;
        let (gs2, rest) = text.split_once('\x01').ok_or("no GS2 header")?;
        let authorization_id = match gs2.strip_prefix("n,").and_then(|s| s.strip_suffix(',')) {
            Some("") => String::new(),
            Some(a) => a.strip_prefix("a=").ok_or("a malformed authorization id")?.to_string(),
            None => return Err(format!("a GS2 header Kafka does not take: {gs2:?}")),
        };
        let pairs = rest.strip_suffix("\x01\x01").ok_or("the initial response does not end with two \\x01")?;
        let mut token = None;
        let mut extensions = Vec::new();
        for kv in pairs.split('\x01') {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("not key=value: {kv:?}"))?;
            if k == "auth" {
                let t = v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")).ok_or("auth is not a Bearer token")?;
                token = Some(t.trim().to_string());
            } else {
                extensions.push((k.to_string(), v.to_string()));
            }
        }
        let token = token.filter(|t| !t.is_empty()).ok_or("no auth=Bearer token")?;
        Ok(ClientInitialResponse { authorization_id, token, extensions })
    }
}

/// The set of audience names as given (a comma-separated Kafka list).
pub fn audience_list(value: &str) -> Vec<String> {
    let set: HashSet<&str> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let mut v: Vec<String> = set.into_iter().map(String::from).collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_responses_as_clients_send_them() {
        let r = ClientInitialResponse::parse(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").unwrap();
        assert_eq!(r, ClientInitialResponse { authorization_id: String::new(), token: "abc.def.ghi".into(), extensions: vec![] });
        let r = ClientInitialResponse::parse(b"n,a=alice,\x01traceId=7\x01auth=Bearer t\x01\x01").unwrap();
        assert_eq!(r.authorization_id, "alice");
        assert_eq!(r.extensions, vec![("traceId".to_string(), "7".to_string())]);
        for bad in [
            &b""[..],
            b"n,,",
            b"y,,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01auth=Basic t\x01\x01",
            b"n,,\x01x=1\x01\x01",
            b"n,,\x01\xff\x01\x01",
        ] {
            assert!(ClientInitialResponse::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_jwks_without_public_keys_is_refused() {
        let s = OAuthBearerSettings { sub_claim_name: "sub".into(), ..Default::default() };
        assert!(OAuthBearerValidator::from_jwks(s.clone(), r#"{"keys":[]}"#).is_err());
        assert!(OAuthBearerValidator::from_jwks(s.clone(), r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).is_err(), "a shared secret is no public key");
        assert!(OAuthBearerValidator::from_jwks(s, "not json").is_err());
        assert!(OAuthBearerValidator::load(OAuthBearerSettings::default()).is_err());
    }

    #[test]
    fn unsigned_and_garbage_tokens_are_refused() {
        // An Ed25519 public key (RFC 8037's example).
        let jwks = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        let v = OAuthBearerValidator::from_jwks(OAuthBearerSettings { sub_claim_name: "sub".into(), ..Default::default() }, jwks).unwrap();
        // {"alg":"none"}.{"sub":"mallory","exp":9999999999}.
        let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtYWxsb3J5IiwiZXhwIjo5OTk5OTk5OTk5fQ.";
        assert!(v.validate(unsigned).is_err());
        assert!(matches!(v.validate("garbage"), Err(TokenError::Malformed(_))));
        // {"alg":"HS256","kid":"k1"}: a symmetric algorithm is never allowed.
        let hs = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJtYWxsb3J5IiwiZXhwIjo5OTk5OTk5OTk5fQ.c2ln";
        assert!(matches!(v.validate(hs), Err(TokenError::Invalid(_))));
    }
}
