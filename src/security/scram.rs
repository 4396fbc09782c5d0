//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker side: the
//! credentials Kafka stores (salt, StoredKey, ServerKey, iterations) and the server's half
//! of the exchange, as Kafka's ScramSaslServer speaks it (no channel binding).
//!
//! The hashes and MACs are RustCrypto's `sha2` and `hmac`; this file only frames the
//! messages. A user with no credential is answered with a stand-in salt derived from the
//! name and fails at the final step with the same error as a wrong password, so neither
//! the answer nor the step at which it fails tells whether the user exists.
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// A SCRAM client message longer than this is refused before it is parsed.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Kafka's bounds on a credential's iterations (`ScramMechanism.minIterations`, the
/// controller's MAX_ITERATIONS).
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// Kafka's wire type (AlterUserScramCredentials, DescribeUserScramCredentials):
    /// 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512, anything else UNKNOWN.
    pub fn from_type(t: i8) -> Option<ScramMechanism> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The SASL mechanism name (`sasl.enabled.mechanisms`, SaslHandshake).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub(super) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations).to_vec(),
            ScramMechanism::Sha512 => pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations).to_vec(),
        }
    }

    pub(super) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length, so `new_from_slice` cannot fail.
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }
}

/// What a broker stores for one user and mechanism (Kafka's UserScramCredentialRecord):
/// never the password, nor the salted password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    // Keys never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential").field("iterations", &self.iterations).finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The stored form of a salted password (`Hi(password, salt, iterations)`, which
    /// AlterUserScramCredentials carries): StoredKey = H(HMAC(salted, "Client Key")),
    /// ServerKey = HMAC(salted, "Server Key").
    pub fn from_salted_password(mechanism: ScramMechanism, salt: Vec<u8>, salted_password: &[u8], iterations: i32) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential { salt, stored_key: mechanism.hash(&client_key), server_key: mechanism.hmac(salted_password, b"Server Key"), iterations }
    }
}

/// Why an exchange failed. Clients are told only `message()`, one text for all of them.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("authorization id differs from the user name")]
    Impersonation,
    #[error("the client's nonce does not match the exchange")]
    NonceMismatch,
    #[error("invalid credentials")]
    InvalidProof,
    #[error("a SCRAM extension that is not served: {0}")]
    UnsupportedExtension(String),
}

impl ScramError {
    /// What the client reads (Kafka's words for any failed SCRAM exchange).
    pub fn message(mechanism: ScramMechanism) -> String {
        format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {}", mechanism.name())
    }
}

/// Where the exchange is: after the client's first message, the server's answer and the
/// credential to check the proof against.
enum Stage {
    First,
    Final { client_first_bare: String, server_first: String, nonce: String, credential: Option<ScramCredential>, user: String },
    Done,
}

/// The server's half of one SCRAM exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    stage: Stage,
    /// Key of the stand-in salts for unknown users: random per exchange would let a client
    /// tell unknown users (their salt changes) from real ones, so it is per process.
    decoy_key: &'static [u8; 32],
    /// The client asked for delegation-token authentication (`tokenauth=true`).
    token_auth: bool,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        static DECOY_KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
        ScramServer { mechanism, stage: Stage::First, decoy_key: DECOY_KEY.get_or_init(rand::random), token_auth: false }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The client authenticates with a delegation token (its user name is the token id).
    pub fn token_auth(&self) -> bool {
        self.token_auth
    }

    /// True until the client-first message has been taken.
    pub fn awaits_client_first(&self) -> bool {
        matches!(self.stage, Stage::First)
    }

    /// The client-first message (`n,[a=authzid],n=user,r=cnonce[,ext]`) in; the
    /// server-first message (`r=cnonce+snonce,s=salt,i=iterations`) out. `lookup` finds the
    /// credential for this mechanism of the user, or (second argument true: `tokenauth=true`)
    /// of the delegation token of that id.
    pub fn client_first(&mut self, message: &[u8], lookup: impl FnOnce(&str, bool) -> Option<ScramCredential>) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.stage, Stage::First) {
            return Err(ScramError::Malformed("a second client-first message"));
        }
        let text = utf8(message)?;
        // gs2 header: no channel binding ("n"), an optional authorization id.
        let rest = text.strip_prefix("n,").ok_or(ScramError::Malformed("channel binding is not supported (the gs2 header must be 'n')"))?;
        let (authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed("no gs2 header"))?;
        let mut fields = bare.split(',');
        let user = fields.next().and_then(|f| f.strip_prefix("n=")).ok_or(ScramError::Malformed("no user name"))?;
        let user = unescape_name(user)?;
        let client_nonce = fields.next().and_then(|f| f.strip_prefix("r=")).ok_or(ScramError::Malformed("no nonce"))?;
        if client_nonce.is_empty() || !client_nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',') {
            return Err(ScramError::Malformed("the nonce is not printable"));
        }
        for ext in fields {
            // Kafka's one extension: tokenauth=true (a delegation token).
            let (name, value) = ext.split_once('=').ok_or(ScramError::Malformed("an extension without a value"))?;
            if name != "tokenauth" {
                return Err(ScramError::UnsupportedExtension(name.to_string()));
            }
            self.token_auth = value.eq_ignore_ascii_case("true");
        }
        if !authzid.is_empty() && authzid.strip_prefix("a=").map(unescape_name).transpose()?.as_deref() != Some(user.as_str()) {
            return Err(ScramError::Impersonation);
        }
        let credential = lookup(&user, self.token_auth);
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => (self.decoy_salt(&user), MIN_ITERATIONS),
        };
        let server_nonce = BASE64.encode(rand::random::<[u8; 24]>());
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(&salt));
        let out = server_first.clone().into_bytes();
        self.stage = Stage::Final { client_first_bare: bare.to_string(), server_first, nonce, credential, user };
        Ok(out)
    }

    /// The client-final message (`c=biws,r=nonce,p=proof`) in; on success the
    /// authenticated user and the server-final message (`v=signature`).
    pub fn client_final(&mut self, message: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let Stage::Final { client_first_bare, server_first, nonce, credential, user } = std::mem::replace(&mut self.stage, Stage::Done) else {
            return Err(ScramError::Malformed("a client-final message out of order"));
        };
        let text = utf8(message)?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramError::Malformed("no proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields.next().and_then(|f| f.strip_prefix("c=")).ok_or(ScramError::Malformed("no channel binding"))?;
        // base64("n,,") or base64("n,a=<authzid>,"): the gs2 header of the first message.
        let header = BASE64.decode(binding).map_err(|_| ScramError::Malformed("channel binding is not base64"))?;
        if !header.starts_with(b"n,") || !header.ends_with(b",") {
            return Err(ScramError::Malformed("channel binding differs from the gs2 header"));
        }
        if fields.next().and_then(|f| f.strip_prefix("r=")) != Some(nonce.as_str()) {
            return Err(ScramError::NonceMismatch);
        }
        let proof = BASE64.decode(proof).map_err(|_| ScramError::Malformed("the proof is not base64"))?;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let credential = credential.ok_or(ScramError::InvalidProof)?;
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(ScramError::InvalidProof);
        }
        // ClientKey = proof XOR ClientSignature; the proof holds iff H(ClientKey) = StoredKey.
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return Err(ScramError::InvalidProof);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((user, format!("v={}", BASE64.encode(server_signature)).into_bytes()))
    }

    /// A salt for a user without a credential: the same for the same name, and unlike any
    /// real salt's pattern.
    fn decoy_salt(&self, user: &str) -> Vec<u8> {
        self.mechanism.hmac(self.decoy_key, user.as_bytes())[..16].to_vec()
    }
}

fn utf8(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(ScramError::Malformed("message too long"));
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))
}

/// RFC 5802 saslname: ',' and '=' travel as "=2C" and "=3D"; any other '=' is malformed.
fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("a bad escape in the user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("an empty user name"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn salted(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        m.salted_password(password, salt, iterations)
    }

    fn field<'a>(msg: &'a str, key: &str) -> &'a str {
        msg.split(',').find_map(|f| f.strip_prefix(key)).unwrap()
    }

    /// Runs a whole exchange for `user` with `password`; Ok(server-final) or the error.
    fn exchange(m: ScramMechanism, stored: Option<&ScramCredential>, user: &str, password: &str) -> Result<(String, Vec<u8>), ScramError> {
        let mut server = ScramServer::new(m);
        let first_bare = format!("n={user},r=clientnonce123");
        let server_first = server.client_first(format!("n,,{first_bare}").as_bytes(), |_, _| stored.cloned())?;
        let server_first = String::from_utf8(server_first).unwrap();
        assert!(field(&server_first, "r=").starts_with("clientnonce123"));
        let salt = BASE64.decode(field(&server_first, "s=")).unwrap();
        let iterations: u32 = field(&server_first, "i=").parse().unwrap();
        let salted = salted(m, password, &salt, iterations);
        let without_proof = format!("c=biws,r={}", field(&server_first, "r="));
        let auth = format!("{first_bare},{server_first},{without_proof}");
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&m.hash(&client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let (who, server_final) = server.client_final(format!("{without_proof},p={}", BASE64.encode(proof)).as_bytes())?;
        // The client checks the server too: the server knew ServerKey.
        let expected = m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes());
        assert_eq!(server_final, format!("v={}", BASE64.encode(expected)).into_bytes());
        Ok((who, server_final))
    }

    fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
        let salt = b"0123456789abcdef".to_vec();
        ScramCredential::from_salted_password(m, salt.clone(), &salted(m, password, &salt, 4096), 4096)
    }

    #[test]
    fn both_mechanisms_authenticate_the_right_password_only() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let c = credential(m, "alice-secret");
            assert_eq!(exchange(m, Some(&c), "alice", "alice-secret").unwrap().0, "alice");
            assert_eq!(exchange(m, Some(&c), "alice", "wrong").unwrap_err(), ScramError::InvalidProof);
            // An unknown user gets a salt and fails where a wrong password does.
            assert_eq!(exchange(m, None, "nobody", "x").unwrap_err(), ScramError::InvalidProof);
        }
    }

    /// RFC 7677's SCRAM-SHA-256 test vector: the server's answer to the client's proof.
    #[test]
    fn rfc7677_test_vector() {
        let m = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let c = ScramCredential::from_salted_password(m, salt.clone(), &salted(m, "pencil", &salt, 4096), 4096);
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let server_signature = m.hmac(&c.server_key, auth.as_bytes());
        assert_eq!(BASE64.encode(server_signature), "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        let client_key = m.hmac(&salted(m, "pencil", &salt, 4096), b"Client Key");
        let proof: Vec<u8> = client_key.iter().zip(m.hmac(&c.stored_key, auth.as_bytes())).map(|(a, b)| a ^ b).collect();
        assert_eq!(BASE64.encode(proof), "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    }

    #[test]
    fn unknown_users_get_a_stable_salt() {
        let salt = |user: &str| {
            let mut s = ScramServer::new(ScramMechanism::Sha512);
            let first = String::from_utf8(s.client_first(format!("n,,n={user},r=abc").as_bytes(), |_, _| None).unwrap()).unwrap();
            field(&first, "s=").to_string()
        };
        assert_eq!(salt("ghost"), salt("ghost"));
        assert_ne!(salt("ghost"), salt("phantom"));
    }

    #[test]
    fn malformed_and_out_of_order_messages_are_refused() {
        let c = credential(ScramMechanism::Sha256, "p");
        let first = |msg: &[u8]| ScramServer::new(ScramMechanism::Sha256).client_first(msg, |_, _| Some(c.clone())).map(|_| ());
        assert!(matches!(first(b"y,,n=alice,r=abc"), Err(ScramError::Malformed(_))), "channel binding");
        assert!(matches!(first(b"p=tls-unique,,n=alice,r=abc"), Err(ScramError::Malformed(_))));
        assert!(matches!(first(b"n,,r=abc"), Err(ScramError::Malformed(_))), "no user");
        assert!(matches!(first(b"n,,n=alice"), Err(ScramError::Malformed(_))), "no nonce");
        assert!(matches!(first(b"n,,n=al=ice,r=abc"), Err(ScramError::Malformed(_))), "bad escape");
        assert!(matches!(first(b"n,,n=,r=abc"), Err(ScramError::Malformed(_))), "empty user");
        assert!(matches!(first(b"n,,n=alice,r=a bc"), Err(ScramError::Malformed(_))), "nonce not printable");
        assert!(matches!(first(&[0xff, 0xfe]), Err(ScramError::Malformed(_))));
        assert!(matches!(first(&vec![b'n'; MAX_MESSAGE_BYTES + 1]), Err(ScramError::Malformed(_))));
        assert_eq!(first(b"n,a=bob,n=alice,r=abc"), Err(ScramError::Impersonation));
        assert_eq!(first(b"n,a=alice,n=alice,r=abc"), Ok(()));
        assert_eq!(first(b"n,,n=alice,r=abc,other=1"), Err(ScramError::UnsupportedExtension("other".into())));
        // Kafka's one extension: a delegation token's id as the user name.
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        let mut asked = None;
        s.client_first(b"n,,n=tokenid,r=abc,tokenauth=true", |user, token| {
            asked = Some((user.to_string(), token));
            None
        })
        .unwrap();
        assert_eq!((asked, s.token_auth()), (Some(("tokenid".to_string(), true)), true));
        // Final before first; a wrong nonce; a missing proof.
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(s.client_final(b"c=biws,r=abc,p=AAAA"), Err(ScramError::Malformed(_))));
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        s.client_first(b"n,,n=alice,r=abc", |_, _| Some(c.clone())).unwrap();
        assert_eq!(s.client_final(b"c=biws,r=abcdef,p=AAAA"), Err(ScramError::NonceMismatch));
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        s.client_first(b"n,,n=alice,r=abc", |_, _| Some(c.clone())).unwrap();
        assert!(matches!(s.client_final(b"c=biws,r=abc"), Err(ScramError::Malformed(_))));
    }

    #[test]
    fn escaped_names_are_unescaped() {
        assert_eq!(unescape_name("a=2Cb=3Dc").unwrap(), "a,b=c");
    }
}
