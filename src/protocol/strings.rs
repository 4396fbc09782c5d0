//! Building the codec's string types from Rust strings (one copy into a fresh `Bytes`).
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}
