//! The process limits a broker needs raised before it opens anything: locked memory
//! (glommio registers I/O memory per shard) and open files (each partition keeps its
//! active segment, and often more, open: 100k partitions need 100k+ descriptors, where
//! a login shell's default soft limit is 1,024). Best effort, as Kafka's operators do
//! with `ulimit`: what cannot be raised is logged, and `shardlog tune --check` reports it.

/// glommio registers io memory per executor; lift RLIMIT_MEMLOCK so that works (best
/// effort: without it glommio falls back with a warning).
pub fn raise_memlock_limit() {
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads a valid rlimit struct; failure is reported by return value.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// The kernel's ceiling for RLIMIT_NOFILE (`fs.nr_open`).
fn nr_open() -> Option<libc::rlim_t> {
    std::fs::read_to_string("/proc/sys/fs/nr_open").ok()?.trim().parse().ok()
}

fn open_files_limit() -> Option<libc::rlimit> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given; failure is its return value.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim)
}

/// Raises RLIMIT_NOFILE: the soft limit to the hard one, and both to `fs.nr_open` when
/// the process may (root, or CAP_SYS_RESOURCE). Returns the soft limit in force.
pub fn raise_open_files_limit() -> Option<u64> {
    let before = open_files_limit()?;
    let ceiling = nr_open().unwrap_or(before.rlim_max).max(before.rlim_max);
    let raised = libc::rlimit { rlim_cur: ceiling, rlim_max: ceiling };
    // SAFETY: setrlimit reads a valid rlimit struct; failure is reported by return value.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        // Unprivileged: the hard limit is the most there is.
        let soft = libc::rlimit { rlim_cur: before.rlim_max, rlim_max: before.rlim_max };
        // SAFETY: as above.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &soft) };
    }
    let now = open_files_limit()?;
    debug_assert!(now.rlim_cur >= before.rlim_cur, "the open-files limit is only ever raised");
    Some(now.rlim_cur)
}

/// Descriptors a broker wants beyond those of its partitions: connections, listeners,
/// the controller's files, glommio's rings and eventfds.
const DESCRIPTORS_BESIDES_PARTITIONS: u64 = 16_384;

/// A warning when `limit` cannot hold `partitions` partitions (one descriptor each, at
/// least) plus the broker's other descriptors; None when it can.
pub fn open_files_warning(limit: u64, partitions: u64) -> Option<String> {
    let wanted = partitions.saturating_add(DESCRIPTORS_BESIDES_PARTITIONS);
    (limit < wanted).then(|| {
        format!(
            "the open-files limit ({limit}) is below the {wanted} descriptors that max_partitions_per_shard ({partitions} over all \
             shards) and connections may need: partitions past it fail to open (EMFILE); raise it (ulimit -n, LimitNOFILE in a \
             systemd unit) or run as root"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_the_open_files_limit_never_lowers_it() {
        let before = open_files_limit().expect("getrlimit");
        let now = raise_open_files_limit().expect("getrlimit");
        assert!(now >= before.rlim_cur);
        assert_eq!(now, open_files_limit().unwrap().rlim_cur, "the limit returned is the one in force");
        // The soft limit reaches at least the hard limit it started from.
        assert!(now >= before.rlim_max);
    }

    #[test]
    fn the_warning_names_the_shortfall() {
        assert_eq!(open_files_warning(1 << 20, 100_000), None);
        let w = open_files_warning(20_000, 100_000).expect("too low");
        assert!(w.contains("20000") && w.contains("116384"), "{w}");
    }
}
