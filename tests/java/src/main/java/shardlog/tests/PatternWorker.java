package shardlog.tests;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A KIP-848 consumer subscribed with a broker-side regex (tests/integration/test_regex_subscription.py).
 *
 *   pattern-worker --bootstrap B --group G --pattern RE2
 *       subscribe(SubscriptionPattern) with group.protocol=consumer, polls until killed
 *       (SIGTERM: leaves the group). Prints {"assignment":["topic-p",..]} (sorted) after each
 *       assignment change and {"record":"topic-p","o":O} per record; a poll error prints
 *       {"error":CLASS,"message":..} and exits 1.
 */
final class PatternWorker {
  private PatternWorker() {}

  static int run(Map<String, String> o, PrintWriter out) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, ClientTool.need(o, "group"));
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    final KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
    final Thread main = Thread.currentThread();
    final AtomicBoolean stopping = new AtomicBoolean();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stopping.set(true);
      c.wakeup();
      try { main.join(20000); } catch (InterruptedException e) { /* exiting */ }
    }));
    Runnable report = () -> {
      TreeSet<String> names = new TreeSet<>();
      for (TopicPartition tp : c.assignment()) names.add(ClientTool.jstr(tp.topic() + "-" + tp.partition()));
      synchronized (out) { out.println("{\"assignment\":[" + String.join(",", names) + "]}"); out.flush(); }
    };
    try {
      c.subscribe(new SubscriptionPattern(ClientTool.need(o, "pattern")), new ConsumerRebalanceListener() {
        public void onPartitionsRevoked(Collection<TopicPartition> ps) { if (!ps.isEmpty()) report.run(); }
        public void onPartitionsAssigned(Collection<TopicPartition> ps) { report.run(); }
      });
      while (!stopping.get()) {
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
          synchronized (out) { out.println("{\"record\":" + ClientTool.jstr(r.topic() + "-" + r.partition()) + ",\"o\":" + r.offset() + "}"); }
        }
        synchronized (out) { out.flush(); }
      }
    } catch (WakeupException e) {
      // SIGTERM
    } catch (KafkaException e) {
      synchronized (out) { out.println("{\"error\":" + ClientTool.jstr(e.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(e.getMessage()) + "}"); out.flush(); }
      c.close(Duration.ofSeconds(5));
      return 1;
    }
    c.close(Duration.ofSeconds(10));
    return 0;
  }
}
