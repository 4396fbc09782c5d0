"""Issue 12 point 6: follower fetching for consumers (KIP-392) on 3 brokers in 3 racks
(tests/integration/cluster_harness.py) with `replica_selector_class` = Kafka's
RackAwareReplicaSelector.

- raw Fetch v11 (the first with `rack_id`) to the leader from a consumer in another
  broker's rack: answered with `preferred_read_replica` = that broker and no records;
- the same fetch sent to that follower: it serves the records, up to its own high
  watermark (what its leader told it), never above the leader's;
- a consumer in the leader's rack, or with no rack, reads from the leader as before;
- confluent-kafka with `client.rack` consumes every record, in order.
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import wait_for
from kafkawire import Reader, batches_in, i8, i32, i64, request, roundtrip, string

RACKS = ["rack-a", "rack-b", "rack-c"]
FETCH = 1
COUNT = 500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "follower-fetching", racks=RACKS,
                                        extra_args=["--replica-selector-class",
                                                    "org.apache.kafka.common.replica.RackAwareReplicaSelector"])


def fetch_v11(bootstrap: str, topic: str, partition: int, offset: int, rack: str) -> dict:
    """One partition's answer to a consumer's Fetch v11 (replica id -1, `rack_id`)."""
    body = (i32(-1) + i32(0) + i32(1) + i32(8 << 20) + i8(0) + i32(0) + i32(-1)
            + i32(1) + string(topic) + i32(1)
            + i32(partition) + i32(-1) + i64(offset) + i64(-1) + i32(8 << 20)
            + i32(0) + string(rack))
    r = Reader(roundtrip(bootstrap, request(FETCH, 11, 7, body, header_version=1)))
    assert r.i32() == 7
    r.i32()  # throttle_time_ms
    assert r.i16() == 0, "top-level error"
    r.i32()  # session_id
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    d = {"partition": r.i32(), "error_code": r.i16(), "high_watermark": r.i64(), "last_stable_offset": r.i64(),
         "log_start_offset": r.i64()}
    for _ in range(max(r.i32(), 0)):  # aborted transactions
        r.i64()
        r.i64()
    d["preferred_read_replica"] = r.i32()
    size = r.i32()
    d["records"] = b"" if size < 0 else r.b[r.i:r.i + size]
    return d


def records_below(d: dict) -> int:
    return sum(last - base + 1 for base, last, _ in batches_in(d["records"]))


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster):
    leader_node = cluster.node(1)
    topic = f"kip392-{uuid.uuid4().hex[:8]}"
    a = AdminClient({"bootstrap.servers": leader_node.bootstrap})
    a.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])], operation_timeout=30)[topic].result(timeout=60)
    p = Producer({"bootstrap.servers": leader_node.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(COUNT):
        p.produce(topic, value=f"r-{i}".encode(), partition=0)
    assert p.flush(60) == 0

    # The leader (rack-a) sends a rack-b consumer to broker 2, without records.
    d = fetch_v11(leader_node.bootstrap, topic, 0, 0, "rack-b")
    assert d["error_code"] == 0 and d["preferred_read_replica"] == 2, d
    assert d["records"] == b"" and d["high_watermark"] == COUNT
    # A consumer in the leader's rack, and one with no rack, read from the leader.
    for rack in ("rack-a", ""):
        d = fetch_v11(leader_node.bootstrap, topic, 0, 0, rack)
        assert d["preferred_read_replica"] == -1 and records_below(d) > 0, (rack, d["preferred_read_replica"])

    # Broker 2 serves the records up to its high watermark, once its leader told it.
    follower = cluster.node(2)
    d = wait_for("the follower's high watermark reaches the end",
                 lambda: (x := fetch_v11(follower.bootstrap, topic, 0, 0, "rack-b"))["high_watermark"] == COUNT and x)
    assert d["error_code"] == 0 and d["preferred_read_replica"] == -1
    assert records_below(d) == COUNT and batches_in(d["records"])[0][0] == 0
    # Broker 3 (rack-c, another follower) serves too; past the end there is nothing yet.
    d = wait_for("broker 3 serves", lambda: (x := fetch_v11(cluster.node(3).bootstrap, topic, 0, COUNT, "rack-c"))
                 ["error_code"] == 0 and x)
    assert d["records"] == b""

    # A real consumer in rack-c reads everything, in order.
    c = Consumer({"bootstrap.servers": leader_node.bootstrap, "group.id": f"g-{topic}", "client.rack": "rack-c",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def done():
            for m in c.consume(num_messages=1000, timeout=1.0):
                if not m.error():
                    got.append(m.value())
            return len(got) >= COUNT

        wait_for("a rack-c consumer reads every record", done, deadline_s=90)
        assert got == [f"r-{i}".encode() for i in range(COUNT)]
    finally:
        c.close()
