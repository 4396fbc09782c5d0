//! SASL authentication of a connection on a SASL_PLAINTEXT or SASL_SSL listener, before
//! any other request is served (Kafka's `SaslServerAuthenticator`).
//!
//! The connection's reader runs it frame by frame until the client is authenticated:
//! ApiVersions is answered, then SaslHandshake picks an enabled mechanism and
//! SaslAuthenticate carries the mechanism's tokens (or, after a v0 handshake, the tokens
//! come as bare length-prefixed frames, as Kafka's oldest clients send them). Anything else
//! closes the connection, as Kafka does; so does a failed authentication, after its error
//! is sent. Mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER.
//!
//! Sessions and re-authentication (KIP-368): with `connections.max.reauth.ms`, or a
//! credential that expires (an OAUTHBEARER token), a session lasts that long
//! (`session_lifetime_ms` in the SaslAuthenticate response). The client re-authenticates
//! on the same connection before then (SaslHandshake again, the same mechanism, the same
//! principal); a request that arrives after the session expired closes the connection.
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{RequestMeta, Response};
use super::handlers;
use crate::cluster::image::MetadataImage;
use crate::cluster::security_image::SecurityImage;
use crate::protocol::api_versions::unsupported_version_response_v0;
use crate::protocol::{decode_request, ErrorCode, RequestError};
use crate::security::delegation_token;
use crate::security::oauthbearer::{ClientInitialResponse, OAuthBearerValidator, INVALID_TOKEN_RESPONSE};
use crate::security::sasl_plain::{PlainError, PlainUsers};
use crate::security::scram::{ScramError, ScramMechanism, ScramServer};

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a client may send
/// before it is authenticated (so a stranger cannot make the broker hold megabytes).
pub const SASL_SERVER_MAX_RECEIVE_SIZE: usize = 524_288;

/// What a broker's SASL listeners accept: `sasl.enabled.mechanisms`, the PLAIN users
/// and the OAUTHBEARER validator (SCRAM credentials come from the metadata image).
#[derive(Debug)]
pub struct SaslSettings {
    pub mechanisms: Vec<String>,
    pub plain: Option<PlainUsers>,
    pub oauthbearer: Option<Arc<OAuthBearerValidator>>,
    /// connections.max.reauth.ms (0: sessions do not end, unless their credential does).
    pub connections_max_reauth_ms: u64,
    /// delegation.token.secret.key, when delegation tokens are enabled: SCRAM with
    /// `tokenauth=true` then authenticates a token (its id, its base64 HMAC).
    pub delegation_token_secret: Option<Arc<[u8]>>,
}

/// What the reader does after a frame.
pub enum Step {
    /// Send this response and read on.
    Respond(Response),
    /// Send this response, then close the connection.
    RespondAndClose(Response),
    /// Close the connection without a response.
    Close(&'static str),
}

/// The mechanism a handshake chose, with its exchange state.
enum Mechanism {
    Plain,
    Scram(ScramServer),
    /// `invalid_token_sent`: the token was refused and the client told so (RFC 7628);
    /// its answer, a lone \x01, ends the exchange with the failure.
    OAuthBearer {
        invalid_token_sent: bool,
    },
}

enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// A mechanism was chosen: waiting for its tokens, in SaslAuthenticate requests or,
    /// after a v0 handshake, as bare frames.
    Authenticate {
        mechanism: Mechanism,
        bare_tokens: bool,
    },
    /// A re-authentication asked for another mechanism: its handshake was answered (as
    /// Kafka answers it), the next frame closes the connection.
    MechanismChanged,
    Done,
}

/// What one token of the exchange led to.
enum Exchanged {
    /// The mechanism's answer; the client sends another token.
    Continue(Vec<u8>),
    /// Authenticated; the mechanism's last answer (empty for PLAIN) and the session's
    /// lifetime in ms (0: it does not end).
    Done(Vec<u8>, i64),
}

/// What the connection was authenticated as, while it re-authenticates.
struct Session {
    mechanism: String,
    principal: String,
}

pub struct Authenticator {
    settings: Arc<SaslSettings>,
    state: State,
    /// `User:<name>` once authenticated.
    principal: Option<String>,
    /// The mechanism the handshake chose.
    mechanism: Option<String>,
    /// The previous session, while the client re-authenticates.
    reauthenticating: Option<Session>,
    /// When the session ends (None: never).
    session_expires: Option<Instant>,
    /// Authenticated with a delegation token (such a session may not manage tokens).
    token_authenticated: bool,
    /// This node's (cluster id, node id), for ApiVersions v5 before authentication.
    node: Option<(String, i32)>,
    /// `unstable.feature.versions.enable`, for ApiVersions' supported features.
    unstable_features: bool,
}

impl Authenticator {
    pub fn new(settings: Arc<SaslSettings>) -> Authenticator {
        Authenticator {
            settings,
            state: State::Handshake,
            principal: None,
            mechanism: None,
            reauthenticating: None,
            session_expires: None,
            token_authenticated: false,
            node: None,
            unstable_features: false,
        }
    }

    /// The node ApiVersions v5 clients may name (KIP-1242); unset, the check is skipped.
    pub fn with_node(mut self, cluster_id: &str, node_id: i32) -> Authenticator {
        self.node = (!cluster_id.is_empty()).then(|| (cluster_id.to_string(), node_id));
        self
    }

    /// Whether ApiVersions lists the feature levels still being built.
    pub fn with_unstable_features(mut self, unstable: bool) -> Authenticator {
        self.unstable_features = unstable;
        self
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    pub fn token_authenticated(&self) -> bool {
        self.token_authenticated
    }

    /// Whether the authenticated session is over (a request now closes the connection).
    pub fn session_expired(&self, now: Instant) -> bool {
        self.is_done() && self.session_expires.is_some_and(|t| now >= t)
    }

    /// Whether `frame` starts a re-authentication (a SaslHandshake after authentication).
    pub fn starts_reauthentication(&self, frame: &[u8]) -> bool {
        self.is_done() && frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == ApiKey::SaslHandshake as i16
    }

    /// Goes back to the handshake, remembering what the client must prove again.
    pub fn begin_reauthentication(&mut self) {
        debug_assert!(self.is_done());
        if let (Some(mechanism), Some(principal)) = (self.mechanism.take(), self.principal.clone()) {
            self.reauthenticating = Some(Session { mechanism, principal });
        }
        self.state = State::Handshake;
    }

    /// Handles one frame of a connection that is not authenticated yet; SCRAM credentials
    /// are looked up in `image` (the shard's current metadata image), which ApiVersions
    /// also answers from (its feature levels).
    pub fn on_frame(&mut self, frame: Bytes, origin: super::dispatch::Origin, image: &MetadataImage) -> Step {
        let security = &image.security;
        debug_assert!(!self.is_done(), "frames after authentication go to dispatch");
        if matches!(self.state, State::MechanismChanged) {
            return Step::Close("SASL re-authentication with another mechanism");
        }
        if matches!(self.state, State::Authenticate { bare_tokens: true, .. }) {
            // After a v0 handshake the answer is a bare length-prefixed token too.
            return match self.exchange(&frame, security) {
                Ok(Exchanged::Continue(answer) | Exchanged::Done(answer, _)) => Step::Respond(bare_frame(answer)),
                Err(_) => Step::Close("SASL authentication failed"),
            };
        }
        let req = match decode_request(frame) {
            Ok(req) => req,
            Err(RequestError::UnsupportedVersion { api_key: ApiKey::ApiVersions, correlation_id, .. }) => {
                return Step::Respond(Response::Frames(smallvec::smallvec![unsupported_version_response_v0(correlation_id).freeze().into()]))
            }
            Err(_) => return Step::Close("malformed request during SASL authentication"),
        };
        let meta = RequestMeta::of(&req, origin);
        match (req.body, &self.state) {
            (RequestKind::ApiVersions(r), _) => {
                let node = self.node.as_ref().map(|(c, id)| (c.as_str(), *id));
                Step::Respond(handlers::api_versions::handle(meta, &r, node, image, self.unstable_features))
            }
            (RequestKind::SaslHandshake(r), State::Handshake) => {
                let enabled = &self.settings.mechanisms;
                let response = SaslHandshakeResponse::default().with_mechanisms(enabled.iter().map(|m| StrBytes::from_string(m.clone())).collect());
                if let Some(previous) = self.reauthenticating.as_ref().filter(|p| p.mechanism != r.mechanism.as_str()) {
                    // KIP-368: a session is re-authenticated with the mechanism it began with.
                    tracing::info!(previous = %previous.mechanism, requested = %r.mechanism.as_str(), "SASL re-authentication with another mechanism refused");
                    self.state = State::MechanismChanged;
                    return Step::Respond(meta.respond(&response));
                }
                let chosen = enabled.iter().find(|m| m.as_str() == r.mechanism.as_str()).and_then(|m| match ScramMechanism::from_name(m) {
                    Some(scram) => Some(Mechanism::Scram(ScramServer::new(scram))),
                    None if m == "OAUTHBEARER" && self.settings.oauthbearer.is_some() => Some(Mechanism::OAuthBearer { invalid_token_sent: false }),
                    None => (m == "PLAIN").then_some(Mechanism::Plain),
                });
                match chosen {
                    Some(mechanism) => {
                        self.mechanism = Some(r.mechanism.to_string());
                        self.state = State::Authenticate { mechanism, bare_tokens: meta.version == 0 };
                        Step::Respond(meta.respond(&response))
                    }
                    None => Step::RespondAndClose(meta.respond(&response.with_error_code(ErrorCode::UNSUPPORTED_SASL_MECHANISM.code()))),
                }
            }
            (RequestKind::SaslAuthenticate(r), State::Authenticate { bare_tokens: false, .. }) => match self.exchange(&r.auth_bytes, security) {
                Ok(Exchanged::Continue(answer)) => Step::Respond(meta.respond(&SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(answer)))),
                // session_lifetime_ms (v1+): re-authenticate within it (0: never needed).
                Ok(Exchanged::Done(answer, lifetime_ms)) => {
                    Step::Respond(meta.respond(&SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(answer)).with_session_lifetime_ms(lifetime_ms)))
                }
                Err(message) => Step::RespondAndClose(
                    meta.respond(
                        &SaslAuthenticateResponse::default()
                            .with_error_code(ErrorCode::SASL_AUTHENTICATION_FAILED.code())
                            .with_error_message(Some(StrBytes::from_string(message))),
                    ),
                ),
            },
            (RequestKind::SaslAuthenticate(_), _) => Step::RespondAndClose(
                meta.respond(
                    &SaslAuthenticateResponse::default()
                        .with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())
                        .with_error_message(Some(StrBytes::from_static_str("Unexpected SaslAuthenticate request before a SaslHandshake"))),
                ),
            ),
            (RequestKind::SaslHandshake(_), _) => {
                Step::RespondAndClose(meta.respond(&SaslHandshakeResponse::default().with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())))
            }
            _ => Step::Close("a request other than ApiVersions, SaslHandshake or SaslAuthenticate before authentication"),
        }
    }

    /// One token of the chosen mechanism's exchange; Err(the message the client is told).
    fn exchange(&mut self, token: &[u8], security: &SecurityImage) -> Result<Exchanged, String> {
        let State::Authenticate { mechanism, .. } = &mut self.state else {
            return Err("no SASL mechanism chosen".into());
        };
        // When the credential itself expires (Unix ms), if it does.
        let mut credential_expires_ms: Option<u64> = None;
        let (user, answer) = match mechanism {
            Mechanism::Plain => {
                let users = self.settings.plain.as_ref().ok_or(PlainError::AuthFailed).map_err(|e| e.to_string())?;
                (users.authenticate(token).map_err(|e| e.to_string())?, Vec::new())
            }
            Mechanism::Scram(server) => {
                let m = server.mechanism();
                let secret = self.settings.delegation_token_secret.as_deref();
                let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                // A live token, when delegation tokens are enabled (else: no credential, the
                // same failure as a wrong password).
                let live_token = |id: &str| secret.and_then(|s| security.delegation_tokens.get(id).filter(|t| !t.is_expired(now_ms)).map(|t| (s, t)));
                let step = if server.awaits_client_first() {
                    let lookup = |user: &str, token: bool| match token {
                        true => live_token(user).map(|(s, t)| delegation_token::scram_credential(s, &t.token_id, m)),
                        false => security.scram_credential(user, m).cloned(),
                    };
                    server.client_first(token, lookup).map(|answer| (None, answer))
                } else {
                    server.client_final(token).map(|(user, answer)| (Some(user), answer))
                };
                match step {
                    Ok((None, answer)) => return Ok(Exchanged::Continue(answer)),
                    Ok((Some(token_id), answer)) if server.token_auth() => {
                        // Kafka: the session is the token's owner's, until the token expires.
                        let Some((_, t)) = live_token(&token_id) else { return Err(ScramError::message(m)) };
                        credential_expires_ms = Some(u64::try_from(t.expiry_ms).unwrap_or(0));
                        self.token_authenticated = true;
                        (t.owner.strip_prefix("User:").unwrap_or(&t.owner).to_string(), answer)
                    }
                    Ok((Some(user), answer)) => (user, answer),
                    Err(e) => {
                        // The reason stays in the log; the client reads Kafka's one message.
                        tracing::info!(mechanism = m.name(), reason = %e, "SASL/SCRAM authentication failed");
                        return Err(ScramError::message(m));
                    }
                }
            }
            Mechanism::OAuthBearer { invalid_token_sent } => {
                if *invalid_token_sent && token == [0x01] {
                    // The client acknowledged the error challenge (Kafka's message is the challenge).
                    return Err(INVALID_TOKEN_RESPONSE.into());
                }
                let validator = self.settings.oauthbearer.as_ref().ok_or("OAUTHBEARER is not enabled")?;
                let initial = ClientInitialResponse::parse(token).map_err(|why| {
                    tracing::info!(reason = %why, "SASL/OAUTHBEARER: a malformed initial response");
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER".to_string()
                })?;
                let user = match validator.validate(&initial.token) {
                    Ok(valid) => {
                        credential_expires_ms = Some(valid.expires_at_s.saturating_mul(1000));
                        valid.principal
                    }
                    Err(e) => {
                        // The reason stays in the log; the client is told `invalid_token` and
                        // answers \x01 (RFC 7628 section 3.2.3).
                        tracing::info!(reason = %e, "SASL/OAUTHBEARER: token refused");
                        *invalid_token_sent = true;
                        return Ok(Exchanged::Continue(INVALID_TOKEN_RESPONSE.as_bytes().to_vec()));
                    }
                };
                if !initial.authorization_id.is_empty() && initial.authorization_id != user {
                    return Err(format!(
                        "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({user})",
                        initial.authorization_id
                    ));
                }
                // Extensions (KIP-342) are ignored, as Kafka's validator ignores those it does not check.
                (user, Vec::new())
            }
        };
        let principal = format!("User:{user}");
        if let Some(previous) = self.reauthenticating.take() {
            if previous.principal != principal {
                let name = |p: &str| p.replacen(':', ".", 1);
                return Err(format!("Cannot change principals during re-authentication from {}: {}", name(&previous.principal), name(&principal)));
            }
        }
        let lifetime_ms = self.session_lifetime_ms(credential_expires_ms);
        self.session_expires = lifetime_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        self.principal = Some(principal);
        self.state = State::Done;
        Ok(Exchanged::Done(answer, lifetime_ms.map_or(0, |ms| i64::try_from(ms).unwrap_or(i64::MAX))))
    }

    /// How long the session lasts (Kafka's SaslServerAuthenticator): the shorter of
    /// connections.max.reauth.ms and the credential's remaining life; None when neither
    /// applies.
    fn session_lifetime_ms(&self, credential_expires_ms: Option<u64>) -> Option<u64> {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let credential = credential_expires_ms.map(|t| t.saturating_sub(now_ms));
        let max = Some(self.settings.connections_max_reauth_ms).filter(|ms| *ms > 0);
        match (credential, max) {
            (Some(c), Some(m)) => Some(c.min(m)),
            (c, m) => c.or(m),
        }
    }
}

/// A bare SASL token frame (after a v0 handshake): the length, then the token.
fn bare_frame(token: Vec<u8>) -> Response {
    let mut b = bytes::BytesMut::with_capacity(4 + token.len());
    b.extend_from_slice(&(token.len() as u32).to_be_bytes());
    b.extend_from_slice(&token);
    Response::Frames(smallvec::smallvec![b.freeze().into()])
}

/// Answers of a broker listener without SASL to the SASL APIs (Kafka's KafkaApis: the
/// listener does not authenticate, so the state is illegal).
pub fn not_on_this_listener(meta: RequestMeta, api: ApiKey) -> Response {
    if api == ApiKey::SaslHandshake {
        meta.respond(&SaslHandshakeResponse::default().with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code()))
    } else {
        meta.respond(&SaslAuthenticateResponse::default().with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code()).with_error_message(Some(
            StrBytes::from_static_str("SaslAuthenticate request received after successful authentication or on a listener without SASL"),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ResponseBuf;
    use crate::server::dispatch::Origin;
    use bytes::{BufMut, BytesMut};

    /// A frame as a v0 handshake's bare token arrives.
    fn bare(bytes: &[u8]) -> Bytes {
        Bytes::copy_from_slice(bytes)
    }

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";"#;

    fn authenticator() -> Authenticator {
        let plain = PlainUsers::from_jaas(JAAS).unwrap();
        Authenticator::new(Arc::new(SaslSettings {
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-256".into()],
            plain: Some(plain),
            oauthbearer: None,
            connections_max_reauth_ms: 0,
            delegation_token_secret: None,
        }))
    }

    fn origin() -> Origin {
        Origin { peer: None, listener: 0, principal: crate::security::principal::Principal::ANONYMOUS, token_authenticated: false }
    }

    /// A request frame (no length prefix): header v2 for flexible versions.
    fn request(api: i16, version: i16, flexible: bool, body: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api);
        b.put_i16(version);
        b.put_i32(7);
        b.put_i16(-1); // null client id
        if flexible {
            b.put_u8(0);
        }
        b.put_slice(body);
        b.freeze()
    }

    fn handshake(version: i16, mechanism: &str) -> Bytes {
        let mut body = BytesMut::new();
        body.put_i16(mechanism.len() as i16);
        body.put_slice(mechanism.as_bytes());
        request(17, version, false, &body)
    }

    fn authenticate(token: &[u8]) -> Bytes {
        // SaslAuthenticate v2 (flexible): compact bytes, then the body's tag buffer.
        let mut body = BytesMut::new();
        body.put_u8(token.len() as u8 + 1);
        body.put_slice(token);
        body.put_u8(0);
        request(36, 2, true, &body)
    }

    /// The error code at the start of a response body (after length and header).
    fn error_code(step: &Step, flexible_header: bool) -> i16 {
        let r = match step {
            Step::Respond(r) | Step::RespondAndClose(r) => r,
            Step::Close(why) => panic!("closed: {why}"),
        };
        let Response::Frames(frames) = r else { panic!("no frame") };
        let ResponseBuf::Memory(bytes) = &frames[0] else { panic!("a file piece") };
        let at = 8 + usize::from(flexible_header);
        i16::from_be_bytes([bytes[at], bytes[at + 1]])
    }

    #[test]
    fn plain_over_handshake_v1_then_authenticate() {
        let mut a = authenticator();
        let step = a.on_frame(handshake(1, "PLAIN"), origin(), &MetadataImage::default());
        assert!(matches!(step, Step::Respond(_)) && error_code(&step, false) == 0);
        let step = a.on_frame(authenticate(b"\0alice\0secret"), origin(), &MetadataImage::default());
        assert!(matches!(step, Step::Respond(_)) && error_code(&step, true) == 0);
        assert!(a.is_done());
        assert_eq!(a.principal(), Some("User:alice"));
    }

    #[test]
    fn a_bad_password_is_answered_then_closed() {
        let mut a = authenticator();
        a.on_frame(handshake(1, "PLAIN"), origin(), &MetadataImage::default());
        let step = a.on_frame(authenticate(b"\0alice\0nope"), origin(), &MetadataImage::default());
        assert!(matches!(step, Step::RespondAndClose(_)));
        assert_eq!(error_code(&step, true), ErrorCode::SASL_AUTHENTICATION_FAILED.code());
        assert!(!a.is_done() && a.principal().is_none());
    }

    #[test]
    fn unknown_mechanisms_out_of_order_steps_and_other_apis_are_refused() {
        let mut a = authenticator();
        let step = a.on_frame(handshake(1, "SCRAM-SHA-512"), origin(), &MetadataImage::default());
        // (SCRAM-SHA-256 is enabled, SCRAM-SHA-512 is not.)
        assert!(matches!(step, Step::RespondAndClose(_)));
        assert_eq!(error_code(&step, false), ErrorCode::UNSUPPORTED_SASL_MECHANISM.code());
        let mut a = authenticator();
        let step = a.on_frame(authenticate(b"\0alice\0secret"), origin(), &MetadataImage::default());
        assert_eq!(error_code(&step, true), ErrorCode::ILLEGAL_SASL_STATE.code());
        let mut a = authenticator();
        // Metadata v0 with no topics before authentication: closed without an answer.
        assert!(matches!(a.on_frame(request(3, 0, false, &[0, 0, 0, 0]), origin(), &MetadataImage::default()), Step::Close(_)));
        assert!(matches!(authenticator().on_frame(bare(b"\x01\x02"), origin(), &MetadataImage::default()), Step::Close(_)));
    }

    #[test]
    fn handshake_v0_takes_bare_tokens() {
        let mut a = authenticator();
        a.on_frame(handshake(0, "PLAIN"), origin(), &MetadataImage::default());
        let Step::Respond(Response::Frames(f)) = a.on_frame(bare(b"\0alice\0secret"), origin(), &MetadataImage::default()) else { panic!("not answered") };
        assert!(matches!(&f[0], ResponseBuf::Memory(b) if b[..] == [0, 0, 0, 0]), "an empty bare token");
        assert!(a.is_done());
        let mut a = authenticator();
        a.on_frame(handshake(0, "PLAIN"), origin(), &MetadataImage::default());
        assert!(matches!(a.on_frame(bare(b"\0alice\0wrong"), origin(), &MetadataImage::default()), Step::Close(_)));
    }

    /// The token a SaslAuthenticate response carries (v2: compact bytes after the header,
    /// error code, error message and session lifetime).
    fn auth_bytes(step: &Step) -> Vec<u8> {
        let Step::Respond(Response::Frames(frames)) = step else { panic!("not answered") };
        let ResponseBuf::Memory(b) = &frames[0] else { panic!("a file piece") };
        // length 4, correlation id 4, header tags 1, error code 2, null message 1.
        let at = 4 + 4 + 1 + 2 + 1;
        let len = b[at] as usize - 1;
        b[at + 1..at + 1 + len].to_vec()
    }

    #[test]
    fn scram_authenticates_against_the_image_and_refuses_unknown_users_alike() {
        use crate::security::scram::{ScramCredential, ScramMechanism};
        let m = ScramMechanism::Sha256;
        let salt = b"salt-of-sixteen!".to_vec();
        let salted = pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(b"pw", &salt, 4096);
        let mut image = MetadataImage::default();
        let security = &mut image.security;
        security.set_scram_credential("alice", m, ScramCredential::from_salted_password(m, salt.clone(), &salted, 4096));
        let client_key = hmac_sha256(&salted, b"Client Key");
        let stored_key: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(client_key).into();
        for (user, expect_ok) in [("alice", true), ("mallory", false)] {
            let mut a = authenticator();
            a.on_frame(handshake(1, "SCRAM-SHA-256"), origin(), &image);
            let first_bare = format!("n={user},r=nonce1");
            let step = a.on_frame(authenticate(format!("n,,{first_bare}").as_bytes()), origin(), &image);
            let server_first = String::from_utf8(auth_bytes(&step)).unwrap();
            let nonce = server_first.split(',').next().unwrap().strip_prefix("r=").unwrap();
            let without_proof = format!("c=biws,r={nonce}");
            let signature = hmac_sha256(&stored_key, format!("{first_bare},{server_first},{without_proof}").as_bytes());
            let proof: Vec<u8> = client_key.iter().zip(signature).map(|(k, s)| k ^ s).collect();
            use base64::Engine;
            let last = format!("{without_proof},p={}", base64::engine::general_purpose::STANDARD.encode(proof));
            let step = a.on_frame(authenticate(last.as_bytes()), origin(), &image);
            if expect_ok {
                assert!(String::from_utf8(auth_bytes(&step)).unwrap().starts_with("v="));
                assert_eq!(a.principal(), Some("User:alice"));
            } else {
                assert!(matches!(step, Step::RespondAndClose(_)));
                assert_eq!(error_code(&step, true), ErrorCode::SASL_AUTHENTICATION_FAILED.code());
                assert!(!a.is_done());
            }
        }
    }

    #[test]
    fn sessions_end_and_reauthentication_keeps_principal_and_mechanism() {
        let plain = PlainUsers::from_jaas(r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a" user_bob="b";"#).unwrap();
        let settings = Arc::new(SaslSettings {
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-256".into()],
            plain: Some(plain),
            oauthbearer: None,
            connections_max_reauth_ms: 1000,
            delegation_token_secret: None,
        });
        let image = MetadataImage::default();
        let mut a = Authenticator::new(settings.clone());
        a.on_frame(handshake(1, "PLAIN"), origin(), &image);
        a.on_frame(authenticate(b"\0alice\0a"), origin(), &image);
        assert!(a.is_done());
        let now = Instant::now();
        assert!(!a.session_expired(now));
        assert!(a.session_expired(now + Duration::from_millis(1500)), "connections.max.reauth.ms ends the session");
        // Re-authentication as the same principal starts a new session.
        assert!(a.starts_reauthentication(&handshake(1, "PLAIN")));
        assert!(!a.starts_reauthentication(&request(3, 0, false, &[0, 0, 0, 0])), "a Metadata request is no handshake");
        a.begin_reauthentication();
        a.on_frame(handshake(1, "PLAIN"), origin(), &image);
        assert!(matches!(a.on_frame(authenticate(b"\0alice\0a"), origin(), &image), Step::Respond(_)));
        assert!(a.is_done() && a.principal() == Some("User:alice"));
        // As another principal: refused, and the connection closed.
        a.begin_reauthentication();
        a.on_frame(handshake(1, "PLAIN"), origin(), &image);
        let step = a.on_frame(authenticate(b"\0bob\0b"), origin(), &image);
        assert!(matches!(step, Step::RespondAndClose(_)));
        assert_eq!(error_code(&step, true), ErrorCode::SASL_AUTHENTICATION_FAILED.code());
        // With another mechanism: the handshake is answered, the next frame closes.
        let mut a = Authenticator::new(settings);
        a.on_frame(handshake(1, "PLAIN"), origin(), &image);
        a.on_frame(authenticate(b"\0alice\0a"), origin(), &image);
        a.begin_reauthentication();
        assert!(matches!(a.on_frame(handshake(1, "SCRAM-SHA-256"), origin(), &image), Step::Respond(_)));
        assert!(matches!(a.on_frame(authenticate(b"n,,n=alice,r=x"), origin(), &image), Step::Close(_)));
    }

    fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
        use hmac::Mac;
        let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        m.update(data);
        m.finalize().into_bytes().into()
    }
}
