//! The process limits a broker needs raised before it opens anything: locked memory
//! (glommio registers I/O memory per shard) and open files (each partition keeps its
//! active segment, and often more, open: 100k partitions need 100k+ descriptors, where
//! a login shell's default soft limit is 1,024). Best effort, as Kafka's operators do
//! with `ulimit`; what the limit cannot hold is handled by each shard's descriptor budget
//! (`storage::open_files`: idle segment files closed, reopened when used), and
//! `shardlog tune --check` reports a low limit.

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

/// The segment descriptors each shard may keep open (`storage::open_files`) under an
/// open-files limit of `limit`: what is left after a reserve for connections, listeners,
/// the controller's files, glommio's rings, zero-copy duplicates and short-lived files
/// (a fifth of the limit, at least 1,024 and at most 65,536), split over the shards.
pub fn segment_files_per_shard(limit: u64, shards: usize) -> usize {
    let reserve = (limit / 5).clamp(1024, 65_536);
    let per_shard = limit.saturating_sub(reserve) / shards.max(1) as u64;
    usize::try_from(per_shard).unwrap_or(usize::MAX)
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
    fn segment_descriptors_leave_a_reserve_and_split_over_the_shards() {
        // This machine's hard limit: 16,000 left for segments, 8,000 per shard.
        assert_eq!(segment_files_per_shard(20_000, 2), 8_000);
        // A large limit keeps at most 65,536 in reserve.
        assert_eq!(segment_files_per_shard(1 << 20, 4), ((1 << 20) - 65_536) / 4);
        // A login shell's 1,024: nothing left (the budget's own minimum then applies).
        assert_eq!(segment_files_per_shard(1024, 2), 0);
        assert_eq!(segment_files_per_shard(50_000, 0), 40_000, "no shard count is one shard");
    }
}
