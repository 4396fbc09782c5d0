//! The client's half of a SASL/SCRAM exchange (RFC 5802, no channel binding), as this
//! broker speaks it to a peer's SASL listener with its own credentials: client-first out,
//! server-first in (nonce, salt, iterations checked), client-final with the proof out,
//! server-final in (the server's signature checked, so a peer that does not know the
//! credential is not trusted either).
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use subtle::ConstantTimeEq;

use super::scram::{ScramError, ScramMechanism, MAX_ITERATIONS, MAX_MESSAGE_BYTES, MIN_ITERATIONS};

pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    /// After server-first: the server signature the server-final must carry.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange for `username`; the client-first message to send.
    pub fn start(mechanism: ScramMechanism, username: &str, password: &str) -> (ScramClient, Vec<u8>) {
        let client_nonce = BASE64.encode(rand::random::<[u8; 24]>());
        let client_first_bare = format!("n={},r={client_nonce}", escape_name(username));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let client = ScramClient { mechanism, password: password.to_string(), client_first_bare, client_nonce, expected_server_signature: None };
        (client, first)
    }

    /// The server-first message (`r=nonce,s=salt,i=iterations`) in; the client-final
    /// message (`c=biws,r=nonce,p=proof`) out.
    pub fn server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        if message.len() > MAX_MESSAGE_BYTES {
            return Err(ScramError::Malformed("a server message too long"));
        }
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let field = |key: &str| text.split(',').find_map(|f| f.strip_prefix(key));
        let nonce = field("r=").ok_or(ScramError::Malformed("no nonce"))?;
        // The server extends our nonce; anything else is a replay or a confused peer.
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        let salt = field("s=").and_then(|s| BASE64.decode(s).ok()).ok_or(ScramError::Malformed("no salt"))?;
        let iterations: i32 = field("i=").and_then(|i| i.parse().ok()).ok_or(ScramError::Malformed("no iteration count"))?;
        // Bounded as Kafka bounds credentials: a peer cannot make this node spin.
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Malformed("an iteration count outside Kafka's bounds"));
        }
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations as u32);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&m.hash(&client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        self.expected_server_signature = Some(m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// The server-final message (`v=signature`, or `e=error`) in: Ok when the server
    /// proved it knows the credential.
    pub fn server_final(&self, message: &[u8]) -> Result<(), ScramError> {
        let expected = self.expected_server_signature.as_ref().ok_or(ScramError::Malformed("server-final before server-first"))?;
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        if text.starts_with("e=") {
            return Err(ScramError::InvalidProof);
        }
        let got = text.strip_prefix("v=").and_then(|v| BASE64.decode(v).ok()).ok_or(ScramError::Malformed("no server signature"))?;
        if bool::from(got.ct_eq(expected)) {
            Ok(())
        } else {
            Err(ScramError::InvalidProof)
        }
    }
}

/// RFC 5802's saslname: `,` and `=` escaped.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::{ScramCredential, ScramServer};

    fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
        let salt = b"0123456789abcdef".to_vec();
        ScramCredential::from_salted_password(m, salt.clone(), &m.salted_password(password, &salt, 4096), 4096)
    }

    /// One exchange between this client and the broker's server half.
    fn exchange(m: ScramMechanism, stored: &ScramCredential, user: &str, password: &str) -> Result<String, ScramError> {
        let mut server = ScramServer::new(m);
        let (mut client, first) = ScramClient::start(m, user, password);
        let server_first = server.client_first(&first, |_, _| Some(stored.clone()))?;
        let client_final = client.server_first(&server_first)?;
        let (who, server_final) = server.client_final(&client_final)?;
        client.server_final(&server_final)?;
        Ok(who)
    }

    #[test]
    fn the_client_and_the_server_agree_on_the_right_password_only() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let c = credential(m, "broker-secret");
            assert_eq!(exchange(m, &c, "bro,ker=1", "broker-secret").unwrap(), "bro,ker=1");
            assert_eq!(exchange(m, &c, "broker", "wrong"), Err(ScramError::InvalidProof));
        }
    }

    #[test]
    fn a_server_that_does_not_know_the_credential_or_plays_games_is_refused() {
        let m = ScramMechanism::Sha256;
        let (mut client, _) = ScramClient::start(m, "broker", "secret");
        let nonce = client.client_nonce.clone();
        assert_eq!(client.server_first(b"r=someoneelse,s=AAAA,i=4096"), Err(ScramError::NonceMismatch));
        assert_eq!(client.server_first(format!("r={nonce},s=AAAA,i=4096").as_bytes()), Err(ScramError::NonceMismatch), "the server adds nothing");
        assert!(client.server_first(format!("r={nonce}x,s=AAAA,i=100000000").as_bytes()).is_err(), "unbounded iterations");
        assert!(client.server_final(b"v=AAAA").is_err(), "final before first");
        client.server_first(format!("r={nonce}x,s=AAAA,i=4096").as_bytes()).unwrap();
        assert_eq!(client.server_final(b"v=AAAA"), Err(ScramError::InvalidProof), "a server without the key");
        assert_eq!(client.server_final(b"e=invalid-proof"), Err(ScramError::InvalidProof));
    }
}
