//! Record framing shared by the controller's files (invariant 3: magic, version, CRC-32C).
//!
//! ```text
//! magic: u32 LE | version: u16 LE | length: u32 LE | crc32c: u32 LE | payload (length bytes)
//! ```
//! The CRC covers magic, version, length and payload, so a torn or overwritten header is
//! caught as well as a bad payload.

pub const HEADER_LEN: usize = 14;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("truncated: need {need} bytes, {have} left")]
    Truncated { need: usize, have: usize },
    #[error("bad magic {found:#010x}, expected {expected:#010x}")]
    BadMagic { found: u32, expected: u32 },
    #[error("unsupported version {found}, expected {expected}")]
    BadVersion { found: u16, expected: u16 },
    #[error("record length {len} exceeds limit {limit}")]
    TooLong { len: usize, limit: usize },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
}

fn crc(header_no_crc: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(header_no_crc), payload)
}

/// Appends one framed record to `out`.
pub fn encode_into(out: &mut Vec<u8>, magic: u32, version: u16, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&magic.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    // Callers bound payloads far below 4 GiB (see their `limit`); saturate rather than wrap
    // so a violation shows up as a CRC/length error on read instead of silent corruption.
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    let c = crc(&out[start..start + 10], payload);
    out.extend_from_slice(&c.to_le_bytes());
    out.extend_from_slice(payload);
}

pub fn encode(magic: u32, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    encode_into(&mut out, magic, version, payload);
    out
}

/// Callers check `buf.len() >= HEADER_LEN` first, so the slice is in bounds.
fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

/// Checks a header's magic, version and length (against `limit`) and returns the payload
/// length, so a reader can bound a length from the network before allocating for it.
pub fn payload_len(header: &[u8; HEADER_LEN], magic: u32, version: u16, limit: usize) -> Result<usize, FrameError> {
    check_header(header, magic, version, limit)
}

fn check_header(buf: &[u8], magic: u32, version: u16, limit: usize) -> Result<usize, FrameError> {
    if buf.len() < HEADER_LEN {
        return Err(FrameError::Truncated { need: HEADER_LEN, have: buf.len() });
    }
    let found = u32_at(buf, 0);
    if found != magic {
        return Err(FrameError::BadMagic { found, expected: magic });
    }
    let v = u16::from_le_bytes([buf[4], buf[5]]);
    if v != version {
        return Err(FrameError::BadVersion { found: v, expected: version });
    }
    let len = u32_at(buf, 6) as usize;
    if len > limit {
        return Err(FrameError::TooLong { len, limit });
    }
    Ok(len)
}

/// Decodes the record at the start of `buf`; returns its payload and the bytes consumed.
/// The length is checked against `limit` and against what remains before anything is read.
pub fn decode(buf: &[u8], magic: u32, version: u16, limit: usize) -> Result<(&[u8], usize), FrameError> {
    let len = check_header(buf, magic, version, limit)?;
    let total = HEADER_LEN + len;
    if buf.len() < total {
        return Err(FrameError::Truncated { need: total, have: buf.len() });
    }
    let stored = u32_at(buf, 10);
    let payload = &buf[HEADER_LEN..total];
    let computed = crc(&buf[..10], payload);
    if stored != computed {
        return Err(FrameError::BadCrc { stored, computed });
    }
    Ok((payload, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u32 = 0x5348_4C47;

    #[test]
    fn roundtrip_and_corruption() {
        let rec = encode(M, 1, b"hello");
        assert_eq!(decode(&rec, M, 1, 100).unwrap(), (&b"hello"[..], rec.len()));
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad, M, 1, 100).is_err(), "flip at {i} not detected");
        }
        assert!(matches!(decode(&rec[..rec.len() - 1], M, 1, 100), Err(FrameError::Truncated { .. })));
        assert!(matches!(decode(&rec, M, 1, 2), Err(FrameError::TooLong { .. })));
        assert!(matches!(decode(&rec, M, 2, 100), Err(FrameError::BadVersion { .. })));
    }
}
