"""KIP-467: when Kafka's LogValidator refuses records of a batch one by one (no key on a
compacted topic, a timestamp outside the topic's window), the whole batch is refused and
the Produce response (v8+) lists each bad record's index and message plus the batch
message. Kafka 4.1 does exactly this; librdkafka (2.4+) then fails the listed records with
INVALID_RECORD and their own message, and the others of the batch with the local error
_INVALID_DIFFERENT_RECORD ("part of a batch which had one or more invalid records"), so
an application can tell which records were bad. Runs against Kafka with
SHARDLOG_TEST_TARGET=kafka.
"""

from __future__ import annotations

import random
import time

from confluent_kafka import KafkaError, Producer

from clients import Rec, admin_create_topic, java_tool, json_lines, now_ms, watermarks, write_java_input
from kafkawire import connect, parse_produce, produce_request, record, batch, recv_frame

INVALID_TIMESTAMP = 32
INVALID_RECORD = 87

BAD = set(range(5, 100, 10))  # 10 keyless records among 100


def _compacted_topic(bootstrap: str, **config) -> str:
    name = "kip467-" + str(random.randrange(1 << 30))
    admin_create_topic(bootstrap, name, 1, config={"cleanup.policy": "compact", **config})
    return name


def test_librdkafka_fails_exactly_the_bad_records(bootstrap):
    topic = _compacted_topic(bootstrap)
    # One batch of 100: nothing is sent before the 100th record (long linger), and the
    # batch closes at 100 records.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                  "linger.ms": 10_000, "batch.num.messages": 100, "retries": 0,
                  "message.timeout.ms": 60_000})
    # The topic's metadata first: records produced while it is unknown wait in librdkafka's
    # unassigned queue, and a flush racing its arrival once sent the first few records
    # alone, in a batch of their own that succeeded (seen once in CI under load).
    assert topic in p.list_topics(topic, timeout=30).topics
    reports: dict[int, KafkaError | None] = {}

    def cb(i):
        return lambda err, _msg: reports.__setitem__(i, err)

    for i in range(100):
        p.produce(topic, key=None if i in BAD else b"k%d" % i, value=b"v%d" % i, partition=0,
                  on_delivery=cb(i))
    assert p.flush(60) == 0
    assert sorted(reports) == list(range(100))
    bad = {i for i, e in reports.items() if e is not None and e.code() == KafkaError.INVALID_RECORD}
    assert bad == BAD, reports
    # (librdkafka keeps each record's message internally; confluent-kafka shows the code's.)
    others = {e.code() for i, e in reports.items() if i not in BAD}
    assert others == {KafkaError._INVALID_DIFFERENT_RECORD}, others
    # The whole batch was refused.
    assert watermarks(bootstrap, topic, 1)[0] == (0, 0)


def test_java_producer_fails_exactly_the_bad_records(bootstrap, tmp_path):
    """The Java producer (Sender.failBatch with recordErrors): the listed records fail with
    InvalidRecordException and their message, the others with a KafkaException saying they
    were part of a batch with invalid records."""
    topic = _compacted_topic(bootstrap)
    ts = now_ms()
    recs = [Rec(None if i in BAD else b"k%d" % i, b"v%d" % i, (), ts) for i in range(100)]
    inp = tmp_path / "in.tsv"
    write_java_input(inp, recs, partition=0)
    r = java_tool("produce", "--bootstrap", bootstrap, "--topic", topic, "--input", str(inp),
                  "--prop", "linger.ms=10000,batch.size=1048576,enable.idempotence=false,retries=0", check=False)
    errors = {l["i"]: l["error"] for l in json_lines(r.stdout) if "error" in l}
    assert sorted(errors) == list(range(100)), errors
    bad = {i for i, e in errors.items() if "InvalidRecordException" in e}
    assert bad == BAD, errors
    for i in BAD:
        assert "Compacted topic cannot accept message without key" in errors[i], errors[i]
    for i in set(range(100)) - BAD:
        assert "Compacted topic" not in errors[i] and "invalid records" in errors[i], errors[i]
    assert watermarks(bootstrap, topic, 1)[0] == (0, 0)


def _produce_v8(bootstrap: str, topic: str, records: bytes) -> dict:
    with connect(bootstrap, timeout_s=60) as s:
        s.sendall(produce_request(8, 3, topic, 0, records))
        corr, res = parse_produce(8, recv_frame(s))
    assert corr == 3
    return res[(topic, 0)]


def test_produce_v8_lists_record_errors_with_kafkas_messages(bootstrap):
    topic = _compacted_topic(bootstrap)
    now = int(time.time() * 1000)
    section = b"".join(record(i, None if i in (1, 3, 4, 6) else b"k", b"v") for i in range(8))
    res = _produce_v8(bootstrap, topic, batch(section, count=8, last_offset_delta=7, base_ts=now))
    no_key = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert res["error_code"] == INVALID_RECORD, res
    assert res["record_errors"] == [(i, no_key) for i in (1, 3, 4, 6)], res
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{no_key}')" for i in (1, 3, 4))
    assert res["error_message"] == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"), res
    assert watermarks(bootstrap, topic, 1)[0] == (0, 0)


def test_timestamp_errors_are_listed_too(bootstrap):
    """A timestamp outside message.timestamp.after.max.ms is a record error as well; with
    any timestamp error the batch answers INVALID_TIMESTAMP with Kafka's short message."""
    topic = _compacted_topic(bootstrap, **{"message.timestamp.after.max.ms": "3600000"})
    now = int(time.time() * 1000)
    future = 24 * 3600 * 1000
    section = (record(0, b"k", b"v") + record(1, b"k", b"v", ts_delta=future)
               + record(2, None, b"v"))
    res = _produce_v8(bootstrap, topic, batch(section, count=3, last_offset_delta=2, base_ts=now))
    assert res["error_code"] == INVALID_TIMESTAMP, res
    assert [i for i, _ in res["record_errors"]] == [1, 2], res
    assert res["record_errors"][0][1].startswith(f"Timestamp {now + future} of message with offset 1 is out of range."), res
    assert res["error_message"] == "One or more records have been rejected due to invalid timestamp", res
