//! A streams group's topology configured against the topics that exist, as Kafka 4.4's
//! `InternalTopicManager.configureTopics` does it (with `RepartitionTopics`,
//! `CopartitionedTopicsEnforcer` and `ChangelogTopics`; the results are Kafka's
//! `ConfiguredTopology`, `ConfiguredSubtopology`, `ConfiguredInternalTopic` and
//! `TopicConfigurationException`). Pure: the metadata image is a function from topic name to
//! partition count.
//!
//! In Kafka's order:
//! 1. every source topic must exist, else MISSING_SOURCE_TOPICS;
//! 2. a repartition topic without a fixed count gets the largest count among the inputs of a
//!    subtopology writing it (a fix point over the topology: no progress is an invalid topology);
//! 3. each co-partition group forces one count on its repartition topics;
//! 4. a changelog gets the largest count among its subtopology's inputs;
//! 5. a subtopology has as many tasks as its largest input;
//! 6. internal topics that exist must have the decided count (else INCORRECTLY_PARTITIONED_TOPICS,
//!    not configured); those that do not are to be created (MISSING_INTERNAL_TOPICS: configured,
//!    yet not ready).
//!
//! A topic-configuration problem is a status of a not-ready result; an invalid topology (Kafka's
//! StreamsInvalidTopologyException) fails the whole heartbeat. Where Kafka iterates a hash map,
//! this iterates subtopologies as declared and topic names sorted, so the output, and which of
//! several problems is reported, is deterministic.
use std::collections::{BTreeMap, BTreeSet};

use super::topology::{StreamsTopology, Subtopology, TopicInfo};

/// Why a configured topology is not ready: Kafka's heartbeat statuses 1 to 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicConfigurationStatus {
    MissingSourceTopics,
    IncorrectlyPartitionedTopics,
    MissingInternalTopics,
}

impl TopicConfigurationStatus {
    /// StreamsGroupHeartbeatResponse's `Status.StatusCode`.
    pub fn code(self) -> i8 {
        match self {
            Self::MissingSourceTopics => 1,
            Self::IncorrectlyPartitionedTopics => 2,
            Self::MissingInternalTopics => 3,
        }
    }

    /// Kafka's description of the status code (the status detail is the exception's message).
    pub fn description(self) -> &'static str {
        match self {
            Self::MissingSourceTopics => "One or more source topics are missing or a source topic regex resolves to zero topics.",
            Self::IncorrectlyPartitionedTopics => "One or more topics expected to be copartitioned are not copartitioned.",
            Self::MissingInternalTopics => "One or more internal topics are missing.",
        }
    }
}

/// A topic-configuration problem: the heartbeat answers it as a status (code, detail = message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TopicConfigurationException {
    pub status: TopicConfigurationStatus,
    pub message: String,
}

impl TopicConfigurationException {
    fn new(status: TopicConfigurationStatus, message: String) -> Self {
        Self { status, message }
    }

    fn incorrectly_partitioned_topics(message: String) -> Self {
        Self::new(TopicConfigurationStatus::IncorrectlyPartitionedTopics, message)
    }
}

/// A topology the group cannot be configured with: the whole heartbeat fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigureError {
    /// Kafka's StreamsInvalidTopologyException: STREAMS_INVALID_TOPOLOGY with this message.
    #[error("{0}")]
    InvalidTopology(String),
    /// A topology Kafka fails on with an unchecked exception (a co-partition index out of range, a
    /// duplicate id or key, a count below 1): Kafka answers UNKNOWN_SERVER_ERROR without a message.
    /// The message says what was wrong, for the log.
    #[error("{0}")]
    Malformed(String),
}

/// A repartition or changelog topic with the partition count decided for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredInternalTopic {
    pub name: String,
    pub number_of_partitions: i32,
    /// None: the broker's default (the topology said 0).
    pub replication_factor: Option<i16>,
    pub topic_configs: BTreeMap<String, String>,
}

impl ConfiguredInternalTopic {
    /// The replication factor to create the topic with (-1: the broker's default).
    pub fn creatable_replication_factor(&self) -> i16 {
        self.replication_factor.unwrap_or(-1)
    }

    /// The replication factor StreamsGroupDescribe shows (0: the broker's default).
    pub fn described_replication_factor(&self) -> i16 {
        self.replication_factor.unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredSubtopology {
    /// The largest partition count among the source and repartition source topics (> 0); a
    /// topic with fewer partitions has no partition for some tasks.
    pub number_of_tasks: i32,
    pub source_topics: BTreeSet<String>,
    pub repartition_source_topics: BTreeMap<String, ConfiguredInternalTopic>,
    pub repartition_sink_topics: BTreeSet<String>,
    pub state_changelog_topics: BTreeMap<String, ConfiguredInternalTopic>,
}

impl ConfiguredSubtopology {
    /// Its tasks have state (and so standby replicas): it has a changelog (Kafka's TopologyMetadata).
    pub fn is_stateful(&self) -> bool {
        !self.state_changelog_topics.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredTopology {
    pub topology_epoch: i32,
    /// By subtopology id. None when the topics do not fit the topology (missing sources, wrong
    /// counts); present while internal topics are missing.
    pub subtopologies: Option<BTreeMap<String, ConfiguredSubtopology>>,
    /// By name; non-empty only with MISSING_INTERNAL_TOPICS.
    pub internal_topics_to_be_created: BTreeMap<String, ConfiguredInternalTopic>,
    pub topic_configuration_exception: Option<TopicConfigurationException>,
}

impl ConfiguredTopology {
    /// Tasks can be assigned: nothing is missing or wrongly partitioned.
    pub fn is_ready(&self) -> bool {
        self.topic_configuration_exception.is_none()
    }

    pub fn subtopology(&self, id: &str) -> Option<&ConfiguredSubtopology> {
        self.subtopologies.as_ref()?.get(id)
    }
}

/// Configures `topology` against the topics that exist (`partitions_of`: a topic's partition
/// count in the metadata image, None if it does not exist).
pub fn configure(topology: &StreamsTopology, partitions_of: &dyn Fn(&str) -> Option<i32>) -> Result<ConfiguredTopology, ConfigureError> {
    // What Kafka's StreamsTopology refuses when built from the request or record.
    if topology.epoch < 0 {
        return Err(malformed("Topology epoch must be non-negative."));
    }
    let mut ids = BTreeSet::new();
    for s in &topology.subtopologies {
        if !ids.insert(s.id.as_str()) {
            return Err(malformed(format!("Duplicate subtopology id {}", s.id)));
        }
    }
    // Kafka resolves the co-partition groups before anything else, outside its error handling.
    let copartition_groups = topology.subtopologies.iter().map(copartition_groups).collect::<Result<Vec<_>, _>>()?;
    match configure_topics(topology, &copartition_groups, partitions_of) {
        Ok(configured) => Ok(configured),
        Err(Failure::Topics(e)) => Ok(ConfiguredTopology {
            topology_epoch: topology.epoch,
            subtopologies: None,
            internal_topics_to_be_created: BTreeMap::new(),
            topic_configuration_exception: Some(e),
        }),
        Err(Failure::Fatal(e)) => Err(e),
    }
}

/// The ways configuring stops: a status on the result, or a failed heartbeat.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    Topics(TopicConfigurationException),
    Fatal(ConfigureError),
}

impl From<TopicConfigurationException> for Failure {
    fn from(e: TopicConfigurationException) -> Self {
        Self::Topics(e)
    }
}

impl From<ConfigureError> for Failure {
    fn from(e: ConfigureError) -> Self {
        Self::Fatal(e)
    }
}

fn malformed(message: impl Into<String>) -> ConfigureError {
    ConfigureError::Malformed(message.into())
}

/// Kafka's topicPartitionCountProvider: a topic's count in the metadata image, else the count
/// decided for it so far (internal topics that do not exist yet).
struct Decided<'a> {
    image: &'a dyn Fn(&str) -> Option<i32>,
    internal: BTreeMap<&'a str, i32>,
}

impl Decided<'_> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        (self.image)(topic).or_else(|| self.internal.get(topic).copied())
    }
}

fn configure_topics<'a>(
    topology: &'a StreamsTopology,
    copartition_groups: &[Vec<BTreeSet<&'a str>>],
    image: &'a dyn Fn(&str) -> Option<i32>,
) -> Result<ConfiguredTopology, Failure> {
    let subtopologies = &topology.subtopologies;
    let missing: BTreeSet<&str> = subtopologies.iter().flat_map(|s| &s.source_topics).map(String::as_str).filter(|t| image(t).is_none()).collect();
    if !missing.is_empty() {
        let message = format!("Source topics {} are missing.", summarize_topics(missing.iter().copied()));
        return Err(TopicConfigurationException::new(TopicConfigurationStatus::MissingSourceTopics, message).into());
    }

    let mut decided = Decided { image, internal: repartition_topics(subtopologies, image)? };
    let mut enforcer = CopartitionedTopicsEnforcer::new(subtopologies);
    for group in copartition_groups.iter().flatten() {
        let counts = enforcer.enforce(group, &|t: &str| decided.partitions(t))?;
        decided.internal.extend(counts);
    }
    let changelogs = changelog_topics(subtopologies, &|t: &str| decided.partitions(t))?;
    decided.internal.extend(changelogs);

    let mut configured = BTreeMap::new();
    for s in subtopologies {
        configured.insert(s.id.clone(), configured_subtopology(s, &decided)?);
    }

    // Internal topics to create: those that do not exist; those that do must fit.
    let mut expected = BTreeMap::new();
    for s in configured.values() {
        for t in s.repartition_source_topics.values().chain(s.state_changelog_topics.values()) {
            expected.insert(t.name.clone(), t.clone());
        }
    }
    let mut to_create = BTreeMap::new();
    for (name, topic) in expected {
        match image(&name) {
            Some(found) if found != topic.number_of_partitions => {
                let message = format!("Existing topic {name} has different number of partitions: expected {}, found {found}", topic.number_of_partitions);
                return Err(TopicConfigurationException::incorrectly_partitioned_topics(message).into());
            }
            Some(_) => {}
            None => {
                to_create.insert(name, topic);
            }
        }
    }
    let topic_configuration_exception = (!to_create.is_empty()).then(|| {
        let message = format!("Internal topics are missing: {}", summarize_topics(to_create.keys().map(String::as_str)));
        TopicConfigurationException::new(TopicConfigurationStatus::MissingInternalTopics, message)
    });
    Ok(ConfiguredTopology {
        topology_epoch: topology.epoch,
        subtopologies: Some(configured),
        internal_topics_to_be_created: to_create,
        topic_configuration_exception,
    })
}

/// A subtopology's co-partition groups as topic names (its source topics and repartition source
/// topics by index; regexes are refused before this).
fn copartition_groups(s: &Subtopology) -> Result<Vec<BTreeSet<&str>>, ConfigureError> {
    fn at<T>(list: &[T], i: i16) -> Result<&T, ConfigureError> {
        usize::try_from(i).ok().and_then(|i| list.get(i)).ok_or_else(|| malformed(format!("Index {i} out of bounds for length {}", list.len())))
    }
    s.copartition_groups
        .iter()
        .map(|g| {
            let sources = g.source_topics.iter().map(|&i| at(&s.source_topics, i).map(String::as_str));
            let repartition = g.repartition_source_topics.iter().map(|&i| at(&s.repartition_source_topics, i).map(|t| t.name.as_str()));
            sources.chain(repartition).collect()
        })
        .collect()
}

/// A subtopology's inputs: source and repartition source topics.
fn input_topics(s: &Subtopology) -> impl Iterator<Item = &str> {
    s.source_topics.iter().map(String::as_str).chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
}

/// Kafka's RepartitionTopics: the partition count of every repartition topic. Fixed counts are
/// kept; a sink without one gets the largest count among the inputs of the subtopology writing
/// it that are known (repartition sources decided so far, source topics that exist).
///
/// Kafka sweeps all subtopologies in passes until every sink is known, failing on a pass without
/// progress: quadratic in a long chain. This visits the same subtopologies at the same points of
/// the same passes, skipping the visits that cannot decide anything: a subtopology is visited in
/// the first pass, and again only once one of its repartition sources became known; a sink decided
/// at subtopology i is seen by a later subtopology in this pass, by an earlier one in the next.
fn repartition_topics<'a>(subtopologies: &'a [Subtopology], partitions: &dyn Fn(&str) -> Option<i32>) -> Result<BTreeMap<&'a str, i32>, ConfigureError> {
    let mut counts: BTreeMap<&str, i32> = BTreeMap::new();
    let mut readers: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (i, s) in subtopologies.iter().enumerate() {
        for t in &s.repartition_source_topics {
            if t.partitions != 0 {
                counts.insert(&t.name, t.partitions);
            }
            readers.entry(&t.name).or_default().insert(i);
        }
    }
    // (pass, subtopology index): Kafka's visiting order.
    let mut visits: BTreeSet<(usize, usize)> = (0..subtopologies.len()).map(|i| (0, i)).collect();
    let mut decided = vec![false; subtopologies.len()];
    while let Some((pass, i)) = visits.pop_first() {
        let s = &subtopologies[i];
        if decided[i] {
            continue;
        }
        let known = s.repartition_source_topics.iter().filter_map(|t| counts.get(t.name.as_str()).copied());
        let Some(n) = known.chain(s.source_topics.iter().filter_map(|t| partitions(t))).max() else { continue };
        // Every sink of this subtopology gets n: deciding one cannot raise the maximum.
        decided[i] = true;
        for sink in &s.repartition_sink_topics {
            if counts.contains_key(sink.as_str()) {
                continue;
            }
            counts.insert(sink, n);
            for &r in readers.get(sink.as_str()).into_iter().flatten() {
                if !decided[r] {
                    visits.insert((if r > i { pass } else { pass + 1 }, r));
                }
            }
        }
    }
    if subtopologies.iter().flat_map(|s| &s.repartition_sink_topics).any(|t| !counts.contains_key(t.as_str())) {
        return Err(ConfigureError::InvalidTopology(
            "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.".into(),
        ));
    }
    if subtopologies.iter().flat_map(|s| &s.repartition_source_topics).any(|t| !counts.contains_key(t.name.as_str())) {
        return Err(ConfigureError::InvalidTopology(
            "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into(),
        ));
    }
    Ok(counts)
}

/// Kafka's CopartitionedTopicsEnforcer: the topics of a co-partition group must have one
/// partition count, which its repartition topics are given.
struct CopartitionedTopicsEnforcer<'a> {
    /// Repartition topics whose count the topology fixes (`repartition()` with a count), in any subtopology.
    fixed: BTreeSet<&'a str>,
    flexible: BTreeSet<&'a str>,
    /// Once asked: the count all fixed topics agree on, None if they do not. Constant while
    /// configuring: a fixed topic's count is the image's or its fixed one, and enforcing never
    /// changes it (it fails instead).
    fixed_count: Option<Option<i32>>,
}

impl<'a> CopartitionedTopicsEnforcer<'a> {
    fn new(subtopologies: &'a [Subtopology]) -> Self {
        let mut fixed = BTreeSet::new();
        let mut flexible = BTreeSet::new();
        for t in subtopologies.iter().flat_map(|s| &s.repartition_source_topics) {
            (if t.partitions != 0 { &mut fixed } else { &mut flexible }).insert(t.name.as_str());
        }
        Self { fixed, flexible, fixed_count: None }
    }

    /// The count each repartition topic of `group` must have.
    fn enforce(&mut self, group: &BTreeSet<&'a str>, partitions: &dyn Fn(&str) -> Option<i32>) -> Result<Vec<(&'a str, i32)>, Failure> {
        let mut repartition = BTreeMap::new();
        let mut external = BTreeMap::new();
        for &t in group {
            let n = partitions(t).ok_or_else(|| malformed(format!("Number of partitions is not set for topic: {t}")))?;
            (if self.fixed.contains(t) || self.flexible.contains(t) { &mut repartition } else { &mut external }).insert(t, n);
        }
        let n = match external.values().next() {
            // External topics decide, and must agree.
            Some(&first) => {
                if external.values().any(|&n| n != first) {
                    return Err(not_same_partitions(&external).into());
                }
                first
            }
            None if repartition.is_empty() => return Ok(Vec::new()),
            // Kafka asks whether the topology's fixed topics agree, all of them and not only this
            // group's, and reports this group's topics if they do not.
            None if !self.fixed.is_empty() => match self.fixed_count(partitions)? {
                Some(n) => n,
                None => return Err(not_same_partitions(&repartition).into()),
            },
            None => match repartition.values().copied().fold(0, i32::max) {
                0 => {
                    let names = repartition.keys().copied().collect::<Vec<_>>().join(", ");
                    return Err(
                        ConfigureError::InvalidTopology(format!("All topics in the copartition group had undefined partition number: [{names}]")).into()
                    );
                }
                max => max,
            },
        };
        for (&t, &v) in &repartition {
            if self.fixed.contains(t) && v != n {
                let message = format!("Number of partitions [{v}] of repartition topic [{t}] doesn't match number of partitions [{n}] of the source topic.");
                return Err(TopicConfigurationException::incorrectly_partitioned_topics(message).into());
            }
        }
        Ok(repartition.into_keys().map(|t| (t, n)).collect())
    }

    fn fixed_count(&mut self, partitions: &dyn Fn(&str) -> Option<i32>) -> Result<Option<i32>, ConfigureError> {
        if let Some(count) = self.fixed_count {
            return Ok(count);
        }
        let mut agreed = None;
        for &t in &self.fixed {
            let n = partitions(t).ok_or_else(|| malformed(format!("Number of partitions is not set for topic: {t}")))?;
            match agreed {
                Some(a) if a != n => {
                    self.fixed_count = Some(None);
                    return Ok(None);
                }
                _ => agreed = Some(n),
            }
        }
        self.fixed_count = Some(agreed);
        Ok(agreed)
    }
}

/// As Kafka prints it: a Java sorted map in brackets, "[{a=1, b=2}]".
fn not_same_partitions(counts: &BTreeMap<&str, i32>) -> TopicConfigurationException {
    let entries = counts.iter().map(|(t, n)| format!("{t}={n}")).collect::<Vec<_>>().join(", ");
    TopicConfigurationException::incorrectly_partitioned_topics(format!("Following topics do not have the same number of partitions: [{{{entries}}}]"))
}

/// Kafka's ChangelogTopics: a changelog has as many partitions as its subtopology's largest input.
fn changelog_topics<'a>(subtopologies: &'a [Subtopology], partitions: &dyn Fn(&str) -> Option<i32>) -> Result<BTreeMap<&'a str, i32>, ConfigureError> {
    let mut out = BTreeMap::new();
    for s in subtopologies {
        let mut max = None;
        for t in input_topics(s) {
            let n = partitions(t).ok_or_else(|| malformed(format!("No partition count for source topic {t}")))?;
            max = max.max(Some(n));
        }
        // Kafka fails here on any subtopology without inputs, stateful or not.
        let Some(n) = max else {
            return Err(ConfigureError::InvalidTopology(format!("No source topics found for subtopology {}", s.id)));
        };
        for t in &s.state_changelog_topics {
            out.insert(t.name.as_str(), n);
        }
    }
    Ok(out)
}

fn configured_subtopology(s: &Subtopology, decided: &Decided<'_>) -> Result<ConfiguredSubtopology, ConfigureError> {
    let mut number_of_tasks = None;
    for t in input_topics(s) {
        let n = decided.partitions(t).ok_or_else(|| malformed(format!("Number of partitions must be set for topic {t}")))?;
        number_of_tasks = number_of_tasks.max(Some(n));
    }
    let number_of_tasks = number_of_tasks.ok_or_else(|| malformed("Subtopology does not contain any source topics"))?;
    if number_of_tasks <= 0 {
        return Err(malformed("Number of tasks must be positive"));
    }
    Ok(ConfiguredSubtopology {
        number_of_tasks,
        source_topics: s.source_topics.iter().cloned().collect(),
        repartition_source_topics: configured_internal_topics(&s.repartition_source_topics, decided)?,
        repartition_sink_topics: s.repartition_sink_topics.iter().cloned().collect(),
        state_changelog_topics: configured_internal_topics(&s.state_changelog_topics, decided)?,
    })
}

fn configured_internal_topics(topics: &[TopicInfo], decided: &Decided<'_>) -> Result<BTreeMap<String, ConfiguredInternalTopic>, ConfigureError> {
    let mut out = BTreeMap::new();
    for info in topics {
        // A count the topology fixes stands as given; the others were decided above.
        let number_of_partitions = match info.partitions {
            0 => decided
                .internal
                .get(info.name.as_str())
                .copied()
                .ok_or_else(|| malformed(format!("Number of partitions must be set for topic {}", info.name)))?,
            n => n,
        };
        if number_of_partitions < 1 {
            return Err(malformed(format!("Number of partitions of topic {} must be at least 1.", info.name)));
        }
        let mut topic_configs = BTreeMap::new();
        for (k, v) in &info.configs {
            if topic_configs.insert(k.clone(), v.clone()).is_some() {
                return Err(malformed(format!("Duplicate config {k} of topic {}", info.name)));
            }
        }
        let topic = ConfiguredInternalTopic {
            name: info.name.clone(),
            number_of_partitions,
            replication_factor: (info.replication_factor != 0).then_some(info.replication_factor),
            topic_configs,
        };
        if out.insert(info.name.clone(), topic).is_some() {
            return Err(malformed(format!("Duplicate topic {} in a subtopology", info.name)));
        }
    }
    Ok(out)
}

/// Up to three names, then how many more: "a, b, c and 2 additional topics".
fn summarize_topics<'s>(topics: impl ExactSizeIterator<Item = &'s str>) -> String {
    let size = topics.len();
    if size == 0 {
        return "<none>".into();
    }
    let mut out = topics.take(3).collect::<Vec<_>>().join(", ");
    if size > 3 {
        out.push_str(&format!(" and {} additional topics", size - 3));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::streams::topology::CopartitionGroup;

    fn topic(name: &str, partitions: i32) -> TopicInfo {
        TopicInfo { name: name.into(), partitions, ..Default::default() }
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn sub(id: &str, sources: &[&str], sinks: &[&str], repartition_sources: Vec<TopicInfo>, changelogs: Vec<TopicInfo>) -> Subtopology {
        Subtopology {
            id: id.into(),
            source_topics: strings(sources),
            repartition_sink_topics: strings(sinks),
            repartition_source_topics: repartition_sources,
            state_changelog_topics: changelogs,
            ..Default::default()
        }
    }

    fn image(topics: &[(&str, i32)]) -> impl Fn(&str) -> Option<i32> {
        let topics: BTreeMap<String, i32> = topics.iter().map(|&(t, n)| (t.to_string(), n)).collect();
        move |t| topics.get(t).copied()
    }

    fn invalid(message: &str) -> ConfigureError {
        ConfigureError::InvalidTopology(message.into())
    }

    fn status(c: &ConfiguredTopology) -> Option<(TopicConfigurationStatus, &str)> {
        c.topic_configuration_exception.as_ref().map(|e| (e.status, e.message.as_str()))
    }

    // InternalTopicManagerTest's topology: source_topic1 → repartition_topic (RF 3) → with
    // source_topic2, co-partitioned; a changelog on each side.
    fn internal_topic_manager_topology() -> StreamsTopology {
        let mut changelog1 = topic("state_changelog_topic1", 0);
        changelog1.configs = vec![("cleanup.policy".into(), "compact".into())];
        let mut repartition = topic("repartition_topic", 0);
        repartition.replication_factor = 3;
        let mut s2 = sub("subtopology2", &["source_topic2"], &[], vec![repartition], vec![topic("state_changelog_topic2", 0)]);
        s2.copartition_groups = vec![CopartitionGroup { source_topics: vec![0], repartition_source_topics: vec![0], ..Default::default() }];
        StreamsTopology { epoch: 3, subtopologies: vec![sub("subtopology1", &["source_topic1"], &["repartition_topic"], vec![], vec![changelog1]), s2] }
    }

    #[test]
    fn missing_source_topic_is_a_status_without_subtopologies() {
        let c = configure(&internal_topic_manager_topology(), &image(&[("source_topic1", 2)])).unwrap();
        assert_eq!(status(&c), Some((TopicConfigurationStatus::MissingSourceTopics, "Source topics source_topic2 are missing.")));
        assert!(c.subtopologies.is_none() && c.internal_topics_to_be_created.is_empty() && !c.is_ready());
        assert_eq!(c.topology_epoch, 3);
    }

    #[test]
    fn configure_topics_decides_counts_and_lists_missing_internal_topics() {
        let c = configure(&internal_topic_manager_topology(), &image(&[("source_topic1", 2), ("source_topic2", 2), ("state_changelog_topic2", 2)])).unwrap();
        let to_create: Vec<_> =
            c.internal_topics_to_be_created.values().map(|t| (t.name.as_str(), t.number_of_partitions, t.creatable_replication_factor())).collect();
        assert_eq!(to_create, vec![("repartition_topic", 2, 3), ("state_changelog_topic1", 2, -1)]);
        assert_eq!(c.internal_topics_to_be_created["state_changelog_topic1"].topic_configs["cleanup.policy"], "compact");
        assert_eq!(
            status(&c),
            Some((TopicConfigurationStatus::MissingInternalTopics, "Internal topics are missing: repartition_topic, state_changelog_topic1"))
        );

        let internal = |name: &str, rf: Option<i16>, configs: &[(&str, &str)]| ConfiguredInternalTopic {
            name: name.into(),
            number_of_partitions: 2,
            replication_factor: rf,
            topic_configs: configs.iter().map(|&(k, v)| (k.into(), v.into())).collect(),
        };
        let expected = BTreeMap::from([
            (
                "subtopology1".to_string(),
                ConfiguredSubtopology {
                    number_of_tasks: 2,
                    source_topics: BTreeSet::from(["source_topic1".to_string()]),
                    repartition_source_topics: BTreeMap::new(),
                    repartition_sink_topics: BTreeSet::from(["repartition_topic".to_string()]),
                    state_changelog_topics: BTreeMap::from([(
                        "state_changelog_topic1".to_string(),
                        internal("state_changelog_topic1", None, &[("cleanup.policy", "compact")]),
                    )]),
                },
            ),
            (
                "subtopology2".to_string(),
                ConfiguredSubtopology {
                    number_of_tasks: 2,
                    source_topics: BTreeSet::from(["source_topic2".to_string()]),
                    repartition_source_topics: BTreeMap::from([("repartition_topic".to_string(), internal("repartition_topic", Some(3), &[]))]),
                    repartition_sink_topics: BTreeSet::new(),
                    state_changelog_topics: BTreeMap::from([("state_changelog_topic2".to_string(), internal("state_changelog_topic2", None, &[]))]),
                },
            ),
        ]);
        assert_eq!(c.subtopologies, Some(expected));
        assert!(c.subtopology("subtopology1").is_some_and(ConfiguredSubtopology::is_stateful));
    }

    // Kafka Streams' word count: words → groupBy (repartition) → count (changelog).
    fn word_count() -> StreamsTopology {
        StreamsTopology {
            epoch: 0,
            subtopologies: vec![
                sub("0", &["words"], &["wc-count-repartition"], vec![], vec![]),
                sub("1", &[], &[], vec![topic("wc-count-repartition", 0)], vec![topic("wc-count-changelog", 0)]),
            ],
        }
    }

    #[test]
    fn word_count_is_ready_once_its_internal_topics_exist() {
        let c = configure(&word_count(), &image(&[("words", 3)])).unwrap();
        assert!(!c.is_ready());
        assert_eq!(c.internal_topics_to_be_created.keys().collect::<Vec<_>>(), vec!["wc-count-changelog", "wc-count-repartition"]);
        assert!(c.internal_topics_to_be_created.values().all(|t| t.number_of_partitions == 3));
        // Configured while not ready: the assignor's view is there already.
        let tasks: Vec<_> = c.subtopologies.iter().flatten().map(|(id, s)| (id.as_str(), s.number_of_tasks, s.is_stateful())).collect();
        assert_eq!(tasks, vec![("0", 3, false), ("1", 3, true)]);

        let c = configure(&word_count(), &image(&[("words", 3), ("wc-count-repartition", 3), ("wc-count-changelog", 3)])).unwrap();
        assert!(c.is_ready() && c.internal_topics_to_be_created.is_empty());
        assert_eq!(c.subtopology("1").map(|s| s.number_of_tasks), Some(3));
    }

    #[test]
    fn an_existing_internal_topic_with_another_count_is_incorrectly_partitioned() {
        let c = configure(&word_count(), &image(&[("words", 3), ("wc-count-repartition", 3), ("wc-count-changelog", 5)])).unwrap();
        assert_eq!(
            status(&c),
            Some((
                TopicConfigurationStatus::IncorrectlyPartitionedTopics,
                "Existing topic wc-count-changelog has different number of partitions: expected 3, found 5"
            ))
        );
        assert!(c.subtopologies.is_none() && c.internal_topics_to_be_created.is_empty());
    }

    #[test]
    fn missing_topics_are_summarized_after_three() {
        let names = ["a", "b", "c", "d", "e"];
        let topology = StreamsTopology { epoch: 1, subtopologies: vec![sub("0", &names, &[], vec![], vec![])] };
        let c = configure(&topology, &image(&[])).unwrap();
        assert_eq!(status(&c).map(|s| s.1), Some("Source topics a, b, c and 2 additional topics are missing."));
        assert_eq!(summarize_topics(["x"].into_iter()), "x");
        assert_eq!(summarize_topics(["x", "y", "z"].into_iter()), "x, y, z");
        assert_eq!(summarize_topics(std::iter::empty()), "<none>");
    }

    #[test]
    fn statuses_have_kafkas_codes() {
        assert_eq!(TopicConfigurationStatus::MissingSourceTopics.code(), 1);
        assert_eq!(TopicConfigurationStatus::IncorrectlyPartitionedTopics.code(), 2);
        assert_eq!(TopicConfigurationStatus::MissingInternalTopics.code(), 3);
        assert_eq!(TopicConfigurationStatus::MissingInternalTopics.description(), "One or more internal topics are missing.");
        let e = TopicConfigurationException::incorrectly_partitioned_topics("test".into());
        assert_eq!((e.status, e.to_string()), (TopicConfigurationStatus::IncorrectlyPartitionedTopics, "test".to_string()));
    }

    #[test]
    fn replication_factor_zero_is_the_brokers_default() {
        let t = ConfiguredInternalTopic { name: "t".into(), number_of_partitions: 1, replication_factor: None, topic_configs: BTreeMap::new() };
        assert_eq!((t.creatable_replication_factor(), t.described_replication_factor()), (-1, 0));
        let t = ConfiguredInternalTopic { replication_factor: Some(2), ..t };
        assert_eq!((t.creatable_replication_factor(), t.described_replication_factor()), (2, 2));
    }

    #[test]
    fn an_empty_topology_is_ready() {
        let c = configure(&StreamsTopology::default(), &image(&[])).unwrap();
        assert!(c.is_ready());
        assert_eq!(c.subtopologies, Some(BTreeMap::new()));
    }

    #[test]
    fn malformed_topologies_fail_without_panicking() {
        let bad_index = |g: CopartitionGroup| StreamsTopology {
            epoch: 0,
            subtopologies: vec![Subtopology { copartition_groups: vec![g], ..sub("0", &["in"], &[], vec![], vec![]) }],
        };
        let present = image(&[("in", 1)]);
        for g in [
            CopartitionGroup { source_topics: vec![1], ..Default::default() },
            CopartitionGroup { source_topics: vec![-1], ..Default::default() },
            CopartitionGroup { repartition_source_topics: vec![0], ..Default::default() },
        ] {
            assert!(matches!(configure(&bad_index(g), &present), Err(ConfigureError::Malformed(_))));
        }
        let duplicate_ids = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["in"], &[], vec![], vec![]), sub("0", &["in"], &[], vec![], vec![])] };
        assert!(matches!(configure(&duplicate_ids, &present), Err(ConfigureError::Malformed(_))));
        let negative_epoch = StreamsTopology { epoch: -1, ..word_count() };
        assert!(matches!(configure(&negative_epoch, &present), Err(ConfigureError::Malformed(_))));
        // A fixed count below 1 (Kafka: IllegalArgumentException in ConfiguredSubtopology).
        let negative =
            StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["in"], &["r"], vec![], vec![]), sub("1", &[], &[], vec![topic("r", -4)], vec![])] };
        assert!(matches!(configure(&negative, &present), Err(ConfigureError::Malformed(_))));
        let mut dup_config = topic("c", 0);
        dup_config.configs = vec![("k".into(), "1".into()), ("k".into(), "2".into())];
        let dup_config = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["in"], &[], vec![], vec![dup_config])] };
        assert!(matches!(configure(&dup_config, &present), Err(ConfigureError::Malformed(_))));
        let dup_changelog = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["in"], &[], vec![], vec![topic("c", 0), topic("c", 0)])] };
        assert!(matches!(configure(&dup_changelog, &present), Err(ConfigureError::Malformed(_))));
    }

    #[test]
    fn invalid_topologies_fail_the_heartbeat() {
        let looped = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &[], &["r"], vec![topic("r", 0)], vec![])] };
        assert_eq!(
            configure(&looped, &image(&[])),
            Err(invalid("Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."))
        );
        let no_inputs = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &[], &[], vec![], vec![])] };
        assert_eq!(configure(&no_inputs, &image(&[])), Err(invalid("No source topics found for subtopology 0")));
    }

    #[test]
    fn copartitioning_forces_the_sources_count_on_repartition_topics() {
        // A join of a re-keyed stream (r, derived from a 5-partition topic) with a 2-partition table.
        let mut joined = sub("1", &["table"], &[], vec![topic("r", 0)], vec![topic("store-changelog", 0)]);
        joined.copartition_groups = vec![CopartitionGroup { source_topics: vec![0], repartition_source_topics: vec![0], ..Default::default() }];
        let topology = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["stream"], &["r"], vec![], vec![]), joined] };
        let c = configure(&topology, &image(&[("stream", 5), ("table", 2)])).unwrap();
        assert_eq!(
            c.internal_topics_to_be_created.values().map(|t| (t.name.as_str(), t.number_of_partitions)).collect::<Vec<_>>(),
            vec![("r", 2), ("store-changelog", 2)]
        );
        assert_eq!(c.subtopology("1").map(|s| s.number_of_tasks), Some(2));

        // Fixed at 4 by the topology: it cannot be co-partitioned with the table.
        let mut fixed = topology.clone();
        fixed.subtopologies[1].repartition_source_topics[0].partitions = 4;
        let c = configure(&fixed, &image(&[("stream", 5), ("table", 2)])).unwrap();
        assert_eq!(
            status(&c),
            Some((
                TopicConfigurationStatus::IncorrectlyPartitionedTopics,
                "Number of partitions [4] of repartition topic [r] doesn't match number of partitions [2] of the source topic."
            ))
        );
        assert!(c.subtopologies.is_none());
    }

    #[test]
    fn fixed_repartition_topics_must_agree_across_the_whole_topology() {
        // Kafka compares every fixed repartition topic, even those outside the group.
        let mut joined = sub("2", &[], &[], vec![topic("r1", 0), topic("r2", 0)], vec![]);
        joined.copartition_groups = vec![CopartitionGroup { repartition_source_topics: vec![0, 1], ..Default::default() }];
        let topology = StreamsTopology {
            epoch: 0,
            subtopologies: vec![
                sub("0", &["a"], &["r1", "r2", "f1"], vec![], vec![]),
                sub("1", &["b"], &["f2"], vec![topic("f1", 3)], vec![]),
                joined,
                sub("3", &[], &[], vec![topic("f2", 6)], vec![]),
            ],
        };
        let c = configure(&topology, &image(&[("a", 2), ("b", 2)])).unwrap();
        assert_eq!(
            status(&c),
            Some((TopicConfigurationStatus::IncorrectlyPartitionedTopics, "Following topics do not have the same number of partitions: [{r1=2, r2=2}]"))
        );
        // When they agree, the group gets their count.
        let mut agreeing = topology.clone();
        agreeing.subtopologies[3].repartition_source_topics[0].partitions = 3;
        let c = configure(&agreeing, &image(&[("a", 2), ("b", 2)])).unwrap();
        assert_eq!(c.subtopology("2").map(|s| s.number_of_tasks), Some(3));
        assert_eq!(c.internal_topics_to_be_created.get("r1").map(|t| t.number_of_partitions), Some(3));
    }

    // RepartitionTopicsTest.

    fn source_counts(t: &str) -> Option<i32> {
        matches!(t, "source1" | "source2").then_some(3)
    }

    #[test]
    fn repartition_topics_keep_fixed_counts() {
        let subs = [sub("s1", &["source1", "source2"], &["repartition1"], vec![], vec![]), sub("s2", &[], &[], vec![topic("repartition1", 4)], vec![])];
        assert_eq!(repartition_topics(&subs, &source_counts), Ok(BTreeMap::from([("repartition1", 4)])));
    }

    #[test]
    fn repartition_topics_fail_on_loops() {
        let subs = [sub("s1", &[], &["repartitionWithoutPartitionCount"], vec![topic("repartitionWithoutPartitionCount", 0)], vec![])];
        assert_eq!(
            repartition_topics(&subs, &source_counts),
            Err(invalid("Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."))
        );
    }

    #[test]
    fn repartition_topics_fail_on_a_source_no_one_writes() {
        let subs = [sub("s1", &[], &[], vec![topic("repartitionWithoutPartitionCount", 0)], vec![])];
        assert_eq!(
            repartition_topics(&subs, &source_counts),
            Err(invalid(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."
            ))
        );
    }

    #[test]
    fn repartition_topics_take_the_count_of_an_upstream_source_topic() {
        let subs = [
            sub("s0", &["source1"], &["repartition1", "repartitionWithoutPartitionCount"], vec![topic("repartition2", 2)], vec![]),
            sub("s1", &[], &[], vec![topic("repartition1", 4), topic("repartitionWithoutPartitionCount", 0)], vec![]),
        ];
        assert_eq!(
            repartition_topics(&subs, &source_counts),
            Ok(BTreeMap::from([("repartition1", 4), ("repartition2", 2), ("repartitionWithoutPartitionCount", 3)]))
        );
    }

    #[test]
    fn repartition_topics_take_the_count_of_an_upstream_repartition_topic() {
        let subs = [
            sub("s0", &["source1"], &["repartitionWithoutPartitionCount"], vec![topic("repartition1", 4)], vec![]),
            sub("s1", &[], &["repartition1"], vec![topic("repartitionWithoutPartitionCount", 0)], vec![]),
        ];
        assert_eq!(repartition_topics(&subs, &source_counts), Ok(BTreeMap::from([("repartition1", 4), ("repartitionWithoutPartitionCount", 4)])));
    }

    #[test]
    fn no_repartition_topics_none_decided() {
        assert_eq!(repartition_topics(&[sub("s0", &["source1"], &[], vec![], vec![])], &source_counts), Ok(BTreeMap::new()));
    }

    #[test]
    fn repartition_topics_resolve_a_long_chain_declared_backwards() {
        // Kafka needs one pass per link here; this must stay fast and give the same counts.
        let n = 2000;
        let mut subs: Vec<Subtopology> =
            (1..n).rev().map(|i| sub(&i.to_string(), &[], &[&format!("r{i}")], vec![topic(&format!("r{}", i - 1), 0)], vec![])).collect();
        subs.push(sub("0", &["source1"], &["r0"], vec![], vec![]));
        let counts = repartition_topics(&subs, &source_counts).unwrap();
        assert_eq!(counts.len(), n);
        assert!(counts.values().all(|&c| c == 3));
    }

    #[test]
    fn repartition_topics_follow_kafkas_pass_order() {
        // Pass 0 decides a0 (2) and a1 (5); in pass 1, "0" decides b (2), then "1" sees b but not
        // yet c (decided by "2" after it): out gets 2, not 5.
        let subs = [
            sub("0", &[], &["b"], vec![topic("a0", 0)], vec![]),
            sub("1", &[], &["out"], vec![topic("b", 0), topic("c", 0)], vec![]),
            sub("2", &[], &["c"], vec![topic("a1", 0)], vec![]),
            sub("3", &["e0"], &["a0"], vec![], vec![]),
            sub("4", &["e1"], &["a1"], vec![], vec![]),
        ];
        let existing = image(&[("e0", 2), ("e1", 5)]);
        let counts = repartition_topics(&subs, &existing).unwrap();
        assert_eq!((counts["b"], counts["c"], counts["out"]), (2, 5, 2));
        let counts = counts.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(repartition_topics_by_passes(&subs, &existing), Ok(counts));
    }

    /// Kafka's RepartitionTopics as written: passes over every subtopology until all sinks are known.
    fn repartition_topics_by_passes(subs: &[Subtopology], partitions: &dyn Fn(&str) -> Option<i32>) -> Result<BTreeMap<String, i32>, ConfigureError> {
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        for t in subs.iter().flat_map(|s| &s.repartition_source_topics).filter(|t| t.partitions != 0) {
            counts.insert(t.name.clone(), t.partitions);
        }
        loop {
            let (mut needed, mut progress) = (false, false);
            for s in subs {
                for sink in &s.repartition_sink_topics {
                    if counts.contains_key(sink) {
                        continue;
                    }
                    let known = s.repartition_source_topics.iter().filter_map(|t| counts.get(&t.name).copied());
                    match known.chain(s.source_topics.iter().filter_map(|t| partitions(t))).max() {
                        None => needed = true,
                        Some(n) => {
                            counts.insert(sink.clone(), n);
                            progress = true;
                        }
                    }
                }
            }
            if needed && !progress {
                return Err(invalid(
                    "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.",
                ));
            }
            if !needed {
                break;
            }
        }
        if subs.iter().flat_map(|s| &s.repartition_source_topics).any(|t| !counts.contains_key(&t.name)) {
            return Err(invalid(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.",
            ));
        }
        Ok(counts)
    }

    #[test]
    fn repartition_topics_match_kafkas_passes_on_random_topologies() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        let pick = |next: &mut dyn FnMut(u64) -> u64, prefix: &str, pool: u64, most: u64| -> Vec<String> {
            (0..next(most + 1)).map(|_| format!("{prefix}{}", next(pool))).collect()
        };
        let existing = |t: &str| match t {
            "e0" => Some(2),
            "e1" => Some(5),
            "e2" => Some(3),
            _ => None,
        };
        let mut ok = 0;
        for _ in 0..5000 {
            let subs: Vec<Subtopology> = (0..1 + next(10))
                .map(|i| {
                    let sources = pick(&mut next, "e", 8, 1);
                    let sinks = pick(&mut next, "r", 8, 2);
                    let repartition =
                        pick(&mut next, "r", 8, 2).into_iter().map(|name| topic(&name, if next(4) == 0 { 1 + next(8) as i32 } else { 0 })).collect();
                    Subtopology {
                        id: i.to_string(),
                        source_topics: sources,
                        repartition_sink_topics: sinks,
                        repartition_source_topics: repartition,
                        ..Default::default()
                    }
                })
                .collect();
            let fast = repartition_topics(&subs, &existing).map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<BTreeMap<_, _>>());
            let slow = repartition_topics_by_passes(&subs, &existing);
            assert_eq!(fast, slow, "{subs:?}");
            ok += usize::from(fast.is_ok());
        }
        assert!(ok > 500, "too few configurable topologies: {ok}");
    }

    // CopartitionedTopicsEnforcerTest.

    fn enforcer<'a>(fixed: &[&'a str], flexible: &[&'a str]) -> CopartitionedTopicsEnforcer<'a> {
        CopartitionedTopicsEnforcer { fixed: fixed.iter().copied().collect(), flexible: flexible.iter().copied().collect(), fixed_count: None }
    }

    fn group<'a>(topics: &[&'a str]) -> BTreeSet<&'a str> {
        topics.iter().copied().collect()
    }

    fn incorrectly(message: &str) -> Failure {
        Failure::Topics(TopicConfigurationException::incorrectly_partitioned_topics(message.into()))
    }

    #[test]
    fn copartitioned_topic_without_count_is_malformed() {
        assert_eq!(
            enforcer(&[], &[]).enforce(&group(&["source-1"]), &image(&[])),
            Err(Failure::Fatal(malformed("Number of partitions is not set for topic: source-1")))
        );
    }

    #[test]
    fn copartitioned_sources_must_have_the_same_count() {
        assert_eq!(
            enforcer(&[], &[]).enforce(&group(&["source-1", "source-2"]), &image(&[("source-1", 2), ("source-2", 1)])),
            Err(incorrectly("Following topics do not have the same number of partitions: [{source-1=2, source-2=1}]"))
        );
    }

    #[test]
    fn repartition_topics_take_the_sources_count() {
        let counts = image(&[("source-1", 2), ("source-2", 2), ("repartitioned-1", 10)]);
        assert_eq!(
            enforcer(&[], &["repartitioned-1"]).enforce(&group(&["source-1", "source-2", "repartitioned-1"]), &counts),
            Ok(vec![("repartitioned-1", 2)])
        );
    }

    #[test]
    fn repartition_only_groups_take_the_maximum() {
        let counts = image(&[("repartitioned-1", 1), ("repartitioned-2", 15), ("repartitioned-3", 5)]);
        let topics = ["repartitioned-1", "repartitioned-2", "repartitioned-3"];
        assert_eq!(enforcer(&[], &topics).enforce(&group(&topics), &counts), Ok(topics.iter().map(|&t| (t, 15)).collect()));
    }

    #[test]
    fn fixed_repartition_topics_with_different_counts_fail() {
        let topics = ["repartitioned-1", "repartitioned-2"];
        assert_eq!(
            enforcer(&topics, &[]).enforce(&group(&topics), &image(&[("repartitioned-1", 10), ("repartitioned-2", 5)])),
            Err(incorrectly("Following topics do not have the same number of partitions: [{repartitioned-1=10, repartitioned-2=5}]"))
        );
    }

    #[test]
    fn flexible_repartition_topics_with_one_count_keep_it() {
        let topics = ["repartitioned-1", "repartitioned-2"];
        assert_eq!(
            enforcer(&[], &topics).enforce(&group(&topics), &image(&[("repartitioned-1", 10), ("repartitioned-2", 10)])),
            Ok(vec![("repartitioned-1", 10), ("repartitioned-2", 10)])
        );
    }

    #[test]
    fn a_fixed_repartition_topic_must_match_the_sources() {
        let topics = group(&["repartitioned-1", "source-1"]);
        assert_eq!(
            enforcer(&["repartitioned-1"], &[]).enforce(&topics, &image(&[("repartitioned-1", 10), ("source-1", 2)])),
            Err(incorrectly("Number of partitions [10] of repartition topic [repartitioned-1] doesn't match number of partitions [2] of the source topic."))
        );
        assert_eq!(enforcer(&[], &["repartitioned-1"]).enforce(&topics, &image(&[("repartitioned-1", 2), ("source-1", 2)])), Ok(vec![("repartitioned-1", 2)]));
    }

    #[test]
    fn flexible_repartition_topics_take_the_fixed_count() {
        let topics = ["repartitioned-1", "repartitioned-2", "repartitioned-3"];
        let counts = image(&[("repartitioned-1", 2), ("repartitioned-2", 5), ("repartitioned-3", 2)]);
        assert_eq!(
            enforcer(&["repartitioned-1", "repartitioned-3"], &["repartitioned-2"]).enforce(&group(&topics), &counts),
            Ok(topics.iter().map(|&t| (t, 2)).collect())
        );
    }

    #[test]
    fn repartition_topics_without_counts_are_an_invalid_topology() {
        let topics = ["repartitioned-1", "repartitioned-2"];
        assert_eq!(
            enforcer(&[], &topics).enforce(&group(&topics), &image(&[("repartitioned-1", 0), ("repartitioned-2", 0)])),
            Err(Failure::Fatal(invalid("All topics in the copartition group had undefined partition number: [repartitioned-1, repartitioned-2]")))
        );
    }

    #[test]
    fn an_empty_group_decides_nothing() {
        assert_eq!(enforcer(&["x"], &[]).enforce(&BTreeSet::new(), &image(&[])), Ok(vec![]));
    }

    // ChangelogTopicsTest.

    fn changelogs(s: Subtopology) -> Result<BTreeMap<String, i32>, ConfigureError> {
        let subs = [s];
        changelog_topics(&subs, &|_: &str| Some(3)).map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    #[test]
    fn changelogs_need_an_input() {
        assert_eq!(changelogs(sub("NO_SOURCE", &[], &["sink"], vec![], vec![])), Err(invalid("No source topics found for subtopology NO_SOURCE")));
        assert_eq!(changelogs(sub("s", &[], &["sink"], vec![topic("repartition", 0)], vec![])), Ok(BTreeMap::new()));
        assert_eq!(changelogs(sub("s", &["source"], &["sink"], vec![], vec![])), Ok(BTreeMap::new()));
    }

    #[test]
    fn changelogs_take_the_largest_input() {
        let both = vec![topic("source", 0), topic("changelog1", 0)];
        assert_eq!(
            changelogs(sub("s", &["source"], &["sink"], vec![topic("repartition", 0)], vec![topic("changelog1", 0)])),
            Ok(BTreeMap::from([("changelog1".into(), 3)]))
        );
        assert_eq!(
            changelogs(sub("s", &["source"], &["sink"], vec![topic("repartition", 0)], vec![topic("source", 0)])),
            Ok(BTreeMap::from([("source".into(), 3)]))
        );
        assert_eq!(
            changelogs(sub("s", &["source"], &["sink"], vec![topic("repartition", 0)], both)),
            Ok(BTreeMap::from([("changelog1".into(), 3), ("source".into(), 3)]))
        );
        let subs = [sub("s", &["small", "big"], &[], vec![], vec![topic("c", 0)])];
        assert_eq!(changelog_topics(&subs, &image(&[("small", 2), ("big", 7)])), Ok(BTreeMap::from([("c", 7)])));
    }
}
