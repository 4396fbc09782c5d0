//! A share group's dead-letter queue (KIP-1191, share.version 2), as Kafka 4.4 writes it.
//!
//! A group whose `errors.deadletterqueue.topic.name` is set sends a record that a member
//! rejected, or that was delivered `share.delivery.count.limit` times, to that topic
//! before archiving it, in two phases (Kafka's SharePartition):
//! 1. the record goes ARCHIVING, written to the share coordinator like any other state;
//! 2. the share-partition's leader writes one record per offset to the dead-letter topic
//!    (acks=all), then the offsets go ARCHIVED, written again.
//!
//! A new leader that finds ARCHIVING offsets in the persisted state runs phase 2 for them
//! (a record may then reach the queue twice: at least once, as in Kafka). When the write
//! cannot be made (the topic does not take dead letters, is missing and may not be
//! created, the name lacks the broker's prefix, or the retries ran out) the offsets are
//! archived anyway and the reason logged, as Kafka does: a misconfigured queue must not
//! stall the share-partition.
//!
//! Each dead-letter record carries Kafka's headers (`__dlq.errors.*`: the source topic,
//! partition, offset, group, delivery count and why), the original key and value when
//! `errors.deadletterqueue.copy.record.enable` is true (else none), and the time of the
//! write as its timestamp. It goes to the queue's partition `source partition % its
//! partition count`.
//!
//! This module builds the records; how they reach the queue's leader (this broker's shard
//! or another broker, creating the topic when allowed) is the server's
//! (`server/dead_letter_writer.rs`), behind `DeadLetterWriter`.
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use futures::future::LocalBoxFuture;

use super::share_partition::ArchivingRange;
use crate::record::{encode_batch_with_headers, iter_batches, parse_records, records_section, NewHeaders, NewRecord};

/// Kafka's header names (ShareGroupDLQStateManager).
pub const HEADER_TOPIC: &str = "__dlq.errors.topic";
pub const HEADER_PARTITION: &str = "__dlq.errors.partition";
pub const HEADER_OFFSET: &str = "__dlq.errors.offset";
pub const HEADER_GROUP: &str = "__dlq.errors.group";
pub const HEADER_DELIVERY_COUNT: &str = "__dlq.errors.delivery.count";
pub const HEADER_MESSAGE: &str = "__dlq.errors.message";

/// Most bytes of dead-letter records in one write (Kafka reads at most 1 MiB of
/// originals per round; a larger range takes several writes).
pub const MAX_WRITE_BYTES: usize = 1 << 20;

/// A group's dead-letter queue, from its configs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterQueue {
    /// `errors.deadletterqueue.topic.name`.
    pub topic: String,
    /// `errors.deadletterqueue.copy.record.enable`: the original key and value go too.
    pub copy_record: bool,
}

/// Why a record went to the dead-letter queue; Kafka's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadLetterCause {
    ClientReject,
    DeliveryCountExceeded,
}

impl DeadLetterCause {
    /// The cause of an ARCHIVING range: a rejection this leader saw (even on the last
    /// allowed delivery, as Kafka's live path), else the delivery limit once reached, else
    /// a rejection (the rule Kafka resumes a persisted ARCHIVING range with).
    pub fn of(range: &ArchivingRange, delivery_count_limit: u16) -> DeadLetterCause {
        if !range.rejected && range.delivery_count >= delivery_count_limit {
            DeadLetterCause::DeliveryCountExceeded
        } else {
            DeadLetterCause::ClientReject
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            DeadLetterCause::ClientReject => "Offset rejected by client.",
            DeadLetterCause::DeliveryCountExceeded => "Offset delivery count exceeded the threshold.",
        }
    }
}

/// Where dead letters come from: one share-partition of one group.
#[derive(Clone, Debug)]
pub struct DeadLetterSource {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
}

/// The original (key, value) of each offset found, for `copy_record`.
pub type Originals = HashMap<i64, (Option<Bytes>, Option<Bytes>)>;

/// The (key, value) of every record in `first..=last` among `batches` (stored batches
/// as the log returns them; compressed ones are decompressed, within the decoder's
/// bound). Offsets with no record (compacted, aborted, control) are left out.
pub fn originals(batches: &[Bytes], first: i64, last: i64) -> Originals {
    let mut out = Originals::new();
    for chunk in batches {
        for (h, span) in iter_batches(chunk).map_while(Result::ok) {
            if h.is_control() || h.last_offset() < first || h.base_offset > last {
                continue;
            }
            let batch = chunk.slice(span);
            let Ok(section) = records_section(&batch, &h) else { continue };
            let Ok(records) = parse_records(&section, &h) else { continue };
            for r in records.into_iter().filter(|r| (first..=last).contains(&r.offset)) {
                out.insert(r.offset, (r.key.map(|k| section.slice(k)), r.value.map(|v| section.slice(v))));
            }
        }
    }
    out
}

/// The dead-letter records of `range`, as batches of at most `MAX_WRITE_BYTES` (one
/// record at least): one record per offset, with Kafka's headers, and the original key
/// and value where `originals` has them.
pub fn dead_letter_batches(
    source: &DeadLetterSource,
    range: &ArchivingRange,
    cause: DeadLetterCause,
    originals: &Originals,
    now_ms: i64,
) -> anyhow::Result<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut pending: Vec<(NewRecord, NewHeaders)> = Vec::new();
    let mut pending_bytes = 0usize;
    let (partition, group, count) =
        (Bytes::from(source.partition.to_string()), Bytes::from(source.group_id.clone()), Bytes::from(range.delivery_count.to_string()));
    let topic = Bytes::from(source.topic.clone());
    for offset in range.first_offset..=range.last_offset {
        let (key, value) = originals.get(&offset).cloned().unwrap_or_default();
        let headers: NewHeaders = vec![
            (HEADER_TOPIC, topic.clone()),
            (HEADER_PARTITION, partition.clone()),
            (HEADER_OFFSET, Bytes::from(offset.to_string())),
            (HEADER_GROUP, group.clone()),
            (HEADER_DELIVERY_COUNT, count.clone()),
            (HEADER_MESSAGE, Bytes::from_static(cause.message().as_bytes())),
        ];
        let size =
            key.as_ref().map_or(0, Bytes::len) + value.as_ref().map_or(0, Bytes::len) + headers.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>() + 16;
        if !pending.is_empty() && pending_bytes + size > MAX_WRITE_BYTES {
            out.push(encode_batch_with_headers(std::mem::take(&mut pending))?);
            pending_bytes = 0;
        }
        pending.push((NewRecord { key, value, timestamp_ms: now_ms }, headers));
        pending_bytes += size;
    }
    if !pending.is_empty() {
        out.push(encode_batch_with_headers(pending)?);
    }
    Ok(out)
}

/// How dead letters reach their queue (the server's: the queue's leader may be this
/// broker's shard or another broker).
pub trait DeadLetterWriter {
    /// Whether `queue` can take `group`'s dead letters: the topic takes them
    /// (`errors.deadletterqueue.group.enable`), or is missing and may be created (then it
    /// is), and its name has the broker's prefix. Err: why not, to log.
    fn prepare<'a>(&'a self, group_id: &'a str, queue: &'a DeadLetterQueue) -> LocalBoxFuture<'a, Result<(), String>>;
    /// Writes `batch` to `queue`'s partition for source partition `source_partition`,
    /// with acks=all, retrying as Kafka does. Err: why it was given up.
    fn write<'a>(&'a self, queue: &'a DeadLetterQueue, source_partition: i32, batch: Bytes) -> LocalBoxFuture<'a, Result<(), String>>;
}

pub type SharedDeadLetterWriter = Rc<dyn DeadLetterWriter>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{parse_header, parse_records, records_section};
    use kafka_protocol::records::{Compression, RecordBatchDecoder};

    fn source() -> DeadLetterSource {
        DeadLetterSource { group_id: "g1".into(), topic: "orders".into(), partition: 3 }
    }

    #[test]
    fn one_record_per_offset_with_kafkas_headers_and_the_original_when_copied() {
        let stored = crate::record::encode_batch(
            (0..3).map(|i| NewRecord { key: Some(Bytes::from(format!("k{i}"))), value: Some(Bytes::from(format!("v{i}"))), timestamp_ms: 5 }),
            Compression::Lz4,
        )
        .unwrap();
        // Stored at offsets 10-12.
        let mut stored = bytes::BytesMut::from(&stored[..]);
        crate::record::set_base_offset(&mut stored, 10).unwrap();
        let originals = originals(&[stored.freeze()], 11, 12);
        assert_eq!(originals.len(), 2, "only the range: {originals:?}");
        let range = ArchivingRange { first_offset: 11, last_offset: 13, delivery_count: 2, rejected: true };
        let batches = dead_letter_batches(&source(), &range, DeadLetterCause::of(&range, 5), &originals, 777).unwrap();
        assert_eq!(batches.len(), 1);
        let mut buf = batches[0].clone();
        let decoded = RecordBatchDecoder::decode(&mut buf).unwrap();
        assert_eq!(decoded.records.len(), 3);
        let r = &decoded.records[0];
        assert_eq!((r.key.as_deref(), r.value.as_deref(), r.timestamp), (Some(&b"k1"[..]), Some(&b"v1"[..]), 777));
        let header = |r: &kafka_protocol::records::Record, name: &str| {
            r.headers.iter().find(|(k, _)| k.as_str() == name).and_then(|(_, v)| v.clone()).map(|v| String::from_utf8(v.to_vec()).unwrap())
        };
        assert_eq!(header(r, HEADER_TOPIC).as_deref(), Some("orders"));
        assert_eq!(header(r, HEADER_PARTITION).as_deref(), Some("3"));
        assert_eq!(header(r, HEADER_OFFSET).as_deref(), Some("11"));
        assert_eq!(header(r, HEADER_GROUP).as_deref(), Some("g1"));
        assert_eq!(header(r, HEADER_DELIVERY_COUNT).as_deref(), Some("2"));
        assert_eq!(header(r, HEADER_MESSAGE).as_deref(), Some("Offset rejected by client."));
        // Offset 13 has no original (not stored, or not copied): headers only.
        let last = &decoded.records[2];
        assert_eq!((last.key.is_none(), last.value.is_none(), header(last, HEADER_OFFSET).as_deref()), (true, true, Some("13")));
        // The batch is one a broker takes from a client.
        let h = parse_header(&batches[0]).unwrap();
        assert_eq!(parse_records(&records_section(&batches[0], &h).unwrap(), &h).unwrap().len(), 3);
    }

    #[test]
    fn the_cause_follows_the_rejection_or_the_delivery_count_and_large_ranges_take_several_writes() {
        let of = |delivery_count, rejected| DeadLetterCause::of(&ArchivingRange { first_offset: 0, last_offset: 0, delivery_count, rejected }, 5);
        assert_eq!(of(5, false).message(), "Offset delivery count exceeded the threshold.");
        assert_eq!(of(1, false), DeadLetterCause::ClientReject, "a loaded range below the limit was rejected");
        // Rejected on its last allowed delivery: Kafka's live path tells the rejection.
        assert_eq!(of(5, true).message(), "Offset rejected by client.");
        let big = Bytes::from(vec![7u8; 300 * 1024]);
        let originals: Originals = (0..10).map(|o| (o, (None, Some(big.clone())))).collect();
        let range = ArchivingRange { first_offset: 0, last_offset: 9, delivery_count: 5, rejected: false };
        let batches = dead_letter_batches(&source(), &range, DeadLetterCause::of(&range, 5), &originals, 1).unwrap();
        assert_eq!(batches.len(), 4, "3 records of 300 KiB fit in 1 MiB");
        let records: usize = batches.iter().map(|b| parse_header(b).unwrap().records_count as usize).sum();
        assert_eq!(records, 10);
    }
}
