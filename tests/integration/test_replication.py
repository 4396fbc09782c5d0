"""Issue 12, replication basics on 3 real brokers (tests/integration/cluster_harness.py):
followers fetch from leaders, the ISR and high watermark, acks=all and
min.insync.replicas, failover that keeps every acknowledged record, and a restarted
broker catching up and rejoining the ISR. The fault suites (kill -9 every 10 s, SIGSTOP,
network namespaces, the coordinator's broker, a corrupted segment) are in
test_replication_faults.py.

Real clients: confluent-kafka (idempotent producer, consumer, AdminClient); the Java
consumer for position validation (tests/java SeekValidation).
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import java_tool, json_lines
from conftest import wait_for

# A follower that stops fetching leaves the ISR after this long (Kafka: 30 s).
LAG_MS = 4000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "replication",
                                        extra_args=["--replica-lag-time-max-ms", str(LAG_MS)])


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def create(node, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None):
    a = admin(node)
    a.create_topics([NewTopic(name, partitions, rf, config=configs or {})], operation_timeout=30)[name].result(timeout=60)


def partition_state(node, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition → (leader, replicas, isr) as `node`'s Metadata says; None if unknown."""
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def live(cluster):
    return [nd for nd in cluster.nodes if nd.alive()]


def produce(node, topic: str, values: list[bytes], **conf) -> tuple[list[tuple[int, int, bytes]], list[str]]:
    """(partition, offset, value) of each acknowledged record and the errors seen."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def report(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(err.name())

    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000, **conf})
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=str(i).encode(), on_delivery=report)
        p.poll(0)
    assert p.flush(90) == 0, "every record was answered"
    return acked, errors


def read_all(node, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition from offset 0 up to the high watermark."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"rd-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        eof: set[int] = set()

        def done():
            for m in c.consume(num_messages=1000, timeout=1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                got[m.partition()].append((m.offset(), m.value()))
                eof.discard(m.partition())
            return len(eof) == partitions

        wait_for(f"every partition of {topic} read to its end", done, deadline_s=120)
        return got
    finally:
        c.close()


def assert_acked_present_once(acked, got):
    by_partition: dict[int, dict[int, bytes]] = {}
    for p, records in got.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True, \
            f"partition {p}: offsets contiguous"
        by_partition[p] = dict(records)
    values = [v for records in got.values() for _, v in records]
    assert len(values) == len(set(values)), "no record appears twice"
    for p, off, v in acked:
        assert by_partition[p].get(off) == v, f"acknowledged record at {p}/{off} is there, unchanged"


def test_followers_replicate_and_join_the_isr(cluster):
    topic = "rep-basic"
    create(cluster.node(1), topic, 3, 3)
    values = [f"v-{i}".encode() for i in range(3000)]
    acked, errors = produce(cluster.node(1), topic, values)
    assert not errors and len(acked) == len(values)
    # Every partition: three replicas, all in the ISR (Kafka creates it so, and the
    # followers keep up), as every broker reports it.
    for nd in cluster.nodes:
        state = wait_for(f"{topic} fully in sync on node {nd.node_id}",
                         lambda nd=nd: (s := partition_state(nd, topic)) and
                         all(len(isr) == 3 and isr == replicas for _, replicas, isr in s.values()) and s)
        assert len(state) == 3
    assert_acked_present_once(acked, read_all(cluster.node(2), topic, 3))


def test_leader_kill_keeps_every_acknowledged_record_and_the_broker_rejoins(cluster):
    topic = "rep-failover"
    create(cluster.node(1), topic, 3, 3, {"min.insync.replicas": "2"})
    first, errors = produce(cluster.node(1), topic, [f"a-{i}".encode() for i in range(2000)])
    assert not errors
    state = wait_for("ISR of 3", lambda: (s := partition_state(cluster.node(1), topic)) and
                     all(len(isr) == 3 for _, _, isr in s.values()) and s)
    victim = cluster.node(state[0][0])
    epoch_partition = 0
    victim.kill9()
    others = [nd for nd in cluster.nodes if nd is not victim]
    wait_for("a new leader for partition 0",
             lambda: (s := partition_state(others[0], topic)) and s[epoch_partition][0] not in (-1, victim.node_id))
    # The survivors still form min.insync.replicas = 2: acks=all keeps working.
    second, errors = produce(others[0], topic, [f"b-{i}".encode() for i in range(2000)])
    assert not errors, f"acks=all with 2 of 3 replicas: {errors[:3]}"
    assert_acked_present_once(first + second, read_all(others[0], topic, 3))
    victim.start()
    cluster.wait_ready(nodes=[victim])
    wait_for("the restarted broker back in every ISR",
             lambda: (s := partition_state(others[1], topic)) and
             all(victim.node_id in isr for _, _, isr in s.values()), deadline_s=120)


def test_min_insync_replicas_refuses_acks_all_but_not_acks_1(cluster):
    topic = "rep-min-isr"
    create(cluster.node(1), topic, 1, 3, {"min.insync.replicas": "3"})
    wait_for("ISR of 3", lambda: (s := partition_state(cluster.node(1), topic)) and len(s[0][2]) == 3)
    leader = partition_state(cluster.node(1), topic)[0][0]
    follower = next(nd for nd in cluster.nodes if nd.node_id != leader)
    follower.kill9()
    try:
        wait_for("the killed follower leaves the ISR",
                 lambda: (s := partition_state(cluster.node(leader), topic)) and follower.node_id not in s[0][2],
                 deadline_s=60)
        _, errors = produce(cluster.node(leader), topic, [b"x"], **{"enable.idempotence": False, "retries": 0})
        assert errors and errors[0] in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"), errors
        acked, errors = produce(cluster.node(leader), topic, [b"y"], acks="1", **{"enable.idempotence": False})
        assert not errors and len(acked) == 1, "acks=1 needs only the leader"
    finally:
        follower.start()
        cluster.wait_ready(nodes=[follower])
    wait_for("the follower back in the ISR",
             lambda: (s := partition_state(cluster.node(leader), topic)) and len(s[0][2]) == 3, deadline_s=120)
    acked, errors = produce(cluster.node(leader), topic, [b"z"])
    assert not errors and len(acked) == 1, "acks=all works again with the full ISR"


def test_java_consumer_validates_its_position_after_a_leader_change(cluster):
    """KIP-320 through the Java client: a position that carries a leader epoch is checked
    with OffsetsForLeaderEpoch against the current leader before the first fetch."""
    topic = "rep-seek-validation"
    create(cluster.node(1), topic, 1, 3, {"min.insync.replicas": "2"})
    first, errors = produce(cluster.node(1), topic, [f"a-{i}".encode() for i in range(100)])
    assert not errors and len(first) == 100
    state = wait_for("ISR of 3", lambda: (s := partition_state(cluster.node(1), topic)) and len(s[0][2]) == 3 and s)
    victim = cluster.node(state[0][0])
    others = [nd for nd in cluster.nodes if nd is not victim]
    bootstrap = ",".join(nd.bootstrap for nd in others)

    def seek(offset: int, epoch: int | None = None, reset: str = "none") -> dict:
        args = ["seek-validate", "--bootstrap", bootstrap, "--topic", topic, "--partition", "0",
                "--offset", str(offset), "--reset", reset]
        if epoch is not None:
            args += ["--epoch", str(epoch)]
        return json_lines(java_tool(*args).stdout)[-1]

    old_epoch = seek(0)["leader_epoch"]
    victim.kill9()
    try:
        wait_for("a new leader", lambda: (s := partition_state(others[0], topic)) and s[0][0] not in (-1, victim.node_id))
        second, errors = produce(others[0], topic, [f"b-{i}".encode() for i in range(50)])
        assert not errors and [o for _, o, _ in second] == list(range(100, 150))
        new_epoch = seek(100)["leader_epoch"]
        assert new_epoch > old_epoch, "the records after the failover carry the new leader's epoch"

        # Inside the old epoch: valid, the consumer reads from where it sought.
        assert seek(50, old_epoch) == {"offset": 50, "leader_epoch": old_epoch}
        # Past the old epoch's end (100) with the old epoch: the log the position came from
        # diverged there. reset=none: LogTruncationException naming the divergence point...
        r = seek(120, old_epoch)
        assert r.get("error") == "LogTruncationException", r
        assert r["divergent_offset"] == 100 and r["divergent_epoch"] == old_epoch, r
        # ...with a reset policy the client goes back to the divergence point instead.
        assert seek(120, old_epoch, reset="earliest") == {"offset": 100, "leader_epoch": new_epoch}
        # The same offset with the epoch that wrote it is valid.
        assert seek(120, new_epoch) == {"offset": 120, "leader_epoch": new_epoch}
    finally:
        victim.start()
        cluster.wait_ready(nodes=[victim])
    wait_for("the restarted broker back in the ISR",
             lambda: (s := partition_state(others[0], topic)) and victim.node_id in s[0][2], deadline_s=120)
