//! A lean pipelined Kafka client for the load generator.
//!
//! Plain std threads, never the broker's shards: each connection is split into a writer
//! half and a reader half (two threads), so up to `inflight` requests are on the wire at
//! once and responses, which Kafka returns in request order on a connection, are matched
//! FIFO. Requests are encoded once into a [`PreparedRequest`]; a send patches only the
//! correlation id in the header and writes the shared bytes.
//!
//! Everything read from the socket is bounds-checked: a short or malformed response is an
//! error, never a panic.
use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Largest response accepted: Fetch responses are bounded by the request's max_bytes
/// (plus framing), so anything bigger is a broken stream.
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;
/// Bytes before the correlation id in a framed request: length, api key, api version.
const CORRELATION_OFFSET: usize = 8;
/// Length + api key + api version + correlation id.
const FIXED_HEAD: usize = 12;
const CLIENT_ID: &str = "shardlog-bench";

/// A request encoded once, framed (4-byte length first), correlation id 0.
#[derive(Clone)]
pub struct PreparedRequest {
    frame: Bytes,
    pub api_version: i16,
}

impl PreparedRequest {
    pub fn encode<R: Request + Encodable>(req: &R, version: i16) -> anyhow::Result<PreparedRequest> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(0)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut buf = BytesMut::new();
        buf.put_i32(0); // length, filled below
        header.encode(&mut buf, R::header_version(version)).map_err(|e| anyhow!("encode request header: {e}"))?;
        req.encode(&mut buf, version).map_err(|e| anyhow!("encode request: {e}"))?;
        let body_len = i32::try_from(buf.len() - 4).context("request too large")?;
        buf[..4].copy_from_slice(&body_len.to_be_bytes());
        Ok(PreparedRequest { frame: buf.freeze(), api_version: version })
    }

    /// The whole frame (length prefix included).
    pub fn frame(&self) -> &Bytes {
        &self.frame
    }

    /// Rebuilds from a frame produced by [`PreparedRequest::encode`] and then modified in
    /// place (e2e stamps record values).
    pub fn from_frame(frame: Bytes, api_version: i16) -> PreparedRequest {
        PreparedRequest { frame, api_version }
    }
}

pub fn connect(addr: &str) -> anyhow::Result<(FrameWriter, FrameReader)> {
    let stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    // Small produce requests and their acks must not wait for Nagle.
    stream.set_nodelay(true)?;
    // A broker that stops answering ends the run with an error instead of a hang.
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let read_half = stream.try_clone()?;
    Ok((FrameWriter { stream }, FrameReader { stream: BufReader::with_capacity(256 << 10, read_half) }))
}

pub struct FrameWriter {
    stream: TcpStream,
}

impl FrameWriter {
    /// Writes `req` with `correlation_id` patched into its header; the body bytes are
    /// written from the shared buffer without a copy.
    pub fn send(&mut self, req: &PreparedRequest, correlation_id: i32) -> io::Result<()> {
        let frame = req.frame.as_ref();
        let mut head = [0u8; FIXED_HEAD];
        head.copy_from_slice(&frame[..FIXED_HEAD]);
        head[CORRELATION_OFFSET..FIXED_HEAD].copy_from_slice(&correlation_id.to_be_bytes());
        write_all_vectored(&mut self.stream, &mut [IoSlice::new(&head), IoSlice::new(&frame[FIXED_HEAD..])])
    }

    /// Tells the broker we are done sending (the reader half still drains responses).
    pub fn finish(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// `write_all` for several buffers in one syscall where the kernel takes them all.
fn write_all_vectored(w: &mut impl Write, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0); // drop leading empty slices
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed while writing")),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub struct FrameReader {
    stream: BufReader<TcpStream>,
}

impl FrameReader {
    /// Reads one response frame (without the length prefix).
    pub fn read_frame(&mut self) -> anyhow::Result<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).context("reading response length")?;
        let len = i32::from_be_bytes(len);
        // Check before allocating: the length comes from the network.
        if len < 4 || len as usize > MAX_RESPONSE_BYTES {
            bail!("bad response length {len}");
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).context("reading response body")?;
        Ok(Bytes::from(buf))
    }

    /// Reads the response to request `R` sent at `version` with `correlation_id`.
    pub fn read_response<R: Request>(&mut self, version: i16, correlation_id: i32) -> anyhow::Result<R::Response>
    where
        R::Response: Decodable + HeaderVersion,
    {
        let frame = self.read_frame()?;
        let mut body = strip_response_header(frame, <R::Response as HeaderVersion>::header_version(version), correlation_id)?;
        R::Response::decode(&mut body, version).map_err(|e| anyhow!("decoding {:?} v{version} response: {e}", R::KEY))
    }
}

/// Checks the correlation id, skips the header's tagged fields (header v1) and returns
/// the body.
pub fn strip_response_header(mut frame: Bytes, header_version: i16, correlation_id: i32) -> anyhow::Result<Bytes> {
    if frame.remaining() < 4 {
        bail!("response shorter than its header");
    }
    let correlation = frame.get_i32();
    if correlation != correlation_id {
        bail!("response correlation id {correlation}, expected {correlation_id} (responses out of order?)");
    }
    if header_version >= 1 {
        let fields = read_uvarint(&mut frame)?;
        for _ in 0..fields {
            let _tag = read_uvarint(&mut frame)?;
            let size = read_uvarint(&mut frame)? as usize;
            if frame.remaining() < size {
                bail!("truncated tagged field in response header");
            }
            frame.advance(size);
        }
    }
    Ok(frame)
}

/// Unsigned varint (protobuf style, as Kafka's flexible versions use), at most 5 bytes.
pub fn read_uvarint(buf: &mut impl Buf) -> anyhow::Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            bail!("truncated varint");
        }
        let b = buf.get_u8();
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::MetadataRequest;

    #[test]
    fn prepared_request_frames_and_patches_correlation_id() {
        let req = PreparedRequest::encode(&MetadataRequest::default().with_topics(None), 12).unwrap();
        let f = req.frame();
        assert_eq!(i32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize, f.len() - 4);
        assert_eq!(i16::from_be_bytes([f[4], f[5]]), 3); // Metadata
        assert_eq!(i16::from_be_bytes([f[6], f[7]]), 12);

        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut head = [0u8; FIXED_HEAD];
        head.copy_from_slice(&f[..FIXED_HEAD]);
        head[CORRELATION_OFFSET..].copy_from_slice(&77i32.to_be_bytes());
        write_all_vectored(&mut a, &mut [IoSlice::new(&head), IoSlice::new(&f[FIXED_HEAD..])]).unwrap();
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), f.len());
        assert_eq!(i32::from_be_bytes([got[8], got[9], got[10], got[11]]), 77);
        assert_eq!(&got[FIXED_HEAD..], &f[FIXED_HEAD..]);
    }

    #[test]
    fn response_header_checks() {
        // v0: correlation id only.
        let body = strip_response_header(Bytes::from_static(&[0, 0, 0, 5, 9]), 0, 5).unwrap();
        assert_eq!(body.as_ref(), &[9]);
        // v1: one tagged field (tag 1, 2 bytes) then the body.
        let body = strip_response_header(Bytes::from_static(&[0, 0, 0, 5, 1, 1, 2, 0xaa, 0xbb, 9]), 1, 5).unwrap();
        assert_eq!(body.as_ref(), &[9]);
        // Wrong id, truncated header, truncated tagged field: errors, not panics.
        assert!(strip_response_header(Bytes::from_static(&[0, 0, 0, 6]), 0, 5).is_err());
        assert!(strip_response_header(Bytes::from_static(&[0, 0]), 0, 5).is_err());
        assert!(strip_response_header(Bytes::from_static(&[0, 0, 0, 5, 1, 1, 9, 0]), 1, 5).is_err());
        assert!(strip_response_header(Bytes::from_static(&[0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), 1, 5).is_err());
    }
}
