//! Hand-written Fetch response writer (versions 4-18; v18 only adds a request field).
//!
//! The codec would copy every record byte into one buffer; here the response is a list
//! of buffers: small header pieces written into one scratch allocation, and between them
//! the stored batch `Bytes` themselves (a refcount bump, no copy). The connection writes
//! the pieces in order.
//!
//! Wire layout by version (Kafka's FetchResponse.json):
//! - response header v0 (correlation id); v12+ header v1 (+ empty tagged fields)
//! - throttle_time_ms; v7+ error_code, session_id; topics array
//! - topic: name (v4-12) or topic_id uuid (v13+); partitions array
//! - partition: index, error_code, high_watermark, last_stable_offset, v5+ log_start_offset,
//!   aborted_transactions (nullable array), v11+ preferred_read_replica, records (nullable
//!   bytes); v12+ tagged fields: 0 diverging_epoch, 1 current_leader, 2 snapshot_id
//!   (written only when set, as Kafka does)
//! - v12+: compact arrays/strings/bytes and tagged-field sections on every struct; the
//!   top-level node_endpoints (tag 0, v16+: the leaders named in `current_leader`, KIP-951)
//!   is written only when non-empty.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;

use smallvec::SmallVec;

use super::response_buf::{ResponseBuf, ResponseBufs};
use crate::record::BatchList;
use crate::runtime::file_slice::FileSlice;

/// One aborted transaction in a partition's fetched range (read_committed consumers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// Largest epoch and its end offset for a diverging follower (tagged field 0, v12+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DivergingEpoch {
    pub epoch: i32,
    pub end_offset: i64,
}

/// The current leader, sent with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (tag 1, v12+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentLeader {
    pub leader_id: i32,
    pub leader_epoch: i32,
}

/// A broker named in a partition's `current_leader` (top-level tag 0, v16+, KIP-951).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub node_id: i32,
    pub host: StrBytes,
    pub port: i32,
    pub rack: Option<StrBytes>,
}

#[derive(Debug, Clone, Default)]
pub struct FetchResponseParts {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    /// Inline for one topic (with `partitions` inline for one partition): a consumer
    /// fetching one partition allocates no lists.
    pub topics: SmallVec<[FetchTopicParts; 1]>,
    /// Written for v16+ only, and only when non-empty (as Kafka does).
    pub node_endpoints: Vec<NodeEndpoint>,
}

#[derive(Debug, Clone, Default)]
pub struct FetchTopicParts {
    /// Written for v4-12.
    pub name: StrBytes,
    /// Written for v13+.
    pub topic_id: [u8; 16],
    pub partitions: SmallVec<[FetchPartitionParts; 1]>,
}

#[derive(Debug, Clone)]
pub struct FetchPartitionParts {
    pub partition_index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub preferred_read_replica: i32,
    /// Stored batch bytes, sent back to back under one length.
    pub records: BatchList,
    /// Batches in a segment file, sent after `records` under the same length, with
    /// `sendfile` (zero-copy fetch; a read returns one form or the other).
    pub file_records: Option<FileSlice>,
    /// `None` is written as a null array (read_uncommitted, as Kafka does);
    /// `Some(vec![])` as an empty one.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
    pub diverging_epoch: Option<DivergingEpoch>,
    pub current_leader: Option<CurrentLeader>,
}

impl Default for FetchPartitionParts {
    /// Kafka's defaults: offsets unknown (-1), no preferred replica, no records.
    fn default() -> Self {
        FetchPartitionParts {
            partition_index: 0,
            error_code: 0,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            preferred_read_replica: -1,
            records: BatchList::new(),
            file_records: None,
            aborted_transactions: None,
            diverging_epoch: None,
            current_leader: None,
        }
    }
}

impl FetchPartitionParts {
    pub fn new(partition_index: i32) -> Self {
        FetchPartitionParts { partition_index, ..Default::default() }
    }

    fn records_len(&self) -> usize {
        self.records.iter().map(Bytes::len).sum::<usize>() + self.file_records.as_ref().map_or(0, FileSlice::len)
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Array length: compact (uvarint n+1) when flexible, else i32.
fn put_array_len(buf: &mut BytesMut, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(buf, n as u64 + 1);
    } else {
        // Counts here are partitions/topics of one response, far below i32::MAX.
        buf.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
    }
}

fn put_string(buf: &mut BytesMut, flexible: bool, s: &str) {
    let mut bytes = s.as_bytes();
    if flexible {
        put_uvarint(buf, bytes.len() as u64 + 1);
    } else {
        // A non-flexible string holds at most i16::MAX bytes. Names come from requests
        // decoded with the same limit or from validated metadata (<= 249 bytes); clamp
        // rather than write a length that disagrees with the bytes.
        bytes = &bytes[..bytes.len().min(i16::MAX as usize)];
        buf.put_i16(bytes.len() as i16);
    }
    buf.put_slice(bytes);
}

fn uvarint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Bytes of the node_endpoints tagged field's value (compact array of endpoints).
fn node_endpoints_size(endpoints: &[NodeEndpoint]) -> usize {
    let compact = |n: usize| uvarint_len(n as u64 + 1) + n;
    uvarint_len(endpoints.len() as u64 + 1)
        + endpoints.iter().map(|e| 4 + compact(e.host.len()) + 4 + e.rack.as_ref().map_or(1, |r| compact(r.len())) + 1).sum::<usize>()
}

/// A Fetch response that cannot be framed: lengths on the wire are i32. The fetch
/// handler's budget (fetch_max_bytes <= i32::MAX, plus at most one batch) keeps
/// responses far below this; the check stays so no size is ever written truncated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchWriteError {
    #[error("partition {partition_index} has {records_bytes} record bytes, more than a Fetch response can carry")]
    PartitionTooLarge { partition_index: i32, records_bytes: usize },
    #[error("the Fetch response would be {frame_bytes} bytes, more than a frame can carry")]
    ResponseTooLarge { frame_bytes: usize },
}

/// Write a complete Fetch response frame (4-byte length, header, body) for `version`
/// (4..=18) as a list of buffers. Record bytes are the caller's `Bytes` (not copies) or
/// file slices (sent by `sendfile`).
/// Refused (never truncated) when a partition's records or the frame exceed `i32::MAX`.
pub fn write_fetch_response(correlation_id: i32, version: i16, parts: &FetchResponseParts) -> Result<ResponseBufs, FetchWriteError> {
    debug_assert!((4..=18).contains(&version), "fetch writer covers v4-18, got v{version}");
    let flexible = version >= 12;

    let n_partitions: usize = parts.topics.iter().map(|t| t.partitions.len()).sum();
    let n_record_pieces: usize = parts.topics.iter().flat_map(|t| &t.partitions).map(|p| p.records.len() + usize::from(p.file_records.is_some())).sum();
    let estimate = 32
        + parts.topics.iter().map(|t| 24 + t.name.len()).sum::<usize>()
        + parts.topics.iter().flat_map(|t| &t.partitions).map(|p| 80 + 16 * p.aborted_transactions.as_ref().map_or(0, Vec::len)).sum::<usize>();

    // out[0] is a placeholder for the first piece, which holds the length prefix and is
    // patched once the total is known.
    let mut out = ResponseBufs::with_capacity(2 + n_partitions + n_record_pieces);
    out.push(ResponseBuf::Memory(Bytes::new()));
    let mut first: Option<BytesMut> = None;
    let mut total: usize = 0;
    // From the shard's arena: no allocation of its own (see `response_arena.rs`).
    let mut buf = super::response_arena::response_buffer(estimate);

    // Move the scratch contents into the output as one piece (same allocation, no copy).
    fn flush(buf: &mut BytesMut, first: &mut Option<BytesMut>, out: &mut ResponseBufs, total: &mut usize) {
        if buf.is_empty() {
            return;
        }
        let piece = buf.split();
        *total += piece.len();
        if first.is_none() {
            *first = Some(piece);
        } else {
            out.push(ResponseBuf::Memory(piece.freeze()));
        }
    }

    buf.put_i32(0); // length, patched below
    buf.put_i32(correlation_id);
    if flexible {
        put_uvarint(&mut buf, 0); // response header v1 tagged fields
    }
    buf.put_i32(parts.throttle_time_ms);
    if version >= 7 {
        buf.put_i16(parts.error_code);
        buf.put_i32(parts.session_id);
    }
    put_array_len(&mut buf, flexible, parts.topics.len());
    for topic in &parts.topics {
        if version >= 13 {
            buf.put_slice(&topic.topic_id);
        } else {
            put_string(&mut buf, flexible, topic.name.as_str());
        }
        put_array_len(&mut buf, flexible, topic.partitions.len());
        for p in &topic.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            match &p.aborted_transactions {
                None if flexible => put_uvarint(&mut buf, 0),
                None => buf.put_i32(-1),
                Some(txns) => {
                    put_array_len(&mut buf, flexible, txns.len());
                    for t in txns {
                        buf.put_i64(t.producer_id);
                        buf.put_i64(t.first_offset);
                        if flexible {
                            put_uvarint(&mut buf, 0);
                        }
                    }
                }
            }
            if version >= 11 {
                buf.put_i32(p.preferred_read_replica);
            }
            let records_len = p.records_len();
            if records_len > i32::MAX as usize {
                return Err(FetchWriteError::PartitionTooLarge { partition_index: p.partition_index, records_bytes: records_len });
            }
            if flexible {
                put_uvarint(&mut buf, records_len as u64 + 1);
            } else {
                buf.put_i32(records_len as i32);
            }
            if records_len > 0 {
                flush(&mut buf, &mut first, &mut out, &mut total);
                for r in p.records.iter().filter(|r| !r.is_empty()) {
                    total += r.len();
                    out.push(ResponseBuf::Memory(r.clone()));
                }
                if let Some(f) = p.file_records.as_ref().filter(|f| !f.is_empty()) {
                    total += f.len();
                    out.push(ResponseBuf::File(f.clone()));
                }
            }
            if flexible {
                let n_tags = usize::from(p.diverging_epoch.is_some()) + usize::from(p.current_leader.is_some());
                put_uvarint(&mut buf, n_tags as u64);
                if let Some(d) = p.diverging_epoch {
                    put_uvarint(&mut buf, 0); // tag
                    put_uvarint(&mut buf, 13); // epoch i32 + end_offset i64 + empty tags
                    buf.put_i32(d.epoch);
                    buf.put_i64(d.end_offset);
                    put_uvarint(&mut buf, 0);
                }
                if let Some(l) = p.current_leader {
                    put_uvarint(&mut buf, 1);
                    put_uvarint(&mut buf, 9); // leader_id i32 + leader_epoch i32 + empty tags
                    buf.put_i32(l.leader_id);
                    buf.put_i32(l.leader_epoch);
                    put_uvarint(&mut buf, 0);
                }
            }
        }
        if flexible {
            put_uvarint(&mut buf, 0); // topic tagged fields
        }
    }
    if flexible {
        if version >= 16 && !parts.node_endpoints.is_empty() {
            put_uvarint(&mut buf, 1); // one top-level tagged field: node_endpoints
            put_uvarint(&mut buf, 0); // tag
            let size = node_endpoints_size(&parts.node_endpoints);
            put_uvarint(&mut buf, size as u64);
            let before = buf.len();
            put_array_len(&mut buf, true, parts.node_endpoints.len());
            for e in &parts.node_endpoints {
                buf.put_i32(e.node_id);
                put_string(&mut buf, true, e.host.as_str());
                buf.put_i32(e.port);
                match &e.rack {
                    Some(r) => put_string(&mut buf, true, r.as_str()),
                    None => put_uvarint(&mut buf, 0),
                }
                put_uvarint(&mut buf, 0);
            }
            debug_assert_eq!(buf.len() - before, size, "node_endpoints size");
        } else {
            put_uvarint(&mut buf, 0); // no top-level tagged fields
        }
    }
    flush(&mut buf, &mut first, &mut out, &mut total);

    let frame_len = total - 4;
    let Ok(frame_len_i32) = i32::try_from(frame_len) else {
        return Err(FetchWriteError::ResponseTooLarge { frame_bytes: total });
    };
    // `first` is set: the first flush always has at least the 8 header bytes written above.
    if let Some(mut head) = first {
        head[..4].copy_from_slice(&frame_len_i32.to_be_bytes());
        out[0] = ResponseBuf::Memory(head.freeze());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint as CodecNodeEndpoint, PartitionData,
    };
    use kafka_protocol::messages::{FetchResponse, ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable};
    use proptest::prelude::*;
    use uuid::Uuid;

    fn concat(pieces: &[ResponseBuf]) -> Bytes {
        let mut b = BytesMut::new();
        for p in pieces {
            b.extend_from_slice(&p.to_bytes().expect("a readable piece"));
        }
        b.freeze()
    }

    /// What the codec should decode for `parts` at `version`.
    fn expected(version: i16, parts: &FetchResponseParts) -> FetchResponse {
        let mut r = FetchResponse::default().with_throttle_time_ms(parts.throttle_time_ms);
        if version >= 7 {
            r = r.with_error_code(parts.error_code).with_session_id(parts.session_id);
        }
        if version >= 16 {
            r.node_endpoints = parts
                .node_endpoints
                .iter()
                .map(|e| CodecNodeEndpoint::default().with_node_id(e.node_id.into()).with_host(e.host.clone()).with_port(e.port).with_rack(e.rack.clone()))
                .collect();
        }
        r.with_responses(
            parts
                .topics
                .iter()
                .map(|t| {
                    let mut ft = FetchableTopicResponse::default();
                    if version >= 13 {
                        ft.topic_id = Uuid::from_bytes(t.topic_id);
                    } else {
                        ft.topic = TopicName(t.name.clone());
                    }
                    ft.with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let mut d = PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(p.error_code)
                                    .with_high_watermark(p.high_watermark)
                                    .with_last_stable_offset(p.last_stable_offset)
                                    .with_aborted_transactions(p.aborted_transactions.as_ref().map(|v| {
                                        v.iter()
                                            .map(|a| AbortedTransaction::default().with_producer_id(a.producer_id.into()).with_first_offset(a.first_offset))
                                            .collect()
                                    }))
                                    .with_records(Some(concat(&p.records.iter().cloned().map(ResponseBuf::from).collect::<Vec<_>>())));
                                if version >= 5 {
                                    d.log_start_offset = p.log_start_offset;
                                }
                                if version >= 11 {
                                    d.preferred_read_replica = p.preferred_read_replica.into();
                                }
                                if version >= 12 {
                                    if let Some(e) = p.diverging_epoch {
                                        d.diverging_epoch = EpochEndOffset::default().with_epoch(e.epoch).with_end_offset(e.end_offset);
                                    }
                                    if let Some(l) = p.current_leader {
                                        d.current_leader = LeaderIdAndEpoch::default().with_leader_id(l.leader_id.into()).with_leader_epoch(l.leader_epoch);
                                    }
                                }
                                d
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    /// Write, check length prefix and header, decode the body with kafka-protocol.
    fn write_and_decode(corr: i32, version: i16, parts: &FetchResponseParts) -> (ResponseBufs, FetchResponse) {
        let pieces = write_fetch_response(corr, version, parts).expect("small response");
        let mut f = concat(&pieces);
        let len = f.get_i32() as usize;
        assert_eq!(len, f.len(), "length prefix v{version}");
        let hv = if version >= 12 { 1 } else { 0 };
        let h = ResponseHeader::decode(&mut f, hv).unwrap();
        assert_eq!(h.correlation_id, corr);
        let body = FetchResponse::decode(&mut f, version).unwrap_or_else(|e| panic!("v{version}: {e:#}"));
        assert!(f.is_empty(), "v{version}: {} trailing bytes", f.len());
        (pieces, body)
    }

    fn sample() -> FetchResponseParts {
        let batch_a = Bytes::from(vec![1u8; 1000]);
        let batch_b = Bytes::from(vec![2u8; 333]);
        FetchResponseParts {
            throttle_time_ms: 5,
            error_code: 0,
            session_id: 77,
            topics: smallvec::smallvec![
                FetchTopicParts {
                    name: StrBytes::from_static_str("orders"),
                    topic_id: *Uuid::new_v4().as_bytes(),
                    partitions: smallvec::smallvec![
                        FetchPartitionParts {
                            partition_index: 0,
                            high_watermark: 100,
                            last_stable_offset: 90,
                            log_start_offset: 3,
                            records: smallvec::smallvec![batch_a, batch_b],
                            aborted_transactions: Some(vec![AbortedTxn { producer_id: 4, first_offset: 50 }]),
                            ..Default::default()
                        },
                        FetchPartitionParts {
                            partition_index: 1,
                            error_code: 6,
                            current_leader: Some(CurrentLeader { leader_id: 2, leader_epoch: 9 }),
                            diverging_epoch: Some(DivergingEpoch { epoch: 3, end_offset: 40 }),
                            ..FetchPartitionParts::new(1)
                        },
                    ],
                },
                FetchTopicParts { name: StrBytes::from_static_str("empty"), topic_id: [7; 16], partitions: SmallVec::new() },
            ],
            node_endpoints: vec![
                NodeEndpoint { node_id: 2, host: StrBytes::from_static_str("broker-2"), port: 9092, rack: Some(StrBytes::from_static_str("r1")) },
                NodeEndpoint { node_id: 3, host: StrBytes::from_static_str("10.0.0.3"), port: 19093, rack: None },
            ],
        }
    }

    #[test]
    fn every_version_decodes_with_kafka_protocol() {
        let parts = sample();
        for v in 4..=18 {
            let (_, body) = write_and_decode(42, v, &parts);
            assert_eq!(body, expected(v, &parts), "v{v}");
        }
    }

    #[test]
    fn records_are_not_copied() {
        let parts = sample();
        for v in [4, 11, 12, 13, 17, 18] {
            let pieces = write_fetch_response(1, v, &parts).expect("small response");
            let src = &parts.topics[0].partitions[0].records;
            let ptrs: Vec<*const u8> = pieces
                .iter()
                .map(|b| match b {
                    ResponseBuf::Memory(b) => b.as_ptr(),
                    ResponseBuf::File(_) => std::ptr::null(),
                })
                .collect();
            for r in src {
                let i = ptrs.iter().position(|&p| p == r.as_ptr()).expect("record buffer not in output");
                assert_eq!(pieces[i].len(), r.len());
            }
            // header, batch a, batch b, tail
            assert_eq!(pieces.len(), 4);
        }
    }

    #[test]
    fn file_records_are_a_piece_of_their_own_under_the_partition_length() {
        // The same batches as memory or as a file slice: the same bytes on the wire.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let mut file_bytes = vec![9u8; 100];
        file_bytes.extend(vec![1u8; 1000]);
        file_bytes.extend(vec![2u8; 333]);
        std::fs::write(&path, &file_bytes).unwrap();
        let fd: std::os::fd::OwnedFd = std::fs::File::open(&path).unwrap().into();
        let in_memory = sample();
        let mut in_file = in_memory.clone();
        let p0 = &mut in_file.topics[0].partitions[0];
        p0.records.clear();
        p0.file_records = Some(FileSlice::new(std::sync::Arc::new(fd), 100, 1333));
        for v in [4, 11, 12, 13, 17, 18] {
            let pieces = write_fetch_response(7, v, &in_file).expect("small response");
            assert_eq!(pieces.iter().filter(|p| matches!(p, ResponseBuf::File(f) if f.len() == 1333)).count(), 1, "v{v}");
            assert_eq!(concat(&pieces), concat(&write_fetch_response(7, v, &in_memory).unwrap()), "v{v}");
        }
    }

    #[test]
    fn matches_codec_encoding_byte_for_byte() {
        // Without partition-level tagged extras (whose order the codec may choose), our
        // bytes equal the codec's encoding, node_endpoints included.
        let mut parts = sample();
        for p in &mut parts.topics[0].partitions {
            p.current_leader = None;
            p.diverging_epoch = None;
        }
        for v in 4..=18 {
            let ours = concat(&write_fetch_response(42, v, &parts).expect("small response"));
            let body = expected(v, &parts);
            let mut theirs = BytesMut::new();
            let hv = if v >= 12 { 1 } else { 0 };
            let header = ResponseHeader::default().with_correlation_id(42);
            let size = header.compute_size(hv).unwrap() + body.compute_size(v).unwrap();
            theirs.put_i32(size as i32);
            header.encode(&mut theirs, hv).unwrap();
            body.encode(&mut theirs, v).unwrap();
            assert_eq!(ours, theirs.freeze(), "v{v}");
        }
    }

    #[test]
    fn empty_response_is_one_buffer() {
        let parts = FetchResponseParts::default();
        for v in 4..=18 {
            let pieces = write_fetch_response(3, v, &parts).expect("small response");
            assert_eq!(pieces.len(), 1);
            let (_, body) = write_and_decode(3, v, &parts);
            assert_eq!(body, expected(v, &parts));
        }
    }

    #[test]
    fn oversized_records_are_refused_not_truncated() {
        // 2 GiB of records as one shared 1 MiB buffer repeated (no 2 GiB allocation).
        let chunk = Bytes::from(vec![0u8; 1 << 20]);
        let mut parts = sample();
        parts.topics[0].partitions[0].records = std::iter::repeat_n(chunk.clone(), 2048).collect();
        let err = write_fetch_response(1, 12, &parts).unwrap_err();
        assert_eq!(err, FetchWriteError::PartitionTooLarge { partition_index: 0, records_bytes: 2048 << 20 });
        // Two partitions each below i32::MAX that together exceed it: the frame is refused.
        parts.topics[0].partitions[0].records = std::iter::repeat_n(chunk.clone(), 1100).collect();
        parts.topics[0].partitions[1].records = std::iter::repeat_n(chunk, 1100).collect();
        assert!(matches!(write_fetch_response(1, 12, &parts), Err(FetchWriteError::ResponseTooLarge { .. })));
    }

    fn arb_partition() -> impl Strategy<Value = FetchPartitionParts> {
        (
            any::<i32>(),
            any::<i16>(),
            (any::<i64>(), any::<i64>(), any::<i64>(), any::<i32>()),
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4),
            proptest::option::of(proptest::collection::vec((any::<i64>(), any::<i64>()), 0..3)),
            proptest::option::of((any::<i32>(), any::<i64>())),
            proptest::option::of((any::<i32>(), any::<i32>())),
        )
            .prop_map(|(idx, err, (hw, lso, lss, prr), recs, aborted, div, leader)| FetchPartitionParts {
                partition_index: idx,
                error_code: err,
                high_watermark: hw,
                last_stable_offset: lso,
                log_start_offset: lss,
                preferred_read_replica: prr,
                records: recs.into_iter().map(Bytes::from).collect(),
                file_records: None,
                aborted_transactions: aborted.map(|v| v.into_iter().map(|(producer_id, first_offset)| AbortedTxn { producer_id, first_offset }).collect()),
                // The codec cannot tell a tagged struct equal to its default from an absent
                // one; keep generated values off the defaults.
                diverging_epoch: div.filter(|&(e, o)| (e, o) != (-1, -1)).map(|(epoch, end_offset)| DivergingEpoch { epoch, end_offset }),
                current_leader: leader.filter(|&(l, e)| (l, e) != (-1, -1)).map(|(leader_id, leader_epoch)| CurrentLeader { leader_id, leader_epoch }),
            })
    }

    fn arb_parts() -> impl Strategy<Value = FetchResponseParts> {
        let topic = ("[a-zA-Z0-9._-]{0,40}", any::<[u8; 16]>(), proptest::collection::vec(arb_partition(), 0..4))
            .prop_map(|(name, topic_id, partitions)| FetchTopicParts { name: StrBytes::from_string(name), topic_id, partitions: partitions.into() });
        let endpoint = (any::<i32>(), "[a-z0-9.-]{0,200}", any::<i32>(), proptest::option::of("[a-z0-9-]{0,20}"))
            .prop_map(|(node_id, host, port, rack)| NodeEndpoint { node_id, host: StrBytes::from_string(host), port, rack: rack.map(StrBytes::from_string) });
        let endpoints = proptest::collection::vec(endpoint, 0..3);
        (any::<i32>(), any::<i16>(), any::<i32>(), proptest::collection::vec(topic, 0..4), endpoints).prop_map(
            |(throttle_time_ms, error_code, session_id, topics, node_endpoints)| FetchResponseParts {
                throttle_time_ms,
                error_code,
                session_id,
                topics: topics.into(),
                node_endpoints,
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn random_responses_decode(parts in arb_parts(), version in 4i16..=18, corr in any::<i32>()) {
            let (pieces, body) = write_and_decode(corr, version, &parts);
            prop_assert_eq!(body, expected(version, &parts));
            // every non-empty record buffer appears by pointer in the output
            for p in parts.topics.iter().flat_map(|t| &t.partitions) {
                for r in p.records.iter().filter(|r| !r.is_empty()) {
                    prop_assert!(pieces.iter().any(|b| matches!(b, ResponseBuf::Memory(b) if b.as_ptr() == r.as_ptr() && b.len() == r.len())));
                }
            }
        }
    }
}
