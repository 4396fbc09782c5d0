"""Issue 11 point 4: leader election on request (ElectLeaders, API 43) and by itself
(`auto_leader_rebalance_enable`), on 3 combined nodes (tests/integration/cluster_harness.py).

Real clients: Kafka's own `kafka-leader-election` tool (LeaderElectionCommand, run from the
jars as the other tests run Kafka's tools), confluent-kafka (librdkafka's `elect_leaders`,
produce/consume, Metadata, DescribeConfigs), and raw ElectLeaders v0/v1 requests
(kafkawire).

- every leader already preferred: PREFERRED over every partition elects nothing, a named
  partition answers ELECTION_NOT_NEEDED ("Valid replica already elected"), an unknown one
  UNKNOWN_TOPIC_OR_PARTITION; the broker reports the rebalance keys it runs with;
- (3 controllers + 3 brokers, so brokers can die without losing the quorum) a follower
  dies and leaves the ISR, then the only in-sync replica dies: the partition goes offline
  rather than move to the out-of-ISR replica; PREFERRED answers
  PREFERRED_LEADER_NOT_AVAILABLE; UNCLEAN elects the live out-of-ISR replica, which then
  serves produce and consume; the old leader, restarted, truncates, catches up, rejoins
  the ISR and answers NOT_LEADER_OR_FOLLOWER;
- leadership moved off a fenced broker to another in-sync replica goes back to it when it
  returns and has rejoined the ISR, by `kafka-leader-election --election-type PREFERRED`
  and by the automatic rebalance.
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import re
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import conftest
from conftest import wait_for
from clients import kafka_tool
from kafkawire import Reader, i16, i32, parse_produce_v8, produce_v8_request, record_batch, request, roundtrip, string

DEADLINE_S = 60
TOOL = "org.apache.kafka.tools.LeaderElectionCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "leader-election",
                                        extra_args=["--auto-leader-rebalance-enable", "false"])


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})




def partitions(node, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition → (leader, replicas, isr) as `node`'s Metadata says; None if unknown."""
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


def leaders(node, topic: str) -> dict[int, int] | None:
    ps = partitions(node, topic)
    return None if ps is None else {i: p[0] for i, p in ps.items()}


def brokers(node) -> set[int]:
    return set(admin(node).list_topics(timeout=10).brokers)


def create(node, name: str, assignment: list[list[int]]) -> None:
    a = admin(node)
    a.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)], operation_timeout=30)[name].result(timeout=60)


def elect(bootstrap: str, election: str, *target: str):
    """kafka-leader-election; `target` is ("--all-topic-partitions",) or
    ("--topic", t, "--partition", p)."""
    return kafka_tool(TOOL, "--bootstrap-server", bootstrap, "--election-type", election, *target)


def produce_code(node, topic: str, partition: int) -> int:
    batch = record_batch([(None, b"probe", [])], base_ts=int(time.time() * 1000))
    _, out = parse_produce_v8(roundtrip(node.bootstrap, produce_v8_request(1, topic, partition, batch)))
    return out[(topic, partition)]["error_code"]


def produce_consume(bootstrap: str, topic: str, partition: int, n: int = 20) -> None:
    """Produces n records to one partition and reads them back (confluent-kafka)."""
    tag = uuid.uuid4().hex[:6]
    sent = {f"{tag}-{i}" for i in range(n)}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed = []
    for v in sorted(sent):
        p.produce(topic, value=v.encode(), partition=partition,
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert p.flush(60) == 0 and failed == [], failed
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{tag}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    got = set()
    deadline = time.monotonic() + DEADLINE_S
    while not sent <= got and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.add(m.value().decode())
    c.close()
    assert sent <= got, sorted(sent - got)[:5]


def elect_leaders_v0(bootstrap: str, topic: str, parts: list[int]) -> tuple[int, dict[int, int]]:
    """ElectLeaders v0 (no election type: PREFERRED; no top-level error code):
    (throttle, {partition: error code})."""
    body = i32(1) + string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts) + i32(30000)
    r = Reader(roundtrip(bootstrap, request(43, 0, 7, body)))
    assert r.i32() == 7  # correlation id
    throttle = r.i32()
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            part, code = r.i32(), r.i16()
            r.string()
            out[part] = code
    assert r.i == len(r.b), "v0 response has no trailing fields (no top-level error code)"
    return throttle, out


def elect_leaders_v1(bootstrap: str, election_type: int, topic: str, parts: list[int]) -> tuple[int, dict[int, int]]:
    """ElectLeaders v1: (top-level error code, {partition: error code})."""
    body = (struct.pack(">b", election_type) + i32(1) + string(topic) + i32(len(parts))
            + b"".join(i32(p) for p in parts) + i32(30000))
    r = Reader(roundtrip(bootstrap, request(43, 1, 8, body)))
    assert r.i32() == 8
    r.i32()  # throttle
    top = r.i16()
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            part, code = r.i32(), r.i16()
            r.string()
            out[part] = code
    return top, out


def test_preferred_leaders_need_no_election(cluster):
    node = cluster.node(1)
    wait_for("3 brokers", lambda: brokers(node) == {1, 2, 3})
    topic = f"balanced-{uuid.uuid4().hex[:8]}"
    create(node, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    for nd in cluster.nodes:
        wait_for(f"node {nd.node_id} sees the leaders", lambda: leaders(nd, topic) == {0: 1, 1: 2, 2: 3})

    # Every partition: nothing to elect, so nothing reported (Kafka leaves them out).
    r = elect(cluster.bootstrap, "PREFERRED", "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Successfully completed" not in r.stdout and "Error" not in r.stdout, r.stdout
    # A named partition whose preferred replica leads: ELECTION_NOT_NEEDED.
    for election in ("PREFERRED", "UNCLEAN"):
        r = elect(cluster.node(2).bootstrap, election, "--topic", topic, "--partition", "1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"Valid replica already elected for partitions {topic}-1" in r.stdout, r.stdout
    r = elect(node.bootstrap, "PREFERRED", "--topic", topic, "--partition", "9")
    assert r.returncode != 0
    assert f"for partition: {topic}-9: org.apache.kafka.common.errors.UnknownTopicOrPartitionException" in r.stdout, r.stdout
    # v0 on the wire: per-partition codes only.
    throttle, codes = elect_leaders_v0(cluster.node(3).bootstrap, topic, [0, 2, 5])
    assert (throttle, codes) == (0, {0: 84, 2: 84, 5: KafkaError.UNKNOWN_TOPIC_OR_PART})
    # v1: an election type Kafka does not know is an invalid request, on every partition.
    assert elect_leaders_v1(node.bootstrap, 1, topic, [0]) == (0, {0: 84})
    assert elect_leaders_v1(node.bootstrap, 7, topic, [0, 1]) == (42, {0: 42, 1: 42})
    # librdkafka's AdminClient (confluent-kafka elect_leaders).
    a = admin(cluster.node(2))
    got = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 7)]).result(timeout=60)
    codes = {tp.partition: (err.code() if err is not None else 0) for tp, err in got.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 7: KafkaError.UNKNOWN_TOPIC_OR_PART}, got
    assert leaders(node, topic) == {0: 1, 1: 2, 2: 3}

    # The broker reports the rebalance keys it runs with.
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    a = admin(node)
    entries = a.describe_configs([res], request_timeout=30)[res].result(timeout=60)
    assert {k: entries[k].value for k in ("auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
                                          "leader.imbalance.per.broker.percentage")} == {
        "auto.leader.rebalance.enable": "false", "leader.imbalance.check.interval.seconds": "300",
        "leader.imbalance.per.broker.percentage": "10"}


@pytest.fixture(scope="module")
def split_cluster(tmp_path_factory):
    """3 controller-only nodes (1-3) and 3 broker-only nodes (4-6): brokers can die without
    the quorum losing its majority."""
    yield from conftest.running_cluster(tmp_path_factory, "leader-election-split", controllers=3, brokers=3,
                                        extra_args=["--auto-leader-rebalance-enable", "false"])


def test_unclean_election_for_a_partition_whose_only_in_sync_replica_is_gone(split_cluster):
    cluster = split_cluster
    b4, b5, b6 = cluster.node(4), cluster.node(5), cluster.node(6)
    wait_for("3 brokers", lambda: brokers(b4) == {4, 5, 6})
    topic = f"unclean-{uuid.uuid4().hex[:8]}"
    create(b4, topic, [[6, 4], [4, 5]])
    for nd in (b4, b5, b6):
        wait_for(f"node {nd.node_id} sees the leaders", lambda: leaders(nd, topic) == {0: 6, 1: 4})
    produce_consume(b4.bootstrap, topic, 0)

    # Broker 4 dies: it leaves partition 0's ISR, which is broker 6 alone from then on.
    b4.kill9()
    wait_for("broker 4 fenced and out of the ISR", lambda: 4 not in brokers(b5) and partitions(b5, topic)[0][2] == [6])
    produce_consume(b5.bootstrap, topic, 0)  # acknowledged by broker 6 alone: broker 4 lacks it
    # Then broker 6, the only in-sync replica, dies: partition 0 goes offline instead of
    # moving to broker 4, which lacks acknowledged records. With KIP-966 (on in a new
    # cluster, as in Kafka 4.4) broker 6 leaves the ISR, which is empty, for the ELR.
    b6.kill9()
    after = wait_for("broker 6 fenced", lambda: 6 not in brokers(b5) and partitions(b5, topic))
    assert after[0][0] == -1 and after[0][2] == [], after
    b4.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[b4])
    wait_for("broker 4 registered again", lambda: brokers(b5) == {4, 5})
    assert partitions(b5, topic)[0][0] == -1, "a clean election never picks an out-of-ISR replica"
    r = elect(b5.bootstrap, "PREFERRED", "--topic", topic, "--partition", "0")
    assert r.returncode != 0
    assert "PreferredLeaderNotAvailableException" in r.stdout, r.stdout

    r = elect(b5.bootstrap, "UNCLEAN", "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0" in r.stdout, r.stdout
    # The live out-of-ISR replica leads, alone in the ISR; every broker learns it.
    for nd in (b4, b5):
        wait_for(f"node {nd.node_id} sees broker 4 lead", lambda: (partitions(nd, topic) or {}).get(0, (None,))[0] == 4)
    assert partitions(b5, topic)[0][2] == [4]
    produce_consume(b5.bootstrap, topic, 0)
    r = elect(b5.bootstrap, "UNCLEAN", "--topic", topic, "--partition", "0")
    assert f"Valid replica already elected for partitions {topic}-0" in r.stdout, r.stdout

    # The old leader comes back as a follower: it truncates what the unclean leader never
    # had, catches up and rejoins the ISR; broker 4 keeps leading.
    b6.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[b6])
    wait_for("broker 6 registered again", lambda: brokers(b5) == {4, 5, 6})
    wait_for("broker 6 back in the ISR", lambda: sorted(partitions(b5, topic)[0][2]) == [4, 6], deadline_s=120)
    assert leaders(b5, topic)[0] == 4
    assert produce_code(b6, topic, 0) == KafkaError.NOT_LEADER_FOR_PARTITION
    assert produce_code(b4, topic, 0) == 0


def fence_and_restart(cluster, victim, topic: str) -> dict[int, int]:
    """kill -9 `victim`, wait until it is fenced and its leaderships moved to other in-sync
    replicas, restart it; returns the leaders before the kill."""
    node = next(nd for nd in cluster.nodes if nd is not victim)
    before = wait_for("leaders", lambda: (ls := leaders(node, topic)) and -1 not in ls.values() and ls)
    victim.kill9()
    after = wait_for("victim fenced", lambda: victim.node_id not in brokers(node) and leaders(node, topic))
    moved = {p: after[p] for p, b in before.items() if b == victim.node_id}
    assert moved and all(b not in (-1, victim.node_id) for b in moved.values()), after
    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    wait_for("victim registered again", lambda: victim.node_id in brokers(node))
    return before


def test_kafka_leader_election_moves_leadership_back(cluster):
    node = cluster.node(1)
    wait_for("3 brokers", lambda: brokers(node) == {1, 2, 3})
    topic = f"back-{uuid.uuid4().hex[:8]}"
    create(node, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2)
    before = fence_and_restart(cluster, cluster.node(3), topic)
    # Caught up, broker 3 rejoins the ISR (replication); then the tool moves leadership back.
    wait_for("broker 3 back in the ISR", lambda: all(3 in p[2] for p in partitions(node, topic).values()))
    r = elect(cluster.bootstrap, "PREFERRED", "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"Successfully completed leader election \(PREFERRED\) for partitions .*{topic}-2", r.stdout), r.stdout
    wait_for("preferred leaders back", lambda: leaders(node, topic) == before)
    r = elect(cluster.bootstrap, "PREFERRED", "--topic", topic, "--partition", "2")
    assert f"Valid replica already elected for partitions {topic}-2" in r.stdout, r.stdout
    produce_consume(node.bootstrap, topic, 2)


@pytest.fixture(scope="module")
def rebalancing_cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "leader-rebalance",
                                        extra_args=["--leader-imbalance-check-interval-seconds", "1"])


def test_leadership_comes_back_by_itself(rebalancing_cluster):
    cluster = rebalancing_cluster
    node = cluster.node(1)
    wait_for("3 brokers", lambda: brokers(node) == {1, 2, 3})
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    create(node, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2)
    before = fence_and_restart(cluster, cluster.node(2), topic)
    wait_for("preferred leaders back by themselves", lambda: leaders(node, topic) == before)
    produce_consume(node.bootstrap, topic, 1)
