//! A streams group's topology as its members declare it on joining (StreamsGroupHeartbeat's
//! Topology) and as the group stores it (the StreamsGroupTopology record, key 23): per
//! subtopology, its source topics, the repartition topics it writes (sinks) and reads
//! (sources), its state changelog topics, and its co-partition groups. Partition counts of
//! internal topics are 0 ("derive") until `configure.rs` decides them.
use std::collections::BTreeSet;

/// One topic of a topology with what the application asks of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// 0: derived by the broker (changelogs always; repartition topics unless fixed).
    pub partitions: i32,
    /// 0 or -1: the broker's default.
    pub replication_factor: i16,
    /// Topic configs to create the topic with, in the order given.
    pub configs: Vec<(String, String)>,
}

/// Topics that must have the same partition count, as indexes into the subtopology's
/// `source_topics`, `source_topic_regex` and `repartition_source_topics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub source_topic_regex: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subtopology {
    /// "0", "1", ... (the node group's id).
    pub id: String,
    pub source_topics: Vec<String>,
    /// Kafka 4.4 refuses source regexes (INVALID_REQUEST); kept for equality and records.
    pub source_topic_regex: Vec<String>,
    pub state_changelog_topics: Vec<TopicInfo>,
    pub repartition_sink_topics: Vec<String>,
    pub repartition_source_topics: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamsTopology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

impl StreamsTopology {
    /// Every topic the topology names (sources, repartition sinks and sources, changelogs):
    /// what the broker checks before anything else (internal topics, names, ACLs).
    pub fn required_topics(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        for s in &self.subtopologies {
            out.extend(s.source_topics.iter().map(String::as_str));
            out.extend(s.repartition_sink_topics.iter().map(String::as_str));
            out.extend(s.repartition_source_topics.iter().map(|t| t.name.as_str()));
            out.extend(s.state_changelog_topics.iter().map(|t| t.name.as_str()));
        }
        out
    }

    pub fn subtopology(&self, id: &str) -> Option<&Subtopology> {
        self.subtopologies.iter().find(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_topics_are_every_topic_named_once() {
        let t = StreamsTopology {
            epoch: 0,
            subtopologies: vec![
                Subtopology { id: "0".into(), source_topics: vec!["in".into()], repartition_sink_topics: vec!["r".into()], ..Default::default() },
                Subtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![TopicInfo { name: "r".into(), ..Default::default() }],
                    state_changelog_topics: vec![TopicInfo { name: "c".into(), ..Default::default() }],
                    ..Default::default()
                },
            ],
        };
        assert_eq!(t.required_topics().into_iter().collect::<Vec<_>>(), vec!["c", "in", "r"]);
        assert_eq!(t.subtopology("1").map(|s| s.state_changelog_topics.len()), Some(1));
        assert!(t.subtopology("2").is_none());
    }
}
