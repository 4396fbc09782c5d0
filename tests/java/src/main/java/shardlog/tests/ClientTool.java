package shardlog.tests;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.OutputStreamWriter;
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

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the Java kafka-clients for shardlog's Python integration tests.
 *
 * Every subcommand prints JSON lines on stdout (except `consume`, which prints
 * tab-separated records); diagnostics go to stderr. Options are `--name value`.
 *
 * Record file format (input of `produce`, output of `consume`), one record a line, tab-separated:
 *   partition  offset  timestamp  key_b64  value_b64  headers
 * where partition is -1 to let the partitioner choose (produce), offset is ignored by produce,
 * key_b64 is "-" for a null key, and headers is "" or name=b64;name=b64 (names plain ASCII).
 *
 * Subcommands:
 *   produce --bootstrap B --topic T --input FILE [--compression none|gzip|snappy|lz4|zstd]
 *           [--acks all|1|0] [--prop k=v,...]
 *       -> {"i":N,"p":P,"o":O,"ts":T} per acknowledged record (i = line index),
 *          {"i":N,"error":"..."} per failed one, then {"done":true,"acked":A,"failed":F}
 *   consume --bootstrap B --topic T [--partitions 0,1,..] [--timeout-ms MS]
 *           [--isolation read_uncommitted|read_committed] [--prop k=v,...]
 *       assign() + seekToBeginning, reads up to the end offsets taken at start (read_committed:
 *       the last stable offsets); record lines plus a last line "#done\tCOUNT".
 *   group-consume --bootstrap B --topic T --group G --count N [--timeout-ms MS] [--prop k=v,...]
 *           [--protocol classic|consumer]
 *           (subscribe in group G, classic protocol unless --protocol consumer (KIP-848);
 *           poll N records, commitSync, print {"p":..,"committed":..} per assigned partition
 *           and "#done<TAB>count")
 *   group-worker --bootstrap B --topic T --group G --out FILE [--protocol classic|consumer]
 *           [--prop k=v,...]
 *       a group member that runs until killed (SIGTERM: leaves the group cleanly): appends
 *       "partition offset" per processed record to FILE, commitSync every 20 records, when
 *       idle and on revocation; prints {"assigned":[..]} / {"revoked":[..]} on stdout.
 *   describe-group --bootstrap B --group G [--wait-members N --timeout-ms MS]
 *           (Admin describeConsumerGroups; with --wait-members, polls until the group is
 *           Stable with N members, each at the assignment epoch, else exits 1)
 *       -> {"group":G,"type":..,"state":..,"group_epoch":..,"assignment_epoch":..,
 *           "assignor":..,"members":[{"member_id":..,"client_id":..,"epoch":..,
 *           "assignment":[p,..],"target":[p,..]}]}
 *   offsets-for-times --bootstrap B --topic T --ts T1,T2,..   (consumer offsetsForTimes)
 *       -> {"p":P,"query":T,"o":O|null,"ts":T|null}
 *   list-offsets --bootstrap B --topic T --spec earliest|latest|max-timestamp|ts:T  (Admin)
 *           [--isolation read_uncommitted|read_committed]
 *       -> {"p":P,"o":O,"ts":T,"leader_epoch":E|null}
 *   delete-records --bootstrap B --topic T --partition P --offset O   (Admin)
 *       -> {"p":P,"low_watermark":L} or {"p":P,"error":"..."}
 *   create-topic --bootstrap B --topic T --partitions N [--config k=v,...]   (Admin)
 *       -> {"created":T} or {"error":"..."}
 *   describe-topics, describe-cluster, describe-log-dirs, describe-configs: see AdminCompat.
 *   pattern-worker: see PatternWorker; share-worker: see ShareWorker; share-bench: see ShareBench;
 *   producer-fleet: N producers (keys, fixed rate, latency timeline), see ProducerFleet;
 *   init-transactions: see TxnFailFast;
 *   list-transactions, describe-transactions: see TxnAdmin; seek-validate: see SeekValidation;
 *   txn-produce, txn-fence, committed, end-offsets: see Txn.
 */
public final class ClientTool {
  private static final Base64.Encoder B64 = Base64.getEncoder();
  private static final Base64.Decoder B64D = Base64.getDecoder();

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: ClientTool produce|consume|offsets-for-times|list-offsets|delete-records|create-topic --opt value ...");
      System.exit(2);
    }
    Map<String, String> o = parseOpts(args);
    PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16));
    int rc;
    switch (args[0]) {
      case "produce": rc = produce(o, out); break;
      case "consume": rc = consume(o, out); break;
      case "group-consume": rc = groupConsume(o, out); break;
      case "group-worker": rc = groupWorker(o, out); break;
      case "describe-group": rc = describeGroup(o, out); break;
      case "offsets-for-times": rc = offsetsForTimes(o, out); break;
      case "list-offsets": rc = listOffsets(o, out); break;
      case "delete-records": rc = deleteRecords(o, out); break;
      case "create-topic": rc = createTopic(o, out); break;
      case "describe-topics": rc = AdminCompat.describeTopics(o, out); break;
      case "describe-cluster": rc = AdminCompat.describeCluster(o, out); break;
      case "describe-log-dirs": rc = AdminCompat.describeLogDirs(o, out); break;
      case "describe-configs": rc = AdminCompat.describeConfigs(o, out); break;
      case "pattern-worker": rc = PatternWorker.run(o, out); break;
      case "share-worker": rc = ShareWorker.run(o, out); break;
      case "share-bench": rc = ShareBench.run(o, out); break;
      case "producer-fleet": rc = ProducerFleet.run(o, out); break;
      case "init-transactions": rc = TxnFailFast.run(o, out); break;
      case "list-transactions": rc = TxnAdmin.list(o, out); break;
      case "describe-transactions": rc = TxnAdmin.describe(o, out); break;
      case "seek-validate": rc = SeekValidation.run(o, out); break;
      case "txn-produce": rc = Txn.produce(o, out); break;
      case "txn-fence": rc = Txn.fence(o, out); break;
      case "committed": rc = Txn.committed(o, out); break;
      case "end-offsets": rc = Txn.endOffsets(o, out); break;
      default:
        System.err.println("unknown subcommand " + args[0]);
        rc = 2;
    }
    out.flush();
    System.exit(rc);
  }

  private static Map<String, String> parseOpts(String[] args) {
    Map<String, String> m = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException("bad option " + args[i]);
      }
      m.put(args[i].substring(2), args[++i]);
    }
    return m;
  }

  static String need(Map<String, String> o, String k) {
    String v = o.get(k);
    if (v == null) throw new IllegalArgumentException("missing --" + k);
    return v;
  }

  private static void extraProps(Map<String, String> o, Properties p) {
    String s = o.get("prop");
    if (s == null || s.isEmpty()) return;
    for (String kv : s.split(",")) {
      int eq = kv.indexOf('=');
      p.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
  }

  static String jstr(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  private static int produce(Map<String, String> o, PrintWriter out) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(o, "bootstrap"));
    p.put(ProducerConfig.ACKS_CONFIG, o.getOrDefault("acks", "all"));
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, o.getOrDefault("compression", "none"));
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    extraProps(o, p);
    String topic = need(o, "topic");
    AtomicLong acked = new AtomicLong();
    AtomicLong failed = new AtomicLong();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
         BufferedReader in = new BufferedReader(new FileReader(need(o, "input"), StandardCharsets.UTF_8), 1 << 16)) {
      String line;
      long i = 0;
      while ((line = in.readLine()) != null) {
        if (line.isEmpty()) continue;
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
        final long idx = i++;
        ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, part < 0 ? null : part, ts, key, value, headers);
        producer.send(rec, (md, ex) -> {
          synchronized (out) {
            if (ex != null) {
              failed.incrementAndGet();
              out.println("{\"i\":" + idx + ",\"error\":" + jstr(ex.toString()) + "}");
            } else {
              acked.incrementAndGet();
              out.println("{\"i\":" + idx + ",\"p\":" + md.partition() + ",\"o\":" + md.offset() + ",\"ts\":" + md.timestamp() + "}");
            }
          }
        });
      }
      producer.flush();
    }
    synchronized (out) {
      out.println("{\"done\":true,\"acked\":" + acked.get() + ",\"failed\":" + failed.get() + "}");
    }
    return failed.get() == 0 ? 0 : 1;
  }

  private static KafkaConsumer<byte[], byte[]> consumer(Map<String, String> o) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(o, "bootstrap"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    if (o.containsKey("isolation")) p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.get("isolation"));
    extraProps(o, p);
    return new KafkaConsumer<>(p);
  }

  private static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, Map<String, String> o) {
    String topic = need(o, "topic");
    List<TopicPartition> tps = new ArrayList<>();
    String ps = o.get("partitions");
    if (ps != null) {
      for (String s : ps.split(",")) tps.add(new TopicPartition(topic, Integer.parseInt(s)));
    } else {
      List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofSeconds(30));
      for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
      tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
    }
    return tps;
  }

  private static String headersField(ConsumerRecord<byte[], byte[]> r) {
    StringBuilder b = new StringBuilder();
    for (Header h : r.headers()) {
      if (b.length() > 0) b.append(';');
      b.append(h.key()).append('=').append(h.value() == null ? "" : B64.encodeToString(h.value()));
    }
    return b.toString();
  }

  private static int consume(Map<String, String> o, PrintWriter out) {
    long timeoutMs = Long.parseLong(o.getOrDefault("timeout-ms", "120000"));
    long count = 0;
    try (KafkaConsumer<byte[], byte[]> c = consumer(o)) {
      List<TopicPartition> tps = partitions(c, o);
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> end = new HashMap<>(c.endOffsets(tps, Duration.ofSeconds(30)));
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (true) {
        end.entrySet().removeIf(e -> c.position(e.getKey()) >= e.getValue());
        if (end.isEmpty()) break;
        if (System.currentTimeMillis() > deadline) {
          System.err.println("consume: timed out; unfinished " + end);
          out.println("#done\t" + count);
          return 1;
        }
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
          out.print(r.partition()); out.print('\t');
          out.print(r.offset()); out.print('\t');
          out.print(r.timestamp()); out.print('\t');
          out.print(r.key() == null ? "-" : B64.encodeToString(r.key())); out.print('\t');
          out.print(r.value() == null ? "" : B64.encodeToString(r.value())); out.print('\t');
          out.print(headersField(r)); out.print('\n');
          count++;
        }
      }
    }
    out.println("#done\t" + count);
    return 0;
  }

  private static int groupConsume(Map<String, String> o, PrintWriter out) {
    long want = Long.parseLong(need(o, "count"));
    long timeoutMs = Long.parseLong(o.getOrDefault("timeout-ms", "120000"));
    o.putIfAbsent("prop", "");
    Map<String, String> withGroup = new HashMap<>(o);
    String extra = "group.id=" + need(o, "group") + ",enable.auto.commit=false,group.protocol=" + o.getOrDefault("protocol", "classic");
    withGroup.put("prop", o.get("prop").isEmpty() ? extra : o.get("prop") + "," + extra);
    long count = 0;
    try (KafkaConsumer<byte[], byte[]> c = consumer(withGroup)) {
      c.subscribe(java.util.Collections.singletonList(need(o, "topic")));
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (count < want) {
        if (System.currentTimeMillis() > deadline) {
          System.err.println("group-consume: timed out after " + count + " records");
          out.println("#done\t" + count);
          return 1;
        }
        count += c.poll(Duration.ofMillis(500)).count();
      }
      c.commitSync();
      for (Map.Entry<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> e : c.committed(c.assignment()).entrySet()) {
        out.println("{\"p\":" + e.getKey().partition() + ",\"committed\":" + (e.getValue() == null ? -1 : e.getValue().offset()) + "}");
      }
    }
    out.println("#done\t" + count);
    return 0;
  }

  private static String partitionList(java.util.Collection<TopicPartition> tps) {
    List<Integer> ps = new ArrayList<>();
    for (TopicPartition tp : tps) ps.add(tp.partition());
    java.util.Collections.sort(ps);
    return ps.toString().replace(" ", "");
  }

  private static int groupWorker(Map<String, String> o, PrintWriter out) throws Exception {
    o.putIfAbsent("prop", "");
    Map<String, String> withGroup = new HashMap<>(o);
    String extra = "group.id=" + need(o, "group") + ",enable.auto.commit=false,group.protocol=" + o.getOrDefault("protocol", "classic");
    withGroup.put("prop", o.get("prop").isEmpty() ? extra : o.get("prop") + "," + extra);
    final KafkaConsumer<byte[], byte[]> c = consumer(withGroup);
    final Thread main = Thread.currentThread();
    final java.util.concurrent.atomic.AtomicBoolean stopping = new java.util.concurrent.atomic.AtomicBoolean();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      System.err.println("group-worker: shutting down");
      stopping.set(true);
      c.wakeup();
      try { main.join(20000); } catch (InterruptedException e) { /* exiting */ }
    }));
    final long[] pending = {0};
    // Offsets after the records written to FILE: only those are committed (commitSync()
    // without arguments would also commit fetched records not processed yet).
    final Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> done = new HashMap<>();
    try (PrintWriter rec = new PrintWriter(new java.io.FileWriter(need(o, "out"), StandardCharsets.UTF_8, true), true)) {
      Runnable commit = () -> {
        if (pending[0] == 0) return;
        try {
          Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> mine = new HashMap<>(done);
          mine.keySet().retainAll(c.assignment());
          if (!mine.isEmpty()) c.commitSync(mine);
        } catch (org.apache.kafka.common.errors.WakeupException e) {
          throw e;
        } catch (Exception e) {
          // e.g. a rebalance raced the commit: the records get processed again.
          System.err.println("commit failed: " + e);
        }
        pending[0] = 0;
        done.clear();
      };
      c.subscribe(java.util.Collections.singletonList(need(o, "topic")), new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
        public void onPartitionsRevoked(java.util.Collection<TopicPartition> ps) {
          commit.run();
          synchronized (out) { out.println("{\"revoked\":" + partitionList(ps) + "}"); out.flush(); }
        }
        public void onPartitionsAssigned(java.util.Collection<TopicPartition> ps) {
          synchronized (out) { out.println("{\"assigned\":" + partitionList(ps) + "}"); out.flush(); }
        }
      });
      while (!stopping.get()) {
        try {
          org.apache.kafka.clients.consumer.ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
          if (rs.isEmpty()) {
            commit.run();
            continue;
          }
          for (ConsumerRecord<byte[], byte[]> r : rs) {
            rec.println(r.partition() + " " + r.offset());
            done.put(new TopicPartition(r.topic(), r.partition()), new org.apache.kafka.clients.consumer.OffsetAndMetadata(r.offset() + 1));
            pending[0]++;
            if (pending[0] >= 20) commit.run();
          }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
          break;
        } catch (RuntimeException e) {
          System.err.println("group-worker: poll failed: " + e);
          throw e;
        }
      }
      System.err.println("group-worker: leaving the group");
      try { commit.run(); } catch (Exception e) { /* leaving anyway */ }
    } finally {
      c.close(Duration.ofSeconds(10));
    }
    return 0;
  }

  private static int describeGroup(Map<String, String> o, PrintWriter out) throws Exception {
    String group = need(o, "group");
    int waitMembers = Integer.parseInt(o.getOrDefault("wait-members", "-1"));
    long deadline = System.currentTimeMillis() + Long.parseLong(o.getOrDefault("timeout-ms", "60000"));
    try (Admin a = admin(o)) {
      org.apache.kafka.clients.admin.ConsumerGroupDescription d;
      while (true) {
        try {
          d = a.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
        } catch (java.util.concurrent.ExecutionException e) {
          // While waiting, the group may not exist yet.
          if (waitMembers < 0 || !(e.getCause() instanceof org.apache.kafka.common.errors.GroupIdNotFoundException)
              || System.currentTimeMillis() > deadline) throw e;
          Thread.sleep(100);
          continue;
        }
        if (waitMembers < 0) break;
        boolean settled = d.groupState() == org.apache.kafka.common.GroupState.STABLE && d.members().size() == waitMembers;
        for (org.apache.kafka.clients.admin.MemberDescription m : d.members()) {
          settled &= m.memberEpoch().equals(d.targetAssignmentEpoch());
        }
        if (settled) break;
        if (System.currentTimeMillis() > deadline) {
          System.err.println("describe-group: not Stable with " + waitMembers + " members in time");
          waitMembers = -2;
          break;
        }
        Thread.sleep(100);
      }
      StringBuilder b = new StringBuilder();
      b.append("{\"group\":").append(jstr(d.groupId()))
          .append(",\"type\":").append(jstr(String.valueOf(d.type())))
          .append(",\"state\":").append(jstr(String.valueOf(d.groupState())))
          .append(",\"group_epoch\":").append(d.groupEpoch().map(String::valueOf).orElse("null"))
          .append(",\"assignment_epoch\":").append(d.targetAssignmentEpoch().map(String::valueOf).orElse("null"))
          .append(",\"assignor\":").append(jstr(d.partitionAssignor()))
          .append(",\"members\":[");
      boolean first = true;
      for (org.apache.kafka.clients.admin.MemberDescription m : d.members()) {
        if (!first) b.append(',');
        first = false;
        b.append("{\"member_id\":").append(jstr(m.consumerId()))
            .append(",\"client_id\":").append(jstr(m.clientId()))
            .append(",\"epoch\":").append(m.memberEpoch().map(String::valueOf).orElse("null"))
            .append(",\"assignment\":").append(partitionList(m.assignment().topicPartitions()))
            .append(",\"target\":").append(m.targetAssignment().map(t -> partitionList(t.topicPartitions())).orElse("null"))
            // KIP-1099: false for a classic member of a consumer group, true for a KIP-848 one.
            .append(",\"upgraded\":").append(m.upgraded().map(String::valueOf).orElse("null"))
            .append('}');
      }
      b.append("]}");
      out.println(b);
    }
    return waitMembers == -2 ? 1 : 0;
  }

  private static int offsetsForTimes(Map<String, String> o, PrintWriter out) {
    try (KafkaConsumer<byte[], byte[]> c = consumer(o)) {
      List<TopicPartition> tps = partitions(c, o);
      for (String t : need(o, "ts").split(",")) {
        long ts = Long.parseLong(t);
        Map<TopicPartition, Long> q = new HashMap<>();
        for (TopicPartition tp : tps) q.put(tp, ts);
        Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(q, Duration.ofSeconds(30));
        for (TopicPartition tp : tps) {
          OffsetAndTimestamp ot = r.get(tp);
          out.println("{\"p\":" + tp.partition() + ",\"query\":" + ts + ",\"o\":" + (ot == null ? "null" : ot.offset())
              + ",\"ts\":" + (ot == null ? "null" : ot.timestamp()) + "}");
        }
      }
    }
    return 0;
  }

  static Admin admin(Map<String, String> o) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, need(o, "bootstrap"));
    extraProps(o, p);
    return Admin.create(p);
  }

  private static int listOffsets(Map<String, String> o, PrintWriter out) throws Exception {
    String topic = need(o, "topic");
    String spec = need(o, "spec");
    OffsetSpec os;
    if (spec.equals("earliest")) os = OffsetSpec.earliest();
    else if (spec.equals("latest")) os = OffsetSpec.latest();
    else if (spec.equals("max-timestamp")) os = OffsetSpec.maxTimestamp();
    else if (spec.startsWith("ts:")) os = OffsetSpec.forTimestamp(Long.parseLong(spec.substring(3)));
    else throw new IllegalArgumentException("bad --spec " + spec);
    try (Admin a = admin(o)) {
      int n = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
      Map<TopicPartition, OffsetSpec> q = new HashMap<>();
      for (int i = 0; i < n; i++) q.put(new TopicPartition(topic, i), os);
      org.apache.kafka.clients.admin.ListOffsetsOptions opts = new org.apache.kafka.clients.admin.ListOffsetsOptions(
          "read_committed".equals(o.get("isolation")) ? org.apache.kafka.common.IsolationLevel.READ_COMMITTED
                                                      : org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED);
      Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r = a.listOffsets(q, opts).all().get();
      for (int i = 0; i < n; i++) {
        ListOffsetsResult.ListOffsetsResultInfo info = r.get(new TopicPartition(topic, i));
        out.println("{\"p\":" + i + ",\"o\":" + info.offset() + ",\"ts\":" + info.timestamp()
            + ",\"leader_epoch\":" + info.leaderEpoch().map(String::valueOf).orElse("null") + "}");
      }
    }
    return 0;
  }

  private static int deleteRecords(Map<String, String> o, PrintWriter out) throws Exception {
    TopicPartition tp = new TopicPartition(need(o, "topic"), Integer.parseInt(need(o, "partition")));
    long offset = Long.parseLong(need(o, "offset"));
    try (Admin a = admin(o)) {
      try {
        DeletedRecords d = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset))).lowWatermarks().get(tp).get();
        out.println("{\"p\":" + tp.partition() + ",\"low_watermark\":" + d.lowWatermark() + "}");
      } catch (java.util.concurrent.ExecutionException e) {
        out.println("{\"p\":" + tp.partition() + ",\"error\":" + jstr(e.getCause().toString()) + "}");
        return 1;
      }
    }
    return 0;
  }

  private static int createTopic(Map<String, String> o, PrintWriter out) throws Exception {
    String topic = need(o, "topic");
    NewTopic nt = new NewTopic(topic, Integer.parseInt(need(o, "partitions")), (short) 1);
    String cfg = o.get("config");
    if (cfg != null && !cfg.isEmpty()) {
      Map<String, String> m = new HashMap<>();
      for (String kv : cfg.split(",")) {
        int eq = kv.indexOf('=');
        m.put(kv.substring(0, eq), kv.substring(eq + 1));
      }
      nt.configs(m);
    }
    try (Admin a = admin(o)) {
      try {
        a.createTopics(List.of(nt)).all().get();
        out.println("{\"created\":" + jstr(topic) + "}");
      } catch (java.util.concurrent.ExecutionException e) {
        out.println("{\"error\":" + jstr(e.getCause().toString()) + "}");
        return 1;
      }
    }
    return 0;
  }
}
