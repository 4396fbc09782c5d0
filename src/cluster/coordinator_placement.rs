//! Which partition of a coordinator topic coordinates a key: a group's
//! `__consumer_offsets` partition, a transactional id's `__transaction_state` partition.
//! Kafka's `Utils.abs(key.hashCode()) % partitionCount`, with Java's String.hashCode (over
//! UTF-16 code units), so a key lands on the same partition number as in Kafka.

/// Java's `String.hashCode`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Kafka's `Utils.abs`: `Math.abs`, except that i32::MIN (which has no positive) is 0. Not
/// the sign-bit mask (`Utils.toPositive`, the partitioner's): the two differ on every
/// negative hash.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The partition of coordinator key `key` (a group id, a transactional id, a share
/// coordinator key) among `partitions` (> 0; 0 is treated as 1).
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    kafka_abs(java_string_hash(key)) % partitions.max(1)
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
        // Negative hashes, checked with Kafka 4.4's clients jar (jshell:
        // Utils.abs(s.hashCode()) % 50): "group-0-consumers" is -1911774318 -> 18 (the
        // sign-bit mask gave 30), "group-2-consumers" -1210709740 -> 40.
        assert_eq!(java_string_hash("group-0-consumers"), -1_911_774_318);
        assert_eq!(partition_for("group-0-consumers", 50), 18);
        assert_eq!(partition_for("group-2-consumers", 50), 40);
        assert_eq!((kafka_abs(-5), kafka_abs(i32::MIN), kafka_abs(7)), (5, 0, 7));
        for g in ["x", "group-1", "émoji-🎉", "a-very-long-group-name-that-overflows-the-hash"] {
            assert!((0..50).contains(&partition_for(g, 50)));
        }
    }
}
