//! The remote store: an S3 bucket through `object_store` (requests signed by the crate),
//! on its own small tokio runtime, the remote I/O side. Shards never wait on the network
//! or the disk reads of an upload: they call these methods, which run the work on the
//! runtime and answer on a oneshot channel (awaitable from a glommio shard).
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig, WriteMultipart};

use super::chunk_cache::ChunkCache;
use super::object_keys::{segment_key, INDEXES_SUFFIX, LOG_SUFFIX};
use super::remote_indexes::RemoteIndexes;
use super::remote_read::{IndexCache, RemoteBatches, RemoteRead};
use super::segment_export::SegmentExport;
use super::settings::RemoteStoreSettings;
use super::upload::{SegmentUpload, UploadedSegment};
use super::RemoteError;

/// Parts of a multipart upload (S3's minimum is 5 MiB but for the last).
const PART_BYTES: usize = 8 << 20;
/// Parts in flight per upload.
const PARTS_IN_FLIGHT: usize = 2;

/// Cheap to clone; Send + Sync.
#[derive(Clone)]
pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
    indexes: Arc<IndexCache>,
    chunks: Arc<ChunkCache>,
    runtime: Arc<tokio::runtime::Runtime>,
    /// remote.log.reader.threads: reads in flight at once; more wait here.
    readers: Arc<tokio::sync::Semaphore>,
    pub settings: Arc<RemoteStoreSettings>,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl RemoteStore {
    /// The client of `settings`' bucket and the runtime it runs on (one worker thread,
    /// unpinned: uploads are network- and disk-bound).
    pub fn start(settings: RemoteStoreSettings) -> Result<RemoteStore, RemoteError> {
        // reqwest's rustls takes the process's default provider: ring, as the listeners use.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_virtual_hosted_style_request(!settings.path_style)
            .with_client_options(ClientOptions::new().with_timeout(settings.call_timeout).with_connect_timeout(Duration::from_secs(10)))
            .with_retry(RetryConfig { max_retries: 5, retry_timeout: settings.call_timeout, ..RetryConfig::default() });
        if !settings.endpoint.is_empty() {
            b = b.with_endpoint(&settings.endpoint).with_allow_http(settings.endpoint.starts_with("http://"));
        }
        if let Some((id, secret)) = &settings.credentials {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
        }
        let store = b.build().map_err(|e| RemoteError::Settings(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .thread_name("remote-io")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Settings(format!("remote I/O runtime: {e}")))?;
        let indexes = Arc::new(IndexCache::new(settings.index_cache_bytes));
        let readers = Arc::new(tokio::sync::Semaphore::new(settings.reader_concurrency.max(1)));
        let chunks = Arc::new(ChunkCache::new(settings.chunk_cache_bytes, settings.chunk_prefetch_bytes));
        Ok(RemoteStore { store: Arc::new(store), indexes, chunks, runtime: Arc::new(runtime), readers, settings: Arc::new(settings) })
    }

    /// Runs `work` on the remote runtime; the answer arrives on the returned future, which
    /// any executor may await.
    fn run<T, F>(&self, work: F) -> impl std::future::Future<Output = Result<T, RemoteError>>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, RemoteError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        async move { rx.await.unwrap_or(Err(RemoteError::Stopped)) }
    }

    /// Uploads one sealed segment: its batches (`.log`, multipart, streamed from the file)
    /// then its indexes. On any failure both objects are deleted (best effort) and the
    /// local segment stays: the next attempt uses a new segment id.
    pub fn upload(&self, job: SegmentUpload) -> impl std::future::Future<Output = Result<UploadedSegment, RemoteError>> {
        let store = self.store.clone();
        self.run(async move {
            let log_key = ObjectPath::from(segment_key(&job.partition_prefix, job.segment.start_offset, &job.segment_id, LOG_SUFFIX));
            let indexes_key = ObjectPath::from(segment_key(&job.partition_prefix, job.segment.start_offset, &job.segment_id, INDEXES_SUFFIX));
            let result = upload_objects(&*store, &job, &log_key, &indexes_key).await;
            if result.is_err() {
                for key in [&log_key, &indexes_key] {
                    let _ = store.delete(key).await;
                }
            }
            result
        })
    }

    /// `run` for a read: it waits for one of the `readers` permits, and is dropped
    /// unstarted when its caller stopped waiting meanwhile (a fetch answered empty at
    /// remote.fetch.max.wait.ms), so a queue of reads never outlives who asked.
    fn run_read<T, F>(&self, work: F) -> impl std::future::Future<Output = Result<T, RemoteError>>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, RemoteError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let readers = self.readers.clone();
        self.runtime.spawn(async move {
            let Ok(_permit) = readers.acquire_owned().await else { return };
            if !tx.is_canceled() {
                let _ = tx.send(work.await);
            }
        });
        async move { rx.await.unwrap_or(Err(RemoteError::Stopped)) }
    }

    /// A fetch's batches from one remote segment (`remote_read.rs`).
    pub fn read(&self, request: RemoteRead) -> impl std::future::Future<Output = Result<RemoteBatches, RemoteError>> {
        let (store, cache, chunks) = (self.store.clone(), self.indexes.clone(), self.chunks.clone());
        self.run_read(async move { super::remote_read::read(&store, &cache, &chunks, &request).await })
    }

    /// A segment's `.indexes` object (a follower starting from the tiered offset takes its
    /// leader epochs and producer snapshot).
    pub fn read_indexes(
        &self,
        partition_prefix: String,
        start_offset: i64,
        segment_id: [u8; 16],
    ) -> impl std::future::Future<Output = Result<Arc<RemoteIndexes>, RemoteError>> {
        let (store, cache) = (self.store.clone(), self.indexes.clone());
        self.run_read(async move { super::remote_read::indexes(&*store, &cache, &partition_prefix, start_offset, &segment_id).await })
    }

    /// Deletes every object under `prefix` (a deleted partition's folder); returns how
    /// many went.
    pub fn delete_prefix(&self, prefix: String) -> impl std::future::Future<Output = Result<usize, RemoteError>> {
        let store = self.store.clone();
        self.run(async move {
            use futures::StreamExt as _;
            let folder = ObjectPath::from(prefix.trim_end_matches('/'));
            let keys = store.list(Some(&folder)).map(|m| m.map(|m| m.location)).boxed();
            let mut deleted = 0;
            let mut results = store.delete_stream(keys);
            while let Some(r) = results.next().await {
                match r {
                    Ok(_) => deleted += 1,
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(RemoteError::Store(e.to_string())),
                }
            }
            Ok(deleted)
        })
    }

    /// Deletes a segment's objects (a missing one is not an error: deletes are retried).
    pub fn delete_segment(
        &self,
        partition_prefix: String,
        start_offset: i64,
        segment_id: [u8; 16],
    ) -> impl std::future::Future<Output = Result<(), RemoteError>> {
        let store = self.store.clone();
        self.run(async move {
            for suffix in [LOG_SUFFIX, INDEXES_SUFFIX] {
                let key = ObjectPath::from(segment_key(&partition_prefix, start_offset, &segment_id, suffix));
                match store.delete(&key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(RemoteError::Store(e.to_string())),
                }
            }
            Ok(())
        })
    }
}

async fn upload_objects(store: &dyn ObjectStore, job: &SegmentUpload, log_key: &ObjectPath, indexes_key: &ObjectPath) -> Result<UploadedSegment, RemoteError> {
    let (path, start, end) = (job.segment.log_path.clone(), job.segment.start_offset, job.segment.end_offset);
    let mut export = tokio::task::spawn_blocking(move || SegmentExport::open(&path, start, end)).await.map_err(join_error)??;
    let upload = store.put_multipart(log_key).await.map_err(|e| RemoteError::Store(e.to_string()))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    loop {
        // The file is read on the blocking pool, a part's worth at a time (memory stays
        // bounded by the parts in flight).
        let (chunk, back) = tokio::task::spawn_blocking(move || {
            let chunk = export.next_chunk(PART_BYTES);
            (chunk, export)
        })
        .await
        .map_err(join_error)?;
        export = back;
        match chunk {
            Ok(Some(bytes)) => {
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(|e| RemoteError::Store(e.to_string()))?;
                writer.put(bytes.into());
            }
            Ok(None) => break,
            Err(e) => {
                let _ = writer.abort().await;
                return Err(e);
            }
        }
    }
    let exported = export.finish()?;
    writer.finish().await.map_err(|e| RemoteError::Store(e.to_string()))?;
    let producer_snapshot = match &job.segment.producer_snapshot {
        Some(p) => {
            let p = p.clone();
            tokio::task::spawn_blocking(move || std::fs::read(&p).or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(Vec::new()) } else { Err(e) }))
                .await
                .map_err(join_error)?
                .map_err(|e| RemoteError::LocalSegment(format!("producer snapshot: {e}")))?
        }
        None => Vec::new(),
    };
    let indexes = RemoteIndexes {
        offset_index: exported.offset_index,
        time_index: exported.time_index,
        leader_epochs: job.segment.leader_epochs.clone(),
        producer_snapshot,
        aborted_transactions: Some(job.segment.aborted_transactions.clone()),
    };
    store.put(indexes_key, indexes.encode().into()).await.map_err(|e| RemoteError::Store(e.to_string()))?;
    Ok(UploadedSegment { size_bytes: exported.size_bytes, batches: exported.batches, max_timestamp: exported.max_timestamp })
}

fn join_error(e: tokio::task::JoinError) -> RemoteError {
    RemoteError::LocalSegment(format!("reader task: {e}"))
}
