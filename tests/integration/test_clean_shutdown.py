"""SIGTERM is a clean, controlled shutdown (server/shutdown.rs), as Kafka's
kafka-server-stop: in a cluster the quorum fences the broker first, so its leaderships
move to the other in-sync replicas while it still serves; then the broker closes every replica durably with its clean-shutdown marker and high-watermark
checkpoint, and exits 0; the next start opens the sealed segments unread. After kill -9
the next start verifies them (the marker is what tells the two apart).

Real clients: confluent-kafka. No timed assertions: waits poll with generous deadlines.
"""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import is_kafka, wait_for
from test_replication import read_all as replication_read_all

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
    """Every record up to the high watermark, by (partition, offset) (test_replication's
    reader)."""
    got = replication_read_all(SimpleNamespace(bootstrap=bootstrap), topic, PARTITIONS)
    return {(p, o): v for p, records in got.items() for o, v in records}


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "clean-shutdown")


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic]
    return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}


def test_sigterm_moves_leadership_before_closing_and_loses_nothing(cluster):
    """A controlled shutdown: the quorum fences the stopping broker first (its
    leaderships move to the other in-sync replicas while it still serves), then it closes
    its replicas cleanly and exits 0. An acks=all producer writing throughout loses
    nothing; the broker restarts clean and rejoins every ISR."""
    topic = "controlled-stop"
    a = AdminClient({"bootstrap.servers": cluster.bootstrap})
    a.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for("every replica in sync", lambda: (s := leaders(cluster.bootstrap, topic)) and len(s) == PARTITIONS
             and all(len(isr) == 3 for _, isr in s.values()))
    controller = cluster.active_controller()
    led = leaders(cluster.bootstrap, topic)
    # A broker that leads something and is not the active controller (whose stop is a
    # quorum failover too).
    victim = next(cluster.node(l) for l, _ in led.values() if controller is None or l != controller[0])
    others = [nd for nd in cluster.nodes if nd is not victim]

    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def report(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(err.name())

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 60000})
    sent = 0

    def produce_some(n: int):
        nonlocal sent
        for _ in range(n):
            p.produce(topic, value=f"r-{sent}".encode(), partition=sent % PARTITIONS, on_delivery=report)
            sent += 1
            p.poll(0)

    produce_some(3000)
    assert p.flush(60) == 0
    victim.proc.send_signal(signal.SIGTERM)
    # Keep writing while it stops.
    while victim.proc.poll() is None:
        produce_some(50)
        p.poll(0.01)
    produce_some(1000)
    assert p.flush(90) == 0
    assert victim.proc.returncode == 0, victim.log_tail()
    assert not errors, errors[:5]

    log = victim.log_since_start()
    fenced = log.find("controlled shutdown: fenced")
    closing = log.find("closing the replicas cleanly")
    assert 0 <= fenced < closing, "leaderships moved before the replicas closed"
    s = leaders(others[0].bootstrap, topic)
    assert all(leader != victim.node_id and victim.node_id not in isr for leader, isr in s.values()), s

    got = read_all(others[0].bootstrap, topic)
    assert len(got) == sent, "each record once"
    assert all(got.get((part, off)) == v for part, off, v in acked), "every acknowledged record at its offset"

    victim.start()
    cluster.wait_ready(nodes=[victim])
    assert VERIFYING not in victim.log_since_start(), "the restart opens clean"
    wait_for("the restarted broker back in every ISR",
             lambda: all(victim.node_id in isr for _, isr in leaders(others[0].bootstrap, topic).values()),
             deadline_s=120)
