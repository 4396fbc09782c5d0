//! Which partition of a coordinator topic coordinates a key: a group's
//! `__consumer_offsets` partition, a transactional id's `__transaction_state` partition.
//! Kafka's `Utils.abs(key.hashCode()) % partitionCount`, with Java's String.hashCode (over
//! UTF-16 code units), so a key lands on the same partition number as in Kafka.

/// Java's `String.hashCode`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The offsets partition of `group_id` among `partitions` (> 0; 0 is treated as 1).
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    // Kafka's Utils.abs masks the sign bit (so i32::MIN maps to 0, not overflow).
    (java_string_hash(group_id) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_hash_code() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(
            java_string_hash("console-consumer-12345"),
            "console-consumer-12345".encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
        );
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        for g in ["x", "group-1", "émoji-🎉", "a-very-long-group-name-that-overflows-the-hash"] {
            assert!((0..50).contains(&partition_for(g, 50)));
        }
    }
}
