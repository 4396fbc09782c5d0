//! A minimal blocking Kafka client for the CLI (runs on the main thread, never on a
//! shard): one request at a time over one connection.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::bail;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Largest response the CLI accepts.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

pub struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    /// Connects to the first address of `bootstrap` that answers: one `host:port`, or a
    /// comma-separated list as Kafka's tools take for `--bootstrap-server`.
    pub fn connect(bootstrap: &str) -> anyhow::Result<Client> {
        let mut failures = Vec::new();
        for addr in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match TcpStream::connect(addr) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
                    return Ok(Client { stream, correlation_id: 0 });
                }
                Err(e) => failures.push(format!("{addr}: {e}")),
            }
        }
        if failures.is_empty() {
            bail!("no bootstrap address given");
        }
        bail!("cannot connect to {}", failures.join("; "))
    }

    /// Sends `req` at `version` and decodes the response.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> anyhow::Result<R::Response>
    where
        R::Response: Decodable + HeaderVersion,
    {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("shardlog-cli")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version))?;
        req.encode(&mut body, version)?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > MAX_RESPONSE_BYTES {
            bail!("bad response length {len}");
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf)?;
        let mut buf = Bytes::from(buf);
        let correlation = buf.get_i32();
        if correlation != self.correlation_id {
            bail!("response correlation id {correlation} != {}", self.correlation_id);
        }
        if <R::Response as HeaderVersion>::header_version(version) >= 1 {
            // Response header v1 adds tagged fields; we expect none.
            let n = buf.get_u8();
            if n != 0 {
                bail!("unexpected tagged fields in response header");
            }
        }
        R::Response::decode(&mut buf, version)
    }
}

/// GET `path` from a node's admin listener (`admin`: host:port or a URL): (the URL, the
/// body). The figures Kafka's protocol does not carry (per-shard load, remote log sizes).
pub fn admin_get(admin: &str, path: &str) -> anyhow::Result<(String, String)> {
    let base = if admin.starts_with("http") { admin.trim_end_matches('/').to_string() } else { format!("http://{admin}") };
    let url = format!("{base}{path}");
    let body = ureq::get(&url).timeout(Duration::from_secs(5)).call().map_err(|e| anyhow::anyhow!("{url}: {e}"))?.into_string()?;
    Ok((url, body))
}

#[cfg(test)]
mod tests {
    use super::Client;

    #[test]
    fn connects_to_the_first_address_of_a_list_that_answers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let up = listener.local_addr().expect("addr");
        // A port nobody listens on (bound, then closed).
        let down = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
        let client = Client::connect(&format!("{down}, {up}")).expect("the second address answers");
        assert_eq!(client.stream.peer_addr().expect("peer"), up);
        let err = Client::connect(&down.to_string()).err().expect("nothing answers").to_string();
        assert!(err.contains(&down.to_string()), "{err}");
        assert!(Client::connect(" , ").is_err());
    }
}
