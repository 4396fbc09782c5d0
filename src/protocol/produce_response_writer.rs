//! The Produce response (v3–v13), written by hand into a buffer of the shard's response
//! arena.
//!
//! Why by hand: kafka-protocol's encoder wants `ProduceResponse` structs — a `Vec` per
//! topic and one for the topics, the names copied into `StrBytes` — built for every
//! request on the path that must allocate nothing in steady state (issue 10). The
//! handler keeps its answers in one flat list and the names in the request; this writes
//! them straight to the wire, byte for byte what the crate writes (property-tested below
//! against its encoder). The tagged fields this broker never sets (a partition's
//! `current_leader`, the response's `node_endpoints`) are not written, as the crate does
//! when they are default.
use bytes::{BufMut, BytesMut};

use super::frame::ProtocolError;
use super::response_arena::response_buffer;
use kafka_protocol::messages::ApiKey;

const FIRST_FLEXIBLE_VERSION: i16 = 9;

/// One partition's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionAnswer {
    pub index: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// v8+ (KIP-467); older versions drop it, as the crate does.
    pub error_message: Option<String>,
    /// v8+: each refused record's batch index and message.
    pub record_errors: Vec<(i32, Option<String>)>,
}

impl PartitionAnswer {
    /// Not answered yet: Kafka's -1 offsets, error code 0.
    pub fn pending(index: i32) -> PartitionAnswer {
        PartitionAnswer { index, base_offset: -1, log_append_time_ms: -1, log_start_offset: -1, ..Default::default() }
    }
}

/// One topic: its name (up to v12) or id (v13), and its partitions' answers.
#[derive(Debug, Clone)]
pub struct TopicAnswer<'a> {
    pub name: &'a str,
    pub topic_id: [u8; 16],
    pub partitions: &'a [PartitionAnswer],
}

/// The whole response frame: length prefix, response header, body.
/// `throttle_time_ms`: the client's wait before its next request (client quotas).
pub fn write_produce_response<'a, I>(correlation_id: i32, version: i16, topics: I, throttle_time_ms: i32) -> Result<BytesMut, ProtocolError>
where
    I: Iterator<Item = TopicAnswer<'a>> + Clone,
{
    if !(3..=13).contains(&version) {
        return Err(ProtocolError::Encode { api_key: ApiKey::Produce, version, reason: "version outside v3-v13".into() });
    }
    let mut size = Sizer(0);
    write(&mut size, correlation_id, version, topics.clone(), throttle_time_ms);
    let len = i32::try_from(size.0).map_err(|_| ProtocolError::ResponseTooLarge(size.0))?;
    let mut buf = response_buffer(4 + size.0);
    buf.put_i32(len);
    write(&mut buf, correlation_id, version, topics, throttle_time_ms);
    debug_assert_eq!(buf.len(), 4 + size.0, "sized and written alike");
    Ok(buf)
}

/// Where the writer puts bytes: the frame, or a counter that sizes it first.
trait Out {
    fn put(&mut self, bytes: &[u8]);
}

impl Out for BytesMut {
    fn put(&mut self, bytes: &[u8]) {
        self.put_slice(bytes);
    }
}

struct Sizer(usize);

impl Out for Sizer {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

fn uvarint(out: &mut impl Out, mut v: u32) {
    while v >= 0x80 {
        out.put(&[(v as u8) | 0x80]);
        v >>= 7;
    }
    out.put(&[v as u8]);
}

fn array_len(out: &mut impl Out, flexible: bool, n: usize) {
    // Counts come from our own lists, far below the limits of either encoding.
    if flexible {
        uvarint(out, u32::try_from(n + 1).unwrap_or(u32::MAX));
    } else {
        out.put(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
    }
}

fn string(out: &mut impl Out, flexible: bool, s: Option<&str>) {
    match (s, flexible) {
        (None, true) => uvarint(out, 0),
        (None, false) => out.put(&(-1i16).to_be_bytes()),
        (Some(s), true) => {
            uvarint(out, u32::try_from(s.len() + 1).unwrap_or(u32::MAX));
            out.put(s.as_bytes());
        }
        (Some(s), false) => {
            out.put(&i16::try_from(s.len()).unwrap_or(i16::MAX).to_be_bytes());
            out.put(s.as_bytes());
        }
    }
}

fn write<'a>(out: &mut impl Out, correlation_id: i32, version: i16, topics: impl Iterator<Item = TopicAnswer<'a>> + Clone, throttle_time_ms: i32) {
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    out.put(&correlation_id.to_be_bytes());
    if flexible {
        uvarint(out, 0); // response header v1: no tagged fields
    }
    array_len(out, flexible, topics.clone().count());
    for t in topics {
        if version >= 13 {
            out.put(&t.topic_id);
        } else {
            string(out, flexible, Some(t.name));
        }
        array_len(out, flexible, t.partitions.len());
        for p in t.partitions {
            out.put(&p.index.to_be_bytes());
            out.put(&p.error_code.to_be_bytes());
            out.put(&p.base_offset.to_be_bytes());
            out.put(&p.log_append_time_ms.to_be_bytes());
            if version >= 5 {
                out.put(&p.log_start_offset.to_be_bytes());
            }
            if version >= 8 {
                array_len(out, flexible, p.record_errors.len());
                for (batch_index, message) in &p.record_errors {
                    out.put(&batch_index.to_be_bytes());
                    string(out, flexible, message.as_deref());
                    if flexible {
                        uvarint(out, 0);
                    }
                }
                string(out, flexible, p.error_message.as_deref());
            }
            if flexible {
                uvarint(out, 0); // no current_leader
            }
        }
        if flexible {
            uvarint(out, 0);
        }
    }
    out.put(&throttle_time_ms.to_be_bytes());
    if flexible {
        uvarint(out, 0); // no node_endpoints
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame::encode_response;
    use kafka_protocol::messages::produce_response::{BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse};
    use kafka_protocol::messages::{ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    fn crate_frame(corr: i32, version: i16, topics: &[(String, [u8; 16], Vec<PartitionAnswer>)]) -> BytesMut {
        let s = |m: &Option<String>| m.as_ref().map(|m| StrBytes::from_string(m.clone()));
        let body = ProduceResponse::default().with_responses(
            topics
                .iter()
                .map(|(name, id, parts)| {
                    let mut t = TopicProduceResponse::default().with_partition_responses(
                        parts
                            .iter()
                            .map(|p| {
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_error_code(p.error_code)
                                    .with_base_offset(p.base_offset)
                                    .with_log_append_time_ms(p.log_append_time_ms)
                                    .with_log_start_offset(p.log_start_offset)
                                    .with_error_message(s(&p.error_message))
                                    .with_record_errors(
                                        p.record_errors
                                            .iter()
                                            .map(|(i, m)| BatchIndexAndErrorMessage::default().with_batch_index(*i).with_batch_index_error_message(s(m)))
                                            .collect(),
                                    )
                            })
                            .collect(),
                    );
                    if version >= 13 {
                        t.topic_id = uuid::Uuid::from_bytes(*id);
                    } else {
                        t.name = TopicName(StrBytes::from_string(name.clone()));
                    }
                    t
                })
                .collect(),
        );
        encode_response(corr, ApiKey::Produce, version, &body).unwrap()
    }

    fn ours(corr: i32, version: i16, topics: &[(String, [u8; 16], Vec<PartitionAnswer>)]) -> BytesMut {
        let answers = topics.iter().map(|(name, id, parts)| TopicAnswer { name, topic_id: *id, partitions: parts });
        write_produce_response(corr, version, answers, 0).unwrap()
    }

    fn partition() -> impl Strategy<Value = PartitionAnswer> {
        let message = proptest::option::of("[a-zA-Z é]{0,30}");
        (any::<i32>(), any::<i16>(), any::<i64>(), any::<i64>(), any::<i64>(), message.clone(), proptest::collection::vec((any::<i32>(), message), 0..3))
            .prop_map(|(index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message, record_errors)| PartitionAnswer {
                index,
                error_code,
                base_offset,
                log_append_time_ms,
                log_start_offset,
                error_message,
                record_errors,
            })
    }

    #[test]
    fn a_one_partition_answer_matches_the_crate_in_every_version() {
        let topics = vec![("orders".to_string(), [7; 16], vec![PartitionAnswer { base_offset: 42, ..PartitionAnswer::pending(3) }])];
        for v in 3..=13 {
            assert_eq!(ours(9, v, &topics), crate_frame(9, v, &topics), "v{v}");
        }
        assert!(write_produce_response(1, 2, std::iter::empty(), 0).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..Default::default() })]

        /// Byte for byte the crate's encoding, on random answers in every version.
        #[test]
        fn matches_the_crate(
            corr in any::<i32>(), version in 3i16..=13,
            topics in proptest::collection::vec(("[a-z0-9._-]{0,20}", any::<[u8; 16]>(), proptest::collection::vec(partition(), 0..4)), 0..4)
        ) {
            prop_assert_eq!(ours(corr, version, &topics), crate_frame(corr, version, &topics));
        }
    }
}
