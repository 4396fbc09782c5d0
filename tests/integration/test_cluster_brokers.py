"""Issue 11, brokers: 3 combined nodes (tests/integration/cluster_harness.py), each
registering its broker with the quorum and heartbeating; the quorum leader fences a
silent broker and moves (or, with one replica, offlines) its partitions.

Real clients (confluent-kafka) and raw wire requests (kafkawire):
- Metadata / DescribeCluster list all 3 brokers with their racks;
- a 6-partition topic has leaders on every broker; records produced through one bootstrap
  are all consumed back by a consumer group (FindCoordinator names the leader of the
  group's __consumer_offsets partition);
- a broker answers NOT_LEADER_OR_FOLLOWER for a partition another broker leads;
- replication factor above the broker count: INVALID_REPLICATION_FACTOR; an assignment
  naming an unknown broker: INVALID_REPLICA_ASSIGNMENT;
- `kill -9` of a broker: it disappears from Metadata, its partitions report
  LEADER_NOT_AVAILABLE while the others keep serving; restarted, it re-registers, leads
  its partitions again and every acknowledged record is still there;
- DescribeCluster v2 lists a fenced broker, flagged, when asked (KIP-1073).
- SIGSTOP of a broker that is not the active controller: fenced the same way; SIGCONT:
  unfenced, it leads its partitions again.
No timed assertions: every wait polls with a generous deadline; the time to fence is
measured by benches/broker_fencing.py.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import java_tool, json_lines
from conftest import wait_for
from kafkawire import (FlexReader, compact_array, compact_nullable_string, compact_string, flexible_roundtrip, i16, i32,
                       i64, parse_produce_v8, produce_v8_request, record_batch, roundtrip, uvarint)

DEADLINE_S = 60
RACKS = ["rack-a", "rack-b", "rack-c"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "cluster-brokers", racks=RACKS)


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})




def create(node, name: str, partitions: int, rf: int = 1):
    a = admin(node)
    a.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)[name].result(timeout=60)


def leaders(node, topic: str) -> dict[int, int] | None:
    """partition → leader id (-1 when none) as `node`'s Metadata says; None if unknown."""
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: p.leader for p in t.partitions.values()}


def test_metadata_lists_every_broker_with_its_rack(cluster):
    for nd in cluster.nodes:
        brokers = wait_for("all 3 brokers registered",
                           lambda: (b := admin(nd).list_topics(timeout=10).brokers) and len(b) == 3 and b)
        assert {b.id: (b.host, b.port) for b in brokers.values()} == {
            n.node_id: ("127.0.0.1", n.port) for n in cluster.nodes}
        a = admin(nd)  # kept alive until the future is done
        desc = a.describe_cluster(request_timeout=10).result(timeout=30)
        assert {n.id: n.rack for n in desc.nodes} == {n.node_id: RACKS[n.node_id - 1] for n in cluster.nodes}
        assert desc.controller is not None and desc.controller.id in {1, 2, 3}
    # Another client's view (kafka-python asks Metadata).
    from kafka.admin import KafkaAdminClient
    kp = KafkaAdminClient(bootstrap_servers=cluster.node(2).bootstrap)
    try:
        brokers = kp.describe_cluster()["brokers"]
    finally:
        kp.close()
    assert {b["broker_id"]: b["rack"] for b in brokers} == {n.node_id: RACKS[n.node_id - 1] for n in cluster.nodes}


def test_leaders_spread_and_a_group_consumes_everything_across_brokers(cluster):
    wait_for("all 3 brokers registered", lambda: len(admin(cluster.node(1)).list_topics(timeout=10).brokers) == 3)
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    create(cluster.node(2), topic, 6)
    for nd in cluster.nodes:
        ls = wait_for(f"{nd.node_id} sees the leaders", lambda: (l := leaders(nd, topic)) and len(l) == 6 and l)
        assert set(ls.values()) == {1, 2, 3}, ls
    # The group coordinators (leaders of __consumer_offsets) spread over the cluster too.
    assert set(leaders(cluster.node(1), "__consumer_offsets").values()) == {1, 2, 3}
    # One bootstrap server: the client finds the other brokers in Metadata.
    p = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    sent = {f"v{i}" for i in range(600)}
    for i, v in enumerate(sorted(sent)):
        p.produce(topic, value=v.encode(), partition=i % 6,
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert p.flush(60) == 0
    assert failed == []
    c = Consumer({"bootstrap.servers": cluster.node(3).bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = set()
    deadline = time.monotonic() + DEADLINE_S
    while got != sent and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.add(m.value().decode())
    # The group's offsets commit to its coordinator, wherever that is.
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, i) for i in range(6)], timeout=30)
    c.close()
    assert got == sent
    assert sum(tp.offset for tp in committed) == 600


def test_a_broker_refuses_partitions_it_does_not_lead(cluster):
    topic = f"foreign-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 3)
    # Every node must have applied the creation (a node that has not answers
    # UNKNOWN_TOPIC_OR_PARTITION, as Kafka's brokers do until their metadata arrives).
    for nd in cluster.nodes:
        ls = wait_for("leaders", lambda: (l := leaders(nd, topic)) and len(l) == 3 and -1 not in l.values() and l)
    batch = record_batch([(None, b"x", [])], base_ts=int(time.time() * 1000))
    for part, leader in ls.items():
        for nd in cluster.nodes:
            _, out = parse_produce_v8(roundtrip(nd.bootstrap, produce_v8_request(1, topic, part, batch)))
            code = out[(topic, part)]["error_code"]
            if nd.node_id == leader:
                assert code == 0, (nd.node_id, part)
            else:
                assert code == KafkaError.NOT_LEADER_FOR_PARTITION, (nd.node_id, part, code)


def produce_v10(bootstrap: str, topic: str, partition: int, records: bytes) -> tuple[int, tuple | None, dict]:
    """Produce v10 (flexible) of one partition: (error code, KIP-951 current leader
    (id, epoch) or None, node endpoints {id: (host, port, rack)})."""
    part = i32(partition) + uvarint(len(records) + 1) + records + uvarint(0)
    body = (compact_nullable_string(None) + i16(-1) + i32(30000)
            + compact_array([compact_string(topic) + compact_array([part]) + uvarint(0)]))
    r = flexible_roundtrip(bootstrap, 0, 10, body)

    out = {}

    def partition_response():
        idx, code = r.i32(), r.i16()
        r.i64(), r.i64(), r.i64()
        r.array(lambda: (r.i32(), r.compact_string(), r.tags()))
        r.compact_string()
        leader = [None]

        def read(tag):
            if tag == 0:
                leader[0] = (r.i32(), r.i32())
        r.tagged(read)
        out[idx] = (code, leader[0])

    r.array(lambda: (r.compact_string(), r.array(partition_response), r.tags()))
    r.i32()  # throttle
    endpoints = {}

    def read_top(tag):
        if tag == 0:
            for nid, host, port, rack, _ in r.array(lambda: (r.i32(), r.compact_string(), r.i32(), r.compact_string(), r.tags())):
                endpoints[nid] = (host, port, rack)
    r.tagged(read_top)
    code, leader = out[partition]
    return code, leader, endpoints


def test_not_leader_names_the_leader_kip_951(cluster):
    topic = f"kip951-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 3)
    for nd in cluster.nodes:
        ls = wait_for("leaders", lambda: (l := leaders(nd, topic)) and len(l) == 3 and -1 not in l.values() and l)
    batch = record_batch([(None, b"x", [])], base_ts=int(time.time() * 1000))
    for part, leader in ls.items():
        other = next(nd for nd in cluster.nodes if nd.node_id != leader)
        code, current, endpoints = produce_v10(other.bootstrap, topic, part, batch)
        assert code == KafkaError.NOT_LEADER_FOR_PARTITION
        assert current is not None and current[0] == leader
        lead = cluster.node(leader)
        assert endpoints == {leader: ("127.0.0.1", lead.port, RACKS[leader - 1])}
        assert produce_v10(lead.bootstrap, topic, part, batch)[:2] == (0, None)


def topic_id(node, topic: str) -> bytes:
    from confluent_kafka import TopicCollection
    a = admin(node)  # kept referenced until the result is in (else the handle is destroyed)
    d = a.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    u = d.topic_id
    return struct.pack(">qq", u.get_most_significant_bits(), u.get_least_significant_bits())


def fetch_v16(bootstrap: str, tid: bytes, partition: int) -> tuple[int, tuple | None, dict]:
    """Fetch v16 of one partition from offset 0: (error code, KIP-951 current leader
    (id, epoch) or None, node endpoints {id: (host, port, rack)})."""
    part = i32(partition) + i32(-1) + i64(0) + i32(-1) + i64(-1) + i32(1 << 20) + uvarint(0)
    body = (i32(0) + i32(1) + i32(1 << 20) + struct.pack(">b", 0) + i32(0) + i32(-1)
            + compact_array([tid + compact_array([part]) + uvarint(0)])
            + compact_array([]) + compact_string(""))
    r = flexible_roundtrip(bootstrap, 1, 16, body)
    r.i32(), r.i16(), r.i32()  # throttle, error, session

    out = {}

    def partition_response():
        idx, code = r.i32(), r.i16()
        r.i64(), r.i64(), r.i64()
        r.array(lambda: (r.i64(), r.i64(), r.tags()))
        r.i32()
        r.compact_bytes()
        leader = [None]

        def read(tag):
            if tag == 1:
                leader[0] = (r.i32(), r.i32())
        r.tagged(read)
        out[idx] = (code, leader[0])

    r.array(lambda: (r.uuid(), r.array(partition_response), r.tags()))
    endpoints = {}

    def read_top(tag):
        if tag == 0:
            for nid, host, port, rack, _ in r.array(lambda: (r.i32(), r.compact_string(), r.i32(), r.compact_string(), r.tags())):
                endpoints[nid] = (host, port, rack)
    r.tagged(read_top)
    code, leader = out[partition]
    return code, leader, endpoints


def test_fetch_from_a_follower_names_the_leader_kip_951(cluster):
    topic = f"kip951f-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 3)
    for nd in cluster.nodes:
        ls = wait_for("leaders", lambda: (l := leaders(nd, topic)) and len(l) == 3 and -1 not in l.values() and l)
    tid = topic_id(cluster.node(1), topic)
    for part, leader in ls.items():
        other = next(nd for nd in cluster.nodes if nd.node_id != leader)
        code, current, endpoints = fetch_v16(other.bootstrap, tid, part)
        assert code == KafkaError.NOT_LEADER_FOR_PARTITION, (part, code)
        assert current is not None and current[0] == leader
        lead = cluster.node(leader)
        assert endpoints == {leader: ("127.0.0.1", lead.port, RACKS[leader - 1])}
        assert fetch_v16(lead.bootstrap, tid, part) == (0, None, {})


def test_replication_factor_above_the_broker_count_is_refused(cluster):
    name = f"rf4-{uuid.uuid4().hex[:8]}"
    a = admin(cluster.node(1))
    with pytest.raises(Exception) as e:
        a.create_topics([NewTopic(name, 1, 4)])[name].result(timeout=30)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    with pytest.raises(Exception) as e:
        a.create_topics([NewTopic(name, 1, replica_assignment=[[9]])])[name].result(timeout=30)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    # An assignment on live brokers is honoured.
    ok = f"assigned-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(ok, 2, replica_assignment=[[3], [2]])])[ok].result(timeout=30)
    assert wait_for("assigned leaders", lambda: leaders(cluster.node(1), ok)) == {0: 3, 1: 2}


def test_a_killed_broker_is_fenced_and_comes_back_with_its_data(cluster):
    victim = cluster.node(3)
    survivor = cluster.node(1)
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    create(survivor, topic, 6)
    ls = wait_for("leaders on every broker", lambda: (l := leaders(survivor, topic)) and set(l.values()) == {1, 2, 3} and l)
    p = Producer({"bootstrap.servers": survivor.bootstrap, "acks": "all"})
    acked = set()
    for i in range(300):
        p.produce(topic, value=f"a{i}".encode(), partition=i % 6,
                  on_delivery=lambda err, msg: err is None and acked.add(msg.value().decode()))
    assert p.flush(60) == 0
    assert len(acked) == 300

    victim.kill9()
    def fenced():
        md = admin(survivor).list_topics(topic, timeout=10)
        if 3 in md.brokers:
            return None
        parts = md.topics[topic].partitions
        return {i: (pm.leader, pm.error.code() if pm.error else 0) for i, pm in parts.items()}
    after = wait_for("broker 3 fenced", fenced)
    # DescribeCluster v2 (KIP-1073, the Java 4.4 admin's includeFencedBrokers): the fenced
    # broker is listed, flagged fenced, only when the client asks.
    (d,) = json_lines(java_tool("describe-cluster", "--bootstrap", survivor.bootstrap, "--include-fenced", "true").stdout)
    assert sorted(d["nodes"]) == [1, 2, 3] and d["fenced"] == [3], d
    (d,) = json_lines(java_tool("describe-cluster", "--bootstrap", survivor.bootstrap).stdout)
    assert sorted(d["nodes"]) == [1, 2] and d["fenced"] == [], d
    for part, leader in ls.items():
        if leader == 3:
            assert after[part] == (-1, KafkaError.LEADER_NOT_AVAILABLE), after
        else:
            assert after[part] == (leader, 0), after
    # Partitions on the survivors keep serving.
    served = [part for part, leader in ls.items() if leader != 3]
    for part in served:
        p.produce(topic, value=f"b{part}".encode(), partition=part,
                  on_delivery=lambda err, msg: err is None and acked.add(msg.value().decode()))
    assert p.flush(60) == 0
    assert {f"b{part}" for part in served} <= acked

    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    wait_for("broker 3 leads its partitions again", lambda: leaders(survivor, topic) == ls)
    c = Consumer({"bootstrap.servers": survivor.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(6)])
    got = set()
    deadline = time.monotonic() + DEADLINE_S
    while not acked <= got and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.add(m.value().decode())
    c.close()
    assert acked <= got, sorted(acked - got)[:10]


def test_delete_topics_removes_the_data_on_every_broker(cluster):
    topic = f"doomed-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 6)
    wait_for("leaders on every broker",
             lambda: (l := leaders(cluster.node(1), topic)) and set(l.values()) == {1, 2, 3})
    p = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "acks": "all"})
    for i in range(60):
        p.produce(topic, value=b"x", partition=i % 6)
    assert p.flush(60) == 0

    def dirs():
        return sorted(str(d) for nd in cluster.nodes for d in nd.data_dir.rglob(f"{topic}-*"))
    assert len(dirs()) == 6, dirs()  # one replica each, on its leader
    a = admin(cluster.node(2))
    a.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    wait_for("every broker removed the topic's files", lambda: dirs() == [])


def test_a_topic_deleted_while_a_broker_was_down_leaves_no_files_there(cluster):
    """Stray partitions (Kafka's KAFKA-14616): the deletion committed while broker 3 was
    down never reached its shards; at its next start it removes the directories the
    metadata no longer gives it, before any shard opens them."""
    topic = f"stray-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 6)
    wait_for("leaders on every broker",
             lambda: (l := leaders(cluster.node(1), topic)) and set(l.values()) == {1, 2, 3})
    p = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "acks": "all"})
    for i in range(60):
        p.produce(topic, value=b"x", partition=i % 6)
    assert p.flush(60) == 0
    victim = cluster.node(3)
    mine = sorted(victim.data_dir.rglob(f"{topic}-*"))
    assert mine, "broker 3 holds some of the topic's partitions"
    victim.kill9()
    a = admin(cluster.node(1))
    wait_for("broker 3 fenced", lambda: 3 not in a.list_topics(timeout=10).brokers)
    a.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    assert sorted(victim.data_dir.rglob(f"{topic}-*")) == mine, "a killed broker's files stay until it starts"
    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    assert sorted(victim.data_dir.rglob(f"{topic}-*")) == []
    assert "removing a stray partition directory" in victim.log_since_start()


def test_create_partitions_with_an_explicit_assignment(cluster):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewPartitions
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    create(cluster.node(1), topic, 2)
    a = admin(cluster.node(2))

    def refused(total: int, assignment: list[list[int]]) -> int:
        f = a.create_partitions([NewPartitions(topic, total, replica_assignment=assignment)], operation_timeout=30)[topic]
        with pytest.raises(KafkaException) as e:
            f.result(timeout=60)
        return e.value.args[0].code()

    assert refused(4, [[2]]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # one assignment for two new partitions
    assert refused(4, [[2], [9]]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # no broker 9
    assert refused(4, [[2], [2, 3]]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # replication factor differs
    a.create_partitions([NewPartitions(topic, 4, replica_assignment=[[3], [2]])], operation_timeout=30)[topic].result(timeout=60)
    ls = wait_for("4 partitions led", lambda: (l := leaders(cluster.node(1), topic)) and len(l) == 4 and -1 not in l.values() and l)
    assert (ls[2], ls[3]) == (3, 2), ls
    p = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "acks": "all"})
    for part in (2, 3):
        p.produce(topic, value=b"v", partition=part)
    assert p.flush(60) == 0


def test_a_stopped_broker_is_fenced_and_comes_back_on_sigcont(cluster):
    """SIGSTOP of a broker that is not the active controller: the process stays (a hung
    machine) but sends no heartbeats, so the quorum fences it; SIGCONT: its next heartbeat
    unfences it (same incarnation, no re-registration) and it leads its partitions again."""
    active, _ = cluster.wait_leader(timeout_s=DEADLINE_S)
    victim_id = next(nd.node_id for nd in cluster.nodes if nd.node_id != active)
    victim, survivor = cluster.node(victim_id), cluster.node(active)
    topic = f"stop-{uuid.uuid4().hex[:8]}"
    create(survivor, topic, 6)
    ls = wait_for("leaders on every broker", lambda: (l := leaders(survivor, topic)) and set(l.values()) == {1, 2, 3} and l)

    victim.pause()
    try:
        def fenced():
            md = admin(survivor).list_topics(topic, timeout=10)
            if victim_id in md.brokers:
                return None
            return {i: (pm.leader, pm.error.code() if pm.error else 0) for i, pm in md.topics[topic].partitions.items()}
        after = wait_for(f"stopped broker {victim_id} fenced", fenced)
        for part, leader in ls.items():
            expected = (-1, KafkaError.LEADER_NOT_AVAILABLE) if leader == victim_id else (leader, 0)
            assert after[part] == expected, after
        assert victim.alive(), "a stopped process is still there"
    finally:
        victim.resume()
    wait_for(f"broker {victim_id} leads its partitions again", lambda: leaders(survivor, topic) == ls)
    assert victim_id in admin(survivor).list_topics(topic, timeout=10).brokers
    # Resumed, it follows the quorum again: its own Metadata catches up.
    wait_for("the resumed broker's Metadata agrees", lambda: leaders(victim, topic) == ls)
