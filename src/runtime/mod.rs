//! Thread-per-core runtime, the bottom layer: which shard this thread is, where
//! executors are placed, the channels between shards, and the clock.
//!
//! - `mod.rs`       `ShardId`, the current shard and the on-shard assertion
//! - `placement.rs` which cores run shards and the controller
//! - `mesh.rs`      one inbox per shard, a sender to each for everyone
//! - `clock.rs`     `now_ms` (Kafka timestamps)
//! - `poll_time.rs` the time a task spends in its polls (a request.s thread time)
//! - `buffer_pool.rs` per-shard pools of large buffers (stage buffers of the log)
//! - `malloc_policy.rs` the C allocator: large blocks mapped, free pages returned after large requests
//! - `file_slice.rs` a range of a file sent with `sendfile` (zero-copy fetch), and
//!   whether the page cache holds a range (`cachestat`)
//!
//! Never imports anything else of this crate: every other module builds on this one.
pub mod buffer_pool;
pub mod clock;
pub mod file_slice;
pub mod malloc_policy;
pub mod mesh;
pub mod placement;
pub mod poll_time;
pub use clock::now_ms;

use std::cell::Cell;

/// Index of a shard (one glommio executor pinned to one core) inside this broker.
pub type ShardId = u16;

thread_local! {
    static CURRENT_SHARD: Cell<Option<ShardId>> = const { Cell::new(None) };
}

/// The shard whose executor runs on this thread, if any.
pub fn current_shard() -> Option<ShardId> {
    CURRENT_SHARD.with(|c| c.get())
}

/// Marks this thread as the executor of `shard` (once, at executor start).
pub fn enter_shard(shard: ShardId) {
    CURRENT_SHARD.with(|c| {
        assert!(c.get().is_none(), "a thread runs one shard");
        c.set(Some(shard));
    });
}
