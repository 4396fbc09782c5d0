package shardlog.tests;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The consumer's position validation (KIP-320) after a leader change
 * (tests/integration/test_consumer_position_validation.py).
 *
 *   seek-validate --bootstrap B --topic T --partition P --offset O [--epoch E]
 *                 [--reset none|earliest] [--timeout-ms MS]
 *       assign(P); seek(P, OffsetAndMetadata(O, leaderEpoch E or none)); poll until a record
 *       comes. The client validates a position that carries an epoch with
 *       OffsetsForLeaderEpoch before it fetches: a position past the end of its epoch on
 *       the current leader is a truncation (LogTruncationException with reset=none; a seek
 *       to the divergence point otherwise).
 *       -> {"offset":X,"leader_epoch":E} of the first record polled, or
 *          {"error":"LogTruncationException","divergent_offset":X,"divergent_epoch":E|null},
 *          or {"error":CLASS,"message":..}; exit 1 if nothing came within the timeout.
 */
final class SeekValidation {
  private SeekValidation() {}

  static int run(Map<String, String> o, PrintWriter out) {
    TopicPartition tp = new TopicPartition(ClientTool.need(o, "topic"), Integer.parseInt(ClientTool.need(o, "partition")));
    long offset = Long.parseLong(ClientTool.need(o, "offset"));
    Optional<Integer> epoch = o.containsKey("epoch") ? Optional.of(Integer.parseInt(o.get("epoch"))) : Optional.empty();
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, ClientTool.need(o, "bootstrap"));
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, o.getOrDefault("reset", "none"));
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    long deadline = System.currentTimeMillis() + Long.parseLong(o.getOrDefault("timeout-ms", "30000"));
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      c.assign(List.of(tp));
      c.seek(tp, new OffsetAndMetadata(offset, epoch, ""));
      while (System.currentTimeMillis() < deadline) {
        try {
          ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
          for (ConsumerRecord<byte[], byte[]> r : recs.records(tp)) {
            out.println("{\"offset\":" + r.offset() + ",\"leader_epoch\":" + r.leaderEpoch().map(String::valueOf).orElse("null") + "}");
            return 0;
          }
        } catch (LogTruncationException e) {
          OffsetAndMetadata d = e.divergentOffsets().get(tp);
          out.println("{\"error\":\"LogTruncationException\",\"divergent_offset\":" + (d == null ? "null" : d.offset())
              + ",\"divergent_epoch\":" + (d == null ? "null" : d.leaderEpoch().map(String::valueOf).orElse("null")) + "}");
          return 0;
        } catch (RuntimeException e) {
          out.println("{\"error\":" + ClientTool.jstr(e.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(e.getMessage()) + "}");
          return 0;
        }
      }
    }
    out.println("{\"error\":\"timeout\"}");
    return 1;
  }
}
