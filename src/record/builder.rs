//! Building a RecordBatch v2 the broker itself writes (group offsets) or a load
//! generator sends: one batch, no producer id, records at consecutive offsets.
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

/// One record of a batch to build.
pub struct NewRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp_ms: i64,
}

/// Encodes `records` as one non-idempotent RecordBatch v2 (base offset 0).
pub fn encode_batch(records: impl IntoIterator<Item = NewRecord>, compression: Compression) -> anyhow::Result<Bytes> {
    encode_batch_for(records.into_iter().map(|r| (r, Vec::new())), compression, None)
}

/// Record headers: (name, value) in order.
pub type NewHeaders = Vec<(&'static str, Bytes)>;

/// Encodes `records`, each with its headers, as one uncompressed non-idempotent batch.
pub fn encode_batch_with_headers(records: impl IntoIterator<Item = (NewRecord, NewHeaders)>) -> anyhow::Result<Bytes> {
    encode_batch_for(records, Compression::None, None)
}

/// Encodes `records` as one transactional batch of producer (`id`, `epoch`) with no
/// sequence (base sequence -1: the broker writes it for the producer, as Kafka's group
/// coordinator writes a TxnOffsetCommit; never checked against sequences).
pub fn encode_transactional_batch(records: impl IntoIterator<Item = NewRecord>, producer_id: i64, producer_epoch: i16) -> anyhow::Result<Bytes> {
    encode_batch_for(records.into_iter().map(|r| (r, Vec::new())), Compression::None, Some((producer_id, producer_epoch)))
}

fn encode_batch_for(
    records: impl IntoIterator<Item = (NewRecord, NewHeaders)>,
    compression: Compression,
    producer: Option<(i64, i16)>,
) -> anyhow::Result<Bytes> {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let recs: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (r, headers))| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch whenever offset - sequence changes; this
            // keeps it constant and makes the batch's base sequence -1 (no producer id).
            sequence: i as i32 - 1,
            timestamp: r.timestamp_ms,
            key: r.key,
            value: r.value,
            headers: headers.into_iter().map(|(k, v)| (StrBytes::from_static_str(k), Some(v))).collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, recs.iter(), &RecordEncodeOptions { version: 2, compression })?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::validate_produce_records;

    #[test]
    fn builds_exactly_one_valid_batch() {
        let recs = (0..10).map(|i| NewRecord { key: None, value: Some(Bytes::from(vec![i as u8; 100])), timestamp_ms: 1000 + i });
        let b = encode_batch(recs, Compression::Lz4).unwrap();
        let headers = validate_produce_records(&b, &crate::record::ProduceChecks::with_max_message_bytes(1 << 20)).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].records_count, 10);
        assert_eq!(headers[0].base_sequence, -1);
    }
}
