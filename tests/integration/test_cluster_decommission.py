"""Issue 26 point 2, broker decommission: `shardlog cluster decommission <id>` drains a
broker through Kafka's admin APIs (leaderships first, then rack-aware replica moves on the
controller's reassignment path) and unregisters it once it is empty and stopped;
`recommission` cancels the moves still running. Real processes (3 controller-only nodes,
brokers 4-6; tests/integration/cluster_harness.py), real clients:

- recommission: broker 6's only replica of a topic is being moved to a broker that is
  paused (SIGSTOP), so the move cannot finish; `recommission 6` cancels it and the
  partition stays on 6, with no reassignment left;
- drain under load: an idempotent acks=all producer writes to an RF 2 topic over 4-6
  while `decommission 6 --wait` runs; once 6 holds no replica it is stopped, the command
  unregisters it and exits 0; afterwards no partition names 6, every partition is fully
  in sync on 4 and 5, DescribeCluster lists 4 and 5 only, and every acknowledged record
  is in the log at its offset.
shardlog only (the command is shardlog's). No timed assertions.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import wait_for
from acked_load import AckedLoad

DEADLINE_S = 120
TOPIC = "drain-load"
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The internal topics get RF 2, so 2 brokers can hold them once 6 is drained (with RF 3
    # on 3 brokers a drain has nowhere to go: `test_a_drain_with_nowhere_to_go_says_so`).
    yield from conftest.running_cluster(tmp_path_factory, "cluster-decommission", n=3, controllers=3,
                                        extra_args=["--offsets-topic-replication-factor", "2",
                                                    "--transaction-state-log-replication-factor", "2"])


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(conftest.SHARDLOG_BIN), "cluster", *args], capture_output=True, text=True, timeout=timeout)


def partitions(a: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition → (leader, replicas, isr)."""
    t = a.list_topics(topic=topic, timeout=30).topics[topic]
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


def test_recommission_cancels_a_move_in_flight(cluster):
    b4, b5, b6 = cluster.node(4), cluster.node(5), cluster.node(6)
    a = AdminClient({"bootstrap.servers": b4.bootstrap})
    # One partition, only on 6 (a manual assignment): its move cannot finish while 4 and 5
    # are paused.
    a.create_topics([NewTopic("stays", 1, replica_assignment=[[6]])])["stays"].result(60)
    wait_for("stays-0 led by 6", lambda: partitions(a, "stays").get(0, (None,))[0] == 6 or None, DEADLINE_S)
    b4.pause()
    b5.pause()
    try:
        r = cli("decommission", "6", "--bootstrap", b6.bootstrap, "--format", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        started = json.loads(r.stdout.splitlines()[-1])
        # stays-0, and __consumer_offsets partitions (the first broker up created them).
        assert started["started"] >= 1 and started["replicas_left"] >= 1, started
        # The move cannot finish while its target is paused: the reassignment is running.
        r = cli("recommission", "6", "--bootstrap", b6.bootstrap, "--format", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.splitlines()[-1])
        assert "stays-0" in out["cancelled"] and out["refused"] == [], out
    finally:
        b4.resume()
        b5.resume()
    wait_for("stays-0 back on 6 alone", lambda: partitions(a, "stays")[0][1] == [6] or None, DEADLINE_S)
    # No reassignment remains: a second recommission cancels nothing.
    r = cli("recommission", "6", "--bootstrap", b6.bootstrap, "--format", "json")
    assert json.loads(r.stdout.splitlines()[-1])["cancelled"] == [], r.stdout


def test_a_drain_with_nowhere_to_go_says_so(cluster):
    b4 = cluster.node(4)
    a = AdminClient({"bootstrap.servers": b4.bootstrap})
    a.create_topics([NewTopic("everywhere", 1, replication_factor=3)])["everywhere"].result(60)
    wait_for("everywhere-0 led", lambda: partitions(a, "everywhere").get(0, (-1,))[0] >= 0 or None, DEADLINE_S)
    r = cli("decommission", "5", "--bootstrap", b4.bootstrap, "--wait")
    assert r.returncode != 0 and "everywhere-0: no active broker without a replica of it" in r.stdout, r.stdout + r.stderr
    assert "broker 5 cannot be drained" in r.stderr, r.stderr
    a.delete_topics(["everywhere"])["everywhere"].result(60)
    wait_for("everywhere deleted", lambda: "everywhere" not in a.list_topics(timeout=30).topics or None, DEADLINE_S)


def test_drain_under_load_then_unregister(cluster):
    b4, b5, b6 = cluster.node(4), cluster.node(5), cluster.node(6)
    bootstrap = f"{b4.bootstrap},{b5.bootstrap}"
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=2)])[TOPIC].result(60)
    wait_for("the topic led", lambda: all(l >= 0 for l, _, _ in partitions(a, TOPIC).values()) or None, DEADLINE_S)
    assert any(6 in r for _, r, _ in partitions(a, TOPIC).values()), "placement put replicas on 6"
    load = AckedLoad(bootstrap, TOPIC, PARTITIONS).start()
    wait_for("the first acknowledgements", lambda: len(load.acked) > 100 or None, DEADLINE_S)
    drain = subprocess.Popen([str(conftest.SHARDLOG_BIN), "cluster", "decommission", "6", "--bootstrap", b4.bootstrap,
                              "--wait", "--timeout-s", str(3 * DEADLINE_S)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def empty():
            names = [6 in r for t in (TOPIC, "stays") for _, r, _ in partitions(a, t).values()]
            return not any(names) or None
        wait_for("no partition names broker 6", empty, 3 * DEADLINE_S)
        before = len(load.acked)
        wait_for("acknowledgements after the drain", lambda: len(load.acked) > before + 50 or None, DEADLINE_S)
        b6.stop()
        out, _ = drain.communicate(timeout=2 * DEADLINE_S)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 0 and "broker 6: empty and stopped: unregistered" in out, out
    md = a.list_topics(timeout=30)
    assert sorted(md.brokers) == [4, 5], md.brokers
    for topic in (TOPIC, "stays"):
        for p, (leader, replicas, isr) in partitions(a, topic).items():
            assert 6 not in replicas and leader in (4, 5) and sorted(isr) == sorted(replicas), (topic, p, replicas, isr)
    assert all(len(r) == 2 for _, r, _ in partitions(a, TOPIC).values()), "the replication factor is kept"
    load.finish()
    res = load.check(bootstrap)
    assert res.acknowledged > 200 and not res.lost and not res.double_acked and not res.duplicated, res
    assert not load.errors, load.errors[:5]


def test_a_returning_broker_gets_replicas_back_with_balance_moves(cluster):
    """Broker 6, drained and unregistered above, starts again (it registers anew, holding
    nothing); `balance --moves` plans replica moves that even out the replicas per broker,
    `--apply` starts them; afterwards 6 holds its share and every partition is in sync."""
    b4, b6 = cluster.node(4), cluster.node(6)
    a = AdminClient({"bootstrap.servers": b4.bootstrap})
    b6.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[b6])
    wait_for("broker 6 registered", lambda: 6 in a.list_topics(timeout=30).brokers or None, DEADLINE_S)
    r = cli("balance", "--bootstrap", b4.bootstrap, "--moves", "200", "--format", "json")
    planned = json.loads(r.stdout)["moves"]
    assert planned and all("-> [" in m for m in planned), r.stdout + r.stderr
    r = cli("balance", "--bootstrap", b4.bootstrap, "--moves", "200", "--apply", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["refused"] == [], r.stdout + r.stderr

    def even():
        counts = {4: 0, 5: 0, 6: 0}
        for name, t in a.list_topics(timeout=30).topics.items():
            for p in t.partitions.values():
                if sorted(p.isrs) != sorted(p.replicas):
                    return None
                for r in p.replicas:
                    counts[r] += 1
        return counts if max(counts.values()) - min(counts.values()) <= 1 else None
    counts = wait_for("replicas even over 4, 5, 6 and in sync", even, 3 * DEADLINE_S)
    assert counts[6] > 0, counts
