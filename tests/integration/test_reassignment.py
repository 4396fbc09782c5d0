"""Issue 12 point 7: partition reassignment (AlterPartitionReassignments, API 45;
ListPartitionReassignments, API 46) on 3 real broker processes
(tests/integration/cluster_harness.py; with SHARDLOG_TEST_TARGET=kafka the same tests run
on 3 Apache Kafka 4.1 nodes, kafka_cluster.py).

- Kafka's own `kafka-reassign-partitions` tool (ReassignPartitionsCommand, from the jars)
  moves an RF=1 partition from broker 1 to broker 2 and an RF=2 partition from {1, 2} to
  {2, 3} (its leader, 1, leaves) while an idempotent acks=all confluent-kafka producer
  writes to both: `--verify` reports both complete, Metadata shows the new replicas,
  broker 1's partition directories are gone, and every acknowledged record is read back
  exactly once at the offset it was acknowledged with (replication_check.py);
- a reassignment to a broker that is down stays ongoing: `--list` shows its replicas,
  adding and removing ones, `--verify` says it is in progress; `--cancel` reverts it and
  nothing is listed any more; the broker, back, holds no replica;
- bad input, as raw AlterPartitionReassignments v0 requests: an unknown topic or
  partition UNKNOWN_TOPIC_OR_PARTITION, an empty target, a broker twice or an unknown
  broker INVALID_REPLICA_ASSIGNMENT, a cancel with nothing ongoing
  NO_REASSIGNMENT_IN_PROGRESS; the broker stays up.
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer

import conftest
from conftest import wait_for
from clients import kafka_tool
from kafkawire import FlexReader, compact_array, compact_string, i32, request, roundtrip, uvarint
from replication_check import check_log
from test_replication_faults import admin, bootstrap_of, create_topic, partition_state, read_partitions, start_cluster

TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
DEADLINE_S = 120

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
NO_REASSIGNMENT_IN_PROGRESS = 85


@pytest.fixture
def cluster(tmp_path_factory):
    """A fresh 3-node cluster per test (the tests stop nodes)."""
    yield from start_cluster(tmp_path_factory, "reassign")


def partition_dir(node, topic: str, partition: int):
    base = node.data_dir / "logs" if conftest.is_kafka() else node.data_dir
    return base / f"{topic}-{partition}"


def reassign_tool(bootstrap: str, tmp_path, moves: list[tuple[str, int, list[int]]], action: str):
    """Runs kafka-reassign-partitions with a reassignment JSON of `moves` and `action`
    (--execute, --verify, --cancel); returns the completed process."""
    path = tmp_path / f"reassign-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": rs, "log_dirs": ["any"] * len(rs)} for t, p, rs in moves]}))
    return kafka_tool(TOOL, "--bootstrap-server", bootstrap, "--reassignment-json-file", str(path), action)


def list_tool(bootstrap: str):
    return kafka_tool(TOOL, "--bootstrap-server", bootstrap, "--list")


class Writer:
    """An idempotent acks=all producer writing sequence-numbered values to every topic
    of `topics` (partition 0) in turn until stopped, recording what was acknowledged."""

    def __init__(self, bootstrap: str, topics: list[str]):
        self.topics = topics
        self.acked: dict[str, list[tuple[int, int, bytes]]] = {t: [] for t in topics}
        self.attempted: dict[str, list[bytes]] = {t: [] for t in topics}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "message.timeout.ms": 120000})
        self.thread = threading.Thread(target=self.run, daemon=True)

    def report(self, err, msg):
        if err is None:
            self.acked[msg.topic()].append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.errors.append(f"{msg.topic()} {msg.value()[:20]!r}: {err}")

    def run(self):
        seq = 0
        while not self.stop.is_set():
            for t in self.topics:
                v = b"%s-%010d" % (t.encode(), seq)
                try:
                    self.p.produce(t, value=v, partition=0, on_delivery=self.report)
                except BufferError:
                    self.p.poll(0.05)
                    continue
                self.attempted[t].append(v)
            seq += 1
            self.p.poll(0.002)  # ~hundreds of records per second per topic
        self.p.flush(180)

    def acked_count(self, topic: str) -> int:
        return len(self.acked[topic])


def test_tool_moves_partitions_while_producing_and_loses_nothing(cluster, tmp_path):
    nodes = cluster.nodes
    bs = bootstrap_of(nodes)
    tag = uuid.uuid4().hex[:6]
    single, pair = f"mv1-{tag}", f"mv2-{tag}"
    create_topic(nodes[0], single, assignment=[[1]], config={"min.insync.replicas": "1"})
    create_topic(nodes[0], pair, assignment=[[1, 2]], config={})
    wait_for("both topics led by broker 1", lambda: all(
        (partition_state(nodes[0], t) or {}).get(0, (None,))[0] == 1 for t in (single, pair)))
    assert partition_dir(nodes[0], single, 0).is_dir()

    w = Writer(bs, [single, pair])
    w.thread.start()
    try:
        wait_for("records acknowledged before the move", lambda: min(w.acked_count(t) for t in (single, pair)) >= 300,
                 deadline_s=DEADLINE_S)
        moves = [(single, 0, [2]), (pair, 0, [2, 3])]
        out = reassign_tool(bs, tmp_path, moves, "--execute")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "Successfully started partition reassignment" in out.stdout, out.stdout

        def completed():
            v = reassign_tool(bs, tmp_path, moves, "--verify")
            return v.returncode == 0 and all(f"Reassignment of partition {t}-0 is completed" in v.stdout for t in (single, pair)) and v
        verified = wait_for("--verify reports both reassignments complete", completed, deadline_s=DEADLINE_S)
        assert "still in progress" not in verified.stdout
        acked_at_completion = {t: w.acked_count(t) for t in (single, pair)}
        wait_for("records acknowledged after the move", lambda: all(
            w.acked_count(t) >= acked_at_completion[t] + 200 for t in (single, pair)), deadline_s=DEADLINE_S)
    finally:
        w.stop.set()
        w.thread.join(200)
    assert w.errors == [], f"acks=all writes failed during the move: {w.errors[:5]}"

    for nd in nodes:
        wait_for(f"node {nd.node_id}: Metadata shows the new replicas", lambda nd=nd: (
            partition_state(nd, single)[0][1] == [2] and sorted(partition_state(nd, pair)[0][1]) == [2, 3]))
    leader, replicas, isr = partition_state(nodes[0], pair)[0]
    assert leader in (2, 3) and sorted(isr) == [2, 3], (leader, replicas, isr)
    for t in (single, pair):
        wait_for(f"broker 1's {t}-0 directory deleted", lambda t=t: not partition_dir(nodes[0], t, 0).exists())
    assert partition_dir(nodes[1], single, 0).is_dir() and partition_dir(nodes[2], pair, 0).is_dir()
    ongoing = list_tool(bs)
    assert ongoing.returncode == 0 and single not in ongoing.stdout and pair not in ongoing.stdout, ongoing.stdout

    for t in (single, pair):
        log = read_partitions(nodes, t, [0], w.acked[t])
        res = check_log(w.attempted[t], w.acked[t], log)
        print(f"{t}: {res.summary()}")
        assert res.acknowledged >= acked_at_completion[t] + 200
        assert res.ok, res.details()


def test_an_ongoing_reassignment_is_listed_and_cancel_reverts_it(cluster, tmp_path):
    nodes = cluster.nodes
    bs = bootstrap_of(nodes[:2])
    topic = f"stuck-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[0], topic, assignment=[[1]], config={"min.insync.replicas": "1"})
    wait_for("the topic is led by broker 1", lambda: (partition_state(nodes[0], topic) or {}).get(0, (None,))[0] == 1)
    # Broker 3 down: registered (a reassignment may name it) but unable to catch up. The
    # tool's --execute refuses brokers missing from DescribeCluster, so the reassignment
    # starts with a raw request (as AdminClient would send it).
    nodes[2].stop()
    assert raw_alter(nodes[0].bootstrap, [(topic, [(0, [3])])]) == {(topic, 0): 0}

    listed = wait_for("--list shows the ongoing reassignment", lambda: (lambda r: topic in r.stdout and r)(list_tool(bs)))
    line = next(ln for ln in listed.stdout.splitlines() if f"{topic}-0" in ln)
    assert "replicas: 3,1" in line and "adding: 3" in line and "removing: 1" in line, listed.stdout
    verify = reassign_tool(bs, tmp_path, [(topic, 0, [3])], "--verify")
    assert f"Reassignment of partition {topic}-0 is still in progress" in verify.stdout, verify.stdout
    # Still served by broker 1 meanwhile.
    leader, replicas, isr = partition_state(nodes[0], topic)[0]
    assert (leader, isr) == (1, [1]) and sorted(replicas) == [1, 3], (leader, replicas, isr)

    cancel = reassign_tool(bs, tmp_path, [(topic, 0, [3])], "--cancel")
    # The tool then clears broker-level throttles on every broker named, 3 included, which
    # is down: that part times out (it does against Kafka too), the cancel is done.
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in cancel.stdout, cancel.stdout + cancel.stderr
    wait_for("nothing listed after the cancel", lambda: (lambda r: r.returncode == 0 and topic not in r.stdout)(list_tool(bs)))
    wait_for("the original replicas are back", lambda: partition_state(nodes[0], topic)[0][1] == [1])
    # A second cancel has nothing to cancel: the tool reports it per partition.
    again = raw_alter(nodes[0].bootstrap, [(topic, [(0, None)])])
    assert again == {(topic, 0): NO_REASSIGNMENT_IN_PROGRESS}
    nodes[2].start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[nodes[2]])
    wait_for("broker 3 holds no replica of the topic", lambda: not partition_dir(nodes[2], topic, 0).exists())


# == raw requests ==========================================================================

def alter_v0_request(correlation_id: int, topics: list[tuple[str, list[tuple[int, list[int] | None]]]]) -> bytes:
    """AlterPartitionReassignments v0 (flexible): per topic, (partition, replicas or None = cancel)."""
    def replicas(rs):
        return uvarint(0) if rs is None else compact_array([i32(b) for b in rs])
    body = i32(30000) + compact_array([
        compact_string(t) + compact_array([i32(p) + replicas(rs) + uvarint(0) for p, rs in ps]) + uvarint(0)
        for t, ps in topics]) + uvarint(0)
    return request(45, 0, correlation_id, body, header_version=2)


def raw_alter(bootstrap: str, topics) -> dict[tuple[str, int], int]:
    """Sends one AlterPartitionReassignments v0: (topic, partition) → error code; asserts
    the top-level error is NONE."""
    r = FlexReader(roundtrip(bootstrap, alter_v0_request(11, topics)))
    assert r.i32() == 11
    r.uvarint()  # response header tagged fields
    r.i32()  # throttle
    top = r.i16()
    r.compact_string()
    assert top == 0, top
    out = {}

    def partition(topic):
        p, code = r.i32(), r.i16()
        r.compact_string()
        r.uvarint()
        out[(topic, p)] = code

    def topic():
        name = r.compact_string()
        r.array(lambda: partition(name))
        r.uvarint()
    r.array(topic)
    return out


def test_bad_input_gets_kafkas_errors(cluster):
    nodes = cluster.nodes
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    create_topic(nodes[0], topic, assignment=[[1, 2]], config={})
    wait_for("the topic exists", lambda: partition_state(nodes[0], topic))
    got = raw_alter(nodes[0].bootstrap, [
        (f"nope-{topic}", [(0, [1])]),
        (topic, [(7, [1]), (0, [1, 1]), (0, [1, 99])]),
    ])
    assert got[(f"nope-{topic}", 0)] == UNKNOWN_TOPIC_OR_PARTITION
    assert got[(topic, 7)] == UNKNOWN_TOPIC_OR_PARTITION
    assert got[(topic, 0)] == INVALID_REPLICA_ASSIGNMENT  # the last of the two answers for partition 0
    assert raw_alter(nodes[0].bootstrap, [(topic, [(0, [])])]) == {(topic, 0): INVALID_REPLICA_ASSIGNMENT}
    assert raw_alter(nodes[1].bootstrap, [(topic, [(0, [1, 1])])]) == {(topic, 0): INVALID_REPLICA_ASSIGNMENT}
    assert raw_alter(nodes[2].bootstrap, [(topic, [(0, None)])]) == {(topic, 0): NO_REASSIGNMENT_IN_PROGRESS}
    # Nothing changed, and every node still answers.
    assert sorted(partition_state(nodes[0], topic)[0][1]) == [1, 2]
    assert all(nd.alive() for nd in nodes)
    assert set(admin(nodes).list_topics(timeout=10).brokers) == {1, 2, 3}
