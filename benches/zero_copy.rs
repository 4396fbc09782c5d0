//! Page cache → socket: what a zero-copy send (`sendfile`, `splice` through a pipe)
//! saves against the copying path the fetch path uses for page-cache data today
//! (`preadv2` into a reused buffer, then `send`: `storage::cached_read` plus the
//! connection's vectored write). Issue 10 asks for zero copy "where it pays, measured
//! against the copying path"; this is that measurement, at the syscall level, before any
//! of it is built into the fetch path.
//!
//! A 256 MiB file is written and read once (so it is in the page cache), then sent over
//! a loopback TCP connection in 1 MiB pieces (the fetch path's read chunk) to a thread
//! that drains it. Each mode runs `ROUNDS` times, interleaved (copy, sendfile, splice,
//! copy, ...), and the medians are printed: throughput, and the sending thread's CPU time
//! per GiB (user + system, `RUSAGE_THREAD`), which is what a shard would spend. The
//! receiver's copy is the same in every mode and is not counted.
//!
//! `cargo bench --bench zero_copy` (env `ZERO_COPY_MIB` for another file size).
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const CHUNK: usize = 1 << 20;
const ROUNDS: usize = 5;

#[derive(Clone, Copy, Debug)]
enum Mode {
    Copy,
    Sendfile,
    Splice,
}

fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    t(u.ru_utime) + t(u.ru_stime)
}

fn check(r: isize, what: &str) -> usize {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
    r as usize
}

/// Sends `len` bytes of `file` to `sock` in `mode`; returns (wall, sender CPU).
fn send(mode: Mode, file: &std::fs::File, len: u64, sock: &TcpStream) -> (Duration, Duration) {
    let (f, s) = (file.as_raw_fd(), sock.as_raw_fd());
    let mut buf = vec![0u8; CHUNK];
    let mut pipe = [0; 2];
    if let Mode::Splice = mode {
        // SAFETY: pipe2 fills the two descriptors.
        check(unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } as isize, "pipe2");
        // A pipe holds 64 KiB by default; make it hold a whole chunk.
        unsafe { libc::fcntl(pipe[1], libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
    }
    let (start, cpu0) = (Instant::now(), thread_cpu());
    let mut pos = 0u64;
    while pos < len {
        let n = CHUNK.min((len - pos) as usize);
        match mode {
            Mode::Copy => {
                let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: n };
                // SAFETY: the iovec covers `buf`, which nothing else uses.
                let got = check(unsafe { libc::preadv2(f, &iov, 1, pos as i64, 0) }, "preadv2");
                let mut sent = 0;
                while sent < got {
                    // SAFETY: sends initialised bytes of `buf`.
                    sent += check(unsafe { libc::send(s, buf[sent..got].as_ptr().cast(), got - sent, 0) }, "send");
                }
                pos += got as u64;
            }
            Mode::Sendfile => {
                let mut off = pos as libc::off_t;
                let mut left = n;
                while left > 0 {
                    // SAFETY: sendfile reads the file at `off` and advances it.
                    left -= check(unsafe { libc::sendfile(s, f, &mut off, left) }, "sendfile");
                }
                pos += n as u64;
            }
            Mode::Splice => {
                let mut off = pos as libc::loff_t;
                let mut in_pipe = 0;
                while in_pipe < n {
                    // SAFETY: moves page references from the file into the pipe.
                    in_pipe += check(unsafe { libc::splice(f, &mut off, pipe[1], std::ptr::null_mut(), n - in_pipe, libc::SPLICE_F_MOVE) }, "splice in");
                }
                let mut out = 0;
                while out < n {
                    // SAFETY: moves them from the pipe to the socket.
                    out += check(unsafe { libc::splice(pipe[0], std::ptr::null_mut(), s, std::ptr::null_mut(), n - out, libc::SPLICE_F_MOVE) }, "splice out");
                }
                pos += n as u64;
            }
        }
    }
    let out = (start.elapsed(), thread_cpu() - cpu0);
    if let Mode::Splice = mode {
        unsafe { libc::close(pipe[0]) };
        unsafe { libc::close(pipe[1]) };
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mib: u64 = std::env::var("ZERO_COPY_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let len = mib << 20;
    let dir = tempfile::tempdir_in(std::env::var("ZERO_COPY_DIR").unwrap_or_else(|_| ".".into())).expect("tempdir");
    let path = dir.path().join("segment");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        let mut chunk = vec![0u8; CHUNK];
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = (i * 7919 % 251) as u8;
        }
        for _ in 0..mib {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let file = std::fs::File::open(&path).unwrap();
    let mut warm = Vec::new();
    (&file).read_to_end(&mut warm).unwrap();
    drop(warm);

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let total = len * (ROUNDS as u64) * 3;
    let drain = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; CHUNK];
        let mut got = 0u64;
        while got < total {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "sender closed early");
            got += n as u64;
        }
    });
    let sock = TcpStream::connect(addr).unwrap();
    let modes = [Mode::Copy, Mode::Sendfile, Mode::Splice];
    let mut results: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); 3];
    for _ in 0..ROUNDS {
        for (i, &m) in modes.iter().enumerate() {
            let (wall, cpu) = send(m, &file, len, &sock);
            let gib = len as f64 / (1u64 << 30) as f64;
            results[i].0.push(len as f64 / 1e6 / wall.as_secs_f64());
            results[i].1.push(cpu.as_secs_f64() * 1e3 / gib);
        }
    }
    drain.join().unwrap();
    let copy_cpu = median(results[0].1.clone());
    println!("page cache -> loopback socket, {mib} MiB x {ROUNDS} rounds per mode, {} KiB pieces (medians)", CHUNK >> 10);
    println!("{:<10} {:>10} {:>22} {:>14}", "mode", "MB/s", "sender CPU ms per GiB", "CPU vs copy");
    for (i, m) in modes.iter().enumerate() {
        let cpu = median(results[i].1.clone());
        println!("{:<10} {:>10.0} {:>22.1} {:>13.2}x", format!("{m:?}"), median(results[i].0.clone()), cpu, cpu / copy_cpu);
    }
}
