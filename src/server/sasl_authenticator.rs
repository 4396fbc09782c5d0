//! SASL authentication of a connection on a SASL_PLAINTEXT or SASL_SSL listener, before
//! any other request is served (Kafka's `SaslServerAuthenticator`).
//!
//! The connection's reader runs it frame by frame until the client is authenticated:
//! ApiVersions is answered, then SaslHandshake picks an enabled mechanism and
//! SaslAuthenticate carries the mechanism's tokens (or, after a v0 handshake, the tokens
//! come as bare length-prefixed frames, as Kafka's oldest clients send them). Anything else
//! closes the connection, as Kafka does; so does a failed authentication, after its error
//! is sent. Mechanisms: PLAIN.
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{RequestMeta, Response};
use super::handlers;
use crate::protocol::api_versions::unsupported_version_response_v0;
use crate::protocol::{decode_request, ErrorCode, RequestError};
use crate::security::sasl_plain::{PlainError, PlainUsers};

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a client may send
/// before it is authenticated (so a stranger cannot make the broker hold megabytes).
pub const SASL_SERVER_MAX_RECEIVE_SIZE: usize = 524_288;

/// What a broker's SASL listeners accept: `sasl.enabled.mechanisms` and their users.
#[derive(Debug)]
pub struct SaslSettings {
    pub mechanisms: Vec<String>,
    pub plain: Option<PlainUsers>,
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

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// A mechanism was chosen: waiting for its token, in a SaslAuthenticate request or,
    /// after a v0 handshake, as a bare frame.
    Authenticate { bare_tokens: bool },
    Done,
}

pub struct Authenticator {
    settings: Arc<SaslSettings>,
    state: State,
    /// `User:<name>` once authenticated.
    principal: Option<String>,
}

impl Authenticator {
    pub fn new(settings: Arc<SaslSettings>) -> Authenticator {
        Authenticator { settings, state: State::Handshake, principal: None }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Handles one frame of a connection that is not authenticated yet.
    pub fn on_frame(&mut self, frame: Bytes, origin: super::dispatch::Origin) -> Step {
        debug_assert!(!self.is_done(), "frames after authentication go to dispatch");
        if self.state == (State::Authenticate { bare_tokens: true }) {
            return match self.check_plain(&frame) {
                // The bare answer: a length-prefixed token (PLAIN's is empty).
                Ok(()) => Step::Respond(Response::Frames(smallvec::smallvec![Bytes::from_static(&[0, 0, 0, 0]).into()])),
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
            (RequestKind::ApiVersions(_), _) => Step::Respond(handlers::api_versions::handle(meta)),
            (RequestKind::SaslHandshake(r), State::Handshake) => {
                let enabled = &self.settings.mechanisms;
                let response = SaslHandshakeResponse::default().with_mechanisms(enabled.iter().map(|m| StrBytes::from_string(m.clone())).collect());
                if enabled.iter().any(|m| m.as_str() == r.mechanism.as_str()) {
                    self.state = State::Authenticate { bare_tokens: meta.version == 0 };
                    Step::Respond(meta.respond(&response))
                } else {
                    Step::RespondAndClose(meta.respond(&response.with_error_code(ErrorCode::UNSUPPORTED_SASL_MECHANISM.code())))
                }
            }
            (RequestKind::SaslAuthenticate(r), State::Authenticate { bare_tokens: false }) => match self.check_plain(&r.auth_bytes) {
                // session_lifetime_ms 0: no re-authentication asked (connections.max.reauth.ms unset).
                Ok(()) => Step::Respond(meta.respond(&SaslAuthenticateResponse::default())),
                Err(e) => Step::RespondAndClose(meta.respond(
                    &SaslAuthenticateResponse::default()
                        .with_error_code(ErrorCode::SASL_AUTHENTICATION_FAILED.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                )),
            },
            (RequestKind::SaslAuthenticate(_), _) => Step::RespondAndClose(meta.respond(
                &SaslAuthenticateResponse::default()
                    .with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())
                    .with_error_message(Some(StrBytes::from_static_str("Unexpected SaslAuthenticate request before a SaslHandshake"))),
            )),
            (RequestKind::SaslHandshake(_), _) => Step::RespondAndClose(
                meta.respond(&SaslHandshakeResponse::default().with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())),
            ),
            _ => Step::Close("a request other than ApiVersions, SaslHandshake or SaslAuthenticate before authentication"),
        }
    }

    fn check_plain(&mut self, token: &[u8]) -> Result<(), PlainError> {
        // PLAIN is the only mechanism served, so the handshake chose it.
        let users = self.settings.plain.as_ref().ok_or(PlainError::AuthFailed)?;
        let user = users.authenticate(token)?;
        self.principal = Some(format!("User:{user}"));
        self.state = State::Done;
        Ok(())
    }
}

/// Answers of a broker listener without SASL to the SASL APIs (Kafka's KafkaApis: the
/// listener does not authenticate, so the state is illegal).
pub fn not_on_this_listener(meta: RequestMeta, api: ApiKey) -> Response {
    if api == ApiKey::SaslHandshake {
        meta.respond(&SaslHandshakeResponse::default().with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code()))
    } else {
        meta.respond(
            &SaslAuthenticateResponse::default()
                .with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())
                .with_error_message(Some(StrBytes::from_static_str("SaslAuthenticate request received after successful authentication or on a listener without SASL"))),
        )
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
        Authenticator::new(Arc::new(SaslSettings { mechanisms: vec!["PLAIN".into()], plain: Some(plain) }))
    }

    fn origin() -> Origin {
        Origin { peer: None, listener: 0 }
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
        let step = a.on_frame(handshake(1, "PLAIN"), origin());
        assert!(matches!(step, Step::Respond(_)) && error_code(&step, false) == 0);
        let step = a.on_frame(authenticate(b"\0alice\0secret"), origin());
        assert!(matches!(step, Step::Respond(_)) && error_code(&step, true) == 0);
        assert!(a.is_done());
        assert_eq!(a.principal(), Some("User:alice"));
    }

    #[test]
    fn a_bad_password_is_answered_then_closed() {
        let mut a = authenticator();
        a.on_frame(handshake(1, "PLAIN"), origin());
        let step = a.on_frame(authenticate(b"\0alice\0nope"), origin());
        assert!(matches!(step, Step::RespondAndClose(_)));
        assert_eq!(error_code(&step, true), ErrorCode::SASL_AUTHENTICATION_FAILED.code());
        assert!(!a.is_done() && a.principal().is_none());
    }

    #[test]
    fn unknown_mechanisms_out_of_order_steps_and_other_apis_are_refused() {
        let mut a = authenticator();
        let step = a.on_frame(handshake(1, "SCRAM-SHA-512"), origin());
        assert!(matches!(step, Step::RespondAndClose(_)));
        assert_eq!(error_code(&step, false), ErrorCode::UNSUPPORTED_SASL_MECHANISM.code());
        let mut a = authenticator();
        let step = a.on_frame(authenticate(b"\0alice\0secret"), origin());
        assert_eq!(error_code(&step, true), ErrorCode::ILLEGAL_SASL_STATE.code());
        let mut a = authenticator();
        // Metadata v0 with no topics before authentication: closed without an answer.
        assert!(matches!(a.on_frame(request(3, 0, false, &[0, 0, 0, 0]), origin()), Step::Close(_)));
        assert!(matches!(authenticator().on_frame(bare(b"\x01\x02"), origin()), Step::Close(_)));
    }

    #[test]
    fn handshake_v0_takes_bare_tokens() {
        let mut a = authenticator();
        a.on_frame(handshake(0, "PLAIN"), origin());
        let Step::Respond(Response::Frames(f)) = a.on_frame(bare(b"\0alice\0secret"), origin()) else { panic!("not answered") };
        assert!(matches!(&f[0], ResponseBuf::Memory(b) if b[..] == [0, 0, 0, 0]), "an empty bare token");
        assert!(a.is_done());
        let mut a = authenticator();
        a.on_frame(handshake(0, "PLAIN"), origin());
        assert!(matches!(a.on_frame(bare(b"\0alice\0wrong"), origin()), Step::Close(_)));
    }
}
