//! Feature versions (KIP-584, as Kafka 4.4 keeps them): the levels this build supports, the
//! levels the cluster has finalized (part of the metadata image, changed by UpdateFeatures
//! through the controller), and Kafka's rules for changing them, with its words.
//!
//! Supported ranges say what shardlog implements, not what Kafka 4.4 does: a level is
//! listed only once the behaviour behind it exists (a level it does not know is refused,
//! naming the range, as Kafka refuses a level its controller does not know).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const METADATA_VERSION: &str = "metadata.version";
pub const KRAFT_VERSION: &str = "kraft.version";
pub const TRANSACTION_VERSION: &str = "transaction.version";
pub const GROUP_VERSION: &str = "group.version";
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";
pub const SHARE_VERSION: &str = "share.version";
pub const STREAMS_VERSION: &str = "streams.version";

/// metadata.version levels (Kafka's MetadataVersion feature levels): 3.3-IV3 is the
/// oldest Kafka 4.x knows, 4.4-IV2 its latest production level.
pub const METADATA_VERSION_MIN: i16 = 7;
pub const METADATA_VERSION_4_4_IV2: i16 = 33;

/// One feature this build supports: levels `min..=max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// Every feature Kafka 4.4 defines, with the range shardlog implements (Kafka 4.4's
/// maximum in brackets where it is higher).
pub const SUPPORTED: &[SupportedFeature] = &[
    SupportedFeature { name: METADATA_VERSION, min: METADATA_VERSION_MIN, max: METADATA_VERSION_4_4_IV2 },
    // 1 = KIP-853 dynamic controller membership (`controller/voters.rs`): AddRaftVoter,
    // RemoveRaftVoter and UpdateRaftVoter are refused at 0, as by a static Kafka quorum.
    SupportedFeature { name: KRAFT_VERSION, min: 0, max: 1 },
    // KIP-890: 1 = server-side verification, 2 = an epoch bump per transaction.
    SupportedFeature { name: TRANSACTION_VERSION, min: 0, max: 2 },
    // 1 = KIP-848 consumer groups (ConsumerGroupHeartbeat).
    SupportedFeature { name: GROUP_VERSION, min: 0, max: 1 },
    // 1 = KIP-966 eligible leader replicas (`controller/eligible_leaders.rs`).
    SupportedFeature { name: ELIGIBLE_LEADER_REPLICAS_VERSION, min: 0, max: 1 },
    // 1 = KIP-932 share groups (`group/share/`); 2 = KIP-1191's dead-letter queue
    // (`group/share/dead_letter.rs`).
    SupportedFeature { name: SHARE_VERSION, min: 0, max: 2 },
    // 1 = KIP-1071 streams groups (`group/streams/`).
    SupportedFeature { name: STREAMS_VERSION, min: 0, max: 1 },
];

/// Levels being built, supported only with `unstable.feature.versions.enable` (Kafka's
/// name for its testing levels). None today: share.version 1 was, until share groups were
/// durable, and streams.version 1, until streams groups ran Kafka Streams end to end.
const UNSTABLE_MAX: &[(&str, i16)] = &[];

/// The supported ranges, with the unstable levels when `unstable`.
pub fn supported_features(unstable: bool) -> impl Iterator<Item = SupportedFeature> {
    SUPPORTED.iter().map(move |f| match UNSTABLE_MAX.iter().find(|(n, _)| *n == f.name) {
        Some(&(_, max)) if unstable => SupportedFeature { max: max.max(f.max), ..*f },
        _ => *f,
    })
}

/// What a new cluster finalizes: the highest supported level of each feature, as Kafka
/// 4.4 formats a new cluster with its latest production levels (never an unstable one).
fn bootstrap_levels() -> BTreeMap<String, i16> {
    SUPPORTED.iter().filter(|f| f.max > 0).map(|f| (f.name.to_string(), f.max)).collect()
}

pub fn supported(name: &str, unstable: bool) -> Option<SupportedFeature> {
    supported_features(unstable).find(|f| f.name == name)
}

/// The cluster's finalized feature levels. Only levels >= 1 are kept (Kafka removes a
/// feature finalized at 0); an image from before features existed has the bootstrap
/// levels, which are what those clusters behaved as (transaction.version 2, KIP-848).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalizedFeatures {
    levels: BTreeMap<String, i16>,
}

impl Default for FinalizedFeatures {
    fn default() -> Self {
        FinalizedFeatures { levels: bootstrap_levels() }
    }
}

impl FinalizedFeatures {
    /// The finalized level of `name`; 0 when not finalized.
    pub fn level(&self, name: &str) -> i16 {
        self.levels.get(name).copied().unwrap_or(0)
    }

    /// (name, level) of every finalized feature (level >= 1).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i16)> {
        self.levels.iter().map(|(n, l)| (n.as_str(), *l))
    }

    /// Sets committed levels (0 removes the feature). metadata.version never goes down:
    /// every downgrade is refused before the record is written, so a lower level here was
    /// checked against an older image and loses to the newer one.
    pub fn set(&mut self, levels: &[(String, i16)]) {
        for (name, level) in levels {
            if name == METADATA_VERSION && *level < self.level(METADATA_VERSION) {
                continue;
            }
            if *level <= 0 {
                self.levels.remove(name);
            } else {
                self.levels.insert(name.clone(), *level);
            }
        }
    }

    /// Whether KIP-848 consumer groups are on (group.version >= 1).
    pub fn consumer_groups_enabled(&self) -> bool {
        self.level(GROUP_VERSION) >= 1
    }

    /// Whether KIP-966 eligible leader replicas are on (level 1 or more of
    /// eligible.leader.replicas.version): the controller keeps ELRs, a fenced last ISR
    /// member leaves the ISR, and a leader holds its high watermark while its ISR is below
    /// min.insync.replicas.
    pub fn elr_enabled(&self) -> bool {
        self.level(ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1
    }

    /// Whether share groups are on (share.version >= 1).
    pub fn share_groups_enabled(&self) -> bool {
        self.level(SHARE_VERSION) >= 1
    }

    /// Whether share groups may have a dead-letter queue (share.version >= 2, KIP-1191).
    pub fn share_dead_letter_queue_enabled(&self) -> bool {
        self.level(SHARE_VERSION) >= 2
    }

    /// Whether streams groups are on (streams.version >= 1).
    pub fn streams_groups_enabled(&self) -> bool {
        self.level(STREAMS_VERSION) >= 1
    }
}

/// UpdateFeatures' upgrade types (v1+; v0's AllowDowngrade maps to `SafeDowngrade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// The wire value (1, 2, 3); anything else is not a type.
    pub fn from_wire(v: i8) -> Option<UpgradeType> {
        match v {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// One requested change: `upgrade_type` None is a wire value that names no type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: Option<UpgradeType>,
}

/// Checks `updates` against `current` as Kafka's FeatureControlManager does, each against
/// the current levels; all or none apply. Ok: the levels to commit (a feature named twice:
/// the last wins). Err: Kafka's message (the error is INVALID_UPDATE_VERSION).
/// `controller`: the node id that checks (Kafka names its "local controller");
/// `unstable`: whether it supports the levels still being built.
pub fn check_updates(current: &FinalizedFeatures, updates: &[FeatureUpdate], controller: i32, unstable: bool) -> Result<Vec<(String, i16)>, String> {
    let mut out: Vec<(String, i16)> = Vec::with_capacity(updates.len());
    for u in updates {
        check_one(current, u, controller, unstable).map_err(|e| format!("The update failed for all features since the following feature had an error: {e}"))?;
        out.retain(|(n, _)| *n != u.name);
        out.push((u.name.clone(), u.level.max(0)));
    }
    Ok(out)
}

fn check_one(current: &FinalizedFeatures, u: &FeatureUpdate, controller: i32, unstable: bool) -> Result<(), String> {
    let invalid = |why: String| format!("Invalid update version {} for feature {}. {why}", u.level, u.name);
    let Some(upgrade_type) = u.upgrade_type else {
        return Err(invalid("The controller does not support the given upgrade type.".into()));
    };
    let Some(range) = supported(&u.name, unstable) else {
        return Err(invalid(format!("Local controller {controller} does not support this feature.")));
    };
    let level = u.level.max(0);
    if level != 0 && !(range.min..=range.max).contains(&level) || level == 0 && u.name == METADATA_VERSION {
        return Err(invalid(format!("Local controller {controller} only supports versions {}-{}", range.min, range.max)));
    }
    let now = current.level(&u.name);
    if level < now {
        if u.name == KRAFT_VERSION {
            return Err(invalid("Can't downgrade the version of this feature.".into()));
        }
        if upgrade_type == UpgradeType::Upgrade {
            return Err(invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.".into()));
        }
        if u.name == METADATA_VERSION {
            // Kafka 4.x refuses both kinds; its words (no "Invalid update version" here).
            let why = match upgrade_type {
                UpgradeType::UnsafeDowngrade => "Unsafe metadata downgrade is not supported in this version.",
                _ => "Refusing to perform the requested downgrade because it might delete metadata information.",
            };
            return Err(format!("Unsupported metadata.version downgrade from {now} to {level}. {why}"));
        }
    } else if level > now && upgrade_type != UpgradeType::Upgrade {
        return Err(invalid("Can't downgrade to a newer version.".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, level: i16, t: u8) -> FeatureUpdate {
        FeatureUpdate { name: name.into(), level, upgrade_type: UpgradeType::from_wire(t as i8) }
    }

    const PREFIX: &str = "The update failed for all features since the following feature had an error: ";

    #[test]
    fn a_new_cluster_finalizes_what_is_built() {
        let f = FinalizedFeatures::default();
        let levels: Vec<_> = f.iter().collect();
        assert_eq!(
            levels,
            vec![
                (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
                (GROUP_VERSION, 1),
                (KRAFT_VERSION, 1),
                (METADATA_VERSION, 33),
                (SHARE_VERSION, 2),
                (STREAMS_VERSION, 1),
                (TRANSACTION_VERSION, 2)
            ]
        );
        assert!(f.elr_enabled());
        assert!(f.share_groups_enabled() && f.share_dead_letter_queue_enabled());
        assert!(f.streams_groups_enabled());
        assert!(f.consumer_groups_enabled());
    }

    #[test]
    fn updates_are_checked_with_kafka_4_4_words() {
        let f = FinalizedFeatures::default();
        let err = |u: FeatureUpdate| check_updates(&f, &[u], 1, false).unwrap_err().strip_prefix(PREFIX).unwrap().to_string();
        assert_eq!(err(up(SHARE_VERSION, 3, 1)), "Invalid update version 3 for feature share.version. Local controller 1 only supports versions 0-2");
        assert_eq!(err(up(STREAMS_VERSION, 2, 1)), "Invalid update version 2 for feature streams.version. Local controller 1 only supports versions 0-1");
        assert_eq!(err(up("bogus.version", 1, 1)), "Invalid update version 1 for feature bogus.version. Local controller 1 does not support this feature.");
        assert_eq!(err(up(GROUP_VERSION, 0, 1)), "Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.");
        assert_eq!(err(up(GROUP_VERSION, 1, 4)), "Invalid update version 1 for feature group.version. The controller does not support the given upgrade type.");
        assert_eq!(
            err(up(TRANSACTION_VERSION, 3, 2)),
            "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"
        );
        assert_eq!(
            err(up(METADATA_VERSION, 30, 2)),
            "Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the requested downgrade because it might delete metadata information."
        );
        assert_eq!(
            err(up(METADATA_VERSION, 30, 3)),
            "Unsupported metadata.version downgrade from 33 to 30. Unsafe metadata downgrade is not supported in this version."
        );
        assert_eq!(err(up(METADATA_VERSION, 34, 1)), "Invalid update version 34 for feature metadata.version. Local controller 1 only supports versions 7-33");
        let mut g = f.clone();
        g.set(&[(GROUP_VERSION.into(), 0)]);
        let err_g = check_updates(&g, &[up(GROUP_VERSION, 1, 2)], 1, false).unwrap_err();
        assert!(err_g.ends_with("Invalid update version 1 for feature group.version. Can't downgrade to a newer version."), "{err_g}");
        // share.version 1 and streams.version 1 are production: the same ranges with or
        // without unstable levels.
        assert_eq!(supported(SHARE_VERSION, false), supported(SHARE_VERSION, true));
        assert_eq!(supported(STREAMS_VERSION, false), supported(STREAMS_VERSION, true));
        assert_eq!(check_updates(&f, &[up(SHARE_VERSION, 0, 2)], 1, false).unwrap(), vec![(SHARE_VERSION.to_string(), 0)]);
        // All or none: one bad update fails the request.
        assert!(check_updates(&f, &[up(TRANSACTION_VERSION, 1, 2), up(SHARE_VERSION, 3, 1)], 1, false).is_err());
    }

    #[test]
    fn accepted_updates_change_the_levels() {
        let mut f = FinalizedFeatures::default();
        let levels = check_updates(&f, &[up(TRANSACTION_VERSION, 1, 2), up(GROUP_VERSION, 0, 2), up(METADATA_VERSION, 33, 1)], 1, false).unwrap();
        f.set(&levels);
        assert_eq!((f.level(TRANSACTION_VERSION), f.level(GROUP_VERSION)), (1, 0));
        assert!(!f.consumer_groups_enabled());
        assert!(f.iter().all(|(n, _)| n != GROUP_VERSION), "a feature at level 0 is not listed");
        f.set(&check_updates(&f, &[up(GROUP_VERSION, 1, 1), up(TRANSACTION_VERSION, 2, 1)], 1, false).unwrap());
        assert_eq!(f, FinalizedFeatures::default());
        // Named twice: checked each against the current levels, the last wins.
        assert_eq!(
            check_updates(&f, &[up(TRANSACTION_VERSION, 0, 2), up(TRANSACTION_VERSION, 1, 2)], 1, false).unwrap(),
            vec![(TRANSACTION_VERSION.to_string(), 1)]
        );
        // metadata.version never goes down, even in a record checked against an older image.
        f.set(&[(METADATA_VERSION.into(), 20)]);
        assert_eq!(f.level(METADATA_VERSION), 33);
    }
}
