//! This broker authenticating itself to a peer's SASL listener: SaslHandshake v1 naming
//! the mechanism, then SaslAuthenticate v2 rounds (PLAIN: one; SCRAM: two, the server's
//! signature checked at the end), as Kafka's own inter-broker clients do.
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use crate::security::peer_security::SaslCredentials;
use crate::security::scram::ScramMechanism;
use crate::security::scram_client::ScramClient;

use super::peer_connection::PeerConnection;

/// SASL answers are a few hundred bytes; anything larger is refused unread.
const MAX_SASL_RESPONSE_BYTES: usize = 64 * 1024;

pub async fn authenticate(conn: &mut PeerConnection, c: &SaslCredentials) -> Result<(), String> {
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(c.mechanism.clone()));
    let resp: SaslHandshakeResponse = conn.call(ApiKey::SaslHandshake, 1, &handshake, MAX_SASL_RESPONSE_BYTES).await.map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(format!("the peer does not offer {} (error {}; it offers {offered:?})", c.mechanism, resp.error_code));
    }
    if c.mechanism == "PLAIN" {
        let token = format!("\0{}\0{}", c.username, c.password).into_bytes();
        round(conn, token).await?;
        return Ok(());
    }
    let mechanism = ScramMechanism::from_name(&c.mechanism).ok_or_else(|| format!("{} is not a mechanism this broker can authenticate with", c.mechanism))?;
    let (mut client, first) = ScramClient::start(mechanism, &c.username, &c.password);
    let server_first = round(conn, first).await?;
    let client_final = client.server_first(&server_first).map_err(|e| e.to_string())?;
    let server_final = round(conn, client_final).await?;
    client.server_final(&server_final).map_err(|e| format!("the peer did not prove it knows the credential: {e}"))
}

/// One SaslAuthenticate: our bytes out, the server's back (its error refuses).
async fn round(conn: &mut PeerConnection, auth_bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(auth_bytes.into());
    let resp: SaslAuthenticateResponse = conn.call(ApiKey::SaslAuthenticate, 2, &req, MAX_SASL_RESPONSE_BYTES).await.map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        let message = resp.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
        return Err(format!("error {}: {message}", resp.error_code));
    }
    Ok(resp.auth_bytes.to_vec())
}
