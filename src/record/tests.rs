//! Tests of the batch layout (header, iteration, patching, produce validation), and the
//! test batches other modules build theirs from.
use super::header::*;
use super::iter::{iter_batches, IterStop};
use super::patch::{set_base_offset, set_log_append_time, set_partition_leader_epoch};
use super::validate::{check_produce_version, validate_produce_records, ProduceChecks, RecordError, RecordErrorKind, RecordErrors};
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use proptest::prelude::*;

pub(crate) fn compression_of(i: u8) -> Compression {
    match i % 5 {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        _ => Compression::Zstd,
    }
}

/// One batch as a producer would send it (base offset 0).
pub(crate) fn make_batch(values: &[Vec<u8>], compression: Compression, producer_id: i64, base_ts: i64) -> BytesMut {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut headers = IndexMap::new();
            if i % 3 == 0 {
                headers.insert(StrBytes::from_static_str("h"), Some(Bytes::from_static(b"x")));
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch: if producer_id >= 0 { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder starts a new batch whenever offset - sequence changes, so keep
                // it constant; non-idempotent batches then get base sequence -1.
                sequence: if producer_id >= 0 { 7 + i as i32 } else { i as i32 - 1 },
                timestamp: base_ts + i as i64,
                key: if i % 2 == 0 { Some(Bytes::from(format!("k{i}"))) } else { None },
                value: Some(Bytes::from(v.clone())),
                headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).expect("test batch encodes");
    buf
}

/// A stored batch at `base` of (key, value) records; producer (id, epoch, base seq).
pub(crate) fn kv_batch(base: i64, recs: &[(Option<&str>, Option<&str>)], compression: Compression, producer: Option<(i64, i16, i32)>, ts: i64) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = recs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: base + i as i64,
            sequence: if seq < 0 { i as i32 - 1 } else { seq + i as i32 },
            timestamp: ts + i as i64,
            key: k.map(|s| Bytes::from(s.to_string())),
            value: v.map(|s| Bytes::from(s.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).expect("test batch encodes");
    buf.freeze()
}

/// (offset, key, value, timestamp) of every record of a batch, decoded by kafka-protocol.
pub(crate) fn decode_kv(b: &Bytes) -> Vec<(i64, Option<Bytes>, Option<Bytes>, i64)> {
    let mut b = b.clone();
    let set = RecordBatchDecoder::decode(&mut b).expect("decodes");
    set.records.into_iter().map(|r| (r.offset, r.key, r.value, r.timestamp)).collect()
}

#[test]
fn header_fields_and_helpers() {
    let b = make_batch(&[b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()], Compression::Lz4, 42, 1000);
    let h = parse_header(&b).unwrap();
    assert_eq!(h.magic, 2);
    assert_eq!(h.base_offset, 0);
    assert_eq!(h.records_count, 3);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.last_offset(), 2);
    assert_eq!(h.total_len(), b.len());
    assert_eq!(h.compression(), Some(Compression::Lz4));
    assert_eq!(h.producer_id, 42);
    assert_eq!(h.base_sequence, 7);
    assert_eq!(h.last_sequence(), 9);
    assert_eq!(h.base_timestamp, 1000);
    assert_eq!(h.max_timestamp, 1002);
    assert!(!h.is_control() && !h.is_transactional() && !h.timestamp_type_is_log_append());
    let v = validate(&b).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0], h);
}

/// Client-batch validation with a 1 MiB max.message.bytes and no topic settings.
pub(crate) fn validate(records: &[u8]) -> Result<smallvec::SmallVec<[BatchHeader; 1]>, BatchError> {
    validate_produce_records(records, &ProduceChecks::with_max_message_bytes(1 << 20))
}

fn reseal(b: &mut [u8]) {
    let crc = compute_crc(b);
    b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn produce_rules_like_kafka() {
    let good = make_batch(&vec![b"v".to_vec(); 4], Compression::None, -1, 5);
    assert_eq!(validate(&[]), Err(BatchError::NoBatch));
    // too large: whole batch size counts
    assert_eq!(
        validate_produce_records(&good, &ProduceChecks::with_max_message_bytes(good.len() - 1)),
        Err(BatchError::MessageTooLarge { size: good.len(), max: good.len() - 1 })
    );
    assert!(validate_produce_records(&good, &ProduceChecks::with_max_message_bytes(good.len())).is_ok());
    // two batches
    let mut two = good.clone();
    two.extend_from_slice(&good);
    assert_eq!(validate(&two), Err(BatchError::MultipleBatches));
    // base offset must be 0
    let mut b = good.clone();
    set_base_offset(&mut b, 5).unwrap();
    assert_eq!(validate(&b), Err(BatchError::NonZeroBaseOffset(5)));
    // old magic
    let mut b = good.clone();
    b[OFF_MAGIC] = 1;
    assert_eq!(validate(&b), Err(BatchError::UnsupportedMagic(1)));
    // control batch (CRC resealed so the content check is reached)
    let mut b = good.clone();
    b[OFF_ATTRIBUTES + 1] |= ATTR_CONTROL as u8;
    reseal(&mut b);
    assert_eq!(validate(&b), Err(BatchError::ControlBatchFromClient));
    // inconsistent lastOffsetDelta
    let mut b = good.clone();
    b[OFF_LAST_OFFSET_DELTA + 3] = 9;
    reseal(&mut b);
    assert!(matches!(validate(&b), Err(BatchError::InconsistentOffsetDelta { .. })));
    // zero records
    let mut b = good.clone();
    b[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&0i32.to_be_bytes());
    reseal(&mut b);
    assert_eq!(validate(&b), Err(BatchError::InvalidRecordCount(0)));
    // unknown codec
    let mut b = good.clone();
    b[OFF_ATTRIBUTES + 1] |= 7;
    reseal(&mut b);
    assert_eq!(validate(&b), Err(BatchError::UnknownCompression(7)));
    // idempotent producer with negative sequence
    let mut b = make_batch(&[b"v".to_vec()], Compression::None, 3, 5);
    b[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
    reseal(&mut b);
    assert!(matches!(validate(&b), Err(BatchError::InvalidSequence { .. })));
    // length field below the minimum
    let mut b = good.clone();
    b[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&10i32.to_be_bytes());
    assert!(validate(&b).is_err());
    let mut b = good.clone();
    b[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(validate(&b), Err(BatchError::InvalidBatchLength { length: -5 }));
}

#[test]
fn iter_batches_stops_at_zero_tail_and_reports_bad_batch() {
    let a = make_batch(&[b"one".to_vec(), b"two".to_vec()], Compression::Snappy, -1, 1);
    let b = make_batch(&[b"three".to_vec()], Compression::Gzip, -1, 2);
    let mut log = BytesMut::new();
    log.extend_from_slice(&a);
    set_base_offset(&mut log[..], 0).unwrap();
    let at = log.len();
    log.extend_from_slice(&b);
    set_base_offset(&mut log[at..], 2).unwrap();
    let end = log.len();
    log.extend_from_slice(&[0u8; 4096 - 7]); // DMA zero padding
    let got: Vec<_> = iter_batches(&log).collect();
    assert_eq!(got.len(), 2);
    let (h0, r0) = got[0].clone().unwrap();
    let (h1, r1) = got[1].clone().unwrap();
    assert_eq!((h0.base_offset, r0), (0, 0..at));
    assert_eq!((h1.base_offset, r1), (2, at..end));
    // a short zero tail too
    let mut it = iter_batches(&log[..end + 5]);
    assert_eq!(it.by_ref().count(), 2);
    assert_eq!(it.valid_len(), end);
    // a torn second batch: first batch ok, then an error, then nothing
    let mut it = iter_batches(&log[..end - 3]);
    assert!(it.next().unwrap().is_ok());
    assert!(matches!(it.next(), Some(Err(BatchError::Truncated { .. }))));
    assert!(it.next().is_none());
    assert_eq!(it.valid_len(), at);
    // a corrupted byte in the second batch
    let mut bad = log.clone();
    bad[at + 70] ^= 0x40;
    let mut it = iter_batches(&bad);
    assert!(it.next().unwrap().is_ok());
    assert!(matches!(it.next(), Some(Err(BatchError::CorruptMessage { .. }))));
    assert_eq!(it.valid_len(), at);
    // non-zero garbage shorter than a header
    let mut g = log[..end].to_vec();
    g.extend_from_slice(&[1, 2, 3]);
    let mut it = iter_batches(&g);
    assert_eq!(it.by_ref().filter(|r| r.is_ok()).count(), 2);
    assert!(iter_batches(&g).any(|r| r.is_err()));
}

#[test]
fn iter_reports_why_it_stopped() {
    let a = make_batch(&[b"one".to_vec(), b"two".to_vec()], Compression::None, -1, 1);
    let b = make_batch(&[b"three".to_vec()], Compression::Lz4, -1, 2);
    let mut log = BytesMut::new();
    log.extend_from_slice(&a);
    let at = log.len();
    log.extend_from_slice(&b);
    let end = log.len();
    let stop_of = |buf: &[u8]| {
        let mut it = iter_batches(buf);
        it.by_ref().for_each(drop);
        (it.valid_len(), it.stop().cloned())
    };
    assert_eq!(stop_of(&log), (end, Some(IterStop::End)));
    // cut inside the second batch's header and body: its whole length is reported
    assert_eq!(stop_of(&log[..at + 30]), (at, Some(IterStop::Cut { total_len: Some(b.len()) })));
    assert_eq!(stop_of(&log[..end - 1]), (at, Some(IterStop::Cut { total_len: Some(b.len()) })));
    // fewer than 12 bytes: a cut of unknown length, zero or not
    assert_eq!(stop_of(&log[..at + 5]), (at, Some(IterStop::Cut { total_len: None })));
    let mut z = log[..end].to_vec();
    z.extend_from_slice(&[0u8; 7]);
    assert_eq!(stop_of(&z), (end, Some(IterStop::Cut { total_len: None })));
    // a zero length field: the padded tail
    z.extend_from_slice(&[0u8; 100]);
    assert_eq!(stop_of(&z), (end, Some(IterStop::ZeroTail)));
    // a damaged batch
    let mut bad = log.to_vec();
    bad[at + 70] ^= 0x40;
    assert!(matches!(stop_of(&bad), (p, Some(IterStop::Invalid(BatchError::CorruptMessage { .. }))) if p == at));
    // nothing read yet
    assert_eq!(iter_batches(&log).stop(), None);
}

#[test]
fn setters_reject_short_buffers() {
    let mut short = [0u8; 10];
    assert!(set_base_offset(&mut short, 1).is_err());
    assert!(set_partition_leader_epoch(&mut short, 1).is_err());
    assert!(set_log_append_time(&mut short, 1).is_err());
    assert!(parse_header(&short).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn roundtrip_patch_and_decode(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20),
        codec in 0u8..5,
        idempotent in any::<bool>(),
        base_ts in 0i64..2_000_000_000_000,
        base_offset in 0i64..(1i64 << 50),
        epoch in 0i32..1000,
        append_ts in 0i64..2_000_000_000_000,
    ) {
        let compression = compression_of(codec);
        let mut b = make_batch(&values, compression, if idempotent { 9 } else { -1 }, base_ts);
        let n = values.len() as i32;
        let v = validate(&b).unwrap();
        prop_assert_eq!(v.len(), 1);
        let h = v[0];
        prop_assert_eq!(h.records_count, n);
        prop_assert_eq!(h.last_offset_delta, n - 1);
        prop_assert_eq!(h.total_len(), b.len());
        prop_assert_eq!(h.compression(), Some(compression));
        prop_assert_eq!(h.max_timestamp, base_ts + i64::from(n) - 1);

        set_base_offset(&mut b, base_offset).unwrap();
        set_partition_leader_epoch(&mut b, epoch).unwrap();
        set_log_append_time(&mut b, append_ts).unwrap();

        let h2 = parse_header(&b).unwrap();
        prop_assert_eq!(h2.base_offset, base_offset);
        prop_assert_eq!(h2.partition_leader_epoch, epoch);
        prop_assert_eq!(h2.max_timestamp, append_ts);
        prop_assert_eq!(h2.base_timestamp, base_ts);
        prop_assert!(h2.timestamp_type_is_log_append());
        prop_assert_eq!(h2.compression(), Some(compression));
        prop_assert_eq!(h2.last_offset(), base_offset + i64::from(n) - 1);
        // still a valid stored batch
        let stored: Vec<_> = iter_batches(&b).collect();
        prop_assert_eq!(stored.len(), 1);
        prop_assert!(stored[0].is_ok());

        // kafka-protocol (independent CRC check) decodes it with the patched offsets
        let mut bytes = b.clone().freeze();
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        prop_assert_eq!(set.records.len(), values.len());
        for (i, r) in set.records.iter().enumerate() {
            prop_assert_eq!(r.offset, base_offset + i as i64);
            prop_assert_eq!(r.partition_leader_epoch, epoch);
            prop_assert_eq!(r.timestamp_type, TimestampType::LogAppend);
            prop_assert_eq!(r.value.as_deref(), Some(&values[i][..]));
        }
    }

    #[test]
    fn any_flipped_crc_byte_is_detected(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
        codec in 0u8..5,
        pos_seed in any::<usize>(),
        flip in 1u8..=255,
    ) {
        let mut b = make_batch(&values, compression_of(codec), -1, 77);
        let covered = OFF_ATTRIBUTES..b.len();
        let pos = covered.start + pos_seed % covered.len();
        b[pos] ^= flip;
        let corrupt = matches!(validate(&b), Err(BatchError::CorruptMessage { .. }));
        prop_assert!(corrupt, "flip at {} not reported as corrupt", pos);
        let first = iter_batches(&b).next();
        let corrupt = matches!(first, Some(Err(BatchError::CorruptMessage { .. })));
        prop_assert!(corrupt);
    }

    #[test]
    fn truncation_is_an_error(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
        codec in 0u8..5,
    ) {
        let b = make_batch(&values, compression_of(codec), -1, 3);
        for k in 0..b.len() {
            prop_assert!(validate(&b[..k]).is_err());
            let mut copy = b[..k].to_vec();
            let _ = set_log_append_time(&mut copy, 1);
            let _ = parse_header(&b[..k]);
            // iter_batches on a prefix either yields an error or stops: never a batch
            prop_assert!(iter_batches(&b[..k]).all(|r| r.is_err()));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = validate(&data);
        let _ = parse_header(&data);
        for r in iter_batches(&data) { let _ = r; }
        let mut d = data.clone();
        let _ = set_log_append_time(&mut d, 5);
        let _ = set_base_offset(&mut d, 5);
    }
}

/// A producer batch around a hand-built records section (compressed already when
/// `compression` is not None), header fields as given, CRC computed.
fn raw_batch(section: &[u8], count: i32, last_offset_delta: i32, compression: Compression, base_ts: i64) -> Vec<u8> {
    let mut b = vec![0u8; BATCH_HEADER_LEN];
    let batch_length = (BATCH_HEADER_LEN - LOG_OVERHEAD + section.len()) as i32;
    b[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    b[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&(-1i32).to_be_bytes());
    b[OFF_MAGIC] = MAGIC_V2 as u8;
    b[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&(compression as i16).to_be_bytes());
    b[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&last_offset_delta.to_be_bytes());
    b[OFF_BASE_TIMESTAMP..OFF_BASE_TIMESTAMP + 8].copy_from_slice(&base_ts.to_be_bytes());
    b[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&base_ts.to_be_bytes());
    b[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&(-1i64).to_be_bytes());
    b[OFF_PRODUCER_EPOCH..OFF_PRODUCER_EPOCH + 2].copy_from_slice(&(-1i16).to_be_bytes());
    b[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
    b[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&count.to_be_bytes());
    b.extend_from_slice(section);
    reseal(&mut b);
    b
}

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One DefaultRecord: offset delta, timestamp delta, key, value, headers.
fn raw_record(offset_delta: i64, ts_delta: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut body = vec![0u8];
    zigzag(ts_delta, &mut body);
    zigzag(offset_delta, &mut body);
    for field in [key, value] {
        match field {
            None => zigzag(-1, &mut body),
            Some(f) => {
                zigzag(f.len() as i64, &mut body);
                body.extend_from_slice(f);
            }
        }
    }
    zigzag(headers.len() as i64, &mut body);
    for (k, v) in headers {
        zigzag(k.len() as i64, &mut body);
        body.extend_from_slice(k);
        zigzag(v.len() as i64, &mut body);
        body.extend_from_slice(v);
    }
    let mut out = Vec::new();
    zigzag(body.len() as i64, &mut out);
    out.extend_from_slice(&body);
    out
}

fn compress(plain: &[u8], compression: Compression) -> Vec<u8> {
    let mut out = BytesMut::new();
    super::records::compress_into(&mut out, BytesMut::from(plain), compression).expect("test section compresses");
    out.to_vec()
}

fn is_invalid_record(r: Result<smallvec::SmallVec<[BatchHeader; 1]>, BatchError>) -> bool {
    matches!(r, Err(BatchError::InvalidRecord(_)))
}

/// LogValidator's record pass, for every codec: the records must be exactly the count the
/// header declares, each well-formed, with offset deltas 0..n-1.
#[test]
fn records_must_match_the_header_for_every_codec() {
    let recs: Vec<Vec<u8>> = (0..3).map(|i| raw_record(i, i, Some(b"k"), Some(b"v"), &[(b"h", b"1")])).collect();
    let section = recs.concat();
    for c in 0..5u8 {
        let codec = compression_of(c);
        let body = |plain: &[u8]| compress(plain, codec);
        let ok = raw_batch(&body(&section), 3, 2, codec, 1000);
        assert_eq!(validate(&ok).unwrap()[0].records_count, 3, "{codec:?}");
        // Count says 4 (lastOffsetDelta consistent), 3 records present: premature end.
        assert!(is_invalid_record(validate(&raw_batch(&body(&section), 4, 3, codec, 1000))), "{codec:?}");
        // Count says 2, 3 records present: records still remaining.
        assert!(is_invalid_record(validate(&raw_batch(&body(&section), 2, 1, codec, 1000))), "{codec:?}");
        // The last record cut short.
        let cut = &section[..section.len() - 2];
        assert!(is_invalid_record(validate(&raw_batch(&body(cut), 3, 2, codec, 1000))), "{codec:?}");
        // Offset deltas other than 0..n-1.
        for deltas in [[0, 2, 3], [1, 2, 3], [0, 0, 1], [2, 1, 0], [0, 1, 1]] {
            let bad: Vec<u8> = deltas.iter().flat_map(|&d| raw_record(d, 0, Some(b"k"), Some(b"v"), &[])).collect();
            let r = validate(&raw_batch(&body(&bad), 3, 2, codec, 1000));
            assert!(is_invalid_record(r), "{codec:?} deltas {deltas:?}");
        }
        // A record whose length claims one byte more than it holds (next record's first
        // byte swallowed), and one whose header count is negative.
        let mut long = recs[0].clone();
        long[0] += 2; // zigzag: length + 1
        let swallowed = [long, recs[1].clone(), recs[2].clone()].concat();
        assert!(is_invalid_record(validate(&raw_batch(&body(&swallowed), 3, 2, codec, 1000))), "{codec:?}");
        let mut neg = raw_record(0, 0, Some(b"k"), Some(b"v"), &[]);
        *neg.last_mut().unwrap() = 3; // header count -2 (zigzag 3)
        assert!(is_invalid_record(validate(&raw_batch(&neg, 1, 0, Compression::None, 1000))));
    }
}

#[test]
fn decompression_bomb_is_refused_by_produce_validation() {
    // 129 MiB of one record's zero value: a few hundred KiB compressed, past the limit.
    let value = vec![0u8; super::records::MAX_DECOMPRESSED_BYTES + (1 << 20)];
    let section = raw_record(0, 0, None, Some(&value), &[]);
    drop(value);
    for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
        let packed = compress(&section, codec);
        if packed.len() > 8 << 20 {
            continue; // a codec that cannot pack it under max.message.bytes cannot carry a bomb
        }
        let b = raw_batch(&packed, 1, 0, codec, 1000);
        let checks = ProduceChecks::with_max_message_bytes(8 << 20);
        assert_eq!(validate_produce_records(&b, &checks), Err(BatchError::DecompressedTooLarge { limit: super::records::MAX_DECOMPRESSED_BYTES }), "{codec:?}");
    }
}

#[test]
fn compacted_topics_need_keys_and_timestamps_stay_in_the_window() {
    let keyed = [raw_record(0, 0, Some(b"k"), Some(b"v"), &[]), raw_record(1, 5, Some(b"k"), None, &[])].concat();
    let keyless = [raw_record(0, 0, Some(b"k"), Some(b"v"), &[]), raw_record(1, 5, None, Some(b"v"), &[])].concat();
    let mut checks = ProduceChecks::with_max_message_bytes(1 << 20);
    checks.compacted_topic = true;
    for c in 0..5u8 {
        let codec = compression_of(c);
        assert!(validate_produce_records(&raw_batch(&compress(&keyed, codec), 2, 1, codec, 1000), &checks).is_ok());
        assert_eq!(
            validate_produce_records(&raw_batch(&compress(&keyless, codec), 2, 1, codec, 1000), &checks),
            Err(refused(vec![RecordError { batch_index: 1, kind: RecordErrorKind::NoKeyOnCompactedTopic }])),
            "{codec:?}"
        );
    }
    // Window [now - 100, now + 10]: the second record (base + 5) decides.
    let checks = ProduceChecks { timestamp_before_max_ms: 100, timestamp_after_max_ms: 10, now_ms: 10_000, ..checks };
    let at = |base: i64| validate_produce_records(&raw_batch(&keyed, 2, 1, Compression::None, base), &checks);
    assert!(at(9_900).is_ok());
    assert!(at(10_005).is_ok());
    let late = |timestamp, offset| RecordErrorKind::TimestampOutOfRange { timestamp, offset, min: 9_900, max: 10_010 };
    assert_eq!(at(10_006), Err(refused(vec![RecordError { batch_index: 1, kind: late(10_011, 1) }])));
    assert_eq!(at(9_899), Err(refused(vec![RecordError { batch_index: 0, kind: late(9_899, 0) }])), "the second record (9_904) is in the window");
    // No timestamp (-1) is never range-checked; a LogAppendTime topic checks no window but
    // refuses a client batch that claims LogAppendTime.
    let none = [raw_record(0, 0, Some(b"k"), Some(b"v"), &[])].concat();
    assert!(validate_produce_records(&raw_batch(&none, 1, 0, Compression::None, -1), &checks).is_ok());
    let lat = ProduceChecks { log_append_time: true, ..checks };
    assert!(validate_produce_records(&raw_batch(&keyed, 2, 1, Compression::None, 1), &lat).is_ok());
    let mut claims = raw_batch(&keyed, 2, 1, Compression::None, 1);
    claims[OFF_ATTRIBUTES + 1] |= ATTR_TIMESTAMP_LOG_APPEND as u8;
    reseal(&mut claims);
    assert_eq!(validate_produce_records(&claims, &lat), Err(BatchError::LogAppendTimeFromClient));
}

fn refused(errors: Vec<RecordError>) -> BatchError {
    BatchError::RecordErrors(Box::new(RecordErrors { errors }))
}

/// KIP-467: every bad record of the batch is listed (not only the first), with Kafka's
/// messages; a timestamp error makes the batch message Kafka's timestamp one.
#[test]
fn every_refused_record_is_listed_with_kafkas_messages() {
    let records: Vec<Vec<u8>> =
        (0..10i64).map(|i| if i % 3 == 1 { raw_record(i, 0, None, Some(b"v"), &[]) } else { raw_record(i, 0, Some(b"k"), Some(b"v"), &[]) }).collect();
    let mut checks = ProduceChecks::with_max_message_bytes(1 << 20);
    checks.compacted_topic = true;
    let b = raw_batch(&records.concat(), 10, 9, Compression::None, 1000);
    let Err(BatchError::RecordErrors(r)) = validate_produce_records(&b, &checks) else { panic!("keyless records accepted") };
    assert_eq!(r.errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(), vec![1, 4, 7]);
    assert_eq!(r.errors[0].message("t-0"), "Compacted topic cannot accept message without key in topic partition t-0");
    let no_key = "message='Compacted topic cannot accept message without key in topic partition t-0'";
    assert_eq!(
        r.batch_message("t-0"),
        format!("One or more records have been rejected due to 3 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, {no_key}), RecordError(batchIndex=4, {no_key}), RecordError(batchIndex=7, {no_key})]")
    );
    // A record with a key but a bad timestamp is listed too; the batch message is Kafka's
    // timestamp message then.
    checks.now_ms = 1000;
    checks.timestamp_after_max_ms = 5;
    checks.timestamp_before_max_ms = 100;
    let records = [raw_record(0, 0, Some(b"k"), None, &[]), raw_record(1, 10, Some(b"k"), None, &[]), raw_record(2, 0, None, None, &[])].concat();
    let Err(BatchError::RecordErrors(r)) = validate_produce_records(&raw_batch(&records, 3, 2, Compression::None, 1000), &checks) else { panic!() };
    assert_eq!(r.errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(r.errors[0].message("t-0"), "Timestamp 1010 of message with offset 1 is out of range. The timestamp should be within [900, 1005]");
    assert_eq!(r.batch_message("t-0"), "One or more records have been rejected due to invalid timestamp");
}

#[test]
fn zstd_needs_produce_v7() {
    let section = raw_record(0, 0, Some(b"k"), Some(b"v"), &[]);
    let zstd = raw_batch(&compress(&section, Compression::Zstd), 1, 0, Compression::Zstd, 1);
    assert_eq!(check_produce_version(&zstd, 6), Err(BatchError::CompressionNeedsNewerProduce { version: 6 }));
    assert_eq!(check_produce_version(&zstd, 3), Err(BatchError::CompressionNeedsNewerProduce { version: 3 }));
    assert_eq!(check_produce_version(&zstd, 7), Ok(()));
    let lz4 = raw_batch(&compress(&section, Compression::Lz4), 1, 0, Compression::Lz4, 1);
    assert_eq!(check_produce_version(&lz4, 3), Ok(()));
    // Garbage is left to validate_produce_records.
    assert_eq!(check_produce_version(b"junk", 3), Ok(()));
}

proptest! {
    /// Any producer batch kafka-protocol encodes (every codec, keys, nulls, headers)
    /// passes; flipping any byte of its records section and resealing the CRC never
    /// panics and is either refused or still a well-formed batch.
    #[test]
    fn encoded_batches_pass_and_damaged_records_never_panic(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..12),
        codec in 0u8..5,
        flip in any::<proptest::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let b = make_batch(&values, compression_of(codec), -1, 1_000);
        prop_assert_eq!(validate(&b).unwrap()[0].records_count as usize, values.len());
        let mut d = b.to_vec();
        let i = BATCH_HEADER_LEN + flip.index(d.len() - BATCH_HEADER_LEN);
        d[i] ^= xor;
        reseal(&mut d);
        let _ = validate(&d);
    }
}
