//! Reading a fetch's batches back from a remote segment (Kafka's RemoteLogReader): the
//! segment's `.indexes` object gives the position of the last indexed batch at or below
//! the offset (decoded objects are cached, bounded), then one ranged GET of the `.log`
//! object from there. Batches before the offset are skipped; whole batches only, each CRC
//! checked (a damaged object is an error, never served); the first batch is returned whole
//! even past `max_bytes` when `min_one_batch` (a second GET completes it).
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::record::{iter_batches, IterStop};

use super::chunk_cache::{ChunkCache, RangeSource};
use super::object_keys::{segment_key, INDEXES_SUFFIX, LOG_SUFFIX};
use super::remote_indexes::{RemoteAbortedTxn, RemoteIndexes, MAX_INDEXES_BYTES, OFFSET_INDEX_INTERVAL};
use super::RemoteError;

/// Which remote segment to read, and where.
#[derive(Clone, Debug)]
pub struct RemoteRead {
    pub partition_prefix: String,
    pub segment_id: [u8; 16],
    pub start_offset: i64,
    pub end_offset: i64,
    /// Bytes of the `.log` object (its metadata's size).
    pub size_bytes: u64,
    pub offset: i64,
    pub max_bytes: usize,
    pub min_one_batch: bool,
    /// A ListOffsets search for this timestamp: the read starts where the time index
    /// says the first batch reaching it can be (not before `offset`).
    pub timestamp: Option<i64>,
}

/// The batches read: one `Bytes` per batch, in offset order.
#[derive(Debug, Default)]
pub struct RemoteBatches {
    pub batches: Vec<Bytes>,
    pub bytes: usize,
    /// The first batch is larger than `max_bytes` (returned anyway: `min_one_batch`).
    pub first_batch_exceeds_limit: bool,
    /// Some batch read is transactional (its producer wrote in a transaction).
    pub transactional: bool,
    /// The last offset of the last batch read (-1: none).
    pub last_offset: i64,
    /// The aborted transactions overlapping what was read, from the segment's remote
    /// transaction index; None: the object has none (written before it existed).
    pub aborted_transactions: Option<Vec<RemoteAbortedTxn>>,
    /// Where the `.log` bytes read came from (`chunk_cache`).
    pub source: RangeSource,
}

/// The decoded `.indexes` objects most recently used, by segment id, within a bound in
/// bytes (remote.log.index.file.cache.total.size.bytes; the newest always stays). Shared
/// by the shards' reads on the remote runtime: a lookup is a hash probe and a short move
/// in the recency list, against a network read it saves.
pub struct IndexCache {
    capacity_bytes: usize,
    entries: Mutex<IndexLru>,
}

#[derive(Default)]
struct IndexLru {
    map: HashMap<[u8; 16], (std::sync::Arc<RemoteIndexes>, usize)>,
    /// Least recently used first.
    order: VecDeque<[u8; 16]>,
    bytes: usize,
}

impl Default for IndexCache {
    fn default() -> Self {
        IndexCache::new(usize::MAX)
    }
}

impl IndexCache {
    pub fn new(capacity_bytes: usize) -> IndexCache {
        IndexCache { capacity_bytes, entries: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IndexLru> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, id: &[u8; 16]) -> Option<std::sync::Arc<RemoteIndexes>> {
        let mut g = self.lock();
        let found = g.map.get(id)?.0.clone();
        if let Some(i) = g.order.iter().position(|o| o == id) {
            g.order.remove(i);
        }
        g.order.push_back(*id);
        Some(found)
    }

    fn put(&self, id: [u8; 16], indexes: std::sync::Arc<RemoteIndexes>) {
        let size = indexes.memory_bytes();
        let mut g = self.lock();
        let lru = &mut *g;
        if let Some((_, old)) = lru.map.insert(id, (indexes, size)) {
            lru.bytes -= old;
            lru.order.retain(|o| o != &id);
        }
        lru.bytes += size;
        lru.order.push_back(id);
        while lru.bytes > self.capacity_bytes && lru.order.len() > 1 {
            let Some(old) = lru.order.pop_front() else { break };
            if let Some((_, n)) = lru.map.remove(&old) {
                lru.bytes -= n;
            }
        }
        debug_assert_eq!(lru.map.len(), lru.order.len(), "every cached object is in the recency list once");
    }

    /// (objects, bytes) held now.
    pub fn usage(&self) -> (usize, usize) {
        let g = self.lock();
        (g.map.len(), g.bytes)
    }
}

/// A segment's `.indexes` object, from the cache or the store (bounded before it is read).
pub(super) async fn indexes(
    store: &dyn ObjectStore,
    cache: &IndexCache,
    partition_prefix: &str,
    start_offset: i64,
    segment_id: &[u8; 16],
) -> Result<std::sync::Arc<RemoteIndexes>, RemoteError> {
    if let Some(i) = cache.get(segment_id) {
        return Ok(i);
    }
    let key = ObjectPath::from(segment_key(partition_prefix, start_offset, segment_id, INDEXES_SUFFIX));
    let head = store.head(&key).await.map_err(|e| RemoteError::Store(format!("{key}: {e}")))?;
    if head.size > MAX_INDEXES_BYTES as u64 {
        return Err(RemoteError::Corrupt(format!("{key} is {} bytes, over the {MAX_INDEXES_BYTES} bytes an indexes object may hold", head.size)));
    }
    let bytes = store.get_range(&key, 0..head.size).await.map_err(|e| RemoteError::Store(format!("{key}: {e}")))?;
    let decoded = std::sync::Arc::new(RemoteIndexes::decode(&bytes).map_err(|e| RemoteError::Corrupt(format!("{key}: {e}")))?);
    cache.put(*segment_id, decoded.clone());
    Ok(decoded)
}

pub(super) async fn read(store: &Arc<dyn ObjectStore>, cache: &IndexCache, chunks: &Arc<ChunkCache>, r: &RemoteRead) -> Result<RemoteBatches, RemoteError> {
    let indexes = indexes(&**store, cache, &r.partition_prefix, r.start_offset, &r.segment_id).await?;
    let mut out = read_batches(store, chunks, &indexes, r).await?;
    out.aborted_transactions = indexes.aborted_between(r.offset, out.last_offset);
    Ok(out)
}

/// The batches of `r` from its `.log` object, found through `indexes`.
async fn read_batches(store: &Arc<dyn ObjectStore>, chunks: &Arc<ChunkCache>, indexes: &RemoteIndexes, r: &RemoteRead) -> Result<RemoteBatches, RemoteError> {
    let log = ObjectPath::from(segment_key(&r.partition_prefix, r.start_offset, &r.segment_id, LOG_SUFFIX));
    let timed = r.timestamp.and_then(|ts| indexes.scan_start_for_timestamp(ts));
    let r = &RemoteRead { offset: timed.map_or(r.offset, |o| o.max(r.offset)), ..r.clone() };
    let from = indexes.position_for(r.offset);
    if from >= r.size_bytes {
        return Err(RemoteError::Corrupt(format!("{log}: index position {from} past the object's {} bytes", r.size_bytes)));
    }
    // Up to one index interval of batches before the offset, then what the fetch asks.
    let want = (r.max_bytes as u64).saturating_add(OFFSET_INDEX_INTERVAL).max(64 << 10);
    let end = from.saturating_add(want).min(r.size_bytes);
    let (mut chunk, source) = chunks.read(store, &log, r.segment_id, r.size_bytes, from..end).await?;
    let mut pos = from;
    let mut out = RemoteBatches { last_offset: -1, source, ..Default::default() };
    // Each pass reads past what the last one consumed; a damaged object that stops that
    // (a zero length, a batch longer than the object) ends as an error, not a loop.
    for _ in 0..64 {
        let mut it = iter_batches(&chunk);
        let mut consumed = 0;
        let mut full = false;
        while let Some(Ok((h, range))) = it.next() {
            consumed = range.end;
            let last = h.last_offset();
            if last < r.offset {
                continue;
            }
            if h.base_offset > r.end_offset {
                break;
            }
            let first = out.batches.is_empty();
            if out.bytes + range.len() > r.max_bytes && !(first && r.min_one_batch) {
                full = true;
                break;
            }
            out.first_batch_exceeds_limit |= first && range.len() > r.max_bytes;
            out.transactional |= h.is_transactional();
            out.last_offset = last;
            out.bytes += range.len();
            out.batches.push(chunk.slice(range));
            if last >= r.end_offset {
                full = true;
                break;
            }
        }
        let stop = it.stop().cloned();
        if full {
            return Ok(out);
        }
        match stop {
            Some(IterStop::Invalid(e)) => return Err(RemoteError::Corrupt(format!("{log}: bad batch at {}: {e}", pos + consumed as u64))),
            // Nothing wanted yet and the object goes on (the offset's batch is past this
            // range, or cut by its end): read on from the first byte not consumed.
            _ if out.batches.is_empty() && pos + (consumed as u64) < r.size_bytes && (consumed > 0 || matches!(stop, Some(IterStop::Cut { .. }))) => {
                pos += consumed as u64;
                let cut = match stop {
                    Some(IterStop::Cut { total_len: Some(n) }) => n as u64,
                    _ => 0,
                };
                let end = pos.saturating_add(want.max(cut)).min(r.size_bytes);
                let (more, source) = chunks.read(store, &log, r.segment_id, r.size_bytes, pos..end).await?;
                chunk = more;
                out.source += source;
            }
            Some(IterStop::ZeroTail) => return Err(RemoteError::Corrupt(format!("{log}: zeros at {}", pos + consumed as u64))),
            _ => return Ok(out),
        }
    }
    Err(RemoteError::Corrupt(format!("{log}: no batch at offset {} within 64 reads", r.offset)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_batch, set_base_offset, NewRecord};
    use object_store::memory::InMemory;

    /// Batches of `n` records each, `value_len` bytes per value, from offset 0.
    fn batches(count: usize, n: usize, value_len: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|i| {
                let records = (0..n).map(|j| NewRecord { key: None, value: Some(vec![(i + j) as u8; value_len].into()), timestamp_ms: 1_000 });
                let mut b = encode_batch(records, kafka_protocol::records::Compression::None).unwrap().to_vec();
                set_base_offset(&mut b, (i * n) as i64).unwrap();
                b
            })
            .collect()
    }

    /// A store holding one segment of `batches` (offsets 0..), indexed every 2 batches.
    fn segment(store: &InMemory, batches: &[Vec<u8>], n: usize) -> RemoteRead {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let log: Vec<u8> = batches.concat();
        let mut pos = 0u64;
        let mut offset_index = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            if i % 2 == 0 {
                offset_index.push(((i * n) as i64, pos));
            }
            pos += b.len() as u64;
        }
        let indexes = RemoteIndexes { offset_index, ..Default::default() };
        let read = RemoteRead {
            partition_prefix: "p/t-x/0/".into(),
            segment_id: [7; 16],
            start_offset: 0,
            end_offset: (batches.len() * n) as i64 - 1,
            size_bytes: log.len() as u64,
            offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            timestamp: None,
        };
        rt.block_on(async {
            store.put(&ObjectPath::from(segment_key(&read.partition_prefix, 0, &read.segment_id, LOG_SUFFIX)), log.into()).await.unwrap();
            store.put(&ObjectPath::from(segment_key(&read.partition_prefix, 0, &read.segment_id, INDEXES_SUFFIX)), indexes.encode().into()).await.unwrap();
        });
        read
    }

    fn run(store: &InMemory, cache: &IndexCache, r: &RemoteRead) -> Result<RemoteBatches, RemoteError> {
        // A copy of the store's objects as they are now; no chunk cache.
        let store: Arc<dyn ObjectStore> = Arc::new(store.fork());
        let chunks = Arc::new(ChunkCache::new(0, 0));
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(read(&store, cache, &chunks, r))
    }

    fn bases(out: &RemoteBatches) -> Vec<i64> {
        out.batches.iter().map(|b| i64::from_be_bytes(b[..8].try_into().unwrap())).collect()
    }

    #[test]
    fn reads_whole_batches_from_the_offset_within_the_limit() {
        let (store, cache) = (InMemory::new(), IndexCache::default());
        let all = batches(10, 5, 100);
        let r = segment(&store, &all, 5);
        // From offset 17 (in the batch 15-19): that batch first, then on to the end.
        let out = run(&store, &cache, &RemoteRead { offset: 17, ..r.clone() }).unwrap();
        assert_eq!(bases(&out), vec![15, 20, 25, 30, 35, 40, 45]);
        assert_eq!(out.bytes, all[3..].iter().map(Vec::len).sum::<usize>());
        // Two batches' worth of bytes: two batches.
        let out = run(&store, &cache, &RemoteRead { offset: 0, max_bytes: all[0].len() * 2 + 1, ..r.clone() }).unwrap();
        assert_eq!(bases(&out), vec![0, 5]);
        // Less than one batch: that batch anyway with min_one_batch, else nothing.
        let out = run(&store, &cache, &RemoteRead { offset: 49, max_bytes: 10, ..r.clone() }).unwrap();
        assert_eq!((bases(&out), out.first_batch_exceeds_limit), (vec![45], true));
        let out = run(&store, &cache, &RemoteRead { offset: 49, max_bytes: 10, min_one_batch: false, ..r }).unwrap();
        assert!(out.batches.is_empty());
    }

    #[test]
    fn a_batch_larger_than_the_first_range_is_read_whole() {
        let (store, cache) = (InMemory::new(), IndexCache::default());
        // 3 batches of 5 x 120 KiB: each larger than the 64 KiB a small fetch asks first
        // (plus the index interval, 256 KiB: the second batch is cut at the range's end).
        let all = batches(3, 5, 120 << 10);
        let r = segment(&store, &all, 5);
        let out = run(&store, &cache, &RemoteRead { offset: 5, max_bytes: 1, ..r }).unwrap();
        assert_eq!(bases(&out), vec![5]);
        assert_eq!(out.batches[0].len(), all[1].len());
    }

    #[test]
    fn the_index_cache_keeps_the_most_recently_used_within_its_bytes() {
        let indexes = |n: usize| std::sync::Arc::new(RemoteIndexes { producer_snapshot: vec![0; n], ..Default::default() });
        let one = indexes(1000).memory_bytes();
        let cache = IndexCache::new(2 * one + one / 2);
        cache.put([1; 16], indexes(1000));
        cache.put([2; 16], indexes(1000));
        assert!(cache.get(&[1; 16]).is_some(), "1 is now the most recently used");
        cache.put([3; 16], indexes(1000));
        assert_eq!(cache.usage(), (2, 2 * one));
        assert!(cache.get(&[2; 16]).is_none(), "the least recently used went");
        assert!(cache.get(&[1; 16]).is_some() && cache.get(&[3; 16]).is_some());
        // One object over the whole bound stays alone (it is being read).
        cache.put([4; 16], indexes(10 * one));
        assert_eq!(cache.usage().0, 1);
        assert!(cache.get(&[4; 16]).is_some());
        // Put again: counted once.
        cache.put([4; 16], indexes(10 * one));
        assert_eq!(cache.usage(), (1, indexes(10 * one).memory_bytes()));
    }

    #[test]
    fn a_damaged_object_is_an_error_never_data() {
        let (store, cache) = (InMemory::new(), IndexCache::default());
        let mut all = batches(4, 5, 100);
        let last = all[1].len() - 1;
        all[1][last] ^= 0xff;
        let r = segment(&store, &all, 5);
        let err = run(&store, &cache, &RemoteRead { offset: 5, ..r.clone() }).unwrap_err();
        assert!(matches!(err, RemoteError::Corrupt(_)), "{err}");
        // A missing object: a store error.
        let gone = RemoteRead { segment_id: [9; 16], ..r };
        assert!(matches!(run(&store, &cache, &gone), Err(RemoteError::Store(_))));
    }
}
