package shardlog.tests;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * Kafka Streams with processing.guarantee=exactly_once_v2 for the coordinator failover
 * tests (tests/integration/test_txn_failover.py): counts per key of the input topic
 * (String keys), written to the output topic as (String key, Long count). One stream
 * thread, an in-memory store restored from its changelog (replication factor 3).
 *
 *   java -cp clienttool.jar shardlog.tests.StreamsEos --bootstrap B --app-id A
 *        --input IN --output OUT --state-dir DIR [--prop k=v,...]
 *
 * stdout, JSON lines: {"state":"RUNNING"} (every state change), then once running
 * {"transactional_ids":[...]} (the stream threads' ids: the coordinator tests kill their
 * coordinator) and {"described":{id:state,...}} whenever their states as DescribeTransactions
 * gives them change. Runs until SIGTERM: closes, prints {"closed":true} and exits 0
 * (3 if it did not close within 60 s); exit 2 if Streams reaches ERROR.
 */
public final class StreamsEos {
    private StreamsEos() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String bootstrap = opt.get("bootstrap");
        String appId = opt.get("app-id");
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
        p.put(StreamsConfig.STATE_DIR_CONFIG, opt.get("state-dir"));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), 120000);
        if (opt.containsKey("prop")) {
            for (String kv : opt.get("prop").split(",")) {
                String[] parts = kv.split("=", 2);
                p.put(parts[0], parts[1]);
            }
        }

        StreamsBuilder b = new StreamsBuilder();
        b.stream(opt.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(opt.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        CountDownLatch running = new CountDownLatch(1);
        final int[] exit = {0};
        streams.setStateListener((now, before) -> {
            out.println("{\"state\":\"" + now + "\"}");
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
            if (now == KafkaStreams.State.ERROR) {
                exit[0] = 2;
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            out.println("{\"uncaught\":" + ClientTool.jstr(String.valueOf(e)) + "}");
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        // SIGTERM: close (commits or aborts the open transaction); exit 0 if it closed in
        // time, 3 if not (halt: a JVM ended by a signal would otherwise exit 143).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean closed = streams.close(Duration.ofSeconds(60));
            out.println("{\"closed\":" + closed + "}");
            Runtime.getRuntime().halt(closed ? exit[0] : 3);
        }));
        streams.start();

        // Once running: the application's transactional ids (the coordinator to kill). With
        // exactly_once_v2 a thread's id is <application.id>-<process id>-<thread index>, its
        // name <application.id>-<process id>-StreamThread-<thread index>.
        running.await();
        List<String> quoted = new ArrayList<>();
        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
            quoted.add(ClientTool.jstr(t.threadName().replace("-StreamThread-", "-")));
        }
        out.println("{\"transactional_ids\":[" + String.join(",", quoted) + "]}");
        // And their state as their coordinator describes it (DescribeTransactions),
        // whenever that changes.
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            List<String> ids = new ArrayList<>();
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                ids.add(t.threadName().replace("-StreamThread-", "-"));
            }
            String last = null;
            while (done.getCount() > 0) {
                try {
                    List<String> states = new ArrayList<>();
                    var result = admin.describeTransactions(ids);
                    for (String id : ids) {
                        states.add(ClientTool.jstr(id) + ":" + ClientTool.jstr(result.description(id).get().state().toString()));
                    }
                    String now = "{\"described\":{" + String.join(",", states) + "}}";
                    if (!now.equals(last)) {
                        out.println(now);
                        last = now;
                    }
                } catch (Exception e) {
                    System.err.println("describeTransactions: " + e);
                }
                done.await(500, java.util.concurrent.TimeUnit.MILLISECONDS);
            }
        }
        done.await();
        System.exit(exit[0]);
    }
}
