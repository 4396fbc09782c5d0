//! The host checks of `shardlog tune --check`. Each reads what the kernel reports and
//! compares it with what the broker needs (required: it cannot run correctly without it)
//! or what its latency wants (recommended: Redpanda's and Kafka's production guidance).
//! A fact the host does not expose (no cpufreq in a VM) is `Unknown`, never a failure.
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How much a check matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The broker refuses to start without it (`shardlog serve` runs these).
    Required,
    /// Throughput or tail latency suffer without it.
    Recommended,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Fail,
    /// Not measurable on this host (the file is absent).
    Unknown,
}

/// One check's result, a row of the table.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The check's name; also its `--apply` name where `apply.rs` can change it.
    pub name: &'static str,
    pub level: Level,
    pub outcome: Outcome,
    pub current: String,
    pub wanted: String,
    /// How to fix it: `shardlog tune --apply <name>`, or what to do by hand.
    pub fix: String,
}

/// Where /proc and /sys are: "/" on a real host, a directory tree in tests.
#[derive(Clone, Debug)]
pub struct Host {
    pub root: PathBuf,
}

impl Host {
    pub fn real() -> Host {
        Host { root: PathBuf::from("/") }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// The trimmed contents of `rel` (e.g. "proc/sys/vm/swappiness"), None if unreadable.
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok().map(|s| s.trim().to_string())
    }

    fn read_int(&self, rel: &str) -> Option<i64> {
        self.read(rel)?.split_whitespace().next()?.parse().ok()
    }

    fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }
}

/// What the checks need to know of the broker's configuration.
#[derive(Clone, Debug)]
pub struct TuneInputs {
    pub log_dirs: Vec<PathBuf>,
    /// `flush = always`: segments are written with O_DIRECT, which every log dir's
    /// filesystem must then support.
    pub flush_always: bool,
}

/// The oldest kernel glommio (the shards' executor) runs on.
const MIN_KERNEL: (u32, u32) = (5, 8);

fn result(name: &'static str, level: Level, outcome: Outcome, current: impl Into<String>, wanted: &str, fix: impl Into<String>) -> CheckResult {
    CheckResult { name, level, outcome, current: current.into(), wanted: wanted.into(), fix: fix.into() }
}

fn ok_if(pass: bool) -> Outcome {
    if pass {
        Outcome::Ok
    } else {
        Outcome::Fail
    }
}

fn apply_fix(name: &str) -> String {
    format!("shardlog tune --apply {name}")
}

/// Every check, in table order.
pub fn check_all(host: &Host, inputs: &TuneInputs) -> Vec<CheckResult> {
    let mut out = vec![kernel(host), io_uring(host), memlock(), open_files()];
    for dir in &inputs.log_dirs {
        out.push(o_direct(dir, inputs.flush_always));
        out.push(filesystem(dir));
        out.push(io_scheduler(host, dir));
    }
    out.extend([
        aio_max_nr(host),
        transparent_hugepages(host),
        cpu_governor(host),
        irq_affinity(host),
        swappiness(host),
        dirty_writeback(host),
        clock_source(host),
    ]);
    out
}

/// The required checks that fail (what `shardlog serve` refuses on), with one message.
pub fn required_failures(host: &Host, inputs: &TuneInputs) -> Option<String> {
    let failed: Vec<String> = check_all(host, inputs)
        .into_iter()
        .filter(|r| r.level == Level::Required && r.outcome == Outcome::Fail)
        .map(|r| format!("{}: {} (needs {}; {})", r.name, r.current, r.wanted, r.fix))
        .collect();
    (!failed.is_empty()).then(|| format!("this host cannot run the broker: {}; `shardlog tune --check` lists every check", failed.join("; ")))
}

fn parse_kernel(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn kernel(host: &Host) -> CheckResult {
    let wanted = format!(">= {}.{} (glommio, io_uring)", MIN_KERNEL.0, MIN_KERNEL.1);
    match host.read("proc/sys/kernel/osrelease") {
        Some(release) => {
            let outcome = parse_kernel(&release).map_or(Outcome::Unknown, |v| ok_if(v >= MIN_KERNEL));
            result("kernel", Level::Required, outcome, release, &wanted, "upgrade the kernel")
        }
        None => result("kernel", Level::Required, Outcome::Unknown, "unreadable", &wanted, "upgrade the kernel"),
    }
}

/// io_uring: not disabled by `kernel.io_uring_disabled` (2 = off for everyone), and a ring
/// can be set up (the real host only; a test tree has no syscalls of its own).
fn io_uring(host: &Host) -> CheckResult {
    let disabled = host.read_int("proc/sys/kernel/io_uring_disabled").unwrap_or(0);
    let ring = if host.is_real() { io_uring::IoUring::new(8).map(|_| ()).map_err(|e| e.to_string()) } else { Ok(()) };
    let (outcome, current) = match (disabled, ring) {
        (2, _) => (Outcome::Fail, "kernel.io_uring_disabled = 2".to_string()),
        (_, Err(e)) => (Outcome::Fail, format!("io_uring_setup failed: {e}")),
        (d, Ok(())) => (Outcome::Ok, format!("available (kernel.io_uring_disabled = {d})")),
    };
    result(
        "io_uring",
        Level::Required,
        outcome,
        current,
        "a ring can be set up",
        "sysctl -w kernel.io_uring_disabled=0 (and allow io_uring_setup in seccomp or container profiles)",
    )
}

/// RLIMIT_MEMLOCK: glommio registers I/O memory per shard; `serve` raises the limit (root
/// may), else glommio falls back with a warning.
fn memlock() -> CheckResult {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given; failure is its return value.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    // SAFETY: geteuid has no failure mode.
    let root = unsafe { libc::geteuid() } == 0;
    let show = |v: libc::rlim_t| if v == libc::RLIM_INFINITY { "unlimited".to_string() } else { format!("{} MiB", v / (1 << 20)) };
    let wanted = "unlimited or >= 512 MiB (serve raises it when run as root)";
    if rc != 0 {
        return result("memlock", Level::Recommended, Outcome::Unknown, "getrlimit failed", wanted, "ulimit -l unlimited");
    }
    let enough = |v: libc::rlim_t| v == libc::RLIM_INFINITY || v >= 512 << 20;
    let outcome = ok_if(root || enough(lim.rlim_max));
    result(
        "memlock",
        Level::Recommended,
        outcome,
        format!("soft {}, hard {}{}", show(lim.rlim_cur), show(lim.rlim_max), if root { " (root: raised at start)" } else { "" }),
        wanted,
        "ulimit -l unlimited (LimitMEMLOCK=infinity in a systemd unit)",
    )
}

/// RLIMIT_NOFILE: every partition keeps at least its active segment open; `serve`
/// raises the soft limit to the hard one, and both to fs.nr_open as root.
fn open_files() -> CheckResult {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given; failure is its return value.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    // SAFETY: geteuid has no failure mode.
    let root = unsafe { libc::geteuid() } == 0;
    let wanted = ">= 1048576, above the partitions the broker may hold (serve raises it to the hard limit, and further as root)";
    if rc != 0 {
        return result("open_files", Level::Recommended, Outcome::Unknown, "getrlimit failed", wanted, "ulimit -n 1048576");
    }
    result(
        "open_files",
        Level::Recommended,
        ok_if(root || lim.rlim_max >= 1 << 20),
        format!("soft {}, hard {}{}", lim.rlim_cur, lim.rlim_max, if root { " (root: raised at start)" } else { "" }),
        wanted,
        "ulimit -n 1048576 (LimitNOFILE=1048576 in a systemd unit)",
    )
}

/// The deepest existing ancestor of `dir` (a log dir not created yet is checked where it
/// will be).
fn existing(dir: &Path) -> PathBuf {
    let mut d = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    while !d.exists() {
        if !d.pop() {
            return PathBuf::from("/");
        }
    }
    d
}

/// O_DIRECT: `flush = always` writes segments with it; a filesystem without it (tmpfs
/// before Linux 6.6, some network filesystems) cannot hold such a log dir.
fn o_direct(dir: &Path, flush_always: bool) -> CheckResult {
    let at = existing(dir);
    let probe = at.join(format!(".shardlog-tune-{}", std::process::id()));
    let opened = std::fs::OpenOptions::new().read(true).write(true).create_new(true).custom_flags(libc::O_DIRECT).open(&probe);
    let _ = std::fs::remove_file(&probe);
    let level = if flush_always { Level::Required } else { Level::Recommended };
    let (outcome, current) = match opened {
        Ok(_) => (Outcome::Ok, format!("{}: supported", dir.display())),
        Err(e) => (Outcome::Fail, format!("{}: {e}", dir.display())),
    };
    result("o_direct", level, outcome, current, "O_DIRECT opens (flush = always writes with it)", "put the log dir on XFS or ext4, or run with flush = never")
}

/// The filesystem of a log dir: XFS or ext4, what Kafka and Redpanda are run on.
fn filesystem(dir: &Path) -> CheckResult {
    let at = existing(dir);
    let name = filesystem_name(&at);
    let outcome = match name.as_deref() {
        Some("xfs" | "ext4") => Outcome::Ok,
        Some(_) => Outcome::Fail,
        None => Outcome::Unknown,
    };
    result(
        "filesystem",
        Level::Recommended,
        outcome,
        format!("{}: {}", dir.display(), name.unwrap_or_else(|| "unknown".into())),
        "xfs or ext4",
        "put the log dir on XFS (preferred) or ext4",
    )
}

fn filesystem_name(dir: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills the zeroed struct for a NUL-terminated path; failure is -1.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    // The magic numbers of linux/magic.h.
    Some(
        match s.f_type as u64 {
            0x5846_5342 => "xfs",
            0xEF53 => "ext4",
            0x0102_1994 => "tmpfs",
            0x9123_683E => "btrfs",
            0x6969 => "nfs",
            0x794C_7630 => "overlayfs",
            0x2FC1_2FC1 => "zfs",
            other => return Some(format!("f_type {other:#x}")),
        }
        .to_string(),
    )
}

/// The block device holding `dir`: its /sys/dev/block entry, the whole disk's for a
/// partition (the queue belongs to the disk).
pub fn block_queue_of(host: &Host, dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(existing(dir)).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let entry = host.path(&format!("sys/dev/block/{major}:{minor}"));
    let entry = std::fs::canonicalize(&entry).unwrap_or(entry);
    [entry.join("queue"), entry.parent()?.join("queue")].into_iter().find(|q| q.join("scheduler").exists())
}

/// The I/O scheduler of the disk under a log dir: `none` (the broker orders its own I/O;
/// what Redpanda sets), `mq-deadline` being the usual alternative.
fn io_scheduler(host: &Host, dir: &Path) -> CheckResult {
    let wanted = "none (or mq-deadline)";
    let Some(queue) = block_queue_of(host, dir) else {
        return result(
            "io_scheduler",
            Level::Recommended,
            Outcome::Unknown,
            format!("{}: no block queue found", dir.display()),
            wanted,
            apply_fix("io_scheduler"),
        );
    };
    let line = std::fs::read_to_string(queue.join("scheduler")).unwrap_or_default();
    let active = selected(&line).unwrap_or_else(|| line.trim().to_string());
    let outcome = ok_if(active == "none" || active == "mq-deadline");
    result("io_scheduler", Level::Recommended, outcome, format!("{}: {active}", dir.display()), wanted, apply_fix("io_scheduler"))
}

/// The bracketed choice of a sysfs selector ("always [madvise] never" → "madvise").
pub fn selected(line: &str) -> Option<String> {
    let start = line.find('[')? + 1;
    let end = start + line[start..].find(']')?;
    Some(line[start..end].to_string())
}

/// fs.aio-max-nr: the kernel's count of in-flight AIO contexts (Redpanda asks 1048576).
fn aio_max_nr(host: &Host) -> CheckResult {
    const WANT: i64 = 1_048_576;
    let current = host.read_int("proc/sys/fs/aio-max-nr");
    let outcome = current.map_or(Outcome::Unknown, |v| ok_if(v >= WANT));
    result("aio_max_nr", Level::Recommended, outcome, current.map_or("unreadable".into(), |v| v.to_string()), ">= 1048576", apply_fix("aio_max_nr"))
}

/// Transparent huge pages: `always` makes page faults and khugepaged's compaction stall
/// a shard; `madvise` or `never`.
fn transparent_hugepages(host: &Host) -> CheckResult {
    let line = host.read("sys/kernel/mm/transparent_hugepage/enabled");
    let active = line.as_deref().and_then(selected);
    let outcome = active.as_deref().map_or(Outcome::Unknown, |a| ok_if(a != "always"));
    result(
        "transparent_hugepages",
        Level::Recommended,
        outcome,
        active.unwrap_or_else(|| "unknown".into()),
        "madvise or never",
        apply_fix("transparent_hugepages"),
    )
}

/// The cpufreq governor of every CPU: `performance` (no frequency ramp under a burst).
/// VMs often expose none: unknown.
fn cpu_governor(host: &Host) -> CheckResult {
    let governors = cpu_files(host, "cpufreq/scaling_governor");
    let wanted = "performance on every CPU";
    if governors.is_empty() {
        return result("cpu_governor", Level::Recommended, Outcome::Unknown, "no cpufreq (a VM?)", wanted, apply_fix("cpu_governor"));
    }
    let values: Vec<String> = governors.iter().map(|(_, v)| v.clone()).collect();
    let mut distinct = values.clone();
    distinct.sort();
    distinct.dedup();
    result("cpu_governor", Level::Recommended, ok_if(distinct == ["performance"]), distinct.join(", "), wanted, apply_fix("cpu_governor"))
}

/// (path, trimmed contents) of `rel` under every cpuN directory.
pub fn cpu_files(host: &Host, rel: &str) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(host.path("sys/devices/system/cpu")) else { return Vec::new() };
    let mut out: Vec<(PathBuf, String)> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.strip_prefix("cpu").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))))
        .filter_map(|e| {
            let p = e.path().join(rel);
            std::fs::read_to_string(&p).ok().map(|v| (p, v.trim().to_string()))
        })
        .collect();
    out.sort();
    out
}

/// Device interrupts: on a host that leaves them free to land on any core they preempt
/// the shards (Redpanda pins them to cores it keeps for them). Counted from
/// /proc/irq/N/smp_affinity_list against the online CPUs.
fn irq_affinity(host: &Host) -> CheckResult {
    let wanted = "device IRQs pinned to cores the shards do not use";
    let fix = "stop irqbalance, pin IRQs (/proc/irq/N/smp_affinity_list) to a core left out of the shards' (`cores`)";
    let online = host.read("sys/devices/system/cpu/online").and_then(|s| cpu_list(&s));
    let Ok(entries) = std::fs::read_dir(host.path("proc/irq")) else {
        return result("irq_affinity", Level::Recommended, Outcome::Unknown, "no /proc/irq", wanted, fix);
    };
    let (mut total, mut anywhere) = (0, 0);
    for e in entries.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))) {
        let Some(list) = std::fs::read_to_string(e.path().join("smp_affinity_list")).ok().and_then(|s| cpu_list(s.trim())) else { continue };
        total += 1;
        anywhere += usize::from(online.as_ref().is_some_and(|o| o.iter().all(|c| list.contains(c))));
    }
    let outcome = if total == 0 || online.is_none() { Outcome::Unknown } else { ok_if(anywhere == 0) };
    result("irq_affinity", Level::Recommended, outcome, format!("{anywhere} of {total} IRQs may run on any core"), wanted, fix)
}

/// "0-3,8" → [0, 1, 2, 3, 8].
pub fn cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// vm.swappiness: a swapped-out page of a shard stalls it; 1 (Redpanda's, Kafka's advice).
fn swappiness(host: &Host) -> CheckResult {
    let current = host.read_int("proc/sys/vm/swappiness");
    let outcome = current.map_or(Outcome::Unknown, |v| ok_if(v <= 1));
    result("swappiness", Level::Recommended, outcome, current.map_or("unreadable".into(), |v| v.to_string()), "<= 1", apply_fix("swappiness"))
}

/// vm.dirty_*: with `flush = never` the page cache holds what fdatasync has not written
/// yet; background writeback should start early and writers block late (Kafka's
/// guidance: dirty_background_ratio 5, dirty_ratio 60-80).
fn dirty_writeback(host: &Host) -> CheckResult {
    let bg = host.read_int("proc/sys/vm/dirty_background_ratio");
    let ratio = host.read_int("proc/sys/vm/dirty_ratio");
    let outcome = match (bg, ratio) {
        (Some(b), Some(r)) => ok_if(b <= 10 && r >= 20),
        _ => Outcome::Unknown,
    };
    let show = |v: Option<i64>| v.map_or("?".to_string(), |v| v.to_string());
    result(
        "dirty_writeback",
        Level::Recommended,
        outcome,
        format!("dirty_background_ratio {}, dirty_ratio {}", show(bg), show(ratio)),
        "dirty_background_ratio <= 10, dirty_ratio >= 20 (for flush = never)",
        apply_fix("dirty_writeback"),
    )
}

/// The clock source: `tsc` (or a hypervisor's paravirtual clock) keeps clock_gettime in
/// the vDSO; `hpet` or `acpi_pm` make every timestamp a system call.
fn clock_source(host: &Host) -> CheckResult {
    let current = host.read("sys/devices/system/clocksource/clocksource0/current_clocksource");
    let outcome = current.as_deref().map_or(Outcome::Unknown, |c| ok_if(matches!(c, "tsc" | "kvm-clock" | "arch_sys_counter" | "hyperv_clocksource_tsc_page")));
    result(
        "clock_source",
        Level::Recommended,
        outcome,
        current.unwrap_or_else(|| "unknown".into()),
        "tsc (kvm-clock, arch_sys_counter in VMs / on arm64)",
        "clocksource=tsc on the kernel command line",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc and /sys under a temp dir.
    fn host(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        for (rel, body) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let h = Host { root: dir.path().to_path_buf() };
        (dir, h)
    }

    #[test]
    fn kernel_versions_are_compared_by_major_and_minor() {
        assert_eq!(parse_kernel("6.18.0-1-cloud-amd64"), Some((6, 18)));
        let (_d, h) = host(&[("proc/sys/kernel/osrelease", "5.4.0-150-generic\n")]);
        assert_eq!(kernel(&h).outcome, Outcome::Fail);
        let (_d, h) = host(&[("proc/sys/kernel/osrelease", "5.15.0\n")]);
        assert_eq!(kernel(&h).outcome, Outcome::Ok);
    }

    #[test]
    fn io_uring_disabled_is_a_required_failure_and_serve_names_it() {
        let (_d, h) = host(&[("proc/sys/kernel/osrelease", "6.1.0"), ("proc/sys/kernel/io_uring_disabled", "2")]);
        assert_eq!(io_uring(&h).outcome, Outcome::Fail);
        let msg = required_failures(&h, &TuneInputs { log_dirs: Vec::new(), flush_always: false }).expect("refused");
        assert!(msg.contains("io_uring: kernel.io_uring_disabled = 2"), "{msg}");
        let (_d, h) = host(&[("proc/sys/kernel/osrelease", "6.1.0"), ("proc/sys/kernel/io_uring_disabled", "0")]);
        assert_eq!(required_failures(&h, &TuneInputs { log_dirs: Vec::new(), flush_always: false }), None);
    }

    #[test]
    fn sysctl_and_sysfs_values_are_judged() {
        let (_d, h) = host(&[
            ("proc/sys/vm/swappiness", "60"),
            ("proc/sys/fs/aio-max-nr", "65536"),
            ("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never"),
            ("proc/sys/vm/dirty_background_ratio", "10"),
            ("proc/sys/vm/dirty_ratio", "20"),
            ("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet"),
        ]);
        assert_eq!(swappiness(&h).outcome, Outcome::Fail);
        assert_eq!(aio_max_nr(&h).outcome, Outcome::Fail);
        assert_eq!(transparent_hugepages(&h).outcome, Outcome::Fail);
        assert_eq!(dirty_writeback(&h).outcome, Outcome::Ok);
        assert_eq!(clock_source(&h).outcome, Outcome::Fail);
        assert_eq!(cpu_governor(&h).outcome, Outcome::Unknown, "no cpufreq");
        let (_d, h) = host(&[("proc/sys/vm/swappiness", "1"), ("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never")]);
        assert_eq!(swappiness(&h).outcome, Outcome::Ok);
        assert_eq!(transparent_hugepages(&h).outcome, Outcome::Ok);
    }

    #[test]
    fn governors_and_irqs_are_read_per_cpu_and_per_irq() {
        let (_d, h) = host(&[
            ("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance"),
            ("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave"),
            ("sys/devices/system/cpu/online", "0-1"),
            ("proc/irq/24/smp_affinity_list", "0-1"),
            ("proc/irq/25/smp_affinity_list", "1"),
        ]);
        let g = cpu_governor(&h);
        assert_eq!((g.outcome, g.current.as_str()), (Outcome::Fail, "performance, powersave"));
        let i = irq_affinity(&h);
        assert_eq!((i.outcome, i.current.as_str()), (Outcome::Fail, "1 of 2 IRQs may run on any core"));
        assert_eq!(cpu_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(selected("mq-deadline [none]"), Some("none".into()));
    }

    #[test]
    fn a_log_dir_is_checked_where_it_will_be_created() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("not/yet");
        let r = o_direct(&later, true);
        assert_eq!(r.level, Level::Required);
        assert_ne!(r.outcome, Outcome::Unknown);
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "the probe file is removed");
        assert_eq!(o_direct(&later, false).level, Level::Recommended);
    }
}
