"""Issue 26 point 1, KIP-853 quorum membership, with Kafka's own operator tools against
real shardlog processes (tests/integration/cluster_harness.py):

- every original voter of a 3-controller quorum is replaced, one at a time, while a
  producer writes with acks=all through the 2 brokers: a new controller-only node starts
  with controller_quorum_bootstrap_servers and follows as an observer,
  `kafka-metadata-quorum.sh add-controller` (its properties file, its meta.properties'
  directory.id) makes it a voter, `remove-controller` (the old voter's id and directory
  id from `describe --status`) removes the old one, which is then stopped. Afterwards the
  voters are the three new nodes, a new topic can be created, every topic is still
  there, and every acknowledged record is in the log at its offset (replication_check);
  a new voter and a broker whose configured voters are all gone restart and rejoin;
- a voter restarted on another controller port announces it (UpdateRaftVoter):
  `describe --status` shows the new endpoint and its lag returns to 0 after new metadata;
- Kafka's refusals and words: a voter added twice (DUPLICATE_VOTER), a wrong directory id
  (VOTER_NOT_FOUND), a broker-only node (shardlog: INVALID_REQUEST naming its role; Kafka:
  a timeout, its broker has no controller listener to answer), an unknown node (not an
  observer: REQUEST_TIMED_OUT);
- `kafka-cluster.sh unregister` (UnregisterBroker) of a stopped broker: it leaves
  DescribeCluster (and, on shardlog, the quorum's observers at once); an unknown id is
  refused (BROKER_ID_NOT_REGISTERED).
Runs against Kafka 4.4 too (SHARDLOG_TEST_TARGET=kafka: a dynamic quorum,
kafka_cluster.py), which checks the test asserts Kafka's behaviour; the two places where
shardlog answers otherwise say so (stopped observers leave DescribeQuorum at once rather
than after Kafka's fetch timeout; a broker-only node refused by its role). No timed
assertions.
"""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import kafka_tool
from conftest import wait_for
from acked_load import AckedLoad
from cluster_harness import free_port

QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
TOPIC = "membership-load"
PARTITIONS = 4
DEADLINE_S = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Ids 1-3 controllers, 4-5 brokers; new controllers get 11, 12, 13. Kafka: a dynamic
    # quorum (formatted with --initial-controllers), as shardlog's always is.
    if conftest.is_kafka():
        yield from conftest.running_kafka_cluster(tmp_path_factory, "quorum-membership", {}, n=2, controllers=3, dynamic_quorum=True)
    else:
        yield from conftest.running_cluster(tmp_path_factory, "quorum-membership", n=2, controllers=3)


def quorum(bootstrap: str, *args: str):
    r = kafka_tool(QUORUM_TOOL, "--bootstrap-server", bootstrap, *args)
    return r.returncode, r.stdout + r.stderr


def status(bootstrap: str) -> dict:
    """`describe --status`: {"leader": id, "voters": {id: directoryId}, "observers": {id: directoryId}}."""
    rc, out = quorum(bootstrap, "describe", "--status")
    assert rc == 0, out

    def members(field: str) -> dict[int, str | None]:
        line = re.search(rf"^{field}:\s+(\[.*\])\s*$", out, re.M).group(1)
        return {m["id"]: m.get("directoryId") for m in json.loads(line)}
    def endpoints() -> dict[int, list[str]]:
        line = re.search(r"^CurrentVoters:\s+(\[.*\])\s*$", out, re.M).group(1)
        return {m["id"]: m.get("endpoints", []) for m in json.loads(line)}
    return {"leader": int(re.search(r"LeaderId:\s+(\d+)", out).group(1)),
            "voters": members("CurrentVoters"), "observers": members("CurrentObservers"),
            "endpoints": endpoints(), "text": out}


def wait_status(bootstrap: str, what: str, check):
    last = {}

    def ok():
        last["s"] = status(bootstrap)
        return check(last["s"]) or None
    try:
        wait_for(what, ok, DEADLINE_S)
        return last["s"]
    except AssertionError:
        raise AssertionError(f"{what}: last status {last.get('s', {}).get('text')}")


def controller_properties(node, path) -> str:
    """The new controller's server.properties as Kafka's add-controller reads it: node.id,
    process.roles, its CONTROLLER listener, and metadata.log.dir (whose meta.properties
    names the directory id)."""
    path.write_text(f"process.roles=controller\nnode.id={node.node_id}\ncontroller.listener.names=CONTROLLER\n"
                    f"listeners=CONTROLLER://{node.controller_listener}\nmetadata.log.dir={node.metadata_dir}\n")
    return str(path)


def test_replace_every_voter_under_load(cluster, tmp_path):
    brokers = cluster.bootstrap
    a = AdminClient({"bootstrap.servers": brokers})
    a.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=2)])["membership-load"].result(60)
    first = wait_status(brokers, "the original quorum", lambda s: set(s["voters"]) == {1, 2, 3} and {4, 5} <= set(s["observers"]))
    assert all(d for d in first["voters"].values()), f"every voter announced its directory id: {first['text']}"
    load = AckedLoad(brokers, TOPIC, PARTITIONS).start()
    wait_for("the first acknowledgements", lambda: len(load.acked) > 100 or None, DEADLINE_S)
    for old, new_id in [(1, 11), (2, 12), (3, 13)]:
        live_voters = [cluster.node(v) for v in status(brokers)["voters"]]
        new = cluster.add_node(new_id, roles="controller", join_through=live_voters)
        conftest._LIVE.append(new)
        new.start()
        cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[new])
        s = wait_status(brokers, f"node {new_id} follows as an observer", lambda s: new_id in s["observers"])
        props = controller_properties(new, tmp_path / f"controller-{new_id}.properties")
        rc, out = quorum(brokers, "--command-config", props, "add-controller")
        assert rc == 0 and f"Added controller {new_id} with directory id" in out, out
        wait_status(brokers, f"node {new_id} is a voter", lambda s: new_id in s["voters"] and new_id not in s["observers"])
        old_dir = status(brokers)["voters"][old]
        # `=`: a directory id (base64url) may start with "-", which would read as an option.
        rc, out = quorum(brokers, "remove-controller", "--controller-id", str(old), f"--controller-directory-id={old_dir}")
        assert rc == 0 and f"Removed KRaft controller {old} with directory id" in out, out
        wait_status(brokers, f"node {old} is no voter", lambda s: old not in s["voters"])
        cluster.node(old).stop()
        before = len(load.acked)
        wait_for(f"acknowledgements after replacing {old} by {new_id}", lambda: len(load.acked) > before + 50 or None, DEADLINE_S)
    final = wait_status(brokers, "the new quorum", lambda s: set(s["voters"]) == {11, 12, 13})
    if not conftest.is_kafka():
        # shardlog drops a removed controller-only voter from the membership at once;
        # Kafka's leader lists a stopped observer until its fetches time out (minutes).
        assert not set(final["observers"]) & {1, 2, 3}, f"removed controller-only voters leave the membership: {final['text']}"

    # The metadata survived: a new topic, and every topic listed.
    a.create_topics([NewTopic("after-replacement", 2, replication_factor=2)])["after-replacement"].result(60)
    topics = a.list_topics(timeout=30).topics
    assert {TOPIC, "after-replacement"} <= set(topics), sorted(topics)
    assert len(topics[TOPIC].partitions) == PARTITIONS

    # A new voter restarts (the log makes it a voter; it does not join again), and so does
    # a broker whose configured voters (1, 2, 3) are all gone: it is an observer already.
    for nid in (12, 4):
        cluster.node(nid).stop()
        cluster.node(nid).start()
        cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[cluster.node(nid)])
    wait_status(brokers, "voters and observers after the restarts",
                lambda s: set(s["voters"]) == {11, 12, 13} and {4, 5} <= set(s["observers"]))

    load.finish()
    res = load.check(brokers)
    assert res.acknowledged > 200 and not res.lost and not res.double_acked and not res.duplicated, res
    # Retriable errors may come and go while the controller moves; none is an error here.
    assert len(load.acked) + len(load.errors) == load.sent, (len(load.acked), load.errors[:5], load.sent)
    assert not load.errors, load.errors[:5]


def replication_lag(bootstrap: str) -> dict[int, int]:
    """`describe --replication`: each replica's lag behind the leader's log end."""
    rc, out = quorum(bootstrap, "describe", "--replication")
    assert rc == 0, out
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    return {int(r[0]): int(r[3]) for r in rows if r and r[0].isdigit()}


def test_a_voter_moves_its_controller_listener(cluster):
    """A voter restarted on another controller port tells the leader (UpdateRaftVoter):
    DescribeQuorum shows its new endpoint, the leader replicates to it there, the quorum
    keeps committing."""
    brokers = cluster.bootstrap
    s = wait_status(brokers, "a quorum", lambda s: len(s["voters"]) == 3)
    moved = cluster.node(next(v for v in sorted(s["voters"]) if v != s["leader"]))
    old = moved.controller_listener
    moved.stop()
    moved.controller_port = free_port()
    assert moved.controller_listener != old
    moved.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[moved])
    s = wait_status(brokers, f"node {moved.node_id}'s new endpoint",
                    lambda s: s["endpoints"].get(moved.node_id) == [f"CONTROLLER://{moved.controller_listener}"])
    assert len(s["voters"]) == 3 and moved.node_id in s["voters"], s["text"]
    # New metadata reaches the moved voter at its new listener: its lag returns to 0.
    a = AdminClient({"bootstrap.servers": brokers})
    a.create_topics([NewTopic("after-listener-move", 1, replication_factor=1)])["after-listener-move"].result(60)
    wait_for(f"node {moved.node_id} caught up at its new listener",
             lambda: replication_lag(brokers).get(moved.node_id) == 0 or None, DEADLINE_S)
    assert "after-listener-move" in a.list_topics(timeout=30).topics


def test_refusals_name_kafkas_errors(cluster, tmp_path):
    brokers = cluster.bootstrap
    s = wait_status(brokers, "a quorum", lambda s: len(s["voters"]) == 3)
    voter = cluster.node(sorted(s["voters"])[0])
    # Added twice.
    rc, out = quorum(brokers, "--command-config", controller_properties(voter, tmp_path / "dup.properties"), "add-controller")
    assert rc != 0 and "DuplicateVoterException" in out and "is already part of the set of voters" in out, out
    # A wrong directory id names another replica.
    rc, out = quorum(brokers, "remove-controller", "--controller-id", str(voter.node_id),
                     "--controller-directory-id", "V1eFpz4xQ2eyfnz1TUhvEg")
    assert rc != 0 and "VoterNotFoundException" in out and f"Cannot remove voter ReplicaKey(id={voter.node_id}" in out, out
    # A broker-only observer cannot vote.
    broker = cluster.node(5)
    props = tmp_path / "broker.properties"
    props.write_text(f"process.roles=controller\nnode.id=5\ncontroller.listener.names=CONTROLLER\n"
                     f"listeners=CONTROLLER://{broker.controller_listener}\nmetadata.log.dir={broker.metadata_dir}\n")
    rc, out = quorum(brokers, "--command-config", str(props), "add-controller")
    if conftest.is_kafka():
        # Kafka's leader first asks the new voter's controller listener for its versions; a
        # Kafka broker-only node has none listening, so the add times out.
        assert rc != 0 and "TimeoutException" in out and "API_VERSIONS" in out, out
    else:
        # A shardlog broker-only node listens on a controller listener (it follows the quorum
        # over it), so its role is checked instead: refused with the reason.
        assert rc != 0 and "InvalidRequestException" in out and "broker-only" in out, out
    # A node that never joined is no observer.
    ghost = tmp_path / "ghost"
    ghost.mkdir()
    (ghost / "meta.properties").write_text("version=1\nnode.id=42\ncluster.id=x\ndirectory.id=V1eFpz4xQ2eyfnz1TUhvEg\n")
    props = tmp_path / "ghost.properties"
    props.write_text(f"process.roles=controller\nnode.id=42\ncontroller.listener.names=CONTROLLER\n"
                     f"listeners=CONTROLLER://127.0.0.1:1\nmetadata.log.dir={ghost}\n")
    rc, out = quorum(brokers, "--command-config", str(props), "add-controller")
    assert rc != 0 and "TimeoutException" in out, out
    # Kafka's leader tries the (unreachable) listener first; shardlog says why it waited.
    assert conftest.is_kafka() or "not an observer" in out, out


def test_unregister_a_stopped_broker(cluster):
    gone = cluster.node(5)
    stay = cluster.node(4)
    gone.stop()

    def fenced_or_absent():
        r = kafka_tool(CLUSTER_TOOL, "list-endpoints", "--bootstrap-server", stay.bootstrap, "--include-fenced-brokers")
        return r.returncode == 0 and re.search(rf"^5\s.*\bfenced\b", r.stdout, re.M | re.I) is not None or None
    wait_for("broker 5 fenced", fenced_or_absent, DEADLINE_S)
    r = kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", stay.bootstrap, "--id", "5")
    assert r.returncode == 0 and "Broker 5 is no longer registered." in r.stdout, r.stdout + r.stderr
    r = kafka_tool(CLUSTER_TOOL, "list-endpoints", "--bootstrap-server", stay.bootstrap, "--include-fenced-brokers")
    assert r.returncode == 0 and not re.search(r"^5\s", r.stdout, re.M), r.stdout
    if not conftest.is_kafka():
        # shardlog retires an unregistered fenced broker's observer at once; Kafka's leader
        # lists a stopped observer until its fetches time out.
        wait_status(stay.bootstrap, "broker 5's observer retired", lambda s: 5 not in s["observers"] and 4 in s["observers"])
    r = kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", stay.bootstrap, "--id", "77")
    assert r.returncode != 0 and "BrokerIdNotRegisteredException" in r.stdout + r.stderr, r.stdout + r.stderr
