package shardlog.tests;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A transactional producer's first step against a broker without transactions
 * (tests/integration/test_admin_compat.py).
 *
 *   init-transactions --bootstrap B --txn-id ID [--max-block-ms MS]
 *       KafkaProducer(transactional.id=ID).initTransactions()
 *       -> {"ok":true} or {"error":CLASS,"message":..}
 */
final class TxnFailFast {
  private TxnFailFast() {}

  static int run(Map<String, String> o, PrintWriter out) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ClientTool.need(o, "txn-id"));
    // The bound: an error must come before it (a TimeoutException says the client hung).
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, o.getOrDefault("max-block-ms", "60000"));
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      try {
        producer.initTransactions();
        out.println("{\"ok\":true}");
      } catch (RuntimeException e) {
        out.println("{\"error\":" + ClientTool.jstr(e.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(e.getMessage()) + "}");
      }
      out.flush();
      producer.close(Duration.ofSeconds(5));
    }
    return 0;
  }
}
