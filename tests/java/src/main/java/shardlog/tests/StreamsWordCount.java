package shardlog.tests;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams 4.4's word count (its WordCountDemo) with group.protocol=streams (KIP-1071),
 * for tests/integration/test_streams_wordcount.py: lines of the input topic split into
 * words, grouped by word (a repartition topic), counted (a changelog topic), counts written
 * to the output topic as (String word, Long count).
 *
 *   java -cp clienttool.jar shardlog.tests.StreamsWordCount --bootstrap B --app-id A
 *        --input IN --output OUT --state-dir DIR
 *
 * stdout, JSON lines: {"state":"RUNNING"} at every state change. Runs until SIGTERM: closes,
 * prints {"closed":true} and exits 0; exit 2 if Streams reaches ERROR.
 */
public final class StreamsWordCount {
    private StreamsWordCount() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opt.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.STATE_DIR_CONFIG, opt.get("state-dir"));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());

        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> lines = b.stream(opt.get("input"));
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
            .groupBy((k, w) -> w)
            .count()
            .toStream()
            .to(opt.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            out.println("{\"state\":\"" + now + "\"}");
            if (now == KafkaStreams.State.ERROR) done.countDown();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            out.println("{\"closed\":true}");
            done.countDown();
        }));
        streams.start();
        done.await();
        if (streams.state() == KafkaStreams.State.ERROR) System.exit(2);
    }
}
