//! A connection from this broker to another broker's inter-broker listener, secured as
//! that listener is (`security::peer_security`): TCP, then the TLS handshake (SSL,
//! SASL_SSL), then the SASL exchange (SASL_PLAINTEXT, SASL_SSL) — all bounded by the
//! handshake timeout — then Kafka requests one at a time. Replica fetchers
//! (`leader_connection.rs`) and the transaction coordinator's calls
//! (`server/broker_call.rs`) go through here, so every broker-to-broker byte is secured
//! the same way.
use std::io;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use crate::cluster::image::BrokerMeta;
use crate::security::peer_security::PeerSecurity;
use crate::security::tls_stream::{self, TlsReadHalf, TlsWriteHalf};

use super::sasl_exchange;

#[derive(Debug, thiserror::Error)]
pub enum PeerConnectionError {
    #[error("broker {broker} has no {listener} listener (inter_broker_listener_name)")]
    NoEndpoint { broker: i32, listener: String },
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("TLS with {addr}: {why}")]
    Tls { addr: String, why: String },
    #[error("SASL authentication to {addr} failed: {why}")]
    Sasl { addr: String, why: String },
    #[error("connection to {addr} failed: {source}")]
    Io { addr: String, source: io::Error },
    #[error("bad response from {addr}: {why}")]
    Protocol { addr: String, why: String },
}

enum Io {
    Plain(TcpStream),
    Tls(TlsReadHalf, TlsWriteHalf),
}

pub struct PeerConnection {
    io: Io,
    addr: String,
    correlation_id: i32,
    client_id: StrBytes,
}

impl PeerConnection {
    /// Connects to `broker`'s endpoint on the listener `security` names and authenticates.
    pub async fn connect(broker: &BrokerMeta, security: &PeerSecurity, client_id: String) -> Result<PeerConnection, PeerConnectionError> {
        let (host, port) =
            broker.endpoint(&security.listener).ok_or_else(|| PeerConnectionError::NoEndpoint { broker: broker.id, listener: security.listener.clone() })?;
        let addr = format!("{host}:{port}");
        let tcp = TcpStream::connect(addr.as_str())
            .await
            .map_err(|e| PeerConnectionError::Connect { addr: addr.clone(), source: io::Error::other(e.to_string()) })?;
        let _ = tcp.set_nodelay(true);
        let io = match &security.tls {
            None => Io::Plain(tcp),
            Some(config) => {
                let name = PeerSecurity::server_name(host).map_err(|why| PeerConnectionError::Tls { addr: addr.clone(), why })?;
                let (r, w) = tls_stream::connect(tcp, config.clone(), name, security.handshake_timeout)
                    .await
                    .map_err(|e| PeerConnectionError::Tls { addr: addr.clone(), why: e.to_string() })?;
                Io::Tls(r, w)
            }
        };
        let mut conn = PeerConnection { io, addr, correlation_id: 0, client_id: StrBytes::from_string(client_id) };
        if let Some(credentials) = &security.sasl {
            let timeout = security.handshake_timeout;
            let exchange = sasl_exchange::authenticate(&mut conn, credentials);
            match glommio::timer::timeout(timeout, async { Ok(exchange.await) }).await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => return Err(PeerConnectionError::Sasl { addr: conn.addr.clone(), why }),
                Err(_) => return Err(PeerConnectionError::Sasl { addr: conn.addr.clone(), why: format!("no answer within {timeout:?}") }),
            }
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn next_correlation_id(&mut self) -> i32 {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.correlation_id
    }

    pub fn client_id(&self) -> &StrBytes {
        &self.client_id
    }

    pub async fn send(&mut self, frame: &[u8]) -> Result<(), PeerConnectionError> {
        let r = match &mut self.io {
            Io::Plain(s) => s.write_all(frame).await,
            Io::Tls(_, w) => match w.write_all(frame).await {
                Ok(()) => w.flush().await,
                Err(e) => Err(e),
            },
        };
        r.map_err(|source| PeerConnectionError::Io { addr: self.addr.clone(), source })
    }

    /// Reads one response frame (after its length prefix), refused above `max_bytes`
    /// before anything is allocated (invariant 4).
    pub async fn read_frame(&mut self, max_bytes: usize) -> Result<Bytes, PeerConnectionError> {
        let mut len = [0u8; 4];
        self.read_exact(&mut len).await?;
        let len = i32::from_be_bytes(len);
        let len = usize::try_from(len)
            .ok()
            .filter(|l| (4..=max_bytes).contains(l))
            .ok_or_else(|| PeerConnectionError::Protocol { addr: self.addr.clone(), why: format!("response length {len} out of bounds") })?;
        let mut body = vec![0u8; len];
        self.read_exact(&mut body).await?;
        Ok(Bytes::from(body))
    }

    async fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), PeerConnectionError> {
        let r = match &mut self.io {
            Io::Plain(s) => s.read_exact(buf).await,
            Io::Tls(r, _) => r.read_exact(buf).await,
        };
        r.map_err(|source| PeerConnectionError::Io { addr: self.addr.clone(), source })
    }

    /// Sends `req` as `api_key` v`version` and decodes its response (at most
    /// `max_response_bytes`). Not for the hot path: kafka-protocol's codecs.
    pub async fn call<Req, Resp>(&mut self, api_key: ApiKey, version: i16, req: &Req, max_response_bytes: usize) -> Result<Resp, PeerConnectionError>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let correlation_id = self.next_correlation_id();
        let bad = |addr: &str, why: String| PeerConnectionError::Protocol { addr: addr.to_string(), why };
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, Req::header_version(version))
            .and_then(|_| req.encode(&mut body, version))
            .map_err(|e| bad(&self.addr, format!("cannot encode {api_key:?}: {e}")))?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        self.send(&frame).await?;
        let mut buf = self.read_frame(max_response_bytes).await?;
        let h = ResponseHeader::decode(&mut buf, Resp::header_version(version)).map_err(|e| bad(&self.addr, format!("bad response header: {e}")))?;
        if h.correlation_id != correlation_id {
            return Err(bad(&self.addr, format!("correlation id {} in the response, expected {correlation_id}", h.correlation_id)));
        }
        let resp = Resp::decode(&mut buf, version).map_err(|e| bad(&self.addr, format!("bad {api_key:?} response: {e}")))?;
        let _ = buf.remaining();
        Ok(resp)
    }
}
