//! One request to another broker's client listener and its response (the transaction
//! coordinator's WriteTxnMarkers): a connection per call, bounded in time and in the
//! response size it accepts. Not a hot path: one call per transaction end and leader
//! broker, so the codecs are kafka-protocol's.
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::FutureExt;
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// Largest response accepted (a WriteTxnMarkers answer is a few bytes per partition).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Sends `req` as `api_key` v`version` to `addr` and decodes the answer, within `timeout`.
pub async fn call<Req, Resp>(addr: &str, client_id: &str, api_key: ApiKey, version: i16, req: &Req, timeout: Duration) -> Result<Resp, String>
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
        let mut body = BytesMut::new();
        header.encode(&mut body, Req::header_version(version)).map_err(|e| format!("cannot encode the request header: {e}"))?;
        req.encode(&mut body, version).map_err(|e| format!("cannot encode the request: {e}"))?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        stream.write_all(&frame).await.map_err(|e| format!("send to {addr}: {e}"))?;
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).await.map_err(|e| format!("read from {addr}: {e}"))?;
        // Bounded before anything is allocated (invariant 4).
        let len = usize::try_from(i32::from_be_bytes(len)).ok().filter(|l| (4..=MAX_RESPONSE_BYTES).contains(l)).ok_or("response length out of bounds")?;
        let mut buf = vec![0u8; len];
        stream.read_exact(&mut buf).await.map_err(|e| format!("read from {addr}: {e}"))?;
        let mut buf = Bytes::from(buf);
        let h = ResponseHeader::decode(&mut buf, Resp::header_version(version)).map_err(|e| format!("bad response header: {e}"))?;
        if h.correlation_id != 1 {
            return Err(format!("correlation id {} in the response, expected 1", h.correlation_id));
        }
        let resp = Resp::decode(&mut buf, version).map_err(|e| format!("bad response: {e}"))?;
        let _ = buf.remaining();
        Ok(resp)
    };
    futures::select! {
        r = exchange.fuse() => r,
        _ = glommio::timer::sleep(timeout).fuse() => Err(format!("{addr} did not answer within {timeout:?}")),
    }
}
