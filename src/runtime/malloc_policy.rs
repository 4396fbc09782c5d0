//! The C allocator's policy for large buffers, set once at broker start.
//!
//! Why: glibc serves an allocation of `M_MMAP_THRESHOLD` bytes or more with its own
//! `mmap`, and by default raises that threshold each time such a block is freed (up to
//! 32 MiB). After the first 1 MiB read or stage buffer is freed, every later one comes
//! from the shard thread's arena instead, and an arena gives memory back to the kernel
//! only from its top: buffers freed out of order stay resident. Large fetches showed it
//! (`tests/integration/test_fetch_limits.py`, four 16 MiB fetches at once, release
//! build, three runs each): the broker's peak RSS grew by 105–127 MiB with the default
//! policy against 72–77 MiB with the threshold fixed at 1 MiB, where the fetch buffers
//! themselves are about 70 MiB. Fixing the threshold turns the dynamic raise off.
//!
//! The cost is an `mmap`/`munmap` pair per buffer of 1 MiB or more; the hot path's
//! large buffers (request frames, stage buffers, cached reads) come from the shards'
//! pools (`runtime::buffer_pool`) and are reused, so that pair is paid on a pool miss.

/// Buffers of this size or more get their own mapping, returned to the kernel on free.
pub const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;

/// Sets the policy; call before the shards start. Returns false if the C library
/// refused (the broker runs anyway, with glibc's default).
pub fn bound_large_allocations() -> bool {
    // SAFETY: mallopt only changes the allocator's parameters; glibc serialises it
    // against allocations in other threads.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 }
}

/// A request frame this large (not Produce, whose frames come from the pools) is rare and
/// leaves many small freed blocks in the shard's arena (its decoded elements, the
/// handler's per-item state): `return_free_memory_soon` after it.
pub const LARGE_REQUEST_BYTES: usize = 1 << 20;

thread_local! {
    static TRIM_PENDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Gives the C allocator's free pages back to the kernel a second after a large request
/// (its response is sent and freed by then), at most once a second per shard. Why:
/// freed small blocks stay resident in the arenas (only an arena's top is trimmed), so
/// RSS would stay at its peak after a burst of large requests; `malloc_trim(0)` also
/// releases whole free pages inside the arenas. Not for the hot path: it walks every
/// arena under its lock, which is why it runs only after rare large requests.
pub fn return_free_memory_soon() {
    if TRIM_PENDING.with(|p| p.replace(true)) {
        return;
    }
    glommio::spawn_local(async {
        glommio::timer::sleep(std::time::Duration::from_secs(1)).await;
        TRIM_PENDING.with(|p| p.set(false));
        // SAFETY: malloc_trim only returns free memory; glibc locks each arena.
        unsafe { libc::malloc_trim(0) };
    })
    .detach();
}

#[cfg(test)]
mod tests {
    #[test]
    fn glibc_accepts_the_threshold() {
        assert!(super::bound_large_allocations());
    }
}
