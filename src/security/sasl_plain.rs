//! SASL/PLAIN (RFC 4616) on the broker side: the users of Kafka's PlainLoginModule JAAS
//! configuration (`user_<name>="<password>"` options), and the check of a client's token.
//!
//! The check never tells a wrong password from an unknown user: the same error, and the
//! same constant-time comparison (against a stand-in password when the user is missing).
use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

/// The JAAS login module whose options name PLAIN users.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// A token longer than this is refused before it is looked at (names and passwords are short).
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The PLAIN users a broker accepts.
#[derive(Clone, Default)]
pub struct PlainUsers {
    passwords: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for PlainUsers {
    // Passwords never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainUsers").field("users", &self.passwords.keys().collect::<Vec<_>>()).finish()
    }
}

/// Why a PLAIN exchange failed. The client is told `AuthFailed` only as Kafka words it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("Authentication failed: Invalid username or password")]
    AuthFailed,
    #[error("Invalid SASL/PLAIN response: {0}")]
    Malformed(&'static str),
    #[error("Authentication failed: SASL/PLAIN authorization id {0:?} differs from the user name")]
    ImpersonationRefused(String),
}

impl PlainUsers {
    /// Parses Kafka's JAAS configuration for PlainLoginModule, e.g.
    /// `org.apache.kafka.common.security.plain.PlainLoginModule required
    ///  username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a";`
    /// (`username`/`password` are the broker's own credentials as a client; the users are
    /// the `user_` options).
    pub fn from_jaas(jaas: &str) -> Result<PlainUsers, String> {
        let line = super::jaas::parse(jaas, &[PLAIN_LOGIN_MODULE])?;
        let mut users = BTreeMap::new();
        for (key, value) in line.options {
            if let Some(user) = key.strip_prefix("user_") {
                if user.is_empty() {
                    return Err("user_ needs a user name".into());
                }
                users.insert(user.to_string(), value.into_bytes());
            }
        }
        if users.is_empty() {
            return Err("names no user (user_<name>=\"<password>\")".into());
        }
        Ok(PlainUsers { passwords: users })
    }

    pub fn len(&self) -> usize {
        self.passwords.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passwords.is_empty()
    }

    /// Checks a client's PLAIN token (`authzid NUL authcid NUL passwd`): the user name on
    /// success (the principal is `User:<name>`).
    pub fn authenticate(&self, token: &[u8]) -> Result<String, PlainError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(PlainError::Malformed("too long"));
        }
        let mut parts = token.split(|&b| b == 0);
        let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(PlainError::Malformed("expected authzid, user name and password separated by NUL"));
        };
        let user = std::str::from_utf8(user).map_err(|_| PlainError::Malformed("the user name is not UTF-8"))?;
        if user.is_empty() {
            return Err(PlainError::Malformed("empty user name"));
        }
        if password.is_empty() {
            return Err(PlainError::Malformed("empty password"));
        }
        // The same work whether the user exists or not.
        const STAND_IN: &[u8] = b"\x00no-such-user\x00";
        let (expected, known) = match self.passwords.get(user) {
            Some(p) => (p.as_slice(), true),
            None => (STAND_IN, false),
        };
        let matches: bool = expected.ct_eq(password).into();
        if !(matches && known) {
            return Err(PlainError::AuthFailed);
        }
        // As Kafka: an authorization id, if any, must be the user itself.
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err(PlainError::ImpersonationRefused(String::from_utf8_lossy(authzid).into_owned()));
        }
        Ok(user.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="al\"ice" ;"#;

    #[test]
    fn users_come_from_the_user_options() {
        let users = PlainUsers::from_jaas(JAAS).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users.authenticate(b"\0alice\0al\"ice"), Ok("alice".into()));
        assert_eq!(users.authenticate(b"admin\0admin\0admin-secret"), Ok("admin".into()));
        assert!(!format!("{users:?}").contains("secret"), "no password in Debug");
    }

    #[test]
    fn a_wrong_password_and_an_unknown_user_fail_alike() {
        let users = PlainUsers::from_jaas(JAAS).unwrap();
        assert_eq!(users.authenticate(b"\0alice\0wrong"), Err(PlainError::AuthFailed));
        assert_eq!(users.authenticate(b"\0mallory\0al\"ice"), Err(PlainError::AuthFailed));
        assert_eq!(PlainError::AuthFailed.to_string(), "Authentication failed: Invalid username or password");
        assert_eq!(users.authenticate(b"bob\0alice\0al\"ice"), Err(PlainError::ImpersonationRefused("bob".into())));
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let users = PlainUsers::from_jaas(JAAS).unwrap();
        for token in [&b""[..], b"alice", b"\0alice", b"\0\0pw", b"\0alice\0", b"\0a\0b\0c", b"\0\xff\xfe\0pw"] {
            assert!(matches!(users.authenticate(token), Err(PlainError::Malformed(_))), "{token:?}");
        }
        let long = vec![b'a'; MAX_TOKEN_BYTES + 1];
        assert!(matches!(users.authenticate(&long), Err(PlainError::Malformed(_))));
    }

    #[test]
    fn bad_jaas_is_refused_with_a_reason() {
        for bad in [
            "",
            "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"b\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule sometimes user_a=\"b\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=b;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_=\"b\";",
        ] {
            assert!(PlainUsers::from_jaas(bad).is_err(), "{bad}");
        }
    }
}
