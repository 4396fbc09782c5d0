//! Reading a fetch's batches back from a remote segment (Kafka's RemoteLogReader): the
//! segment's `.indexes` object gives the position of the last indexed batch at or below
//! the offset (decoded objects are cached, bounded), then one ranged GET of the `.log`
//! object from there. Batches before the offset are skipped; whole batches only, each CRC
//! checked (a damaged object is an error, never served); the first batch is returned whole
//! even past `max_bytes` when `min_one_batch` (a second GET completes it).
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::record::{iter_batches, IterStop};

use super::object_keys::{segment_key, INDEXES_SUFFIX, LOG_SUFFIX};
use super::remote_indexes::{RemoteIndexes, MAX_INDEXES_BYTES, OFFSET_INDEX_INTERVAL};
use super::RemoteError;

/// Decoded `.indexes` objects kept (a few hundred KiB each at most).
const INDEX_CACHE_ENTRIES: usize = 256;

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
}

/// The decoded `.indexes` objects most recently used, by segment id.
#[derive(Default)]
pub struct IndexCache {
    entries: Mutex<(HashMap<[u8; 16], std::sync::Arc<RemoteIndexes>>, VecDeque<[u8; 16]>)>,
}

impl IndexCache {
    fn get(&self, id: &[u8; 16]) -> Option<std::sync::Arc<RemoteIndexes>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).0.get(id).cloned()
    }

    fn put(&self, id: [u8; 16], indexes: std::sync::Arc<RemoteIndexes>) {
        let mut g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *g;
        if map.insert(id, indexes).is_none() {
            order.push_back(id);
        }
        while order.len() > INDEX_CACHE_ENTRIES {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

pub(super) async fn read(store: &dyn ObjectStore, cache: &IndexCache, r: &RemoteRead) -> Result<RemoteBatches, RemoteError> {
    let indexes = match cache.get(&r.segment_id) {
        Some(i) => i,
        None => {
            let key = ObjectPath::from(segment_key(&r.partition_prefix, r.start_offset, &r.segment_id, INDEXES_SUFFIX));
            let head = store.head(&key).await.map_err(|e| RemoteError::Store(format!("{key}: {e}")))?;
            if head.size > MAX_INDEXES_BYTES as u64 {
                return Err(RemoteError::Corrupt(format!("{key} is {} bytes, over the {MAX_INDEXES_BYTES} bytes an indexes object may hold", head.size)));
            }
            let bytes = store.get_range(&key, 0..head.size).await.map_err(|e| RemoteError::Store(format!("{key}: {e}")))?;
            let decoded = std::sync::Arc::new(RemoteIndexes::decode(&bytes).map_err(|e| RemoteError::Corrupt(format!("{key}: {e}")))?);
            cache.put(r.segment_id, decoded.clone());
            decoded
        }
    };
    let log = ObjectPath::from(segment_key(&r.partition_prefix, r.start_offset, &r.segment_id, LOG_SUFFIX));
    let from = indexes.position_for(r.offset);
    if from >= r.size_bytes {
        return Err(RemoteError::Corrupt(format!("{log}: index position {from} past the object's {} bytes", r.size_bytes)));
    }
    // Up to one index interval of batches before the offset, then what the fetch asks.
    let want = (r.max_bytes as u64).saturating_add(OFFSET_INDEX_INTERVAL).max(64 << 10);
    let end = from.saturating_add(want).min(r.size_bytes);
    let mut chunk = store.get_range(&log, from..end).await.map_err(|e| RemoteError::Store(format!("{log}: {e}")))?;
    let mut pos = from;
    let mut out = RemoteBatches::default();
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
                chunk = store.get_range(&log, pos..end).await.map_err(|e| RemoteError::Store(format!("{log}: {e}")))?;
            }
            Some(IterStop::ZeroTail) => return Err(RemoteError::Corrupt(format!("{log}: zeros at {}", pos + consumed as u64))),
            _ => return Ok(out),
        }
    }
    Err(RemoteError::Corrupt(format!("{log}: no batch at offset {} within 64 reads", r.offset)))
}
