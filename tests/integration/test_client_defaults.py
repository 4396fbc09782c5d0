"""Issue 27, point 5: the broker refuses nothing a Kafka 4.4 client sends with its default
settings. Each client gets only its bootstrap address (and a group where it needs one):
- the Java 4.4 clients through Kafka's own tools: the console producer (the producer's
  defaults: idempotent, acks=all, no compression), the console consumer in a group, the console
  share consumer, and the admin client behind kafka-topics and kafka-consumer-groups;
- librdkafka (confluent-kafka): Producer, Consumer and AdminClient with no settings.
(franz-go at its defaults is `test_transactions.py`'s and `test_sasl_scram.py`'s programs.)
Then every record comes back to each consumer, and on shardlog no response carried a
refusal (`shardlog_errors_total`) and no connection was closed for a frame or request the
broker could not take (its log). Both targets for the round trips.
"""

from __future__ import annotations

import subprocess

from confluent_kafka import Consumer, Producer

from admin_api import scrape
from clients import admin, admin_create_topic, kafka_tool
from conftest import is_kafka, kafka_classpath, wait_for

# Error codes that mean the broker refused what a client sent (not the coordination answers
# a group or transaction protocol uses on the way, such as MEMBER_ID_REQUIRED).
REFUSALS = {
    "UNSUPPORTED_VERSION", "INVALID_REQUEST", "UNKNOWN_SERVER_ERROR", "CORRUPT_MESSAGE",
    "INVALID_RECORD", "UNSUPPORTED_COMPRESSION_TYPE", "INVALID_CONFIG", "POLICY_VIOLATION",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS", "CLUSTER_AUTHORIZATION_FAILED", "INVALID_PRODUCER_EPOCH",
    "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_FETCH_SIZE", "INVALID_SESSION_TIMEOUT",
    "INCONSISTENT_GROUP_PROTOCOL", "UNSUPPORTED_ASSIGNOR", "INVALID_RECORD_STATE",
    "INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_NOT_FOUND", "UNKNOWN_TOPIC_ID",
}
CLOSE_LINES = ("refusing frame; closing connection", "bad request; closing connection")
N = 50


def java(cls: str, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", kafka_classpath(), cls, *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)


def test_default_clients_are_refused_nothing(broker, topic_name):
    bs = broker.bootstrap
    admin_create_topic(bs, topic_name, 3)

    # Java producer at its defaults.
    r = java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bs, "--topic", topic_name,
             stdin="".join(f"java-{i}\n" for i in range(N)))
    assert r.returncode == 0, r.stdout + r.stderr
    # librdkafka producer at its defaults.
    p = Producer({"bootstrap.servers": bs})
    for i in range(N):
        p.produce(topic_name, f"rdkafka-{i}".encode())
    assert p.flush(60) == 0
    want = {f"java-{i}" for i in range(N)} | {f"rdkafka-{i}" for i in range(N)}

    # Java consumer in a group, at its defaults (from the beginning: a new group's reset).
    r = java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bs, "--topic", topic_name,
             "--group", "defaults-java-" + topic_name, "--from-beginning", "--max-messages", str(2 * N), "--timeout-ms", "60000")
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(r.stdout.split()) == want, r.stdout[-2000:] + r.stderr[-2000:]

    # librdkafka consumer in a group, at its defaults (but for the reset: its default is latest).
    c = Consumer({"bootstrap.servers": bs, "group.id": "defaults-rdkafka-" + topic_name, "auto.offset.reset": "earliest"})
    c.subscribe([topic_name])
    got: set[str] = set()
    try:
        def all_read():
            m = c.poll(1.0)
            if m is not None:
                assert m.error() is None, m.error()
                got.add(m.value().decode())
            return got == want or None
        wait_for("librdkafka's consumer to read every record", all_read, 90)
    finally:
        c.close()

    # Java share consumer at its defaults (a share group starts at the latest offset, so it
    # reads what is produced after it joined).
    share = subprocess.Popen(
        ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", kafka_classpath(),
         "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server", bs, "--topic", topic_name,
         "--group", "defaults-share-" + topic_name, "--max-messages", "1", "--timeout-ms", "90000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        later = Producer({"bootstrap.servers": bs})

        def shared():
            later.produce(topic_name, b"share-me")
            later.flush(10)
            return share.poll() is not None or None
        wait_for("the share consumer to take a record", shared, 90)
        out, err = share.communicate(timeout=30)
        assert share.returncode == 0 and "share-me" in out, out + err
    finally:
        if share.poll() is None:
            share.kill()

    # The Java admin client behind Kafka's tools, and librdkafka's.
    for cls, args in (("org.apache.kafka.tools.TopicCommand", ["--describe", "--topic", topic_name]),
                      ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["--describe", "--group", "defaults-java-" + topic_name])):
        r = kafka_tool(cls, "--bootstrap-server", bs, *args)
        assert r.returncode == 0, (cls, r.stdout + r.stderr)
    assert topic_name in admin(bs).list_topics(timeout=30).topics

    if not is_kafka():
        refused = {(ls["request"], ls["error"]): v for ls, v in scrape(broker.admin_url).labelled("shardlog_errors_total")
                   if ls.get("error") in REFUSALS and v > 0}
        assert not refused, f"responses refused what a default client sent: {refused}"
        log = broker.log_path.read_text(errors="replace")
        closed = [line for line in log.splitlines() if any(c in line for c in CLOSE_LINES)]
        assert not closed, closed[:5]
