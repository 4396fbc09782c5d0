//! Protocol hot paths: request decode, the Produce request-to-response codec (the crate's
//! decode and encode against the in-place view and the hand-written response, A B in one
//! run), produce batch validation, fetch response assembly.
//! `cargo bench --bench protocol -- --quick` for a short run.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, MetadataRequest, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::Compression;
use shardlog::protocol::fetch_writer::{write_fetch_response, FetchPartitionParts, FetchResponseParts, FetchTopicParts};
use shardlog::protocol::frame::encode_response;
use shardlog::protocol::produce_request_view::ProduceRequestView;
use shardlog::protocol::produce_response_writer::{write_produce_response, PartitionAnswer, TopicAnswer};
use shardlog::protocol::request::decode_request;
use shardlog::record::{encode_batch, NewRecord};
use shardlog::record::{iter_batches, validate_produce_records, ProduceChecks};

/// One uncompressed producer batch of about `bytes` bytes (1 KiB values).
fn batch(bytes: usize) -> Bytes {
    batch_of(bytes, 1000, Compression::None)
}

/// One producer batch of about `bytes` uncompressed bytes: values of `value_bytes`
/// (partly repetitive text, so codecs compress it as they would JSON), keyed, `compression`.
fn batch_of(bytes: usize, value_bytes: usize, compression: Compression) -> Bytes {
    let n = (bytes / (value_bytes + 24)).max(1);
    let records = (0..n).map(|i| {
        let text = format!("{{\"id\":{i},\"user\":\"user-{}\",\"payload\":\"", i % 97);
        let mut v = text.into_bytes();
        v.resize(value_bytes, b'a' + (i % 26) as u8);
        NewRecord { key: Some(Bytes::from(format!("key-{}", i % 1000))), value: Some(Bytes::from(v)), timestamp_ms: 1_700_000_000_000 + i as i64 }
    });
    encode_batch(records, compression).expect("a bench batch encodes")
}

fn request_frame<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, body: &R) -> Bytes {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("bench")))
        .encode(&mut b, R::header_version(version))
        .expect("header encodes");
    body.encode(&mut b, version).expect("body encodes");
    b.freeze()
}

fn bench_decode(c: &mut Criterion) {
    let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str("bench-topic")))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(batch(16 * 1024)))])]);
    let produce = request_frame(ApiKey::Produce, 9, &produce);
    let metadata = MetadataRequest::default().with_topics(Some(
        ["orders", "payments", "clicks"].iter().map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str(t))))).collect(),
    ));
    let metadata = request_frame(ApiKey::Metadata, 12, &metadata);

    let mut g = c.benchmark_group("request_decode");
    g.throughput(Throughput::Elements(1));
    g.bench_function("produce_v9_16KiB", |b| b.iter(|| decode_request(black_box(produce.clone())).is_ok()));
    g.bench_function("metadata_v12_3_topics", |b| b.iter(|| decode_request(black_box(metadata.clone())).is_ok()));
    g.finish();

    // What the produce path does around the append: read the request, answer it.
    let mut g = c.benchmark_group("produce_decode_and_answer_v9_16KiB");
    g.throughput(Throughput::Elements(1));
    g.bench_function("crate_decode_and_structs", |b| b.iter(|| produce_with_the_crate(black_box(&produce))));
    g.bench_function("view_and_hand_written", |b| b.iter(|| produce_in_place(black_box(&produce))));
    g.finish();
}

/// The Produce path before issue 10: kafka-protocol's decode, response structs, encode.
fn produce_with_the_crate(frame: &Bytes) -> usize {
    use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use kafka_protocol::messages::{ProduceResponse, RequestKind};
    let req = decode_request(frame.clone()).expect("decodes");
    let RequestKind::Produce(p) = req.body else { unreachable!("a Produce request") };
    let topics = p
        .topic_data
        .iter()
        .map(|t| {
            let parts = t
                .partition_data
                .iter()
                .map(|pd| PartitionProduceResponse::default().with_index(pd.index).with_base_offset(pd.records.as_ref().map_or(0, |r| r.len() as i64)))
                .collect();
            TopicProduceResponse::default().with_name(t.name.clone()).with_partition_responses(parts)
        })
        .collect();
    encode_response(req.header.correlation_id, ApiKey::Produce, req.version, &ProduceResponse::default().with_responses(topics)).expect("encodes").len()
}

/// The Produce path now: the in-place view, flat answers, the hand-written response.
fn produce_in_place(frame: &Bytes) -> usize {
    let view = ProduceRequestView::parse(frame.clone()).expect("a viewable request");
    let mut answers: smallvec::SmallVec<[PartitionAnswer; 4]> = smallvec::SmallVec::new();
    for t in view.topics() {
        for p in t.partitions {
            let base_offset = view.records(&p).map_or(0, |r| r.len() as i64);
            answers.push(PartitionAnswer { base_offset, ..PartitionAnswer::pending(p.index) });
        }
    }
    let t = view.topics().next().expect("a topic");
    let topics = [TopicAnswer { name: t.name, topic_id: [0; 16], partitions: &answers }];
    write_produce_response(view.correlation_id(), view.version(), topics.iter().cloned(), 0).expect("encodes").len()
}

fn bench_validate(c: &mut Criterion) {
    // 1 MiB as 64 produce batches of 16 KiB, validated one by one (one batch per partition),
    // and the same bytes as a stored log walked by iter_batches.
    let batches: Vec<Bytes> = (0..64).map(|_| batch(16 * 1024)).collect();
    assert!(batches.iter().all(|b| validate_produce_records(b, &ProduceChecks::with_max_message_bytes(1 << 20)).is_ok()));
    let total: usize = batches.iter().map(Bytes::len).sum();
    let mut log = BytesMut::new();
    for b in &batches {
        log.extend_from_slice(b);
    }
    let mut g = c.benchmark_group("batch_validate");
    g.throughput(Throughput::Bytes(total as u64));
    g.bench_function("validate_produce_64x16KiB", |b| {
        b.iter(|| batches.iter().all(|x| validate_produce_records(black_box(x), &ProduceChecks::with_max_message_bytes(1 << 20)).is_ok()))
    });
    g.bench_function("iter_batches_1MiB", |b| b.iter(|| iter_batches(black_box(&log)).count()));
    g.finish();

    // 100-byte records (the record walk costs per record), uncompressed and with each codec:
    // 16 batches of 64 KiB uncompressed each (about 520 records per batch).
    let mut g = c.benchmark_group("batch_validate_records");
    g.throughput(Throughput::Bytes(16 * 64 * 1024));
    for (name, compression) in
        [("none", Compression::None), ("gzip", Compression::Gzip), ("snappy", Compression::Snappy), ("lz4", Compression::Lz4), ("zstd", Compression::Zstd)]
    {
        let batches: Vec<Bytes> = (0..16).map(|_| batch_of(64 * 1024, 100, compression)).collect();
        assert!(batches.iter().all(|b| validate_produce_records(b, &ProduceChecks::with_max_message_bytes(1 << 20)).is_ok()));
        g.bench_function(format!("validate_16x64KiB_100B_{name}"), |b| {
            b.iter(|| batches.iter().all(|x| validate_produce_records(black_box(x), &ProduceChecks::with_max_message_bytes(1 << 20)).is_ok()))
        });
    }
    g.finish();
}

fn bench_fetch(c: &mut Criterion) {
    let records = batch(16 * 1024);
    let parts = FetchResponseParts {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        topics: smallvec::smallvec![FetchTopicParts {
            name: StrBytes::from_static_str("bench-topic"),
            topic_id: [1; 16],
            partitions: (0..64)
                .map(|i| FetchPartitionParts {
                    partition_index: i,
                    high_watermark: 1000,
                    last_stable_offset: 1000,
                    log_start_offset: 0,
                    records: smallvec::smallvec![records.clone()],
                    ..Default::default()
                })
                .collect(),
        }],
        node_endpoints: Vec::new(),
    };
    let mut g = c.benchmark_group("fetch_response");
    g.throughput(Throughput::Bytes(64 * records.len() as u64));
    g.bench_function("v12_64x16KiB", |b| b.iter(|| write_fetch_response(1, 12, black_box(&parts)).map(|v| v.len())));
    g.bench_function("v17_64x16KiB", |b| b.iter(|| write_fetch_response(1, 17, black_box(&parts)).map(|v| v.len())));
    g.finish();
}

criterion_group!(benches, bench_decode, bench_validate, bench_fetch);
criterion_main!(benches);
