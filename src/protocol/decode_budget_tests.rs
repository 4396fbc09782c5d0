//! The decoded-memory budget of a request (`request::decoded_memory_budget`): frames that
//! would decode to many times their size are refused before they are built; real
//! clients' shapes, however large, decode.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestKind, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::request::tests::encode_req;
use super::request::{decode_request, decoded_memory_budget, RequestError};

/// A Metadata request header (v4: int16 strings, no tags) followed by `count` topic names
/// of `name_len` bytes, written by hand so the frame can say what no client would.
fn metadata_v4_names(count: usize, name_len: usize) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::Metadata as i16);
    b.put_i16(4);
    b.put_i32(7);
    b.put_i16(-1); // client id: null
    b.put_i32(count as i32);
    for i in 0..count {
        b.put_i16(name_len as i16);
        b.put_slice(&format!("{i:0>width$}", width = name_len).as_bytes()[..name_len]);
    }
    b.put_u8(0); // allow_auto_topic_creation
    b.freeze()
}

fn refused_for_its_budget(frame: Bytes) -> String {
    match decode_request(frame) {
        Err(RequestError::Malformed { correlation_id: Some(_), reason }) => {
            assert!(reason.contains("budget"), "{reason}");
            reason
        }
        other => panic!("expected a refusal for the decode budget, got {other:?}"),
    }
}

#[test]
fn a_frame_of_empty_topic_names_is_refused_before_it_is_built() {
    let count = 200_000;
    let frame = metadata_v4_names(count, 0);
    let wanted = count * std::mem::size_of::<MetadataRequestTopic>();
    assert!(wanted > decoded_memory_budget(frame.len()), "the shape exceeds the budget: {wanted} bytes from a {} byte frame", frame.len());
    refused_for_its_budget(frame);
}

#[test]
fn large_requests_of_real_shapes_decode() {
    // 100,000 topics with 20-character names (int16 strings), and with 1-character names
    // in the flexible version (a topic id besides each name).
    let frame = metadata_v4_names(100_000, 20);
    let decoded = decode_request(frame).expect("100,000 topic names");
    let RequestKind::Metadata(m) = decoded.body else { panic!("not Metadata") };
    assert_eq!(m.topics.map(|t| t.len()), Some(100_000));

    let topics: Vec<_> =
        (0..100_000).map(|i| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(format!("{}", i % 10)))))).collect();
    let frame = encode_req(ApiKey::Metadata, 12, 8, &MetadataRequest::default().with_topics(Some(topics)));
    let decoded = decode_request(frame).expect("100,000 one-character names, v12");
    let RequestKind::Metadata(m) = decoded.body else { panic!("not Metadata") };
    assert_eq!(m.topics.map(|t| t.len()), Some(100_000));
}

#[test]
fn a_frame_of_unknown_tagged_fields_is_refused() {
    // Metadata v12's header (v2: tagged fields after the client id) with 300,000 distinct
    // empty tags, each 4 bytes on the wire and a map entry in memory.
    let count: u32 = 300_000;
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::Metadata as i16);
    b.put_i16(12);
    b.put_i32(9);
    b.put_i16(-1); // client id: null
    put_uvarint(&mut b, count);
    for tag in 0..count {
        put_uvarint(&mut b, tag);
        put_uvarint(&mut b, 0);
    }
    b.put_u8(0); // topics: null
    b.put_u8(0); // allow_auto_topic_creation
    b.put_u8(0); // include_topic_authorized_operations
    b.put_u8(0); // body tags
    refused_for_its_budget(b.freeze());
}

#[test]
fn a_small_request_of_empty_names_is_served_within_the_slack() {
    // The slack lets any small request through, whatever its shape.
    let frame = metadata_v4_names(1_000, 0);
    assert!(decode_request(frame).is_ok());
}

fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}
