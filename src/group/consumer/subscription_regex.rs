//! KIP-848 regex subscriptions (`SubscribedTopicRegex`), resolved by the coordinator as
//! Kafka 4.4 does: the pattern must match the whole topic name (RE2J `matches()`), and
//! internal topics are matched like any other (a `.*` member is assigned
//! `__consumer_offsets` too: Kafka's coordinator resolves against every topic; the
//! client-side `exclude.internal.topics` applies only to client-side patterns). Resolved against the metadata image at each
//! heartbeat (heartbeat.rs), so a topic created or deleted changes the group's subscribed
//! topics, hence its metadata hash and group epoch, at the next heartbeat of any member
//! (Kafka re-resolves when its metadata image changes, at most every
//! `group.consumer.regex.refresh.interval.ms`).
//!
//! Syntax: Kafka compiles with RE2J; this uses the `regex` crate, of the same RE2 family
//! (linear time, no backreferences or lookaround, `(?i)`-style flags). Known differences:
//! RE2J accepts `\Q...\E` quoting and Java's `\p{javaLowerCase}`-style classes, which the
//! `regex` crate refuses (INVALID_REGULAR_EXPRESSION); `\d`, `\w` and `.` are Unicode-aware
//! here, ASCII in RE2J, which matters only for non-ASCII topic names (Kafka forbids them).
use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};

/// Longest pattern kept (Kafka has no limit; this bounds what a member makes us compile).
pub const MAX_REGEX_BYTES: usize = 4096;
/// Compiled-program size limit: a pattern like `(a{1000}){1000}` is refused rather than
/// built.
const COMPILED_SIZE_LIMIT_BYTES: usize = 1 << 20;

/// Compiles `pattern` to match whole topic names, or says why it is not valid.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_REGEX_BYTES {
        return Err(format!("longer than {MAX_REGEX_BYTES} bytes"));
    }
    RegexBuilder::new(&format!("^(?:{pattern})$")).size_limit(COMPILED_SIZE_LIMIT_BYTES).build().map_err(|e| match e {
        regex::Error::Syntax(s) => s.lines().last().unwrap_or("syntax error").trim_start_matches("error: ").to_string(),
        other => other.to_string(),
    })
}

/// Kafka's message for an invalid pattern (error INVALID_REGULAR_EXPRESSION).
pub fn invalid_message(pattern: &str, reason: &str) -> String {
    format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {reason}.")
}

/// The compiled patterns the members of one group subscribe with (one entry per
/// distinct pattern).
#[derive(Debug, Default)]
pub struct GroupRegexes {
    compiled: BTreeMap<String, Regex>,
}

impl GroupRegexes {
    /// Keeps exactly the `patterns` now in use, compiling new ones. A pattern that does not
    /// compile can only come from stored records (requests are validated): it matches
    /// nothing.
    pub fn refresh<'a>(&mut self, patterns: impl Iterator<Item = &'a str>) {
        let mut next = BTreeMap::new();
        for p in patterns {
            if next.contains_key(p) {
                continue;
            }
            let re = match self.compiled.remove(p) {
                Some(re) => Some(re),
                None => compile(p).map_err(|e| tracing::warn!(pattern = p, error = %e, "stored subscription regex does not compile; it matches nothing")).ok(),
            };
            if let Some(re) = re {
                next.insert(p.to_string(), re);
            }
        }
        self.compiled = next;
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// Whether a member subscribed with `pattern` is subscribed to `topic`.
    pub fn matches(&self, pattern: &str, topic: &str) -> bool {
        self.compiled.get(pattern).is_some_and(|re| re.is_match(topic))
    }

    /// Whether some member's pattern matches `topic`.
    pub fn any_matches(&self, topic: &str) -> bool {
        self.compiled.values().any(|re| re.is_match(topic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_names_only_internal_topics_included() {
        let mut r = GroupRegexes::default();
        r.refresh(["t-.*", "(^x[0-9])", ".*"].into_iter());
        assert!(r.matches("t-.*", "t-1"));
        assert!(!r.matches("t-.*", "at-1"), "a match must cover the whole name");
        assert!(r.matches("(^x[0-9])", "x7"));
        assert!(!r.matches("(^x[0-9])", "x77"));
        assert!(r.matches(".*", "anything"));
        assert!(r.matches(".*", "__consumer_offsets"), "Kafka 4.4 matches internal topics");
        assert!(r.any_matches("__transaction_state"));
        assert!(!r.matches("t-.*", "__consumer_offsets"));
        assert!(!r.matches("unknown", "unknown"));
        // Patterns no longer used are dropped.
        r.refresh(["t-.*"].into_iter());
        assert!(!r.any_matches("x7"));
        assert!(r.any_matches("t-2"));
        r.refresh(std::iter::empty());
        assert!(r.is_empty());
    }

    #[test]
    fn invalid_patterns_are_refused_with_a_reason() {
        for bad in ["t-(", "[a-", "*x", "(?<=a)b", "a\\1"] {
            let e = compile(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(compile(&"a".repeat(MAX_REGEX_BYTES + 1)).is_err());
        assert!(compile("(a{1000}){1000}").is_err(), "compiled size is bounded");
        assert_eq!(invalid_message("t-(", "x"), "SubscribedTopicRegex `t-(` is not a valid regular expression: x.");
        // A stored pattern that does not compile matches nothing.
        let mut r = GroupRegexes::default();
        r.refresh(["t-("].into_iter());
        assert!(r.is_empty());
    }
}
