package shardlog.tests;

import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The share-group benchmark (issue 27's performance point; benches/share_bench.py runs it
 * against shardlog and Kafka): one JVM, so a record's end-to-end latency is one clock's
 * nanoTime at delivery minus the nanoTime the producer wrote into its first 8 bytes.
 *
 *   share-bench --bootstrap B --topic T --group G --consumers 4 --records N --size 1024
 *               --rate R
 *       R > 0: fixed rate. The consumers join first; the producer sends N records at R a
 *       second (acks=1, linger 0) while the consumers read them.
 *       R = 0: maximum. The producer fills the topic with N records (acks=1, 64 KiB batches,
 *       linger 5 ms), then the consumers drain it from the start.
 *   Each consumer is a KafkaShareConsumer 4.4 with explicit acknowledgement (ACCEPT, sent
 *   with its next poll). The group's share.auto.offset.reset is set to earliest first.
 *   Prints one line: {"delivered":N,"seconds":S,"records_s":X,"p50_ms":..,"p99_ms":..,
 *   "p999_ms":..,"max_ms":..,"redelivered":N}; the seconds run from the first delivery to
 *   the last (fixed rate: from the first send).
 */
final class ShareBench {
  private ShareBench() {}

  static int run(Map<String, String> o, PrintWriter out) throws Exception {
    String bootstrap = ClientTool.need(o, "bootstrap");
    String topic = ClientTool.need(o, "topic");
    String group = ClientTool.need(o, "group");
    int consumers = Integer.parseInt(o.getOrDefault("consumers", "4"));
    int records = Integer.parseInt(ClientTool.need(o, "records"));
    int size = Integer.parseInt(o.getOrDefault("size", "1024"));
    double rate = Double.parseDouble(o.getOrDefault("rate", "0"));

    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(ap)) {
      ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
      admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
          .all().get(60, TimeUnit.SECONDS);
    }

    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.ACKS_CONFIG, "1");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, rate > 0 ? "0" : "5");
    pp.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(64 * 1024));
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

    // Latencies in microseconds, one slot per delivery (a redelivery adds a slot).
    final long[] latencies = new long[records * 2];
    final AtomicLong delivered = new AtomicLong();
    final AtomicLong redelivered = new AtomicLong();
    final AtomicLong firstDelivery = new AtomicLong(0);
    final AtomicLong lastDelivery = new AtomicLong(0);
    final AtomicBoolean stop = new AtomicBoolean();

    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
      if (rate <= 0) send(producer, topic, records, size, 0);
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < consumers; i++) {
        Thread t = new Thread(() -> consume(bootstrap, group, topic, records, latencies, delivered, redelivered, firstDelivery, lastDelivery, stop));
        t.start();
        threads.add(t);
      }
      long sendStart = 0;
      if (rate > 0) {
        // The consumers join and are assigned first (the records then reach waiting fetches).
        Thread.sleep(Long.parseLong(o.getOrDefault("join-ms", "8000")));
        sendStart = System.nanoTime();
        send(producer, topic, records, size, rate);
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(o.getOrDefault("timeout-s", "300")));
      while (delivered.get() - redelivered.get() < records && System.nanoTime() < deadline) Thread.sleep(20);
      stop.set(true);
      for (Thread t : threads) t.join(30_000);
      long n = Math.min(delivered.get(), latencies.length);
      long[] l = Arrays.copyOf(latencies, (int) n);
      Arrays.sort(l);
      long from = rate > 0 ? sendStart : firstDelivery.get();
      double seconds = (lastDelivery.get() - from) / 1e9;
      out.println("{\"delivered\":" + delivered.get() + ",\"redelivered\":" + redelivered.get() + ",\"seconds\":" + seconds
          + ",\"records_s\":" + (seconds > 0 ? (delivered.get() - redelivered.get()) / seconds : 0)
          + ",\"p50_ms\":" + pct(l, 0.50) + ",\"p99_ms\":" + pct(l, 0.99) + ",\"p999_ms\":" + pct(l, 0.999)
          + ",\"max_ms\":" + (n > 0 ? l[(int) n - 1] / 1000.0 : 0) + "}");
      out.flush();
      return delivered.get() - redelivered.get() >= records ? 0 : 1;
    }
  }

  static double pct(long[] sorted, double q) {
    if (sorted.length == 0) return 0;
    int i = (int) Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
    return sorted[Math.max(0, i)] / 1000.0;
  }

  /** N records of `size` bytes, the send time in the first 8; `rate` a second (0: at once). */
  static void send(KafkaProducer<byte[], byte[]> producer, String topic, int records, int size, double rate) {
    long start = System.nanoTime();
    for (int i = 0; i < records; i++) {
      if (rate > 0) {
        long due = start + (long) (i * 1e9 / rate);
        long now;
        while ((now = System.nanoTime()) < due) {
          if (due - now > 200_000) {
            try { Thread.sleep(0, 100_000); } catch (InterruptedException e) { return; }
          }
        }
      }
      byte[] v = new byte[size];
      ByteBuffer.wrap(v).putLong(System.nanoTime());
      producer.send(new ProducerRecord<>(topic, 0, null, v));
    }
    producer.flush();
  }

  static void consume(String bootstrap, String group, String topic, int records, long[] latencies, AtomicLong delivered, AtomicLong redelivered,
                      AtomicLong firstDelivery, AtomicLong lastDelivery, AtomicBoolean stop) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
      c.subscribe(List.of(topic));
      while (!stop.get()) {
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
          long now = System.nanoTime();
          long slot = delivered.getAndIncrement();
          if (r.deliveryCount().orElse((short) 1) > 1) redelivered.incrementAndGet();
          if (slot < latencies.length) latencies[(int) slot] = (now - ByteBuffer.wrap(r.value()).getLong()) / 1000;
          firstDelivery.compareAndSet(0, now);
          lastDelivery.accumulateAndGet(now, Math::max);
          c.acknowledge(r, AcknowledgeType.ACCEPT);
        }
      }
      c.commitSync(Duration.ofSeconds(10));
    }
  }
}
