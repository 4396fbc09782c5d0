package shardlog.tests;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A KafkaShareConsumer 4.4 (KIP-932) that reports every delivery and every acknowledgement
 * the broker answered (tests/integration/test_share_consumer_java.py).
 *
 *   share-worker --bootstrap B --group G --topic T --mode explicit|implicit
 *       polls until killed (SIGTERM: closes). Per record delivered:
 *         {"d":OFFSET,"p":P,"v":VALUE,"n":DELIVERY_COUNT}
 *       explicit: each record is acknowledged by its value "r<i>": i%10==7 REJECT, i%10==5
 *       RELEASE (every time: it ends archived at the delivery-count limit), i%10==3 RELEASE
 *       on its first delivery then ACCEPT, else ACCEPT. implicit: every record is accepted
 *       by the next commit. After each poll, commitSync; per partition the broker answered:
 *         {"acked":[[OFFSET,"A"|"R"|"L",N],..],"p":P}     (the broker took them)
 *         {"ackfail":[OFFSET,..],"p":P,"error":CLASS}    (refused or unknown outcome)
 */
final class ShareWorker {
  private ShareWorker() {}

  static AcknowledgeType decide(String value, int deliveries) {
    int i;
    try {
      i = Integer.parseInt(value.substring(1));
    } catch (RuntimeException e) {
      return AcknowledgeType.ACCEPT;
    }
    switch (i % 10) {
      case 7: return AcknowledgeType.REJECT;
      case 5: return AcknowledgeType.RELEASE;
      case 3: return deliveries <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
      default: return AcknowledgeType.ACCEPT;
    }
  }

  static String letter(AcknowledgeType t) {
    switch (t) {
      case ACCEPT: return "A";
      case REJECT: return "R";
      case RELEASE: return "L";
      default: return t.name();
    }
  }

  static int run(Map<String, String> o, PrintWriter out) {
    boolean explicit = "explicit".equals(ClientTool.need(o, "mode"));
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, ClientTool.need(o, "group"));
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    final KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p);
    final Thread main = Thread.currentThread();
    final AtomicBoolean stopping = new AtomicBoolean();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stopping.set(true);
      c.wakeup();
      try { main.join(20000); } catch (InterruptedException e) { /* exiting */ }
    }));
    try {
      c.subscribe(List.of(ClientTool.need(o, "topic")));
      while (!stopping.get()) {
        // By partition: [offset, letter, delivery count] of this poll's acknowledgements.
        Map<Integer, List<String>> pending = new HashMap<>();
        Map<Integer, List<Long>> offsets = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
          String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
          int n = r.deliveryCount().map(Short::intValue).orElse(-1);
          synchronized (out) {
            out.println("{\"d\":" + r.offset() + ",\"p\":" + r.partition() + ",\"v\":" + ClientTool.jstr(value) + ",\"n\":" + n + "}");
          }
          AcknowledgeType t = explicit ? decide(value, n) : AcknowledgeType.ACCEPT;
          if (explicit) c.acknowledge(r, t);
          pending.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add("[" + r.offset() + ",\"" + letter(t) + "\"," + n + "]");
          offsets.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
        }
        synchronized (out) { out.flush(); }
        if (pending.isEmpty()) continue;
        Map<TopicIdPartition, Optional<KafkaException>> answered;
        try {
          answered = c.commitSync(Duration.ofSeconds(30));
        } catch (KafkaException e) {
          answered = Map.of();
        }
        Map<Integer, String> errors = new HashMap<>();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : answered.entrySet()) {
          int partition = e.getKey().partition();
          errors.put(partition, e.getValue().map(x -> x.getClass().getSimpleName()).orElse(null));
        }
        synchronized (out) {
          for (Map.Entry<Integer, List<String>> e : pending.entrySet()) {
            int partition = e.getKey();
            if (errors.containsKey(partition) && errors.get(partition) == null) {
              out.println("{\"acked\":[" + String.join(",", e.getValue()) + "],\"p\":" + partition + "}");
            } else {
              String error = errors.containsKey(partition) ? errors.get(partition) : "no answer";
              out.println("{\"ackfail\":" + offsets.get(partition) + ",\"p\":" + partition + ",\"error\":" + ClientTool.jstr(error) + "}");
            }
          }
          out.flush();
        }
      }
    } catch (WakeupException e) {
      // SIGTERM
    } catch (KafkaException | IllegalStateException e) {
      synchronized (out) { out.println("{\"error\":" + ClientTool.jstr(e.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(String.valueOf(e.getMessage())) + "}"); out.flush(); }
      c.close(Duration.ofSeconds(5));
      return 1;
    }
    c.close(Duration.ofSeconds(10));
    return 0;
  }
}
