//! The tiered-storage rules between a topic's configs (Kafka 4.4's `LogConfig.validate`
//! when remote.storage.enable is involved), checked by the controller before it commits a
//! CreateTopics or an AlterConfigs: each error is Kafka's INVALID_CONFIG message.
use super::topic_config::{TopicConfig, LOCAL_RETENTION_BYTES, LOCAL_RETENTION_MS};

/// Checks `new` (the topic's effective config after the change); `was_enabled`: the topic
/// had remote.storage.enable=true before it (false for a new topic); `system_enabled`: this
/// controller's remote.log.storage.system.enable.
pub fn validate(new: &TopicConfig, was_enabled: bool, system_enabled: bool) -> Result<(), String> {
    if !new.remote_storage_enable {
        // KIP-950: turning it off must say what happens to the remote data.
        if was_enabled && !new.remote_log_delete_on_disable {
            return Err("It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.".into());
        }
        return Ok(());
    }
    if !system_enabled {
        return Err("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into());
    }
    if new.cleanup_policy != ["delete"] {
        return Err("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.".into());
    }
    retention_pair(LOCAL_RETENTION_BYTES, new.local_retention_bytes, "retention.bytes", new.retention_bytes)?;
    retention_pair(LOCAL_RETENTION_MS, new.local_retention_ms, "retention.ms", new.retention_ms)?;
    if new.remote_log_copy_disable {
        for (unit, local, total) in [("bytes", new.local_retention_bytes, new.retention_bytes), ("ms", new.local_retention_ms, new.retention_ms)] {
            if local != -2 && local != total {
                return Err(format!("When `remote.log.copy.disable` is set to true, the `local.retention.{unit}` and `retention.{unit}` must be set to the identical value because there will be no more logs copied to the remote storage."));
            }
        }
    }
    Ok(())
}

/// Kafka's validateRemoteStorageRetentionSize / Time: with a bounded total, the local bound
/// must be bounded too and not above it (-2 follows the total).
fn retention_pair(local_key: &str, local: i64, total_key: &str, total: i64) -> Result<(), String> {
    if total == -1 || local == -2 {
        return Ok(());
    }
    if local == -1 {
        return Err(format!("Invalid value -1 for configuration {local_key}: Value must not be -1 as {total_key} value is set as {total}."));
    }
    if local > total {
        return Err(format!("Invalid value {local} for configuration {local_key}: Value must not be more than {total_key} property value: {total}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::topic_config::TopicConfigDefaults;

    fn topic(pairs: &[(&str, &str)]) -> TopicConfig {
        let m: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TopicConfig::resolve(&TopicConfigDefaults::default(), &m).unwrap()
    }

    #[test]
    fn tiered_topics_need_the_system_switch_and_delete_policy() {
        let on = topic(&[("remote.storage.enable", "true")]);
        assert_eq!(validate(&on, false, true), Ok(()));
        assert!(validate(&on, false, false).unwrap_err().starts_with("Tiered Storage functionality is disabled in the broker."));
        let compacted = topic(&[("remote.storage.enable", "true"), ("cleanup.policy", "compact,delete")]);
        assert!(validate(&compacted, false, true).unwrap_err().contains("only supports topics with cleanup.policy=delete"));
        // Not tiered: nothing to check, whatever the broker has.
        assert_eq!(validate(&topic(&[("cleanup.policy", "compact")]), false, false), Ok(()));
    }

    #[test]
    fn local_retention_stays_within_total_retention() {
        let ok = topic(&[("remote.storage.enable", "true"), ("retention.bytes", "1000"), ("local.retention.bytes", "100"), ("local.retention.ms", "1000")]);
        assert_eq!(validate(&ok, false, true), Ok(()));
        let over = topic(&[("remote.storage.enable", "true"), ("retention.bytes", "1000"), ("local.retention.bytes", "1001")]);
        assert_eq!(
            validate(&over, false, true).unwrap_err(),
            "Invalid value 1001 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 1000"
        );
        let unbounded = topic(&[("remote.storage.enable", "true"), ("retention.ms", "5000"), ("local.retention.ms", "-1")]);
        assert_eq!(
            validate(&unbounded, false, true).unwrap_err(),
            "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 5000."
        );
        // retention.ms -1 (unbounded total): any local bound.
        assert_eq!(validate(&topic(&[("remote.storage.enable", "true"), ("retention.ms", "-1"), ("local.retention.ms", "-1")]), false, true), Ok(()));
        assert_eq!(topic(&[("retention.ms", "77")]).local_retention_ms(), 77, "-2 follows retention.ms");
    }

    #[test]
    fn disabling_needs_delete_on_disable_and_copy_disable_needs_equal_retention() {
        let off = topic(&[("remote.storage.enable", "false")]);
        assert!(validate(&off, true, true).unwrap_err().starts_with("It is invalid to disable remote storage without deleting remote data."));
        assert_eq!(validate(&topic(&[("remote.storage.enable", "false"), ("remote.log.delete.on.disable", "true")]), true, true), Ok(()));
        let read_only = topic(&[("remote.storage.enable", "true"), ("remote.log.copy.disable", "true"), ("local.retention.ms", "10")]);
        assert!(validate(&read_only, true, true).unwrap_err().contains("`local.retention.ms` and `retention.ms` must be set to the identical value"));
        assert_eq!(validate(&topic(&[("remote.storage.enable", "true"), ("remote.log.copy.disable", "true")]), true, true), Ok(()));
    }
}
