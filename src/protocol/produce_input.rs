//! A Produce request as the produce handler walks it, whichever decoder read it: the
//! borrowing view (v3–v12, the hot path: no allocation) or kafka-protocol's owned
//! decode (v13's topic ids, and every frame the view leaves to the crate). One walk for
//! both, so the handler has one code path.
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;

use super::produce_request_view::{PartitionIter, ProduceRequestView, TopicIter};

pub enum ProduceInput {
    View(ProduceRequestView),
    Decoded(ProduceRequest),
}

/// One topic: its name (empty from v13 on) and id (zero before v13), and its partitions.
pub struct InputTopic<'a> {
    pub name: &'a str,
    pub topic_id: [u8; 16],
    pub partitions: InputPartitions<'a>,
}

impl ProduceInput {
    pub fn acks(&self) -> i16 {
        match self {
            ProduceInput::View(v) => v.acks(),
            ProduceInput::Decoded(r) => r.acks,
        }
    }

    /// How long an acks=all produce may wait for the in-sync replicas (Kafka's
    /// `timeout_ms`; REQUEST_TIMED_OUT after it).
    pub fn timeout_ms(&self) -> i32 {
        match self {
            ProduceInput::View(v) => v.timeout_ms(),
            ProduceInput::Decoded(r) => r.timeout_ms,
        }
    }

    /// The producer's transactional id, if any.
    pub fn transactional_id(&self) -> Option<&str> {
        match self {
            ProduceInput::View(v) => v.transactional_id(),
            ProduceInput::Decoded(r) => r.transactional_id.as_ref().map(|t| t.0.as_str()),
        }
    }

    /// The topics in request order (walk as often as needed: nothing is consumed).
    pub fn topics(&self) -> InputTopics<'_> {
        match self {
            ProduceInput::View(v) => InputTopics::View(v, v.topics()),
            ProduceInput::Decoded(r) => InputTopics::Decoded(r.topic_data.iter()),
        }
    }
}

#[derive(Clone)]
pub enum InputTopics<'a> {
    View(&'a ProduceRequestView, TopicIter<'a>),
    Decoded(std::slice::Iter<'a, TopicProduceData>),
}

impl<'a> Iterator for InputTopics<'a> {
    type Item = InputTopic<'a>;

    fn next(&mut self) -> Option<InputTopic<'a>> {
        match self {
            InputTopics::View(v, it) => {
                let t = it.next()?;
                Some(InputTopic { name: t.name, topic_id: [0; 16], partitions: InputPartitions::View(v, t.partitions) })
            }
            InputTopics::Decoded(it) => {
                let t = it.next()?;
                Some(InputTopic { name: t.name.0.as_str(), topic_id: *t.topic_id.as_bytes(), partitions: InputPartitions::Decoded(t.partition_data.iter()) })
            }
        }
    }
}

#[derive(Clone)]
pub enum InputPartitions<'a> {
    View(&'a ProduceRequestView, PartitionIter<'a>),
    Decoded(std::slice::Iter<'a, PartitionProduceData>),
}

impl Iterator for InputPartitions<'_> {
    /// The partition index and its records (a slice of the request frame: no copy).
    type Item = (i32, Option<Bytes>);

    fn next(&mut self) -> Option<(i32, Option<Bytes>)> {
        match self {
            InputPartitions::View(v, it) => {
                let p = it.next()?;
                Some((p.index, v.records(&p)))
            }
            InputPartitions::Decoded(it) => {
                let p = it.next()?;
                Some((p.index, p.records.clone()))
            }
        }
    }
}
