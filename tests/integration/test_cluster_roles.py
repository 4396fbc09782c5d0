"""Issue 11, roles: 3 controller-only nodes (the metadata quorum's voters, no shards, no
client listener) and 2 broker-only nodes (raft learners that follow the committed log),
started by tests/integration/cluster_harness.py (`controllers=3`, node ids 1-3 controllers,
4-5 brokers).

Real processes, real clients (confluent-kafka, Kafka's `kafka-metadata-quorum` tool):
- Metadata and DescribeCluster list exactly the 2 brokers (controllers never register);
- a topic created through a broker has partitions on both brokers; records produced
  through one broker are all consumed back by a group through the other;
- DescribeQuorum names 3 voters and the 2 brokers as observers with log end offsets;
- `kill -9` of the active controller: a new one is elected, a CreateTopics through a
  broker succeeds, every topic created before is still listed;
- SIGSTOP of the active controller while a broker forwards a request to it: the brokers'
  heartbeats reach the new leader meanwhile (no fencing of a live broker);
- a broker `kill -9`'d while topics are created (more than a snapshot interval of them, so
  the leader snapshots and purges its log) restarts, re-registers, catches up every topic
  through the snapshot install path, and gets partitions of new topics again.
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from admin_api import scrape
from conftest import wait_for
from clients import kafka_tool

DEADLINE_S = 60
CONTROLLERS = {1, 2, 3}
BROKERS = {4, 5}
# Small, so a broker down while a few dozen entries commit must install a snapshot.
SNAPSHOT_EVERY = 16
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(
        tmp_path_factory, "cluster-roles", n=2, controllers=3,
        extra_args=["--metadata-snapshot-every-entries", str(SNAPSHOT_EVERY)])


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})




def log_start(node) -> int:
    """The first metadata log offset `node`'s controller still holds (it purges the log
    before each snapshot's end), from its /metrics."""
    return int(scrape(node.admin_url).total("shardlog_raft_log_start_offset"))


def create(node, name: str, partitions: int) -> None:
    """CreateTopics through `node`, retried while the quorum has no leader (as a client
    retries NOT_CONTROLLER and timeouts)."""
    a = admin(node)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30,
                            request_timeout=30)[name].result(timeout=60)
            return
        except Exception as e:
            err = e.args[0] if e.args else e
            if (err.name() if hasattr(err, "name") else str(err)) == "TOPIC_ALREADY_EXISTS":
                return  # an earlier attempt committed before its answer was lost
            assert time.monotonic() < deadline, f"CreateTopics {name} through node {node.node_id}: {e}"
            time.sleep(0.2)


def topics_of(node) -> set[str]:
    md = admin(node).list_topics(timeout=10)
    return {name for name, t in md.topics.items() if t.error is None}


def leaders(node, topic: str) -> dict[int, int] | None:
    t = admin(node).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: p.leader for p in t.partitions.values()}


def brokers_seen(node) -> set[int]:
    return {b.id for b in admin(node).list_topics(timeout=10).brokers.values()}


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_layout(cluster):
    assert {nd.node_id for nd in cluster.controller_nodes} == CONTROLLERS
    assert {nd.node_id for nd in cluster.brokers} == BROKERS
    assert cluster.bootstrap == ",".join(cluster.node(i).bootstrap for i in sorted(BROKERS))
    for i in CONTROLLERS:
        assert cluster.node(i).roles == "controller"
        # A controller-only node never opens a client listener.
        assert "listening on" not in cluster.node(i).log_since_start()


def test_metadata_lists_exactly_the_brokers(cluster):
    for i in BROKERS:
        nd = cluster.node(i)
        wait_for(f"node {i} lists brokers 4 and 5", lambda: brokers_seen(nd) == BROKERS)
        md = admin(nd).list_topics(timeout=10)
        assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
            j: ("127.0.0.1", cluster.node(j).port) for j in BROKERS}
        a = admin(nd)
        desc = a.describe_cluster(request_timeout=10).result(timeout=30)
        assert {n.id for n in desc.nodes} == BROKERS
        # KIP-919: a broker names a live broker as the controller for clients.
        assert desc.controller is not None and desc.controller.id in BROKERS


def test_topics_spread_over_both_brokers_and_a_group_consumes_across_them(cluster):
    wait_for("both brokers registered", lambda: brokers_seen(cluster.node(4)) == BROKERS)
    topic = new_name("split")
    create(cluster.node(4), topic, 4)
    for i in BROKERS:
        ls = wait_for(f"node {i} sees the leaders",
                      lambda: (l := leaders(cluster.node(i), topic)) and len(l) == 4 and l)
        assert set(ls.values()) == BROKERS, ls
    # The offsets topic a broker created lives on the brokers only.
    assert set(leaders(cluster.node(5), "__consumer_offsets").values()) <= BROKERS
    p = Producer({"bootstrap.servers": cluster.node(4).bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    sent = {f"v{i}" for i in range(400)}
    for i, v in enumerate(sorted(sent)):
        p.produce(topic, value=v.encode(), partition=i % 4,
                  on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert p.flush(60) == 0
    assert failed == []
    c = Consumer({"bootstrap.servers": cluster.node(5).bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = set()
    deadline = time.monotonic() + DEADLINE_S
    while got != sent and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.add(m.value().decode())
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, i) for i in range(4)], timeout=30)
    c.close()
    assert got == sent
    assert sum(tp.offset for tp in committed) == 400


def describe_quorum(bootstrap: str, what: str) -> str:
    r = kafka_tool(QUORUM_TOOL, "--bootstrap-server", bootstrap, "describe", what)
    assert r.returncode == 0, f"kafka-metadata-quorum {what}: {r.stdout}\n{r.stderr}"
    return r.stdout


def ids_in(line: str) -> set[int]:
    return {int(x) for x in re.findall(r'"id":\s*(\d+)', line)}


def test_describe_quorum_shows_voters_and_observers(cluster):
    cluster.wait_leader(timeout_s=DEADLINE_S)
    for i in BROKERS:
        out = describe_quorum(cluster.node(i).bootstrap, "--status")
        assert ids_in(re.search(r"CurrentVoters:\s+(.*)", out).group(1)) == CONTROLLERS, out
        assert ids_in(re.search(r"CurrentObservers:\s+(.*)", out).group(1)) == BROKERS, out
        assert int(re.search(r"LeaderId:\s+(\d+)", out).group(1)) in CONTROLLERS, out
    rows = describe_quorum(cluster.node(4).bootstrap, "--replication")
    lines = {int(ln.split()[0]): ln.split() for ln in rows.splitlines() if re.match(r"^\d+\s", ln)}
    assert set(lines) == CONTROLLERS | BROKERS, rows
    assert {i for i, ln in lines.items() if ln[-1] == "Observer"} == BROKERS, rows
    leaders_listed = [i for i, ln in lines.items() if ln[-1] == "Leader"]
    assert len(leaders_listed) == 1 and leaders_listed[0] in CONTROLLERS, rows
    # The leader knows how far each observer got: a log end offset >= 1.
    assert all(int(lines[i][2]) >= 1 for i in BROKERS), rows


def test_kill_active_controller_then_create_through_a_broker(cluster):
    before = new_name("before-failover")
    create(cluster.node(5), before, 2)
    old, _ = cluster.wait_leader(timeout_s=DEADLINE_S)
    assert old in CONTROLLERS
    cluster.node(old).kill9()
    try:
        new, _ = cluster.wait_leader(timeout_s=DEADLINE_S, not_id=old)
        assert new in CONTROLLERS - {old}
        after = new_name("after-failover")
        create(cluster.node(4), after, 2)
        for i in BROKERS:
            wait_for(f"node {i} lists both topics", lambda: {before, after} <= topics_of(cluster.node(i)))
    finally:
        cluster.node(old).start()
        cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[cluster.node(old)])


FENCING = re.compile(r"controller: fencing a broker that missed its heartbeats or disconnected broker=(\d+)")


def test_heartbeats_do_not_wait_behind_a_request_forwarded_to_a_stopped_controller(cluster):
    """SIGSTOP of the active controller, then at once a CreateTopics through broker 4: its
    controller forwards it to the stopped leader it still believes in. No leader may fence
    broker 4 or 5 meanwhile. Both brokers used to be fenced here: the forward waited out its
    5 s allowance (longer than the 3 s broker session) and their heartbeats queued behind
    it. Now a forward is given up as soon as a new leader is known, and heartbeats go on a
    connection of their own (src/controller/heartbeat_sender.rs)."""
    old, _ = cluster.wait_leader(timeout_s=DEADLINE_S)
    others = [cluster.node(i) for i in CONTROLLERS - {old}]
    logs_from = {nd.node_id: nd.log_path.stat().st_size for nd in others}
    name = new_name("during-pause")
    a = admin(cluster.node(4))
    a.list_topics(timeout=10)  # connected before the pause: the request leaves at once
    cluster.node(old).pause()
    try:
        created = a.create_topics([NewTopic(name, 2, 1)], operation_timeout=30, request_timeout=60)[name]
        new, _ = cluster.wait_leader(timeout_s=DEADLINE_S, not_id=old)
        assert new in CONTROLLERS - {old}
        created.result(timeout=DEADLINE_S)
        for i in BROKERS:
            wait_for(f"node {i} lists {name}", lambda: name in topics_of(cluster.node(i)))
    finally:
        cluster.node(old).resume()
    fenced = set()
    for nd in others:
        with open(nd.log_path, "rb") as f:
            f.seek(logs_from[nd.node_id])
            fenced |= {int(m.group(1)) for m in FENCING.finditer(f.read().decode(errors="replace"))}
    assert not fenced & BROKERS, f"live brokers fenced while a forward hung: {sorted(fenced & BROKERS)}"


def test_a_restarted_broker_reregisters_and_catches_up_through_a_snapshot(cluster):
    wait_for("both brokers registered", lambda: brokers_seen(cluster.node(4)) == BROKERS)
    gone = cluster.node(5)
    active = cluster.node(cluster.wait_leader(timeout_s=DEADLINE_S)[0])
    purged_before = log_start(active)
    gone.kill9()
    # Two snapshot intervals of committed entries while broker 5 is down: the leader
    # snapshots and purges the log it would have replicated, so 5 must install a snapshot.
    # Restarted only once the leader purged past where 5's log can end (less than one
    # interval after the last purge before the kill): fencing no longer takes a session
    # timeout, which used to leave the leader time to purge.
    created = [new_name("while-down") for _ in range(2 * SNAPSHOT_EVERY + 4)]
    for name in created:
        create(cluster.node(4), name, 1)
    wait_for("broker 5 fenced", lambda: brokers_seen(cluster.node(4)) == {4})
    wait_for("the leader purged its log past broker 5's end",
             lambda: log_start(active) >= purged_before + 2 * SNAPSHOT_EVERY)
    gone.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[gone])
    wait_for("broker 5 lists every topic created while it was down", lambda: set(created) <= topics_of(gone))
    wait_for("broker 5 registered again", lambda: brokers_seen(cluster.node(4)) == BROKERS)
    assert scrape(gone.admin_url).total("shardlog_raft_snapshots_installed_total") >= 1, gone.log_tail()
    # Placement uses it again: a new topic gets partitions on both brokers.
    topic = new_name("after-restart")
    create(cluster.node(5), topic, 4)
    ls = wait_for("leaders on both brokers", lambda: (l := leaders(cluster.node(5), topic)) and len(l) == 4 and l)
    assert set(ls.values()) == BROKERS, ls
