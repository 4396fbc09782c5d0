package shardlog.bench;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.apache5.Apache5HttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;

/**
 * A minimal Kafka 4.4 RemoteStorageManager over S3, for benches/tiered_bench.py: Kafka tiers
 * to the same object store, with the same settings (the Aiven plugin's `rsm.config.*`
 * names, which Kafka hands over without the prefix), as shardlog.
 *
 * <p>Each file of a segment is one object,
 * {@code <key.prefix><topic>-<topicId>/<partition>/<segmentId>.<suffix>}, written with one
 * PUT (segments are at most segment.bytes, far below S3's 5 GiB PUT limit) and read back
 * whole (indexes) or by ranged GET (the log), through a chunk cache as the Aiven plugin's
 * and shardlog's (see {@link ChunkCache}). No encryption or compression: bench
 * infrastructure, not a production plugin.
 */
public class S3RemoteStorageManager implements RemoteStorageManager {
    private S3Client s3;
    private String bucket;
    private String prefix;
    /** The .log chunk cache; null when fetch.chunk.cache.size is 0 (a ranged GET per fetch). */
    private ChunkCache chunkCache;

    @Override
    public void configure(Map<String, ?> configs) {
        bucket = setting(configs, "storage.s3.bucket.name", null);
        if (bucket == null || bucket.isEmpty()) {
            throw new IllegalArgumentException("rsm.config.storage.s3.bucket.name is required");
        }
        prefix = setting(configs, "key.prefix", "");
        String endpoint = setting(configs, "storage.s3.endpoint.url", "");
        String keyId = setting(configs, "storage.aws.access.key.id", "");
        String secret = setting(configs, "storage.aws.secret.access.key", "");
        S3ClientBuilder b = S3Client.builder()
            .region(Region.of(setting(configs, "storage.s3.region", "us-east-1")))
            // Kafka's copier, expiration and reader pools (10 threads each by default) share
            // this client: a connection for each at once.
            .httpClientBuilder(Apache5HttpClient.builder().maxConnections(64))
            // Newer SDKs add CRC trailers (aws-chunked bodies) to every PUT; S3-compatible
            // servers do not all accept them. Checksums only where the API demands one.
            .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
            .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED);
        if (!endpoint.isEmpty()) {
            // An S3-compatible server (SeaweedFS here) has no per-bucket host names: path style.
            b.endpointOverride(URI.create(endpoint)).forcePathStyle(true);
        }
        if (!keyId.isEmpty()) {
            b.credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(keyId, secret)));
        } // else the SDK's default chain (environment, profile, instance metadata)
        s3 = b.build();
        // The Aiven plugin's names and shardlog's defaults: 256 MiB of 4 MiB chunks, 8 MiB ahead.
        long cacheBytes = Long.parseLong(setting(configs, "fetch.chunk.cache.size", String.valueOf(256L << 20)));
        long prefetchBytes = Long.parseLong(setting(configs, "fetch.chunk.cache.prefetch.max.size", String.valueOf(8L << 20)));
        if (cacheBytes > 0) {
            chunkCache = new ChunkCache(cacheBytes, prefetchBytes);
        }
    }

    private static String setting(Map<String, ?> configs, String name, String dflt) {
        Object v = configs.get(name);
        return v == null ? dflt : v.toString();
    }

    /** The object key of one file of a segment; the segment id (a UUID) makes it unique. */
    private String key(RemoteLogSegmentMetadata m, String suffix) {
        RemoteLogSegmentId id = m.remoteLogSegmentId();
        TopicIdPartition tp = id.topicIdPartition();
        return prefix + tp.topic() + "-" + tp.topicId() + "/" + tp.partition() + "/" + id.id() + "." + suffix;
    }

    private static String suffix(IndexType type) {
        switch (type) {
            case OFFSET: return "index";
            case TIMESTAMP: return "timeindex";
            case PRODUCER_SNAPSHOT: return "snapshot";
            case TRANSACTION: return "txnindex";
            case LEADER_EPOCH: return "leader-epoch-checkpoint";
            default: throw new IllegalArgumentException("unknown index type " + type);
        }
    }

    @Override
    public Optional<CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata m, LogSegmentData d)
            throws RemoteStorageException {
        try {
            putFile(key(m, "log"), d.logSegment());
            putFile(key(m, suffix(IndexType.OFFSET)), d.offsetIndex());
            putFile(key(m, suffix(IndexType.TIMESTAMP)), d.timeIndex());
            putFile(key(m, suffix(IndexType.PRODUCER_SNAPSHOT)), d.producerSnapshotIndex());
            // Kafka passes no transaction index for a segment without aborted transactions;
            // fetchIndex then answers "not found", which Kafka reads as an empty index.
            if (d.transactionIndex().isPresent()) {
                putFile(key(m, suffix(IndexType.TRANSACTION)), d.transactionIndex().get());
            }
            // The leader epochs come in memory (the checkpoint up to this segment's end);
            // duplicate() so Kafka's buffer position is left alone.
            s3.putObject(r -> r.bucket(bucket).key(key(m, suffix(IndexType.LEADER_EPOCH))),
                         RequestBody.fromByteBuffer(d.leaderEpochIndex().duplicate()));
        } catch (SdkException e) {
            // Kafka retries the copy on its next task run; the objects of a failed copy are
            // deleted through deleteLogSegmentData when Kafka expires the unfinished segment.
            throw new RemoteStorageException("copy of " + m.remoteLogSegmentId() + " failed", e);
        }
        return Optional.empty();
    }

    private void putFile(String key, Path file) {
        s3.putObject(r -> r.bucket(bucket).key(key), RequestBody.fromFile(file));
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata m, int startPosition) throws RemoteStorageException {
        if (chunkCache != null) {
            return cached(m, startPosition, Long.MAX_VALUE);
        }
        return get(key(m, "log"), "bytes=" + startPosition + "-");
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata m, int startPosition, int endPosition)
            throws RemoteStorageException {
        // Kafka's end position is inclusive, as an HTTP range's last byte is.
        if (chunkCache != null) {
            return cached(m, startPosition, endPosition + 1L);
        }
        return get(key(m, "log"), "bytes=" + startPosition + "-" + endPosition);
    }

    /**
     * Bytes [start, end) of the segment's .log through the chunk cache. Its size, which bounds
     * the last chunk, is in the metadata: Kafka records segment.log().sizeInBytes() of the
     * closed segment it uploads, so no HEAD is needed.
     */
    private InputStream cached(RemoteLogSegmentMetadata m, long start, long end) throws RemoteStorageException {
        String key = key(m, "log");
        try {
            return chunkCache.open(m.remoteLogSegmentId().id(), m.segmentSizeInBytes(), start, end,
                                   (from, length) -> getRange(key, from, length));
        } catch (IOException e) {
            if (e.getCause() instanceof NoSuchKeyException) {
                throw new RemoteResourceNotFoundException("no object " + key, e.getCause());
            }
            throw new RemoteStorageException("GET " + key + " failed", e);
        }
    }

    /** Bytes [from, from + length) of the object, all of them (a short answer fails). */
    private byte[] getRange(String key, long from, int length) throws IOException {
        try (ResponseInputStream<GetObjectResponse> in =
                 s3.getObject(r -> r.bucket(bucket).key(key).range("bytes=" + from + "-" + (from + length - 1)))) {
            byte[] b = new byte[length];
            int n = in.readNBytes(b, 0, length);
            if (n < length) {
                throw new IOException(key + ": " + n + " bytes at " + from + ", expected " + length);
            }
            return b;
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata m, IndexType type) throws RemoteStorageException {
        return get(key(m, suffix(type)), null);
    }

    /** The object (or the range of it) as a stream; the caller's close() frees the connection. */
    private InputStream get(String key, String range) throws RemoteStorageException {
        try {
            return abortUnreadOnClose(s3.getObject(r -> r.bucket(bucket).key(key).range(range)));
        } catch (NoSuchKeyException e) {
            throw new RemoteResourceNotFoundException("no object " + key, e);
        } catch (SdkException e) {
            throw new RemoteStorageException("GET " + key + " failed", e);
        }
    }

    /**
     * Kafka 4.4 serves a consumer's remote fetch from fetchLogSegment(metadata, startPosition),
     * an open-ended range, reads what the fetch takes (max.partition.fetch.bytes, 1 MiB by
     * default) and closes the stream. Closed unread, the HTTP client would first drain the rest
     * of the segment to reuse the connection (up to segment.bytes per fetch, and past
     * remote.fetch.max.wait.ms the read is thrown away): abort the connection instead.
     */
    private static InputStream abortUnreadOnClose(ResponseInputStream<?> response) {
        return new FilterInputStream(response) {
            private boolean eof;

            @Override
            public int read() throws IOException {
                int b = super.read();
                eof |= b < 0;
                return b;
            }

            @Override
            public int read(byte[] buf, int off, int len) throws IOException {
                int n = super.read(buf, off, len);
                eof |= n < 0;
                return n;
            }

            @Override
            public void close() throws IOException {
                if (!eof) {
                    response.abort();
                }
                super.close();
            }
        };
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata m) throws RemoteStorageException {
        // Kafka may delete a segment again (a retried expiration, a copy that failed half-way):
        // an S3 DELETE of a missing key succeeds, so deleting every suffix is idempotent.
        try {
            s3.deleteObject(r -> r.bucket(bucket).key(key(m, "log")));
            for (IndexType type : IndexType.values()) {
                s3.deleteObject(r -> r.bucket(bucket).key(key(m, suffix(type))));
            }
        } catch (SdkException e) {
            throw new RemoteStorageException("delete of " + m.remoteLogSegmentId() + " failed", e);
        }
    }

    @Override
    public void close() {
        if (chunkCache != null) {
            chunkCache.close();
        }
        if (s3 != null) {
            s3.close();
        }
    }
}
