//! SASL/OAUTHBEARER (RFC 7628, KIP-255/KIP-768): the client's initial response parsed, its
//! JWT validated as Kafka's `OAuthBearerValidatorCallbackHandler` validates it: signed by a
//! key of the JWKS (`sasl.oauthbearer.jwks.endpoint.url`, a file), an asymmetric algorithm,
//! not expired (`exp` and `iat` required, `sasl.oauthbearer.clock.skew.seconds` of leeway,
//! as for `nbf`), the expected issuer and one of the expected audiences when configured, and a
//! subject (`sasl.oauthbearer.sub.claim.name`, default `sub`) that becomes the principal.
//!
//! Signatures and keys are checked by the `jsonwebtoken` crate (ring), never here.
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// The broker's OAUTHBEARER settings, as Kafka names them.
#[derive(Clone, Debug, Default)]
pub struct OAuthBearerSettings {
    /// sasl.oauthbearer.jwks.endpoint.url: `file:///path` or a path.
    pub jwks_endpoint_url: String,
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

pub struct OAuthBearerValidator {
    settings: OAuthBearerSettings,
    keys: Vec<Key>,
}

impl fmt::Debug for OAuthBearerValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthBearerValidator").field("settings", &self.settings).field("keys", &self.keys.len()).finish()
    }
}

impl OAuthBearerValidator {
    /// Reads the JWKS the settings name; an error names what is wrong with it.
    pub fn load(settings: OAuthBearerSettings) -> Result<OAuthBearerValidator, String> {
        let url = settings.jwks_endpoint_url.trim();
        if url.is_empty() {
            return Err("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (a JWKS file)".into());
        }
        let path = match url.strip_prefix("file://") {
            Some(p) => PathBuf::from(p),
            None if url.starts_with("http://") || url.starts_with("https://") => {
                return Err(format!("{url}: only file JWKS endpoints are served (fetch the JWKS into a file)"))
            }
            None => PathBuf::from(url),
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let validator = Self::from_jwks(settings, &text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(validator)
    }

    pub fn from_jwks(settings: OAuthBearerSettings, jwks: &str) -> Result<OAuthBearerValidator, String> {
        let set: JwkSet = serde_json::from_str(jwks).map_err(|e| format!("not a JWKS: {e}"))?;
        let keys: Vec<Key> = set.keys.iter().filter_map(key_of).collect();
        if keys.is_empty() {
            return Err("the JWKS holds no public key (RSA, EC or OKP) usable for signatures".into());
        }
        Ok(OAuthBearerValidator { settings, keys })
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
        let candidates = self.keys.iter().filter(|k| {
            header.kid.as_ref().is_none_or(|kid| k.kid.as_ref() == Some(kid)) && k.alg.is_none_or(|a| a == header.alg)
        });
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
        for bad in [&b""[..], b"n,,", b"y,,\x01auth=Bearer t\x01\x01", b"n,,\x01auth=Bearer t\x01", b"n,,\x01auth=Basic t\x01\x01", b"n,,\x01x=1\x01\x01", b"n,,\x01\xff\x01\x01"] {
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
