//! Kafka framing: every request and response is a 4-byte big-endian length followed by
//! that many bytes. The length is checked before anything is allocated for the frame.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// A length prefix we refuse (the caller closes the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("negative frame length {0}")]
    Negative(i32),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes (raise socket.request.max.bytes if this is legitimate)")]
    TooLarge { len: usize, max: usize },
}

/// Errors while producing a response frame.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("cannot encode {api_key:?} v{version} response: {reason}")]
    Encode { api_key: ApiKey, version: i16, reason: String },
    #[error("response of {0} bytes does not fit a Kafka frame")]
    ResponseTooLarge(usize),
}

/// Length of the frame announced by `prefix`, if it is within `max_bytes`.
/// A zero-length frame is accepted here (it fails request decoding as malformed).
pub fn frame_len(prefix: [u8; 4], max_bytes: usize) -> Result<usize, FrameError> {
    let len = i32::from_be_bytes(prefix);
    if len < 0 {
        return Err(FrameError::Negative(len));
    }
    let len = len as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge { len, max: max_bytes });
    }
    Ok(len)
}

/// Encode a complete response frame: length prefix, response header of the version the
/// body's schema asks for (`R::header_version`; ApiVersions always answers with header v0),
/// then the body. `api_key` only names the API in errors.
pub fn encode_response<R: Encodable + HeaderVersion>(correlation_id: i32, api_key: ApiKey, version: i16, body: &R) -> Result<BytesMut, ProtocolError> {
    let enc_err = |e: anyhow::Error| ProtocolError::Encode { api_key, version, reason: format!("{e:#}") };
    let header_version = R::header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_len = header.compute_size(header_version).map_err(enc_err)?;
    let body_len = body.compute_size(version).map_err(enc_err)?;
    let len = header_len + body_len;
    let len_i32 = i32::try_from(len).map_err(|_| ProtocolError::ResponseTooLarge(len))?;
    let mut buf = super::response_arena::response_buffer(4 + len);
    buf.put_i32(len_i32);
    header.encode(&mut buf, header_version).map_err(enc_err)?;
    body.encode(&mut buf, version).map_err(enc_err)?;
    // compute_size and encode come from the same generated code; a mismatch would corrupt
    // the stream for every later response on the connection, so refuse it.
    if buf.len() != 4 + len {
        return Err(ProtocolError::Encode { api_key, version, reason: format!("size mismatch: computed {len}, wrote {}", buf.len() - 4) });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::{ApiVersionsResponse, MetadataResponse};
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn frame_len_limits() {
        assert_eq!(frame_len(100i32.to_be_bytes(), 100), Ok(100));
        assert_eq!(frame_len(0i32.to_be_bytes(), 100), Ok(0));
        assert_eq!(frame_len(101i32.to_be_bytes(), 100), Err(FrameError::TooLarge { len: 101, max: 100 }));
        assert_eq!(frame_len((-1i32).to_be_bytes(), 100), Err(FrameError::Negative(-1)));
        assert_eq!(frame_len([0xff; 4], usize::MAX), Err(FrameError::Negative(-1)));
    }

    #[test]
    fn response_header_versions() {
        // Metadata v12 is flexible: header v1 (correlation id + empty tagged fields).
        let body = MetadataResponse::default();
        let mut f = encode_response(7, ApiKey::Metadata, 12, &body).unwrap().freeze();
        let len = f.get_i32() as usize;
        assert_eq!(len, f.len());
        assert_eq!(f.get_i32(), 7);
        assert_eq!(f.get_u8(), 0); // tagged fields
        assert_eq!(MetadataResponse::decode(&mut f, 12).unwrap(), body);
        assert!(f.is_empty());

        // ApiVersions v3 is flexible, but its response header stays v0.
        let body = ApiVersionsResponse::default();
        let mut f = encode_response(9, ApiKey::ApiVersions, 3, &body).unwrap().freeze();
        let len = f.get_i32() as usize;
        assert_eq!(len, f.len());
        assert_eq!(f.get_i32(), 9);
        assert_eq!(ApiVersionsResponse::decode(&mut f, 3).unwrap(), body);
        assert!(f.is_empty());
    }

    #[test]
    fn encode_error_is_reported() {
        // Fetch v10 has no preferred_read_replica: the codec refuses a set value, we report.
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        use kafka_protocol::messages::FetchResponse;
        let body = FetchResponse::default()
            .with_responses(vec![FetchableTopicResponse::default().with_partitions(vec![PartitionData::default().with_preferred_read_replica(3.into())])]);
        assert!(encode_response(1, ApiKey::Fetch, 10, &body).is_err());
        assert!(encode_response(1, ApiKey::Fetch, 11, &body).is_ok());
    }
}
