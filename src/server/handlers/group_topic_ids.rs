//! Topic ids in the group APIs (KIP-848: OffsetCommit v10, OffsetFetch v10, TxnOffsetCommit
//! v6 name topics by id, not by name). The handlers resolve ids to names at the edge, so
//! the group coordinator keeps keying offsets by name as Kafka's does, and put the ids back
//! in the response; an id the metadata image does not know is UNKNOWN_TOPIC_ID.
use std::collections::{HashMap, HashSet};

use kafka_protocol::messages::TopicName;

use super::topic_name;
use crate::cluster::image::MetadataImage;

/// Names by id for the ids of one request (ids the image does not know are left out).
pub(crate) fn names_by_id(image: &MetadataImage, ids: impl Iterator<Item = uuid::Uuid>) -> HashMap<uuid::Uuid, TopicName> {
    let wanted: HashSet<uuid::Uuid> = ids.collect();
    if wanted.is_empty() {
        return HashMap::new();
    }
    // One pass over the topics, not one per id (the image indexes topics by name).
    image
        .topics
        .values()
        .filter_map(|t| {
            let id = uuid::Uuid::from_bytes(t.topic_id);
            wanted.contains(&id).then(|| (id, topic_name(&t.name)))
        })
        .collect()
}

/// A request's topics named by id, split into those the image knows (given their names
/// with `named`) and those it does not: `(known, unknown)`.
pub(crate) fn resolve_ids<T>(image: &MetadataImage, topics: Vec<T>, id: impl Fn(&T) -> uuid::Uuid, named: impl Fn(T, TopicName) -> T) -> (Vec<T>, Vec<T>) {
    let names = names_by_id(image, topics.iter().map(&id));
    let (known, unknown): (Vec<T>, Vec<T>) = topics.into_iter().partition(|t| names.contains_key(&id(t)));
    let known = known
        .into_iter()
        .map(|t| {
            let name = names[&id(&t)].clone();
            named(t, name)
        })
        .collect();
    (known, unknown)
}

/// The id of topic `name`, or the nil id when the image has no such topic (a topic
/// deleted since its offsets were committed).
pub(crate) fn id_of(image: &MetadataImage, name: &str) -> uuid::Uuid {
    image.topic(name).map_or(uuid::Uuid::nil(), |t| uuid::Uuid::from_bytes(t.topic_id))
}
