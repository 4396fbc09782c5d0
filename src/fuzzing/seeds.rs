//! Seed inputs for the targets that start from valid shapes (real batches, a recoverable
//! segment, each small file, the controller's files), built from the code that writes
//! them, so mutations start from what the broker really reads. The smoke tests use them
//! in memory; `SHARDLOG_WRITE_FUZZ_SEEDS=1 cargo test --lib fuzz_seed_corpus` writes them
//! to `fuzz/corpus/<target>/seed-*` for the libFuzzer campaign (committed).
use kafka_protocol::records::Compression;

use crate::cluster::image::{BrokerMeta, MetadataImage, PartitionMeta, ReplicaMeta, TopicMeta};
use crate::record::set_base_offset;
use crate::record::tests::{kv_batch, make_batch};
use crate::storage::leader_epoch_cache::{self, EpochEntry};
use crate::storage::partition_metadata;

/// Batches at dense offsets from 0 with every codec, keys, a producer and a tombstone.
fn segment_bytes() -> Vec<u8> {
    let mut log = Vec::new();
    let mut next = 0i64;
    for (i, c) in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd].into_iter().enumerate() {
        let mut b = make_batch(&[b"a".to_vec(), vec![b'v'; 40 * i + 1], b"c".to_vec()], c, if i % 2 == 0 { -1 } else { 1000 + i as i64 }, 1_700_000_000_000);
        set_base_offset(&mut b, next).expect("offset patches");
        next += 3;
        log.extend_from_slice(&b);
    }
    log.extend_from_slice(&kv_batch(next, &[(Some("k"), None), (Some("k"), Some("v"))], Compression::None, Some((7, 0, 0)), 1_700_000_000_000));
    log
}

fn image() -> MetadataImage {
    let mut image = MetadataImage { cluster_id: "fuzz-cluster".into(), applied_index: 42, next_producer_id: 1000, ..Default::default() };
    for id in 1..=2 {
        image.brokers.insert(
            id,
            BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 2, listeners: Vec::new(), fenced: id == 2 },
        );
    }
    let partitions = (0..2).map(|p| PartitionMeta::new_on(p, vec![ReplicaMeta { broker: 1, shard: 0 }, ReplicaMeta { broker: 2, shard: 1 }])).collect();
    image
        .topics
        .insert("t".into(), TopicMeta { name: "t".into(), topic_id: [9; 16], partitions, configs: [("retention.ms".to_string(), "1000".to_string())].into() });
    image
}

pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "stored_batches" => {
            let log = segment_bytes();
            vec![log.clone(), log[..log.len() - 7].to_vec()]
        }
        "segment_recovery" => {
            let log = segment_bytes();
            let mut padded = log.clone();
            padded.resize(log.len().next_multiple_of(4096), 0);
            let mut torn = log.clone();
            torn.truncate(log.len() - 5);
            vec![log, padded, torn]
        }
        "storage_files" => {
            let mut index = vec![0u8; 1 + crate::storage::index::SUMMARY_LEN];
            for (off, pos) in [(0u32, 0u32), (3, 300), (9, 4096)] {
                index.extend_from_slice(&off.to_be_bytes());
                index.extend_from_slice(&pos.to_be_bytes());
            }
            let mut time = vec![1u8];
            for (ts, off) in [(1_700_000_000_000i64, 0u32), (1_700_000_000_500, 3)] {
                time.extend_from_slice(&ts.to_be_bytes());
                time.extend_from_slice(&off.to_be_bytes());
            }
            let epochs = [EpochEntry { epoch: 0, start_offset: 0 }, EpochEntry { epoch: 3, start_offset: 120 }];
            let epoch_text = [&[2u8][..], leader_epoch_cache::encode(&epochs).as_bytes()].concat();
            let metadata_text = [&[3u8][..], partition_metadata::encode(&[5; 16]).as_bytes()].concat();
            vec![index, time, epoch_text, metadata_text]
        }
        "metadata_files" => crate::controller::fuzz_surface::seeds(&image()),
        _ => Vec::new(),
    }
}

/// The seeds are what they claim: readers accept them whole (so mutations start deep).
#[test]
fn fuzz_seed_corpus() {
    use crate::controller::fuzz_surface::{decode_snapshot, scan_metadata_log};
    use crate::storage::index::{OffsetIndex, TimeIndex};
    let log = segment_bytes();
    let mut batches = crate::record::iter_batches(&log);
    assert_eq!(batches.by_ref().filter(Result::is_ok).count(), 6);
    assert_eq!(batches.valid_len(), log.len());
    let files = seeds("storage_files");
    assert!(OffsetIndex::from_payload(&files[0][1..]).is_ok_and(|(_, i)| i.len() == 3));
    assert!(TimeIndex::from_payload(&files[1][1..]).is_ok());
    assert!(leader_epoch_cache::decode(std::str::from_utf8(&files[2][1..]).unwrap()).is_some_and(|e| e.len() == 2));
    assert_eq!(partition_metadata::decode(std::str::from_utf8(&files[3][1..]).unwrap()), Some([5; 16]));
    let meta = seeds("metadata_files");
    assert_eq!(scan_metadata_log(&meta[0][1..]), 3);
    assert!(decode_snapshot(&meta[1][1..]));
    crate::storage::testing::run(|dir| async move {
        let log = segment_bytes();
        for (bytes, kept) in [(log.clone(), 6), ([&log[..], &[0u8; 100][..]].concat(), 6), (log[..log.len() - 5].to_vec(), 5)] {
            std::fs::write(dir.join("00000000000000000000.log"), &bytes).unwrap();
            let o = crate::storage::recovery::open_active(&dir, 0, 256, crate::storage::WriteMode::PageCache, true).await.unwrap();
            assert_eq!(o.batches.len(), kept);
        }
    });
    for (name, check) in super::TARGETS {
        for seed in seeds(name) {
            check(&seed);
        }
    }
    if std::env::var_os("SHARDLOG_WRITE_FUZZ_SEEDS").is_none() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for (name, _) in super::TARGETS {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (i, seed) in seeds(name).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), seed).expect("seed written");
        }
    }
}
