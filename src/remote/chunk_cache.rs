//! The bytes of remote `.log` objects, read in fixed chunks and kept in memory (least
//! recently used out first, bounded in bytes: `rsm.config.fetch.chunk.cache.size`, the
//! Aiven plugin's name), with the chunks after a read fetched ahead
//! (`rsm.config.fetch.chunk.cache.prefetch.max.size`).
//!
//! Why: a consumer reading history asks for `max.partition.fetch.bytes` (1 MiB by
//! default) at a time, and every ranged GET costs the store's round trip. In chunks, a
//! sequential reader finds its next fetch already read (the prefetch ran while it was
//! busy with the last one), and a second reader of the same history (a replaying consumer
//! group, a new follower) reads from memory. A chunk is fetched once however many reads
//! want it meanwhile (the reads share the one request), and a fetch that stopped waiting
//! does not cancel it (it runs on the remote runtime to the end and is kept).
//!
//! Runs on the remote I/O runtime only (tokio); the lock guards a map, never a wait.
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::future::{BoxFuture, FutureExt, Shared};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::RemoteError;

/// Bytes per chunk (the Aiven plugin's usual `chunk.size`): one GET fills four default
/// consumer fetches.
pub const CHUNK_BYTES: u64 = 4 << 20;

/// (segment id, chunk index).
type ChunkKey = ([u8; 16], u64);
type ChunkFetch = Shared<BoxFuture<'static, Result<Bytes, Arc<str>>>>;

/// What a range read was served from: bytes of chunks that were in memory already, and
/// bytes of chunks it waited for from the store (fetched for it, or by a prefetch still
/// running).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RangeSource {
    pub cached_bytes: u64,
    pub fetched_bytes: u64,
}

impl std::ops::AddAssign for RangeSource {
    fn add_assign(&mut self, other: RangeSource) {
        self.cached_bytes += other.cached_bytes;
        self.fetched_bytes += other.fetched_bytes;
    }
}

pub struct ChunkCache {
    capacity_bytes: usize,
    prefetch_chunks: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    chunks: HashMap<ChunkKey, Bytes>,
    /// Least recently used first.
    order: VecDeque<ChunkKey>,
    bytes: usize,
    in_flight: HashMap<ChunkKey, ChunkFetch>,
}

enum Chunk {
    Cached(Bytes),
    Fetching(ChunkFetch),
}

impl ChunkCache {
    /// `capacity_bytes` 0: no cache (each read is one ranged GET of what it needs).
    pub fn new(capacity_bytes: usize, prefetch_bytes: u64) -> ChunkCache {
        ChunkCache { capacity_bytes, prefetch_chunks: prefetch_bytes.div_ceil(CHUNK_BYTES), state: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes `range` of the `.log` object `log` (of segment `id`, `size` bytes long).
    /// Must run on the remote runtime (it spawns the chunk fetches there).
    pub async fn read(
        self: &Arc<Self>,
        store: &Arc<dyn ObjectStore>,
        log: &ObjectPath,
        id: [u8; 16],
        size: u64,
        range: Range<u64>,
    ) -> Result<(Bytes, RangeSource), RemoteError> {
        debug_assert!(range.start < range.end && range.end <= size, "a range within the object");
        if self.capacity_bytes == 0 {
            let bytes = store.get_range(log, range.clone()).await.map_err(|e| RemoteError::Store(format!("{log}: {e}")))?;
            return Ok((bytes, RangeSource { cached_bytes: 0, fetched_bytes: range.end - range.start }));
        }
        let (first, last) = (range.start / CHUNK_BYTES, (range.end - 1) / CHUNK_BYTES);
        let wanted: Vec<(u64, Chunk)> = (first..=last).map(|k| (k, self.chunk(store, log, id, size, k))).collect();
        // Read ahead while this read waits or its consumer works through it.
        let ahead_end = size.div_ceil(CHUNK_BYTES).min(last + 1 + self.prefetch_chunks);
        for k in last + 1..ahead_end {
            drop(self.chunk(store, log, id, size, k));
        }
        let mut source = RangeSource::default();
        let mut parts = Vec::with_capacity(wanted.len());
        for (k, chunk) in wanted {
            let base = k * CHUNK_BYTES;
            let (from, to) = (range.start.max(base) - base, range.end.min(base + CHUNK_BYTES) - base);
            let bytes = match chunk {
                Chunk::Cached(b) => {
                    source += RangeSource { cached_bytes: to - from, fetched_bytes: 0 };
                    b
                }
                Chunk::Fetching(f) => {
                    source += RangeSource { cached_bytes: 0, fetched_bytes: to - from };
                    f.await.map_err(|e| RemoteError::Store(e.to_string()))?
                }
            };
            if (to as usize) > bytes.len() {
                return Err(RemoteError::Corrupt(format!("{log}: chunk {k} is {} bytes, short of {to}", bytes.len())));
            }
            parts.push(bytes.slice(from as usize..to as usize));
        }
        let bytes = if parts.len() == 1 {
            parts.pop().unwrap_or_default()
        } else {
            // A range across chunks: one copy to make it contiguous (batches straddle).
            let mut joined = BytesMut::with_capacity((range.end - range.start) as usize);
            for p in parts {
                joined.extend_from_slice(&p);
            }
            joined.freeze()
        };
        Ok((bytes, source))
    }

    /// Chunk `k`: in memory, already being fetched, or fetched now (on its own task, so it
    /// completes and is kept even if nobody waits for it any more).
    fn chunk(self: &Arc<Self>, store: &Arc<dyn ObjectStore>, log: &ObjectPath, id: [u8; 16], size: u64, k: u64) -> Chunk {
        let key = (id, k);
        let mut s = self.lock();
        if let Some(b) = s.chunks.get(&key).cloned() {
            if let Some(i) = s.order.iter().position(|o| *o == key) {
                s.order.remove(i);
            }
            s.order.push_back(key);
            return Chunk::Cached(b);
        }
        if let Some(f) = s.in_flight.get(&key) {
            return Chunk::Fetching(f.clone());
        }
        let (store, log, cache) = (store.clone(), log.clone(), self.clone());
        let range = k * CHUNK_BYTES..((k + 1) * CHUNK_BYTES).min(size);
        let fetch = async move {
            let got = store.get_range(&log, range).await.map_err(|e| Arc::<str>::from(format!("{log}: {e}")));
            cache.finished(key, got.as_ref().ok());
            got
        }
        .boxed()
        .shared();
        s.in_flight.insert(key, fetch.clone());
        drop(s);
        tokio::spawn(fetch.clone().map(drop));
        Chunk::Fetching(fetch)
    }

    /// A chunk fetch ended: no longer in flight; kept if it succeeded (an error is not
    /// kept: the next read asks again).
    fn finished(&self, key: ChunkKey, bytes: Option<&Bytes>) {
        let mut s = self.lock();
        let s = &mut *s;
        s.in_flight.remove(&key);
        let Some(b) = bytes else { return };
        if s.chunks.insert(key, b.clone()).is_none() {
            s.bytes += b.len();
            s.order.push_back(key);
        }
        while s.bytes > self.capacity_bytes && s.order.len() > 1 {
            let Some(old) = s.order.pop_front() else { break };
            if let Some(gone) = s.chunks.remove(&old) {
                s.bytes -= gone.len();
            }
        }
        debug_assert_eq!(s.chunks.len(), s.order.len(), "every cached chunk is in the recency list once");
    }

    /// (chunks, bytes) held now.
    pub fn usage(&self) -> (usize, usize) {
        let s = self.lock();
        (s.chunks.len(), s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().build().unwrap()
    }

    /// An object of `len` bytes, byte i = i mod 251.
    fn object(rt: &tokio::runtime::Runtime, len: u64) -> (Arc<dyn ObjectStore>, ObjectPath, Vec<u8>) {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = ObjectPath::from("p/seg.log");
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        rt.block_on(store.put(&path, bytes.clone().into())).unwrap();
        (store, path, bytes)
    }

    #[test]
    fn ranges_come_back_exact_across_chunks_and_later_reads_hit_memory() {
        let rt = rt();
        let len = 3 * CHUNK_BYTES + 1000;
        let (store, path, bytes) = object(&rt, len);
        let cache = Arc::new(ChunkCache::new(64 << 20, 0));
        let read = |r: Range<u64>| rt.block_on(cache.read(&store, &path, [1; 16], len, r)).unwrap();
        // Across the first chunk boundary: fetched, exact.
        let (got, src) = read(CHUNK_BYTES - 10..CHUNK_BYTES + 20);
        assert_eq!(&got[..], &bytes[(CHUNK_BYTES - 10) as usize..(CHUNK_BYTES + 20) as usize]);
        assert_eq!(src, RangeSource { cached_bytes: 0, fetched_bytes: 30 });
        // The same chunks again: from memory.
        let (got, src) = read(5..CHUNK_BYTES + 7);
        assert_eq!(&got[..], &bytes[5..(CHUNK_BYTES + 7) as usize]);
        assert_eq!(src, RangeSource { cached_bytes: CHUNK_BYTES + 2, fetched_bytes: 0 });
        // The short last chunk.
        let (got, _) = read(3 * CHUNK_BYTES + 900..len);
        assert_eq!(&got[..], &bytes[(3 * CHUNK_BYTES + 900) as usize..]);
        assert_eq!(cache.usage(), (3, (2 * CHUNK_BYTES + 1000) as usize));
    }

    #[test]
    fn the_chunks_after_a_read_are_fetched_ahead() {
        let rt = rt();
        let len = 4 * CHUNK_BYTES;
        let (store, path, bytes) = object(&rt, len);
        let cache = Arc::new(ChunkCache::new(64 << 20, 2 * CHUNK_BYTES));
        rt.block_on(async {
            let (_, src) = cache.read(&store, &path, [2; 16], len, 0..100).await.unwrap();
            assert_eq!(src.fetched_bytes, 100);
            // Let the prefetches of chunks 1 and 2 run.
            for _ in 0..100 {
                if cache.usage().0 == 3 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_eq!(cache.usage(), (3, 3 * CHUNK_BYTES as usize), "chunk 0 and the two after it");
            let (got, src) = cache.read(&store, &path, [2; 16], len, CHUNK_BYTES..3 * CHUNK_BYTES).await.unwrap();
            assert_eq!(&got[..], &bytes[CHUNK_BYTES as usize..3 * CHUNK_BYTES as usize]);
            assert_eq!(src, RangeSource { cached_bytes: 2 * CHUNK_BYTES, fetched_bytes: 0 });
        });
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used_within_its_bytes_and_zero_means_none() {
        let rt = rt();
        let len = 4 * CHUNK_BYTES;
        let (store, path, _) = object(&rt, len);
        let cache = Arc::new(ChunkCache::new(2 * CHUNK_BYTES as usize, 0));
        for k in 0..4 {
            rt.block_on(cache.read(&store, &path, [3; 16], len, k * CHUNK_BYTES..k * CHUNK_BYTES + 1)).unwrap();
        }
        assert_eq!(cache.usage(), (2, 2 * CHUNK_BYTES as usize));
        let (_, src) = rt.block_on(cache.read(&store, &path, [3; 16], len, 3 * CHUNK_BYTES..3 * CHUNK_BYTES + 1)).unwrap();
        assert_eq!(src.cached_bytes, 1, "the newest stays");
        let (_, src) = rt.block_on(cache.read(&store, &path, [3; 16], len, 0..1)).unwrap();
        assert_eq!(src.fetched_bytes, 1, "the oldest went");
        let none = Arc::new(ChunkCache::new(0, 8 * CHUNK_BYTES));
        let (got, src) = rt.block_on(none.read(&store, &path, [3; 16], len, 10..20)).unwrap();
        assert_eq!((got.len(), src, none.usage()), (10, RangeSource { cached_bytes: 0, fetched_bytes: 10 }, (0, 0)));
    }
}
