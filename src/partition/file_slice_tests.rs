//! Zero-copy consumer reads (`ReadLimit::file_slice`): what a slice holds is exactly
//! what the copying read returns (whole batches, from the fetch offset, within the
//! limit), and reads the slice cannot serve without touching the bytes copy instead.
use std::os::fd::AsRawFd;

use bytes::Bytes;
use kafka_protocol::records::Compression;

use super::read::ReadLimit;
use super::tests::{batch, open_flushed, run};
use crate::config::FlushMode;
use crate::record::parse_header;
use crate::storage::LogConfig;

/// The whole batches of `bytes`, back to back.
fn split_batches(mut bytes: Bytes) -> Vec<(i64, i64, Bytes)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let h = parse_header(&bytes).expect("a whole batch");
        let b = bytes.split_to(h.total_len());
        out.push((h.base_offset, h.last_offset(), b));
    }
    out
}

fn concat(records: &[Bytes]) -> Bytes {
    records.iter().flat_map(|b| b.iter().copied()).collect::<Vec<u8>>().into()
}

/// Drops the partition's segment files from the page cache (synced first: dirty pages
/// are not dropped).
fn drop_page_cache(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir.join("t-0")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "log") {
            let f = std::fs::File::open(&path).unwrap();
            f.sync_all().unwrap();
            // SAFETY: advisory syscall on an open descriptor.
            assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
        }
    }
}

#[test]
fn consumer_reads_past_the_batch_cache_are_file_slices_of_the_same_batches() {
    run(|dir| async move {
        // A 4 KiB batch cache: almost every read goes to the segments. Batches of ~560
        // bytes, an index entry every second one or so, 64 KiB segments.
        let cfg = LogConfig { segment_bytes: 64 * 1024, index_interval_bytes: 1024, cache_bytes: 4 * 1024, ..Default::default() };
        let p = open_flushed(&dir, cfg, FlushMode::Never).await;
        for i in 0..600 {
            p.append(batch(5, 1000 + i, None, Compression::None), 1).await.expect("append");
        }
        let hw = p.high_watermark();
        assert_eq!(hw, 3000);
        let sliced = ReadLimit { max_bytes: 8192, min_one_batch: true, file_slice: true };
        let copied = ReadLimit { file_slice: false, ..sliced };
        let (mut offset, mut slices, mut copies) = (0, 0, 0);
        while offset < hw {
            let a = p.read_with(offset, sliced).await.expect("read");
            let b = p.read_with(offset, copied).await.expect("read");
            assert!(b.file_records.is_none(), "a read without file_slice never slices");
            let got = match &a.file_records {
                Some(f) => {
                    slices += 1;
                    assert!(a.records.is_empty(), "one form per read");
                    assert!(f.len() <= 8192 && a.bytes == f.len(), "within the limit: {} bytes", f.len());
                    Bytes::from(f.read_to_vec().expect("slice readable"))
                }
                None => {
                    copies += 1;
                    concat(&a.records)
                }
            };
            let want = concat(&b.records);
            // A slice ends at an indexed batch start: possibly fewer whole batches.
            assert!(!got.is_empty() && want.starts_with(&got), "at {offset}: the read's bytes are a prefix of the copying read's");
            let batches = split_batches(got);
            assert!(batches[0].0 <= offset && offset <= batches[0].1, "starts with the batch holding {offset}");
            offset = batches.last().unwrap().1 + 1;
        }
        assert_eq!(offset, hw, "the whole log was read");
        assert!(slices > copies, "past the batch cache, sequential reads are slices: {slices} slices, {copies} copies");

        // An offset inside a batch (not an indexed batch start): copied.
        let inside = p.read_with(2, sliced).await.unwrap();
        assert!(inside.file_records.is_none() && !inside.records.is_empty());
        // A limit below the first batch: the copying read decides (min_one_batch).
        let tiny = p.read_with(0, ReadLimit { max_bytes: 10, ..sliced }).await.unwrap();
        assert!(tiny.file_records.is_none() && tiny.records.len() == 1);
        // Not in the page cache: copied (the shard never waits for the disk in sendfile).
        drop_page_cache(&dir);
        let cold = p.read_with(0, sliced).await.unwrap();
        assert!(cold.file_records.is_none() && !cold.records.is_empty(), "cold pages are read, not sliced");
    })
}
