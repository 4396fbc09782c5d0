package shardlog.tests;

import java.io.BufferedReader;
import java.io.FileReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactional producers and read_committed helpers (tests/integration/test_transactions.py).
 *
 *   txn-produce --bootstrap B --topic T --txn-id ID --input FILE [--prop k=v,...]
 *       One transactional KafkaProducer runs the transactions FILE describes, one line each:
 *       "begin", a record line (ClientTool's record format: partition offset ts key value
 *       headers, tab-separated), "commit" or "abort". Before an abort the producer is flushed,
 *       so the aborted records are in the log (acknowledged) when the abort marker is written.
 *       -> {"txn":K,"i":N,"p":P,"o":O} per acknowledged record (K counts "begin" lines from 0,
 *          N counts record lines from 0), {"txn":K,"end":"commit"|"abort"} once
 *          commitTransaction/abortTransaction returned, then {"done":true,"acked":A,"failed":F};
 *          any exception: {"error":CLASS,"message":..,"step":..} and exit code 1.
 *   txn-fence --bootstrap B --topic T --txn-id ID [--partition P] [--prop k=v,...]
 *       Zombie fencing with two producers sharing ID: A initTransactions, begins, sends a-0..a-2
 *       to P and flushes (acknowledged, transaction open); B initTransactions (fences A and
 *       aborts A's transaction), sends b-0..b-2, commits; then A sends a-late and commits.
 *       -> {"step":S,...} per step: "a-sent" (offsets), "b-init", "b-committed" (offsets), and
 *          "a-after-fence" with {"error":CLASS} (or {"ok":true} if A was not fenced), then
 *          "a-abort": A's abortTransaction() after that, {"error":CLASS} or {"ok":true}.
 *   committed --bootstrap B --group G --topic T --partitions 0,1 [--timeout-ms MS]
 *           [--isolation read_committed] [--prop ..]
 *       KafkaConsumer (group G, never subscribing) committed(partitions): with
 *       isolation.level=read_committed the consumer sends OffsetFetch with require_stable and
 *       retries while the broker answers UNSTABLE_OFFSET_COMMIT. The consumer coordinator's
 *       log goes to stderr at INFO (it names the unstable partitions on each retry).
 *       -> {"p":P,"committed":O|null} per partition, or {"error":CLASS,"message":..}
 *   end-offsets --bootstrap B --topic T --partitions 0,1 [--isolation read_committed]
 *       KafkaConsumer endOffsets (read_committed: the last stable offset) -> {"p":P,"o":O}
 */
final class Txn {
  private Txn() {}

  private static final Base64.Decoder B64D = Base64.getDecoder();

  private static void extraProps(Map<String, String> o, Properties p) {
    String s = o.get("prop");
    if (s == null || s.isEmpty()) return;
    for (String kv : s.split(",")) {
      int eq = kv.indexOf('=');
      p.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
  }

  private static String err(Throwable e) {
    return "\"error\":" + ClientTool.jstr(e.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(String.valueOf(e.getMessage()));
  }

  private static KafkaProducer<byte[], byte[]> producer(Map<String, String> o, String clientId) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ClientTool.need(o, "txn-id"));
    p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "120000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    extraProps(o, p);
    return new KafkaProducer<>(p);
  }

  private static ProducerRecord<byte[], byte[]> parseRecord(String topic, String line) {
    String[] f = line.split("\t", -1);
    int part = Integer.parseInt(f[0]);
    long ts = Long.parseLong(f[2]);
    byte[] key = f[3].equals("-") ? null : B64D.decode(f[3]);
    byte[] value = B64D.decode(f[4]);
    List<Header> headers = new ArrayList<>();
    if (f.length > 5 && !f[5].isEmpty()) {
      for (String h : f[5].split(";")) {
        int eq = h.indexOf('=');
        headers.add(new RecordHeader(h.substring(0, eq), B64D.decode(h.substring(eq + 1))));
      }
    }
    return new ProducerRecord<>(topic, part < 0 ? null : part, ts < 0 ? null : ts, key, value, headers);
  }

  static int produce(Map<String, String> o, PrintWriter out) throws Exception {
    String topic = ClientTool.need(o, "topic");
    AtomicLong acked = new AtomicLong();
    AtomicLong failed = new AtomicLong();
    String step = "init";
    try (KafkaProducer<byte[], byte[]> producer = producer(o, "txn-produce");
         BufferedReader in = new BufferedReader(new FileReader(ClientTool.need(o, "input"), StandardCharsets.UTF_8), 1 << 16)) {
      try {
        producer.initTransactions();
        String line;
        long txn = -1;
        long i = 0;
        while ((line = in.readLine()) != null) {
          if (line.isEmpty()) continue;
          if (line.equals("begin")) {
            txn++;
            step = "begin " + txn;
            producer.beginTransaction();
          } else if (line.equals("commit")) {
            step = "commit " + txn;
            producer.commitTransaction();
            synchronized (out) { out.println("{\"txn\":" + txn + ",\"end\":\"commit\"}"); }
          } else if (line.equals("abort")) {
            step = "abort " + txn;
            producer.flush();
            producer.abortTransaction();
            synchronized (out) { out.println("{\"txn\":" + txn + ",\"end\":\"abort\"}"); }
          } else {
            step = "send " + i;
            final long idx = i++;
            final long t = txn;
            producer.send(parseRecord(topic, line), (RecordMetadata md, Exception ex) -> {
              synchronized (out) {
                if (ex != null) {
                  failed.incrementAndGet();
                  out.println("{\"txn\":" + t + ",\"i\":" + idx + "," + err(ex) + "}");
                } else {
                  acked.incrementAndGet();
                  out.println("{\"txn\":" + t + ",\"i\":" + idx + ",\"p\":" + md.partition() + ",\"o\":" + md.offset() + "}");
                }
              }
            });
          }
        }
      } catch (RuntimeException e) {
        synchronized (out) { out.println("{" + err(e) + ",\"step\":" + ClientTool.jstr(step) + "}"); }
        return 1;
      }
    }
    synchronized (out) {
      out.println("{\"done\":true,\"acked\":" + acked.get() + ",\"failed\":" + failed.get() + "}");
    }
    return failed.get() == 0 ? 0 : 1;
  }

  private static String offsets(List<RecordMetadata> mds) {
    StringBuilder b = new StringBuilder("[");
    for (RecordMetadata md : mds) {
      if (b.length() > 1) b.append(',');
      b.append(md.offset());
    }
    return b.append(']').toString();
  }

  static int fence(Map<String, String> o, PrintWriter out) throws Exception {
    String topic = ClientTool.need(o, "topic");
    int part = Integer.parseInt(o.getOrDefault("partition", "0"));
    KafkaProducer<byte[], byte[]> a = producer(o, "txn-fence-a");
    KafkaProducer<byte[], byte[]> b = producer(o, "txn-fence-b");
    try {
      a.initTransactions();
      a.beginTransaction();
      List<java.util.concurrent.Future<RecordMetadata>> fa = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        fa.add(a.send(new ProducerRecord<>(topic, part, null, ("a-" + i).getBytes(StandardCharsets.UTF_8))));
      }
      a.flush();
      List<RecordMetadata> ma = new ArrayList<>();
      for (var f : fa) ma.add(f.get());
      out.println("{\"step\":\"a-sent\",\"offsets\":" + offsets(ma) + "}");
      out.flush();

      b.initTransactions();
      out.println("{\"step\":\"b-init\"}");
      b.beginTransaction();
      List<java.util.concurrent.Future<RecordMetadata>> fb = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        fb.add(b.send(new ProducerRecord<>(topic, part, null, ("b-" + i).getBytes(StandardCharsets.UTF_8))));
      }
      b.commitTransaction();
      List<RecordMetadata> mb = new ArrayList<>();
      for (var f : fb) mb.add(f.get());
      out.println("{\"step\":\"b-committed\",\"offsets\":" + offsets(mb) + "}");
      out.flush();

      String result;
      try {
        // The send may fail at once or through its future; commitTransaction reports the
        // producer's fatal state either way.
        a.send(new ProducerRecord<>(topic, part, null, "a-late".getBytes(StandardCharsets.UTF_8)));
        a.commitTransaction();
        result = "\"ok\":true";
      } catch (RuntimeException e) {
        result = err(e);
      }
      out.println("{\"step\":\"a-after-fence\"," + result + "}");
      // After an abortable error the application aborts; a fenced producer learns it here.
      try {
        a.abortTransaction();
        result = "\"ok\":true";
      } catch (RuntimeException e) {
        result = err(e);
      }
      out.println("{\"step\":\"a-abort\"," + result + "}");
    } catch (Exception e) {
      out.println("{\"step\":\"unexpected\"," + err(e) + "}");
      return 1;
    } finally {
      a.close(Duration.ofSeconds(5));
      b.close(Duration.ofSeconds(5));
    }
    return 0;
  }

  private static KafkaConsumer<byte[], byte[]> consumer(Map<String, String> o, String group) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    if (o.containsKey("isolation")) p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.get("isolation"));
    extraProps(o, p);
    return new KafkaConsumer<>(p);
  }

  private static List<TopicPartition> tps(Map<String, String> o) {
    String topic = ClientTool.need(o, "topic");
    List<TopicPartition> tps = new ArrayList<>();
    for (String s : ClientTool.need(o, "partitions").split(",")) tps.add(new TopicPartition(topic, Integer.parseInt(s)));
    return tps;
  }

  static int committed(Map<String, String> o, PrintWriter out) {
    long timeoutMs = Long.parseLong(o.getOrDefault("timeout-ms", "120000"));
    List<TopicPartition> tps = tps(o);
    // Before the first logger exists (slf4j-simple reads its settings once): the coordinator
    // logs each UNSTABLE_OFFSET_COMMIT answer at INFO.
    System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals.ConsumerCoordinator", "info");
    try (KafkaConsumer<byte[], byte[]> c = consumer(o, ClientTool.need(o, "group"))) {
      try {
        Map<TopicPartition, OffsetAndMetadata> m = c.committed(new java.util.HashSet<>(tps), Duration.ofMillis(timeoutMs));
        for (TopicPartition tp : tps) {
          OffsetAndMetadata om = m.get(tp);
          out.println("{\"p\":" + tp.partition() + ",\"committed\":" + (om == null ? "null" : String.valueOf(om.offset())) + "}");
        }
      } catch (RuntimeException e) {
        out.println("{" + err(e) + "}");
        return 1;
      }
    }
    return 0;
  }

  static int endOffsets(Map<String, String> o, PrintWriter out) {
    List<TopicPartition> tps = tps(o);
    try (KafkaConsumer<byte[], byte[]> c = consumer(o, null)) {
      Map<TopicPartition, Long> m = new HashMap<>(c.endOffsets(tps, Duration.ofSeconds(60)));
      for (TopicPartition tp : tps) {
        out.println("{\"p\":" + tp.partition() + ",\"o\":" + m.get(tp) + "}");
      }
    }
    return 0;
  }
}
