package shardlog.bench;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

import org.apache.kafka.common.Uuid;

/**
 * The bytes of remote {@code .log} objects, read in fixed 4 MiB chunks (chunk k = bytes
 * [k*4MiB, min((k+1)*4MiB, size))) and kept in memory, least recently used out first,
 * bounded in bytes; the chunks after the one a reader enters are fetched ahead. The same
 * scheme, sizes and settings as shardlog's src/remote/chunk_cache.rs and the Aiven plugin
 * ({@code fetch.chunk.cache.size}, {@code fetch.chunk.cache.prefetch.max.size}), so the
 * bench compares brokers, not one broker with a cache against one without.
 *
 * <p>Why: Kafka serves a consumer's remote fetch from an open-ended stream of which it reads
 * about max.partition.fetch.bytes (1 MiB) and closes it; as one ranged GET each, every fetch
 * pays the store's round trip. In chunks, a sequential reader finds its next fetch in memory
 * (read ahead while it was busy with the last one). A chunk is fetched once however many
 * readers want it meanwhile (they share one future), and a fetch nobody waits for any more
 * still completes and is kept; a failed one is not kept (the next reader asks again).
 */
final class ChunkCache implements AutoCloseable {
    static final int CHUNK_BYTES = 4 << 20;
    /** Fetches ahead for several partitions at once; each is a blocking GET, not CPU work. */
    private static final int PREFETCH_THREADS = 8;

    /** Bytes [from, from + length) of the object: one ranged GET. */
    interface Source {
        byte[] read(long from, int length) throws IOException;
    }

    private record Key(Uuid segment, long chunk) {}

    private final long capacityBytes;
    private final long prefetchChunks;
    private final ExecutorService prefetcher;
    // Guarded by `this`; the lock covers map updates only, never a fetch or a wait.
    private final LinkedHashMap<Key, byte[]> chunks = new LinkedHashMap<>(16, 0.75f, true); // access order: LRU first
    private final Map<Key, CompletableFuture<byte[]>> inFlight = new HashMap<>();
    private long bytes;

    ChunkCache(long capacityBytes, long prefetchBytes) {
        this.capacityBytes = capacityBytes;
        this.prefetchChunks = (prefetchBytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
        this.prefetcher = Executors.newFixedThreadPool(PREFETCH_THREADS, r -> {
            Thread t = new Thread(r, "s3-rsm-prefetch");
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Bytes [start, end) of the {@code size}-byte object of {@code segment}, as a stream that
     * fetches a chunk only when the reader gets to it. The first chunk is read here, so a
     * missing object fails the call rather than the first read.
     */
    InputStream open(Uuid segment, long size, long start, long end, Source source) throws IOException {
        ChunkStream s = new ChunkStream(segment, size, start, Math.min(end, size), source);
        if (s.pos < s.end) {
            s.enter(s.pos / CHUNK_BYTES);
        }
        return s;
    }

    /**
     * Chunk {@code k}: in memory, already being fetched, or fetched now: on the caller's
     * thread if it is about to wait for it anyway, else on the prefetcher.
     */
    private CompletableFuture<byte[]> chunk(Uuid segment, long size, long k, Source source, boolean ahead) {
        Key key = new Key(segment, k);
        CompletableFuture<byte[]> f;
        synchronized (this) {
            byte[] b = chunks.get(key);
            if (b != null) {
                return CompletableFuture.completedFuture(b);
            }
            f = inFlight.get(key);
            if (f != null) {
                return f;
            }
            f = new CompletableFuture<>();
            inFlight.put(key, f);
        }
        CompletableFuture<byte[]> fetch = f;
        Runnable run = () -> {
            long from = k * CHUNK_BYTES;
            try {
                byte[] b = source.read(from, (int) Math.min(CHUNK_BYTES, size - from));
                finished(key, b); // cached before the waiters wake: a read after them finds it
                fetch.complete(b);
            } catch (Throwable e) {
                finished(key, null);
                fetch.completeExceptionally(e);
            }
        };
        if (!ahead) {
            run.run();
        } else {
            try {
                prefetcher.execute(run);
            } catch (RejectedExecutionException e) { // closing: no prefetch
                finished(key, null);
                fetch.completeExceptionally(e);
            }
        }
        return fetch;
    }

    /** A chunk fetch ended: no longer in flight; kept if it succeeded, evicting the least recently used. */
    private synchronized void finished(Key key, byte[] b) {
        inFlight.remove(key);
        if (b == null) {
            return;
        }
        if (chunks.put(key, b) == null) {
            bytes += b.length;
        }
        // The newest stays even over capacity (a capacity below one chunk still serves a read).
        Iterator<byte[]> oldest = chunks.values().iterator();
        while (bytes > capacityBytes && chunks.size() > 1) {
            bytes -= oldest.next().length;
            oldest.remove();
        }
    }

    private static byte[] await(CompletableFuture<byte[]> f) throws IOException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted waiting for a chunk");
        } catch (ExecutionException e) {
            throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
        }
    }

    @Override
    public void close() {
        prefetcher.shutdownNow();
    }

    /** Lazy: holds the chunk under the read position, asks for the next only when reached. */
    private final class ChunkStream extends InputStream {
        private final Uuid segment;
        private final long size;
        private final long end;
        private final Source source;
        private long pos;
        private byte[] chunk;
        private long chunkStart;

        ChunkStream(Uuid segment, long size, long start, long end, Source source) {
            this.segment = segment;
            this.size = size;
            this.pos = start;
            this.end = end;
            this.source = source;
        }

        /** Makes chunk k current, fetching the chunks after it ahead (within the object, not the range:
         *  Kafka's next fetch continues where this one stops). */
        void enter(long k) throws IOException {
            CompletableFuture<byte[]> f = chunk(segment, size, k, source, false);
            long aheadEnd = Math.min((size + CHUNK_BYTES - 1) / CHUNK_BYTES, k + 1 + prefetchChunks);
            for (long a = k + 1; a < aheadEnd; a++) {
                chunk(segment, size, a, source, true);
            }
            chunk = await(f);
            chunkStart = k * CHUNK_BYTES; // the Source checks a chunk has all its bytes
        }

        @Override
        public int read(byte[] buf, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            if (pos >= end) {
                return -1;
            }
            if (chunk == null || pos >= chunkStart + chunk.length) {
                enter(pos / CHUNK_BYTES);
            }
            int n = (int) Math.min(len, Math.min(end, chunkStart + chunk.length) - pos);
            System.arraycopy(chunk, (int) (pos - chunkStart), buf, off, n);
            pos += n;
            return n;
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int available() {
            return chunk == null || pos >= end ? 0 : (int) Math.max(0, Math.min(end, chunkStart + chunk.length) - pos);
        }

        @Override
        public void close() {
            chunk = null; // nothing to abort: fetches in flight complete into the cache
        }
    }
}
