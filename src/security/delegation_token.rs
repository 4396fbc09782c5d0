//! Kafka's delegation tokens (KIP-48): a token stands for its owner, so a framework (Spark,
//! Flink) can hand short-lived credentials to its workers. A token is what the metadata
//! log keeps (Kafka's DelegationTokenRecord: id, owner, requester, renewers, issue, expiry
//! and maximum times) — never its HMAC, which every broker derives from the shared
//! `delegation.token.secret.key` as Kafka does (HmacSHA512 of the token id). A client
//! authenticates with SCRAM (`tokenauth=true`), the token id as user name and the base64
//! HMAC as password; the session's principal is the owner.
//!
//! The lifetime rules are Kafka 4.4's (DelegationTokenControlManager), as pure functions
//! of the token, the request and the time, so the broker answers what the log will hold.
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha512;

use super::scram::{ScramCredential, ScramMechanism, MIN_ITERATIONS};

/// One token, as the metadata log keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationToken {
    pub token_id: String,
    /// `User:<name>`: whom the token stands for.
    pub owner: String,
    /// Who created it (the owner unless created on its behalf, v3).
    pub requester: String,
    /// Principals that may renew and expire it besides the owner.
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    pub expiry_ms: i64,
    pub max_ms: i64,
}

/// The delegation-token settings (Kafka's `delegation.token.*`).
#[derive(Clone, Copy, Debug)]
pub struct TokenLifetimes {
    /// delegation.token.max.lifetime.ms: no token lives longer.
    pub max_lifetime_ms: i64,
    /// delegation.token.expiry.time.ms: a token's life before it must be renewed.
    pub expiry_time_ms: i64,
}

/// Why a renewal or expiry is refused (Kafka's codes are the handler's business).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    Expired,
    OwnerMismatch,
}

impl DelegationToken {
    /// A new token for `owner`, created by `requester` at `now_ms` (Kafka: the maximum
    /// lifetime is the request's when positive and below the broker's; the first expiry
    /// is one expiry time away, at most the maximum).
    pub fn create(
        token_id: String,
        owner: String,
        requester: String,
        renewers: Vec<String>,
        requested_max_lifetime_ms: i64,
        now_ms: i64,
        l: TokenLifetimes,
    ) -> DelegationToken {
        let lifetime = if requested_max_lifetime_ms > 0 { requested_max_lifetime_ms.min(l.max_lifetime_ms) } else { l.max_lifetime_ms };
        let max_ms = now_ms.saturating_add(lifetime);
        DelegationToken { token_id, owner, requester, renewers, issue_ms: now_ms, expiry_ms: max_ms.min(now_ms.saturating_add(l.expiry_time_ms)), max_ms }
    }

    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.max_ms < now_ms || self.expiry_ms < now_ms
    }

    /// The owner and the renewers may renew or expire it.
    pub fn may_renew(&self, principal: &str) -> bool {
        self.owner == principal || self.renewers.iter().any(|r| r == principal)
    }

    fn check(&self, principal: &str, now_ms: i64) -> Result<(), TokenRefusal> {
        // Kafka's order: an expired token is that, whoever asks.
        if self.is_expired(now_ms) {
            return Err(TokenRefusal::Expired);
        }
        if !self.may_renew(principal) {
            return Err(TokenRefusal::OwnerMismatch);
        }
        Ok(())
    }

    /// RenewDelegationToken: the new expiry (the broker's expiry time, or the request's
    /// period when positive and shorter; never past the maximum).
    pub fn renewed(&self, principal: &str, renew_period_ms: i64, now_ms: i64, l: TokenLifetimes) -> Result<DelegationToken, TokenRefusal> {
        self.check(principal, now_ms)?;
        let period = if renew_period_ms > 0 { renew_period_ms.min(l.expiry_time_ms) } else { l.expiry_time_ms };
        Ok(DelegationToken { expiry_ms: self.max_ms.min(now_ms.saturating_add(period)), ..self.clone() })
    }

    /// ExpireDelegationToken: None = removed now (a negative period); else the token with
    /// its expiry moved to `now + period` (at most the maximum).
    pub fn expired(&self, principal: &str, expiry_period_ms: i64, now_ms: i64) -> Result<Option<DelegationToken>, TokenRefusal> {
        self.check(principal, now_ms)?;
        if expiry_period_ms < 0 {
            return Ok(None);
        }
        Ok(Some(DelegationToken { expiry_ms: self.max_ms.min(now_ms.saturating_add(expiry_period_ms)), ..self.clone() }))
    }
}

/// The token's HMAC: HmacSHA512 keyed with the secret, of the token id (Kafka's).
pub fn hmac(secret: &[u8], token_id: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha512>::new_from_slice(secret).expect("HMAC accepts any key length");
    m.update(token_id.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// The SCRAM credential a token authenticates with: its base64 HMAC as the password, at
/// Kafka's minimum iterations; the salt derived from the secret and the id, so every
/// broker (and every shard) answers the same without storing it.
pub fn scram_credential(secret: &[u8], token_id: &str, mechanism: ScramMechanism) -> ScramCredential {
    let password = BASE64.encode(hmac(secret, token_id));
    let salt = hmac(secret, &format!("scram-salt:{token_id}"))[..16].to_vec();
    let salted = mechanism.salted_password(&password, &salt, MIN_ITERATIONS as u32);
    ScramCredential::from_salted_password(mechanism, salt, &salted, MIN_ITERATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: TokenLifetimes = TokenLifetimes { max_lifetime_ms: 7_000, expiry_time_ms: 1_000 };

    fn token() -> DelegationToken {
        DelegationToken::create("t1".into(), "User:alice".into(), "User:alice".into(), vec!["User:bob".into()], -1, 10_000, L)
    }

    #[test]
    fn creation_takes_the_shorter_lifetime_and_the_first_expiry() {
        let t = token();
        assert_eq!((t.issue_ms, t.expiry_ms, t.max_ms), (10_000, 11_000, 17_000));
        let short = DelegationToken::create("t2".into(), "User:a".into(), "User:a".into(), vec![], 500, 10_000, L);
        assert_eq!((short.expiry_ms, short.max_ms), (10_500, 10_500));
        let long = DelegationToken::create("t3".into(), "User:a".into(), "User:a".into(), vec![], 99_000, 10_000, L);
        assert_eq!(long.max_ms, 17_000);
    }

    #[test]
    fn owners_and_renewers_renew_and_expire_others_are_refused() {
        let t = token();
        assert_eq!(t.renewed("User:bob", -1, 10_500, L).unwrap().expiry_ms, 11_500);
        assert_eq!(t.renewed("User:alice", 200, 10_500, L).unwrap().expiry_ms, 10_700);
        assert_eq!(t.renewed("User:mallory", -1, 10_500, L), Err(TokenRefusal::OwnerMismatch));
        assert_eq!(t.renewed("User:alice", -1, 11_001, L), Err(TokenRefusal::Expired));
        // Renewal never passes the maximum.
        let late = DelegationToken { expiry_ms: 16_900, ..t.clone() };
        assert_eq!(late.renewed("User:alice", -1, 16_800, L).unwrap().expiry_ms, 17_000);
        assert_eq!(t.expired("User:alice", -1, 10_500), Ok(None));
        assert_eq!(t.expired("User:bob", 100, 10_500).unwrap().unwrap().expiry_ms, 10_600);
        assert_eq!(t.expired("User:mallory", -1, 10_500), Err(TokenRefusal::OwnerMismatch));
    }

    #[test]
    fn the_hmac_is_kafkas_and_the_credential_authenticates_it() {
        // HmacSHA512 is deterministic: the same on every broker with the same secret.
        assert_eq!(hmac(b"secret", "t1"), hmac(b"secret", "t1"));
        assert_ne!(hmac(b"secret", "t1"), hmac(b"other", "t1"));
        assert_eq!(hmac(b"secret", "t1").len(), 64);
        let m = ScramMechanism::Sha512;
        let (mut client, first) = crate::security::scram_client::ScramClient::start(m, "t1", &BASE64.encode(hmac(b"secret", "t1")));
        let mut server = crate::security::scram::ScramServer::new(m);
        let server_first = server.client_first(&first, |_, _| Some(scram_credential(b"secret", "t1", m))).unwrap();
        let (_, server_final) = server.client_final(&client.server_first(&server_first).unwrap()).unwrap();
        client.server_final(&server_final).unwrap();
    }
}
