//! Where a remote segment's objects live in the bucket: the Aiven plugin's layout, so an
//! operator's tools and habits carry over:
//! `<key.prefix><topic>-<topic id>/<partition>/<start offset, 20 digits>-<segment id>.<suffix>`,
//! ids in Kafka's text form (URL-safe base64, no padding). The prefix is used as is.
use base64::Engine as _;

/// The batches of the segment (the local file without its padding).
pub const LOG_SUFFIX: &str = "log";
/// The segment's indexes, leader epochs and producer snapshot (`remote_indexes.rs`).
pub const INDEXES_SUFFIX: &str = "indexes";

/// Kafka's `Uuid.toString`.
pub fn uuid_text(id: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// The folder of one partition's objects (ends with `/`).
pub fn partition_prefix(key_prefix: &str, topic: &str, topic_id: &[u8; 16], partition: i32) -> String {
    format!("{key_prefix}{topic}-{}/{partition}/", uuid_text(topic_id))
}

/// One object of one remote segment.
pub fn segment_key(partition_prefix: &str, start_offset: i64, segment_id: &[u8; 16], suffix: &str) -> String {
    format!("{partition_prefix}{start_offset:020}-{}.{suffix}", uuid_text(segment_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_aiven_layout() {
        let topic_id = [0x31, 0x62, 0x7a, 0x14, 0x74, 0xdf, 0x45, 0x8c, 0xba, 0xee, 0x3c, 0xf0, 0x65, 0xd7, 0xaa, 0x49];
        let p = partition_prefix("someprefix/", "topic", &topic_id, 7);
        assert_eq!(p, "someprefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/");
        let seg = [0xb6, 0x2a, 0x26, 0x29, 0xe6, 0x52, 0x4a, 0xd3, 0x84, 0x3b, 0x04, 0x73, 0x4f, 0x72, 0xf9, 0xa1];
        assert_eq!(segment_key(&p, 1234, &seg, LOG_SUFFIX), "someprefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tiomKeZSStOEOwRzT3L5oQ.log");
    }
}
