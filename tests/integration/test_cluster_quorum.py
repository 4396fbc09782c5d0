"""Issue 11, first layer: a 3-node combined (broker+controller) metadata quorum over TCP.

Real processes (tests/integration/cluster_harness.py) and a real client (confluent-kafka's
AdminClient, one per node, so each request goes to that node only):
- the three nodes elect one quorum leader; a topic created through node 2 appears in the
  Metadata of nodes 1 and 3 (forwarded to the leader, committed, applied everywhere);
- `kill -9` of the active controller: a new leader is elected, a CreateTopics through a
  survivor succeeds, no topic created before is lost; the killed node restarts, rejoins
  and sees every topic; a SIGSTOPped leader is replaced and follows after SIGCONT; the
  whole cluster restarted on its data dirs re-forms the quorum with every topic;
- DescribeQuorum (API 55) through Kafka's `kafka-metadata-quorum` tool, on every node and
  on a single node (that test also runs against Apache Kafka).
No timed assertions: every wait polls with a generous deadline. The failover time is
measured by benches/controller_failover.py.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from test_admin_compat import kafka_tool

DEADLINE_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "cluster-quorum")


def topics_seen_by(node) -> set[str]:
    """Every topic name the node's own Metadata lists (no topic named: no auto-create)."""
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
    return {name for name, t in md.topics.items() if t.error is None}


def wait_seen(node, names: set[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        missing = names - topics_seen_by(node)
        if not missing:
            return
        assert time.monotonic() < deadline, f"node {node.node_id} does not list {sorted(missing)}"
        time.sleep(0.1)


def create_through(node, name: str, partitions: int = 2) -> None:
    """CreateTopics sent to `node`'s client listener; retried until the deadline while the
    quorum has no leader (NOT_CONTROLLER / timeouts), as a client retries."""
    a = AdminClient({"bootstrap.servers": node.bootstrap})
    deadline = time.monotonic() + DEADLINE_S
    while True:
        fut = a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30,
                              request_timeout=30)[name]
        try:
            fut.result(timeout=60)
            return
        except Exception as e:  # KafkaException wrapping the error code
            err = e.args[0] if e.args else e
            code = err.name() if hasattr(err, "name") else str(err)
            if code == "TOPIC_ALREADY_EXISTS":
                return  # an earlier attempt committed before its answer was lost
            assert time.monotonic() < deadline, f"CreateTopics {name} through node {node.node_id}: {e}"
            time.sleep(0.2)


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_three_nodes_elect_one_leader(cluster):
    leader, term = cluster.wait_leader(timeout_s=DEADLINE_S)
    assert leader in (1, 2, 3) and term >= 1
    # Every live node reports the same leader for the highest term it has seen.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        seen = {nd.node_id: nd.latest_leader() for nd in cluster.nodes}
        top = max(t for t, _ in filter(None, seen.values()))
        leaders = {lead for t, lead in filter(None, seen.values()) if t == top}
        if all(seen.values()) and leaders == {cluster.active_controller()[0]}:
            break
        assert time.monotonic() < deadline, f"nodes disagree about the leader: {seen}"
        time.sleep(0.1)


def test_topic_created_through_node_2_is_on_every_node(cluster):
    cluster.wait_leader(timeout_s=DEADLINE_S)
    name = new_name("via-node-2")
    create_through(cluster.node(2), name, partitions=3)
    for nd in cluster.nodes:
        wait_seen(nd, {name})
    # A second create of the same name is refused by the leader, whichever node forwards it.
    a = AdminClient({"bootstrap.servers": cluster.node(3).bootstrap})
    fut = a.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name]
    with pytest.raises(Exception) as e:
        fut.result(timeout=60)
    assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"


def test_kill9_of_the_active_controller_loses_no_metadata(cluster):
    leader, term = cluster.wait_leader(timeout_s=DEADLINE_S)
    survivors = [nd for nd in cluster.nodes if nd.node_id != leader]
    before = {new_name("before")
              for _ in range(3)}
    for i, name in enumerate(sorted(before)):
        create_through(cluster.nodes[i % 3], name)
    for nd in cluster.nodes:
        wait_seen(nd, before)

    killed = cluster.node(leader)
    killed.kill9()
    new_leader, new_term = cluster.wait_leader(timeout_s=DEADLINE_S, not_id=leader)
    assert new_leader != leader and new_term > term

    after = new_name("after")
    # Through the survivor that is NOT the new leader: the request is forwarded.
    follower = next(nd for nd in survivors if nd.node_id != new_leader)
    create_through(follower, after)
    for nd in survivors:
        wait_seen(nd, before | {after})

    killed.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[killed])
    wait_seen(killed, before | {after})
    # It rejoined the quorum: a topic created through it commits and reaches everyone.
    rejoined = new_name("rejoined")
    create_through(killed, rejoined)
    for nd in cluster.nodes:
        wait_seen(nd, {rejoined})



def test_sigstopped_active_controller_is_replaced_and_steps_down_on_sigcont(cluster):
    """A hung leader (SIGSTOP: its sockets stay open, it answers nothing) is replaced; the
    survivors keep committing; once resumed it follows the new leader and catches up."""
    leader, term = cluster.wait_leader(timeout_s=DEADLINE_S)
    hung = cluster.node(leader)
    survivors = [nd for nd in cluster.nodes if nd.node_id != leader]
    hung.pause()
    try:
        new_leader, new_term = cluster.wait_leader(timeout_s=DEADLINE_S, not_id=leader)
        assert new_term > term
        name = new_name("while-stopped")
        create_through(survivors[0], name)
        for nd in survivors:
            wait_seen(nd, {name})
    finally:
        hung.resume()
    wait_seen(hung, {name})
    deadline = time.monotonic() + DEADLINE_S
    while hung.latest_leader() is None or hung.latest_leader()[0] < new_term:
        assert time.monotonic() < deadline, f"node {leader} never saw term {new_term}: {hung.latest_leader()}"
        time.sleep(0.1)

# -- DescribeQuorum (API 55) through Kafka's own kafka-metadata-quorum tool ---------------
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def describe_quorum(bootstrap: str, what: str) -> str:
    r = kafka_tool(QUORUM_TOOL, "--bootstrap-server", bootstrap, "describe", what)
    assert r.returncode == 0, f"kafka-metadata-quorum {what}: {r.stdout}\n{r.stderr}"
    return r.stdout


def status_fields(out: str) -> tuple[int, int, set[int]]:
    """(LeaderId, LeaderEpoch, voter ids) from `describe --status`."""
    leader = int(re.search(r"LeaderId:\s+(\d+)", out).group(1))
    epoch = int(re.search(r"LeaderEpoch:\s+(\d+)", out).group(1))
    voters_line = re.search(r"CurrentVoters:\s+(.*)", out).group(1)
    return leader, epoch, {int(x) for x in re.findall(r'"id":\s*(\d+)', voters_line)}


def test_kafka_metadata_quorum_tool_on_a_single_node(broker):
    """The single-node quorum: this node leads, it is the only voter (also against Kafka)."""
    out = describe_quorum(broker.bootstrap, "--status")
    leader, epoch, voters = status_fields(out)
    assert voters == {leader} and epoch >= 1, out
    rows = describe_quorum(broker.bootstrap, "--replication")
    assert re.search(rf"^{leader}\s.*\bLeader\b", rows, re.M), rows


def test_kafka_metadata_quorum_tool_on_every_node(cluster):
    leader, term = cluster.wait_leader(timeout_s=DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    for nd in cluster.nodes:
        while True:
            out = describe_quorum(nd.bootstrap, "--status")
            got = status_fields(out)
            # A leader change between the two reads would move both: poll, don't time.
            now = cluster.active_controller()
            if got[0] == now[0] and got[2] == {1, 2, 3}:
                break
            assert time.monotonic() < deadline, f"node {nd.node_id}: {out} (active controller {now})"
            time.sleep(0.2)
        assert "CONTROLLER://127.0.0.1:" in out, out
    rows = describe_quorum(cluster.node(1).bootstrap, "--replication")
    lines = [ln.split() for ln in rows.splitlines() if re.match(r"^\d+\s", ln)]
    assert {int(ln[0]) for ln in lines} == {1, 2, 3}, rows
    statuses = {int(ln[0]): ln[-1] for ln in lines}
    assert list(statuses.values()).count("Leader") == 1, rows
    # Every voter's log end offset is a number >= 1 (the leader knows each follower's).
    assert all(int(ln[2]) >= 1 for ln in lines), rows


def test_whole_cluster_restart_keeps_metadata(cluster):
    """Every node stopped, then all started again on their data dirs: the quorum re-forms
    from the logs (no re-initialization) and every node lists every topic."""
    cluster.wait_leader(timeout_s=DEADLINE_S)
    name = new_name("before-restart")
    create_through(cluster.node(3), name)
    for nd in cluster.nodes:
        wait_seen(nd, {name})
    everything = topics_seen_by(cluster.node(1))
    cluster.close()
    cluster.start()
    cluster.wait_ready(timeout_s=DEADLINE_S)
    for nd in cluster.nodes:
        wait_seen(nd, everything)
    after = new_name("after-restart")
    create_through(cluster.node(2), after)
    for nd in cluster.nodes:
        wait_seen(nd, {after})
