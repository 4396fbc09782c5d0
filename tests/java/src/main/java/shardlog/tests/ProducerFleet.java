package shardlog.tests;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A fleet of real KafkaProducers in one JVM, for scripts/bench.sh's many-producer, keyed and
 * fixed-rate workloads (Kafka's ProducerPerformance runs one producer and sends no keys).
 *
 *   producer-fleet --bootstrap H:P --topic T --producers N --size 1024 --rate-mb-s R
 *                  --duration-s D --warmup-s W [--keys K] [--compression none|lz4|zstd|snappy|gzip]
 *                  [--acks 1|all] [--linger-ms 5] [--batch-size 16384] [--interval-s 1]
 *                  [--idempotence false] [--buffer-memory BYTES]
 *
 * The topic must exist. Each producer has its own KafkaProducer (ByteArraySerializer,
 * max.in.flight 5) and its own sending thread.
 *
 * Rate. R MB/s in total (MB = 2^20 bytes of values), split equally over the producers.
 * R > 0: producer p intends to send its record k at start + phase(p) + k / rate_p, the
 * phases spread over one send interval so the fleet does not fire in lockstep; latency runs
 * from that intended time to the ack callback, so time lost blocked in send() (buffer.memory
 * full, metadata) or behind schedule counts (no coordinated omission). R = 0: every thread
 * sends as fast as send() accepts, and latency runs from the send() call to the ack (it
 * includes the wait in send() and in the accumulator).
 *
 * Keys. With --keys K, record i of the whole fleet (one shared counter) has key "key-" + (i mod K)
 * and the default partitioner picks the partition (murmur2 of the key, as a keyed producer
 * does). Without: a null key, the built-in sticky partitioner.
 *
 * Values. A pool of distinct values, reused round-robin (no per-record allocation). Each value
 * alternates 32-byte blocks of random bytes with 32-byte blocks of a fixed line of text, so
 * half of it is incompressible and half compresses to almost nothing: lz4 and zstd do real
 * work, like typical JSON/log payloads (1 KiB values in full 16 KiB batches, as stored by the
 * broker: lz4 1.7x, zstd 1.9x). The pool (16..1024 values, at most 32 MiB) is larger than a
 * batch's record count at the default batch.size, so a batch rarely holds the same value
 * twice (which would compress better than intended).
 *
 * Window. Records whose intended (R = 0: actual) send time falls in [W, W + D) count: their
 * acks give records, bytes (value bytes) and the latency percentiles. Sending stops at W + D
 * (a producer that is behind schedule does not catch up after the window: it shows as
 * records_s below the rate asked); then every producer is closed with a 30 s timeout (which
 * waits for its outstanding acks). elapsed_s is D. At R = 0 send() admits records only as fast
 * as acks free buffer space, so records sent in the window / D is the acked rate. errors
 * counts failed sends over the whole run, warmup and close included.
 *
 * Timeline. One entry per --interval-s of the window, filed by ack time: every record
 * acknowledged in that interval, whenever it was sent, and its latency percentiles (zeros when
 * none). (At R = 0 the first acks of the window are for records queued in the warmup: a
 * send-time filter would show a false dip there. Acks after the window are left out.) The
 * callbacks record into an HdrHistogram Recorder (wait-free for many writers); the main thread
 * swaps it at each interval boundary, so an ack lands in the interval in which the swap found
 * it (off by at most the main thread's wake-up delay, ~1 ms). A closed interval keeps only its
 * figures: memory stays flat however long the run.
 *
 * buffer.memory: Kafka's 32 MiB default times 200 producers would not fit in the callers' 1 GiB
 * heap, so the default is min(32 MiB, max heap / 2 / N, less lz4's buffers; see bufferMemory()),
 * overridable with --buffer-memory. A sending thread that dies (OutOfMemoryError) voids the run:
 * no JSON, exit status 1. The first failure of each kind is printed on stderr. On JDK 17..21,
 * many keyed lz4 producers at high rates hit JDK-8192647 (lz4-java's JNI critical sections make
 * G1 give up on allocations: a spurious OutOfMemoryError after "Retried waiting for GCLocker too
 * often", a JVM warning printed on stdout): pass -XX:+UnlockDiagnosticVMOptions
 * -XX:GCLockerRetryAllocationCount=100, or run on JDK 22+.
 *
 * Output: one JSON line, the same "latency" and "timeline" keys as `shardlog bench --json`:
 *   {"tool":"producer-fleet","producers":N,"keys":K,"compression":C,"acks":A,"rate_mb_s":R,
 *    "records":n,"bytes":b,"elapsed_s":s,"records_s":x,"mb_s":y,"errors":e,
 *    "latency":{"count":..,"p50_ms":..,"p90_ms":..,"p99_ms":..,"p999_ms":..,"p9999_ms":..,"max_ms":..},
 *    "timeline_interval_s":I,"timeline":[{"t_s":0,"records":..,"mb_s":..,"p50_ms":..,"p99_ms":..,
 *    "p999_ms":..,"max_ms":..},...]}
 */
final class ProducerFleet {
  private ProducerFleet() {}

  private static final double MB = 1 << 20;
  /** Latencies in microseconds up to one hour (larger ones saturate), 3 significant digits. */
  private static final long MAX_US = 3_600_000_000L;
  private static final int SIGFIG = 3;
  /** Heap an open lz4 batch holds beside its buffer: a 64 KiB block and its compressed copy. */
  private static final long LZ4_OPEN_BATCH = 2 * 65536 + 300;
  private static final long MIN_BUFFER_MEMORY = 2L << 20;

  static int run(Map<String, String> o, PrintWriter out) throws Exception {
    String bootstrap = ClientTool.need(o, "bootstrap");
    String topic = ClientTool.need(o, "topic");
    int producers = Integer.parseInt(ClientTool.need(o, "producers"));
    int size = Integer.parseInt(o.getOrDefault("size", "1024"));
    double rateMbS = Double.parseDouble(ClientTool.need(o, "rate-mb-s"));
    double durationS = Double.parseDouble(ClientTool.need(o, "duration-s"));
    double warmupS = Double.parseDouble(o.getOrDefault("warmup-s", "0"));
    long keys = Long.parseLong(o.getOrDefault("keys", "0"));
    String compression = o.getOrDefault("compression", "none");
    String acks = o.getOrDefault("acks", "1");
    double intervalS = Double.parseDouble(o.getOrDefault("interval-s", "1"));
    boolean idempotence = Boolean.parseBoolean(o.getOrDefault("idempotence", "false"));
    if (producers < 1 || size < 1 || durationS <= 0 || warmupS < 0 || intervalS <= 0 || rateMbS < 0 || keys < 0) {
      throw new IllegalArgumentException("need --producers >= 1, --size >= 1, --duration-s > 0, --interval-s > 0, --warmup-s/--rate-mb-s/--keys >= 0");
    }
    if (idempotence && !acks.equals("all") && !acks.equals("-1")) {
      throw new IllegalArgumentException("--idempotence true needs --acks all");
    }
    int partitions = partitions(bootstrap, topic);
    long bufferMemory = bufferMemory(o, producers, partitions, keys > 0, compression);

    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.ACKS_CONFIG, acks);
    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotence));
    pp.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, o.getOrDefault("linger-ms", "5"));
    pp.put(ProducerConfig.BATCH_SIZE_CONFIG, o.getOrDefault("batch-size", "16384"));
    pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
    pp.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(bufferMemory));
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

    byte[][] values = valuePool(size);
    // Nanoseconds between two intended sends of one producer (0: as fast as possible).
    double sendIntervalNs = rateMbS > 0 ? 1e9 * size * producers / (rateMbS * MB) : 0;

    Fleet f = new Fleet();
    f.topic = topic;
    f.keys = keys;
    f.values = values;
    f.sendIntervalNs = sendIntervalNs;

    // Create the producers and fetch the topic's metadata before the clock starts: 200
    // producers take seconds to start, and a missing topic should fail here, not in the window.
    CountDownLatch ready = new CountDownLatch(producers);
    CountDownLatch go = new CountDownLatch(1);
    CountDownLatch windowClosed = new CountDownLatch(1);
    AtomicReference<Throwable> startError = new AtomicReference<>();
    AtomicReference<Throwable> fatal = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    for (int p = 0; p < producers; p++) {
      final int id = p;
      Properties props = (Properties) pp.clone();
      props.put(ProducerConfig.CLIENT_ID_CONFIG, "fleet-" + id);
      Thread t = new Thread(() -> {
        KafkaProducer<byte[], byte[]> producer = null;
        try {
          producer = new KafkaProducer<>(props);
          if (producer.partitionsFor(topic).isEmpty()) throw new IllegalStateException("topic " + topic + " has no partitions");
        } catch (Throwable e) {
          startError.compareAndSet(null, e);
        }
        ready.countDown();
        try {
          go.await();
          if (producer != null && startError.get() == null) {
            f.send(producer, id, producers);
            // Closing 200 producers is a burst of CPU: not while the last interval is measured.
            windowClosed.await();
          }
        } catch (Throwable e) {
          fatal.compareAndSet(null, e); // e.g. OutOfMemoryError: the run is void
        } finally {
          // close() waits for the outstanding acks (up to 30 s; after that they fail, counted).
          if (producer != null) producer.close(Duration.ofSeconds(30));
        }
      }, "fleet-send-" + id);
      t.start();
      threads.add(t);
    }
    ready.await();
    if (startError.get() != null) {
      go.countDown();
      for (Thread t : threads) t.join();
      System.err.println("producer-fleet: cannot start: " + startError.get());
      return 1;
    }

    long start = System.nanoTime() + 100_000_000L; // the threads are waiting on `go`: a short lead
    f.start = start;
    f.windowStart = start + (long) (warmupS * 1e9);
    f.windowEnd = f.windowStart + (long) (durationS * 1e9);
    go.countDown();

    // The timeline: swap the interval recorder at each boundary of the window.
    long intervalNs = (long) (intervalS * 1e9);
    long windowNs = f.windowEnd - f.windowStart;
    int intervals = (int) ((windowNs + intervalNs - 1) / intervalNs);
    StringBuilder timeline = new StringBuilder("[");
    sleepUntil(f.windowStart);
    Histogram h = f.timeline.getIntervalHistogram(); // the warmup's acks: not in the timeline
    for (int k = 0; k < intervals; k++) {
      long from = f.windowStart + k * intervalNs;
      long to = Math.min(from + intervalNs, f.windowEnd);
      sleepUntil(to);
      h = f.timeline.getIntervalHistogram(h);
      double secs = (to - from) / 1e9;
      if (k > 0) timeline.append(',');
      timeline.append("{\"t_s\":").append(num(k * intervalS))
          .append(",\"records\":").append(h.getTotalCount())
          .append(",\"mb_s\":").append(num(h.getTotalCount() * (double) size / MB / secs))
          .append(",\"p50_ms\":").append(ms(h, 50.0))
          .append(",\"p99_ms\":").append(ms(h, 99.0))
          .append(",\"p999_ms\":").append(ms(h, 99.9))
          .append(",\"max_ms\":").append(maxMs(h))
          .append('}');
    }
    timeline.append(']');
    windowClosed.countDown();

    for (Thread t : threads) t.join(); // each stops sending at the window's end and closes its producer

    if (fatal.get() != null) {
      System.err.println("producer-fleet: a sending thread died: " + fatal.get());
      return 1;
    }
    Histogram all = f.overall.getIntervalHistogram();
    long records = all.getTotalCount();
    long bytes = records * size;
    double elapsed = windowNs / 1e9;
    String latency = "{\"count\":" + records
        + ",\"p50_ms\":" + ms(all, 50.0) + ",\"p90_ms\":" + ms(all, 90.0) + ",\"p99_ms\":" + ms(all, 99.0)
        + ",\"p999_ms\":" + ms(all, 99.9) + ",\"p9999_ms\":" + ms(all, 99.99) + ",\"max_ms\":" + maxMs(all) + "}";
    out.println("{\"tool\":\"producer-fleet\",\"producers\":" + producers + ",\"keys\":" + keys
        + ",\"compression\":" + ClientTool.jstr(compression) + ",\"acks\":" + ClientTool.jstr(acks)
        + ",\"rate_mb_s\":" + num(rateMbS) + ",\"records\":" + records + ",\"bytes\":" + bytes
        + ",\"elapsed_s\":" + num(elapsed) + ",\"records_s\":" + num(records / elapsed)
        + ",\"mb_s\":" + num(bytes / MB / elapsed) + ",\"errors\":" + f.errors.sum()
        + ",\"latency\":" + latency + ",\"timeline_interval_s\":" + num(intervalS) + ",\"timeline\":" + timeline + "}");
    out.flush();
    return 0;
  }

  /** What the sending threads and their callbacks share. */
  private static final class Fleet {
    String topic;
    long keys;
    byte[][] values;
    double sendIntervalNs;
    long start;
    long windowStart;
    long windowEnd;
    /** Records sent so far by the whole fleet: record i's key is i mod keys. */
    final AtomicLong sent = new AtomicLong();
    final LongAdder errors = new LongAdder();
    /** Error kinds already reported on stderr (the first of each kind is). */
    final Set<String> reported = ConcurrentHashMap.newKeySet();
    /** Latencies (us): the counted records', and all acks of the current timeline interval. */
    final Recorder overall = new Recorder(1, MAX_US, SIGFIG);
    final Recorder timeline = new Recorder(1, MAX_US, SIGFIG);

    void error(Exception e) {
      errors.increment();
      if (reported.add(e.getClass().getName())) System.err.println("producer-fleet: send failed: " + e);
    }

    /** Producer `id`'s sending loop: until the window closes. */
    void send(KafkaProducer<byte[], byte[]> producer, int id, int producers) {
      boolean fixedRate = sendIntervalNs > 0;
      // Spread the producers' schedules over one send interval.
      long phase = (long) (sendIntervalNs * id / producers);
      int v = (id * 7) % values.length;
      for (long k = 0; ; k++) {
        long t;
        if (fixedRate) {
          t = start + phase + (long) (k * sendIntervalNs);
          if (t >= windowEnd) return;
          sleepUntil(t);
          if (System.nanoTime() >= windowEnd) return; // behind schedule: no catching up after the window
        } else {
          t = System.nanoTime();
          if (t >= windowEnd) return;
        }
        byte[] key = null;
        if (keys > 0) {
          key = ("key-" + (sent.getAndIncrement() % keys)).getBytes(StandardCharsets.UTF_8);
        }
        byte[] value = values[v];
        v = v + 1 == values.length ? 0 : v + 1;
        final long from = t;
        final boolean counted = t >= windowStart && t < windowEnd;
        try {
          producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
            if (e != null) {
              error(e);
            } else {
              long us = Math.min(MAX_US, Math.max(0, (System.nanoTime() - from) / 1000));
              timeline.recordValue(us);
              if (counted) overall.recordValue(us);
            }
          });
        } catch (RuntimeException e) {
          error(e); // send() itself failed (closed, interrupted, serialization)
        }
      }
    }
  }

  /**
   * The topic's partition count (and a clear failure if it does not exist). A topic created a
   * moment ago may not be in the broker's metadata yet (Kafka applies CreateTopics through its
   * controller: UNKNOWN_TOPIC_OR_PARTITION for a while), so that one error is retried for 30 s.
   */
  static int partitions(String bootstrap, String topic) throws Exception {
    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    try (Admin admin = Admin.create(ap)) {
      while (true) {
        try {
          return admin.describeTopics(List.of(topic)).allTopicNames().get(60, TimeUnit.SECONDS).get(topic).partitions().size();
        } catch (ExecutionException e) {
          if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
            throw new IllegalStateException("topic " + topic + ": " + e.getCause(), e.getCause());
          }
          Thread.sleep(200);
        }
      }
    }
  }

  /**
   * buffer.memory per producer: --buffer-memory, else Kafka's 32 MiB default within half the
   * heap shared by the fleet. lz4 also holds two 64 KiB arrays per open batch outside
   * buffer.memory (Lz4BlockOutputStream), and a keyed producer keeps a batch open on every
   * partition: 50 keyed lz4 producers on 100 partitions need 625 MiB for those alone, so that
   * is taken off the share first (2 MiB at least; a warning when it all may not fit). zstd and
   * gzip keep theirs in native memory, not the heap.
   */
  static long bufferMemory(Map<String, String> o, int producers, int partitions, boolean keyed, String compression) {
    long heap = Runtime.getRuntime().maxMemory();
    long lz4 = compression.equals("lz4") ? (keyed ? partitions : 2) * LZ4_OPEN_BATCH : 0;
    long b = o.containsKey("buffer-memory") ? Long.parseLong(o.get("buffer-memory"))
        : Math.max(MIN_BUFFER_MEMORY, Math.min(32L << 20, heap / 2 / producers - lz4));
    long live = producers * (b + lz4);
    if (live > heap * 8 / 10) {
      System.err.println("producer-fleet: warning: " + producers + " producers may hold " + (live >> 20) + " MiB (buffer.memory "
          + (b >> 20) + " MiB each" + (lz4 > 0 ? ", lz4 buffers " + (lz4 >> 20) + " MiB each" : "") + ") of a "
          + (heap >> 20) + " MiB heap: at high rates raise -Xmx or lower --buffer-memory");
    }
    return b;
  }

  /** Distinct values of `size` bytes: 32-byte blocks, random and text in turn (about 2x compressible). */
  static byte[][] valuePool(int size) {
    byte[] text = ("2024-05-01T12:00:00.000Z INFO shardlog.bench.fleet order-service: order created "
        + "{\"customer\":\"c-1042\",\"items\":3,\"total\":\"59.90\",\"currency\":\"EUR\",\"status\":\"NEW\"} ")
        .getBytes(StandardCharsets.US_ASCII);
    int count = (int) Math.max(16, Math.min(1024, (32L << 20) / size));
    Random rnd = new Random(42);
    byte[][] pool = new byte[count][];
    for (int i = 0; i < count; i++) {
      byte[] v = new byte[size];
      int ti = 0;
      for (int off = 0, block = 0; off < size; off += 32, block++) {
        int n = Math.min(32, size - off);
        if (block % 2 == 0) {
          byte[] r = new byte[n];
          rnd.nextBytes(r);
          System.arraycopy(r, 0, v, off, n);
        } else {
          for (int j = 0; j < n; j++) {
            v[off + j] = text[ti];
            ti = ti + 1 == text.length ? 0 : ti + 1;
          }
        }
      }
      pool[i] = v;
    }
    return pool;
  }

  static void sleepUntil(long deadline) {
    long now;
    while ((now = System.nanoTime()) < deadline) LockSupport.parkNanos(deadline - now);
  }

  static String ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? "0" : num(h.getValueAtPercentile(percentile) / 1000.0);
  }

  static String maxMs(Histogram h) {
    return h.getTotalCount() == 0 ? "0" : num(h.getMaxValue() / 1000.0);
  }

  /** A JSON number with at most 3 decimals. */
  static String num(double x) {
    if (!Double.isFinite(x)) return "0";
    if (x == Math.rint(x) && Math.abs(x) < 1e15) return Long.toString((long) x);
    return java.math.BigDecimal.valueOf(Math.round(x * 1000) / 1000.0).stripTrailingZeros().toPlainString();
  }
}
