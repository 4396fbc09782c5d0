//! A coordinator's replay of its partition (the group coordinator's `__consumer_offsets`,
//! the transaction coordinator's `__transaction_state`): every record below the high
//! watermark, from the log start, in offset order, with the markers of transactions
//! between them. Read in bounded chunks; records decompressed within the one bound
//! (`record::records_section`).
use bytes::Bytes;

use super::error::PartitionError;
use super::state::Partition;
use crate::record::{parse_header, parse_marker, parse_records, records_section, Marker};

/// One thing a replay meets.
pub enum Replayed {
    /// A record; `txn_producer`: the producer whose transaction wrote it, if one did.
    Record { offset: i64, key: Option<Bytes>, value: Option<Bytes>, txn_producer: Option<i64> },
    /// The marker of a transaction of `producer_id`.
    Marker { offset: i64, producer_id: i64, marker: Marker },
}

impl Partition {
    /// Visits every record and marker below the high watermark (`to_log_end`: below the
    /// written log end — a new leader's high watermark may still trail records its
    /// predecessor acknowledged, and a leader's log is never truncated), reading at most
    /// `chunk_bytes` at a time. A batch or marker that cannot be decoded is logged and
    /// skipped; a header that does not parse (a damaged log) stops the replay there.
    /// Returns the records visited.
    pub async fn replay(&self, chunk_bytes: usize, to_log_end: bool, mut visit: impl FnMut(Replayed)) -> Result<usize, PartitionError> {
        self.check_leader()?;
        let mut offset = self.log_start_offset();
        let mut records = 0usize;
        let end = || if to_log_end { self.written_offset() } else { self.high_watermark() };
        while offset < end() {
            let data = self.read_below(offset, super::ReadLimit::at_least_one(chunk_bytes), end()).await?;
            if data.records.is_empty() {
                break;
            }
            for batch in data.records {
                // Stored batches were validated on append: a header that does not parse
                // means the log is damaged; stop rather than loop.
                let Ok(h) = parse_header(&batch) else {
                    tracing::error!(topic = %self.topic, partition = self.index, offset, "unparsable batch; stopping the replay here");
                    return Ok(records);
                };
                offset = offset.max(h.last_offset() + 1);
                if h.is_control() {
                    match parse_marker(&batch, &h) {
                        Ok(marker) => visit(Replayed::Marker { offset: h.base_offset, producer_id: h.producer_id, marker }),
                        Err(e) => {
                            tracing::warn!(topic = %self.topic, partition = self.index, offset = h.base_offset, error = %e, "skipping an unreadable marker")
                        }
                    }
                    continue;
                }
                let txn_producer = h.is_transactional().then_some(h.producer_id);
                match records_section(&batch, &h).and_then(|section| Ok((parse_records(&section, &h)?, section))) {
                    Ok((recs, section)) => {
                        for r in recs {
                            let key = r.key.map(|k| section.slice(k));
                            let value = r.value.map(|v| section.slice(v));
                            visit(Replayed::Record { offset: r.offset, key, value, txn_producer });
                            records += 1;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(topic = %self.topic, partition = self.index, base_offset = h.base_offset, error = %e, "skipping an undecodable batch")
                    }
                }
            }
        }
        Ok(records)
    }
}
