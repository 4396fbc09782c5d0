"""SIGTERM is a clean shutdown (server/shutdown.rs), as Kafka's kafka-server-stop: the
broker closes every replica durably with its clean-shutdown marker and high-watermark
checkpoint, and exits 0; the next start opens the sealed segments unread. After kill -9
the next start verifies them (the marker is what tells the two apart).

Real clients: confluent-kafka. No timed assertions: waits poll with generous deadlines.
"""

from __future__ import annotations

import signal

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import is_kafka, wait_for

VERIFYING = "no clean-shutdown marker: verifying the sealed segments"
PARTITIONS = 3


def produce(bootstrap: str, topic: str, n: int) -> list[tuple[int, int, bytes]]:
    acked: list[tuple[int, int, bytes]] = []

    def report(err, msg):
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"v-{i}-".encode() + b"x" * 1000, partition=i % PARTITIONS, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    return acked


def read_all(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rd-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[tuple[int, int], bytes] = {}
    eof: set[int] = set()

    def done():
        for m in c.consume(num_messages=1000, timeout=1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got[(m.partition(), m.offset())] = m.value()
            eof.discard(m.partition())
        return len(eof) == PARTITIONS

    try:
        wait_for(f"every partition of {topic} read to its end", done, deadline_s=60)
    finally:
        c.close()
    return got


def log_since_last_start(b) -> str:
    return b.log_path.read_text(errors="replace").rsplit("===== start #", 1)[-1]


@pytest.mark.skipif(is_kafka(), reason="reads shardlog's own log lines")
def test_sigterm_closes_cleanly_and_the_next_start_opens_unverified(broker_factory):
    # Small segments (Kafka's minimum, 1 MiB): every partition has sealed segments for
    # the next open to verify.
    b = broker_factory(extra_args=["--log-segment-bytes", "1048576"])
    topic = "clean-stop"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    acked = produce(b.bootstrap, topic, 7000)

    b.proc.send_signal(signal.SIGTERM)
    wait_for("the broker exits after SIGTERM", lambda: b.proc.poll() is not None, deadline_s=60)
    assert b.proc.returncode == 0, f"exit status {b.proc.returncode}; log tail:\n{b.log_tail()}"
    assert "shut down cleanly" in log_since_last_start(b)
    for p in range(PARTITIONS):
        d = b.data_dir / f"{topic}-{p}"
        assert (d / "clean-shutdown").exists(), f"partition {p} has its marker"
        assert len(list(d.glob("*.log"))) > 1, f"partition {p} has sealed segments"

    b.start()
    assert VERIFYING not in log_since_last_start(b), "a clean shutdown is not recovered as a crash"
    got = read_all(b.bootstrap, topic)
    assert all(got.get((p, o)) == v for p, o, v in acked), "every acknowledged record is there"

    # The difference is the marker: after kill -9 the sealed segments are verified.
    b.kill9()
    b.start()
    assert VERIFYING in log_since_last_start(b)
    assert len(read_all(b.bootstrap, topic)) == len(acked)
