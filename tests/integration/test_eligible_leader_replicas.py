"""Issue 27 point 4: KIP-966 eligible leader replicas keep every acknowledged record in the
scenario that loses them without it, on real processes (3 controller-only nodes and
brokers 4, 5, 6, so brokers can die without the quorum losing its majority).

The scenario (min.insync.replicas 2, RF 3, acks=all, `--flush never` and the
`--storage-fault drop-unsynced` hook on every node, so a kill -9 is a power loss):
broker 6 is killed, the ISR is [4, 5]; more records are acknowledged by 4 and 5; broker 5
is frozen (SIGSTOP) until it is fenced: the ISR is [4], below min ISR, so 5 is an eligible
leader replica (ELR) and leader 4 holds its high watermark; broker 4, the leader and last
ISR member, loses power: its unsynced records (acknowledged ones among them) are gone, the
ISR is empty, the ELR holds 4 and 5. Broker 4 comes back first, without a recorded clean
shutdown: it leaves the ELR and must not lead (before KIP-966 it led again, as the last
ISR member, without those records, and the others truncated to it: simulation finding 3).
Broker 5 resumes: the eligible replica leads, and every acknowledged record is there.

Kafka's own `kafka-topics.sh --describe` (DescribeTopicPartitions) shows the ELR and last
known ELR at each step. shardlog only: the power loss is a shardlog test hook. No timed
assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import Rec, consume_confluent, kafka_tool, produce_confluent
from conftest import wait_for

DEADLINE_S = 90
TOPIC_TOOL = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(
        tmp_path_factory, "elr", controllers=3, brokers=3,
        extra_args=["--auto-leader-rebalance-enable", "false", "--flush", "never", "--storage-fault", "drop-unsynced"])


def metadata(node, topic: str) -> tuple[int, list[int]] | None:
    """(leader, ISR) of partition 0 as `node`'s Metadata says."""
    t = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader, sorted(p.isrs)


def brokers(node) -> set[int]:
    return set(AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).brokers)


def described(node, topic: str) -> dict[str, str]:
    """Partition 0's fields as Kafka's TopicCommand prints them (Leader, Isr, Elr,
    LastKnownElr), from DescribeTopicPartitions."""
    r = kafka_tool(TOPIC_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--topic", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next((ln for ln in r.stdout.splitlines() if re.search(r"\bPartition: 0\b", ln)), None)
    assert line is not None, r.stdout
    return {k: v.strip() for k, v in re.findall(r"(\w+): ([^\t]*)", line)}


def ids(field: str) -> list[int]:
    return sorted(int(x) for x in field.split(",") if x.strip())


def records(prefix: str, n: int) -> list[Rec]:
    return [Rec(None, f"{prefix}-{i}".encode(), (), None) for i in range(n)]


def test_an_eligible_replica_leads_and_keeps_what_the_crashed_leader_lost(cluster):
    b4, b5, b6 = cluster.node(4), cluster.node(5), cluster.node(6)
    wait_for("3 brokers", lambda: brokers(b4) == {4, 5, 6}, DEADLINE_S)
    topic = f"elr-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b4.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[4, 5, 6]], config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic].result(timeout=60)
    wait_for("broker 4 leads, every replica in sync", lambda: metadata(b5, topic) == (4, [4, 5, 6]), DEADLINE_S)

    acked = [p.rec.value for p in produce_confluent(b4.bootstrap, topic, records("all-three", 200), partition=0)]
    b6.kill9()
    wait_for("broker 6 out of the ISR", lambda: metadata(b5, topic) == (4, [4, 5]), DEADLINE_S)
    d = described(b5, topic)
    assert ids(d.get("Elr", "")) == [], f"an ISR at min ISR keeps no ELR: {d}"
    # Acknowledged by 4 and 5, unsynced on 4 (flush never): what 4's power loss will take.
    acked += [p.rec.value for p in produce_confluent(b4.bootstrap, topic, records("four-and-five", 200), partition=0)]

    b5.pause()
    try:
        wait_for("broker 5 fenced: the ISR is the leader alone", lambda: metadata(b4, topic) == (4, [4]), DEADLINE_S)
        d = described(b4, topic)
        assert ids(d["Elr"]) == [5], f"5 left an ISR below min ISR: it is eligible: {d}"
        b4.kill9()  # a power loss: 4's unsynced records are gone
        b4.start()
        cluster.wait_ready(timeout_s=DEADLINE_S * 2, nodes=[b4])
        wait_for("broker 4 registered again", lambda: 4 in brokers(b4), DEADLINE_S)
        wait_for("broker 4 out of the ELR", lambda: ids(described(b4, topic)["Elr"]) == [5], DEADLINE_S)
        d = described(b4, topic)
        assert d["Leader"] == "none" and ids(d["Isr"]) == [], f"back after a crash, 4 must not lead: {d}"
        assert ids(d["LastKnownElr"]) == [4], d
        assert metadata(b4, topic)[0] == -1
    finally:
        b5.resume()
    wait_for("the eligible replica leads", lambda: (metadata(b4, topic) or (None,))[0] == 5, DEADLINE_S)
    d = described(b4, topic)
    # Once 5 led, the ELR and last known ELR are spent. Leadership may already have moved
    # on, but only to an ISR member: 4, after it caught up with 5 and rejoined (seen twice
    # in CI under load, when 5 was fenced again seconds after its SIGCONT). If that fencing
    # left the ISR [4] below min ISR, 5 is eligible again, as KIP-966 says: ELR [5].
    isr, elr = ids(d["Isr"]), ids(d["Elr"])
    assert ids(d["LastKnownElr"]) == [], d
    if d["Leader"] == "5":
        assert elr == [] and 5 in isr, d
    else:
        assert d["Leader"] == "4" and 4 in isr, d
        assert elr == ([5] if isr == [4] else []), d

    # 4 follows the new leader: it truncates what it had alone and rejoins the ISR. (Until
    # then the ISR [5] is below min ISR and 5 holds its high watermark where it learned it
    # as a follower, possibly short of the last acknowledged records.)
    wait_for("broker 4 back in the ISR", lambda: 4 in (metadata(b5, topic) or (0, []))[1], DEADLINE_S * 2)
    # Leadership may still move (5 fenced again under load): a read that meets
    # NOT_LEADER_OR_FOLLOWER is tried again (seen once in a local CI run).
    got = wait_for("every record read back", lambda: [c.value for c in consume_confluent(b4.bootstrap, topic, 1)[0]], DEADLINE_S)
    missing = [v for v in acked if v not in set(got)]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost, first {missing[:3]}"
    assert got[:len(acked)] == acked, "acknowledged records out of order"


def test_without_elr_the_crashed_last_isr_member_leads_again(cluster):
    """The negative control: with eligible.leader.replicas.version 0 (Kafka before 4.1)
    the same crash makes broker 4, the last ISR member, lead again at once, with whatever
    its power loss left; the test above would then fail. ELR is turned back on after."""
    b4, b5 = cluster.node(4), cluster.node(5)
    features = "org.apache.kafka.tools.FeatureCommand"
    r = kafka_tool(features, "--bootstrap-server", b4.bootstrap, "downgrade", "--feature", "eligible.leader.replicas.version=0")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        wait_for("broker 4 restarted by the test above", lambda: 4 in brokers(b5) and 5 in brokers(b4), DEADLINE_S * 2)
        topic = f"no-elr-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b4.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[4, 5]], config={"min.insync.replicas": "2"})],
                            operation_timeout=30)[topic].result(timeout=60)
        wait_for("broker 4 leads, both in sync", lambda: metadata(b5, topic) == (4, [4, 5]), DEADLINE_S)
        produce_confluent(b4.bootstrap, topic, records("both", 100), partition=0)
        b5.pause()
        try:
            wait_for("broker 5 fenced: the ISR is the leader alone", lambda: metadata(b4, topic) == (4, [4]), DEADLINE_S)
            assert ids(described(b4, topic)["Elr"]) == [], "ELR off: no eligible leader replicas"
            b4.kill9()
            b4.start()
            cluster.wait_ready(timeout_s=DEADLINE_S * 2, nodes=[b4])
            wait_for("broker 4 leads again after its crash", lambda: metadata(b4, topic) == (4, [4]), DEADLINE_S)
        finally:
            b5.resume()
    finally:
        r = kafka_tool(features, "--bootstrap-server", b4.bootstrap, "upgrade", "--feature", "eligible.leader.replicas.version=1")
        assert r.returncode == 0, r.stdout + r.stderr
