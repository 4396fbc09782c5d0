//! Metadata at scale (issue 11, "Measure"): the controller log and snapshot for 10k and
//! 100k partitions, built by the real proposal/apply code (`controller::scale`).
//!
//!   cargo bench --bench metadata_scale            # 10k and 100k partitions
//!   METADATA_SCALE=1000000 cargo bench --bench metadata_scale   # other totals
//!
//! Prints, per total: log bytes (every entry framed as the log store writes it), the
//! largest entry against the 16 MiB entry limit, snapshot bytes, and the median of 5 runs
//! of snapshot encode (rkyv + CRC-32C), write + fsync of the file, and load (CRC check,
//! archive validation, decode), as a controller does when it snapshots and restarts.
//! Topics of 1000 partitions, replication factor 3 over 6 brokers.
use std::time::{Duration, Instant};

use shardlog::controller::scale;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let totals: Vec<usize> = match std::env::var("METADATA_SCALE") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![10_000, 100_000],
    };
    let per_topic = 1000;
    let dir = tempfile::tempdir().expect("temp dir");
    println!("partitions,topics,log_entries,log_bytes,largest_entry_bytes,snapshot_bytes,encode_ms,write_fsync_ms,load_ms");
    for total in totals {
        let topics = total.div_ceil(per_topic);
        let built = scale::build(6, topics, per_topic as i32, 3).expect("build metadata");
        let (mut enc, mut wr, mut load) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            bytes = scale::snapshot_file(&built.image).expect("encode");
            enc.push(t.elapsed());
            let path = dir.path().join("snapshot");
            let t = Instant::now();
            {
                use std::io::Write;
                let mut f = std::fs::File::create(&path).expect("create");
                f.write_all(&bytes).expect("write");
                f.sync_data().expect("fsync");
            }
            wr.push(t.elapsed());
            let t = Instant::now();
            let image = scale::load_snapshot_file(&std::fs::read(&path).expect("read")).expect("load");
            load.push(t.elapsed());
            assert_eq!(image.topics.len(), built.image.topics.len(), "the snapshot holds every topic");
        }
        println!(
            "{total},{topics},{},{},{},{},{:.1},{:.1},{:.1}",
            built.entries,
            built.log_bytes,
            built.largest_entry_bytes,
            bytes.len(),
            ms(median(enc)),
            ms(median(wr)),
            ms(median(load))
        );
    }
}
