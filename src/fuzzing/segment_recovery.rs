//! A segment file as a crash may leave it, recovered at start (`storage::recovery::open_active`,
//! the active segment's scan: torn tails, zero padding, bad batches, offsets out of place).
//! What recovery keeps must be a prefix of the file of whole batches at dense offsets from
//! the segment's base, and recovering the result again must keep all of it (idempotent).
//!
//! Recovery runs on a glommio executor (io_uring): one worker thread, started on first
//! use, runs every input in turn in its own scratch directory.
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, OnceLock};

use crate::storage::recovery::open_active;
use crate::storage::WriteMode;

/// Records per index entry in the scan: small, so the rebuilt index has entries.
const INDEX_INTERVAL_BYTES: usize = 256;
/// The file's name for base offset 0 (`storage::file::log_file_name`).
const SEGMENT: &str = "00000000000000000000.log";

type Job = (Vec<u8>, mpsc::SyncSender<Result<(), String>>);

static WORKER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

pub fn check(data: &[u8]) {
    let worker = WORKER.get_or_init(|| Mutex::new(start_worker()));
    let (reply, answer) = mpsc::sync_channel(1);
    worker.lock().unwrap_or_else(|e| e.into_inner()).send((data.to_vec(), reply)).expect("the recovery worker runs");
    match answer.recv_timeout(STALL) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => panic!("segment recovery: {why}"),
        Err(_) => {
            print_every_threads_stack();
            panic!("segment recovery stalled: no answer in {STALL:?}");
        }
    }
}

/// A recovery that has not answered in this long is stuck, not slow (inputs take well
/// under a second even on a loaded machine). Shorter than the campaign's libFuzzer
/// timeout, so the stuck worker's stack is seen, not only the waiting fuzzer thread's.
const STALL: std::time::Duration = std::time::Duration::from_secs(30);

/// Every thread's stack, through gdb when it is installed (the worker's stack is what
/// tells where recovery waits).
fn print_every_threads_stack() {
    let pid = std::process::id().to_string();
    let gdb = std::process::Command::new("gdb").args(["-p", &pid, "-batch", "-ex", "thread apply all bt 40"]).status();
    if let Err(e) = gdb {
        eprintln!("segment recovery stalled; no stacks (gdb: {e})");
    }
}

fn start_worker() -> mpsc::Sender<Job> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let dir = std::env::temp_dir().join(format!("shardlog-fuzz-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    crate::storage::dma::write_iopoll_probe(&dir).expect("iopoll probe");
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                crate::runtime::enter_shard(0);
                crate::storage::dma::open_iopoll_probe(&dir).await.expect("iopoll probe open");
                while let Ok((data, reply)) = inbox.recv() {
                    let _ = reply.send(recover_twice(&dir, &data).await);
                }
            })
            .expect("glommio executor")
            .join()
            .expect("recovery worker");
    });
    jobs
}

async fn recover_twice(dir: &Path, data: &[u8]) -> Result<(), String> {
    let path: PathBuf = dir.join(SEGMENT);
    std::fs::write(&path, data).map_err(|e| e.to_string())?;
    let first = match open_active(dir, 0, INDEX_INTERVAL_BYTES, WriteMode::PageCache, true).await {
        Ok(o) => o,
        // An I/O error is an answer (the partition does not open), not a finding.
        Err(_) => return Ok(()),
    };
    let kept = first.segment.written();
    let on_disk = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
    if kept > data.len() as u64 || on_disk != kept || first.truncated_bytes != data.len() as u64 - kept {
        return Err(format!("kept {kept} of {} bytes, file now {on_disk}, truncated {}", data.len(), first.truncated_bytes));
    }
    let mut next = 0;
    for h in &first.batches {
        if h.base_offset != next || h.last_offset() < h.base_offset {
            return Err(format!("batch at offset {} where {next} was due", h.base_offset));
        }
        next = h.last_offset() + 1;
    }
    let count = first.batches.len();
    drop(first);
    let second = open_active(dir, 0, INDEX_INTERVAL_BYTES, WriteMode::PageCache, true).await.map_err(|e| format!("second recovery: {e}"))?;
    if second.truncated_bytes != 0 || second.segment.written() != kept || second.batches.len() != count {
        return Err(format!(
            "second recovery cut {} bytes, kept {} of {kept}, {} batches of {count}",
            second.truncated_bytes,
            second.segment.written(),
            second.batches.len()
        ));
    }
    Ok(())
}
