"""The cooperative incremental protocol as librdkafka runs it (KIP-429 over the classic
JoinGroup/SyncGroup): members join one by one while records flow; partitions move in two
rebalances without a stop-the-world revoke; every record is consumed, and in the end each
partition is owned by exactly one member.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer

from clients import admin, cli_create_topic
from test_groups import group_broker, wait_group

PARTITIONS = 12
RECORDS = 3000


def test_cooperative_sticky_members_join_while_consuming(broker_factory):
    b = group_broker(broker_factory)
    topic, group = f"coop-{uuid.uuid4().hex[:6]}", f"coop-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, PARTITIONS)
    seen: set[tuple[int, int]] = set()
    lock = threading.Lock()
    stop = threading.Event()
    revoked_all: list[int] = []  # revocations that took every partition of a member at once

    def member(i: int):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500, "enable.auto.commit": True, "auto.commit.interval.ms": 200})

        def on_revoke(consumer, parts):
            if not stop.is_set() and parts and len(parts) == len(consumer.assignment()) and len(parts) > 1:
                revoked_all.append(i)

        c.subscribe([topic], on_revoke=on_revoke)
        while not stop.is_set():
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            with lock:
                seen.add((m.partition(), m.offset()))
        c.close()

    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    threads = []
    try:
        for i in range(3):
            t = threading.Thread(target=member, args=(i,), daemon=True)
            t.start()
            threads.append(t)
            wait_group(b.bootstrap, group, i + 1, 60)
            for n in range(RECORDS // 3):
                p.produce(topic, value=f"{i}-{n}".encode(), partition=(n + i) % PARTITIONS)
            assert p.flush(30) == 0
        deadline = time.monotonic() + 60
        while len(seen) < RECORDS and time.monotonic() < deadline:
            time.sleep(0.2)
        a = admin(b.bootstrap)  # keep the handle alive until the future resolves
        d = a.describe_consumer_groups([group])[group].result(timeout=10)
        assert str(d.state).endswith("STABLE")
        assert d.partition_assignor == "cooperative-sticky"
        owned = [tp.partition for m in d.members for tp in m.assignment.topic_partitions]
        assert sorted(owned) == list(range(PARTITIONS)), owned
        assert all(len(m.assignment.topic_partitions) == PARTITIONS // 3 for m in d.members)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    missing = RECORDS - len(seen)
    assert missing == 0, f"{missing} records never consumed"
    # Cooperative: a member never lost all its partitions at once to let another join.
    assert not revoked_all, f"members {revoked_all} had everything revoked (eager behaviour)"
    b.assert_alive()
