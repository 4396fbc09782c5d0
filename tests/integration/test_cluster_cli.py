"""Issue 26 point 3: `shardlog cluster status | quorum | balance` on 3 combined nodes: every
broker with its roles, state, leaders and replicas, the leader skew and the
under-replicated and offline partitions (DescribeCluster with fenced brokers, Metadata,
DescribeQuorum), as a table and as JSON; a node killed shows fenced, its partitions
under-replicated, and the quorum keeps a leader; restarted, everything is back in sync,
and `balance` lists the partitions that lost their preferred leader, which `--apply`
(a preferred election) gives back; `status --admin` adds leaders and replicas per shard,
checked against each shard's own count. shardlog only (its CLI).
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import wait_for

DEADLINE_S = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "cluster-cli")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(conftest.SHARDLOG_BIN), "cluster", *args], capture_output=True, text=True, timeout=60)


def status(bootstrap: str) -> dict:
    r = cli("status", "--bootstrap", bootstrap, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def quorum(bootstrap: str) -> dict:
    r = cli("quorum", "--bootstrap", bootstrap, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_status_and_quorum_follow_a_node_going_and_coming_back(cluster):
    b1, b3 = cluster.node(1), cluster.node(3)
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b1.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=30)[topic].result(timeout=60)
    s = wait_for("every partition in sync", lambda: (lambda s: s if not s["under_replicated"] and not s["offline"] else None)(status(b1.bootstrap)), DEADLINE_S)
    assert sorted(b["id"] for b in s["brokers"]) == [1, 2, 3]
    assert all(b["roles"] == "broker+controller" and not b["fenced"] for b in s["brokers"]), s
    assert sum(b["leaders"] for b in s["brokers"]) == s["partitions"] and s["topics"] >= 1, s
    assert all(b["replicas"] >= 3 for b in s["brokers"]), "the new topic has a replica on every broker"
    assert s["leader_skew"] == max(b["leaders"] for b in s["brokers"]) - min(b["leaders"] for b in s["brokers"])
    q = quorum(b1.bootstrap)
    assert sorted(r["id"] for r in q["replicas"]) == [1, 2, 3] and [r["role"] for r in q["replicas"]].count("leader") == 1, q
    assert q["leader"] == s["active_controller"] and q["epoch"] >= 1 and q["high_watermark"] > 0, (q, s)
    table = cli("status", "--bootstrap", b1.bootstrap).stdout.splitlines()
    assert table[1].split()[:5] == ["BROKER", "ADDRESS", "RACK", "ROLES", "STATE"], table
    assert "under-replicated: none" in table and "offline: none" in table, table

    b3.kill9()
    try:
        s = wait_for("broker 3 fenced, its partitions under-replicated",
                     lambda: (lambda s: s if any(b["id"] == 3 and b["fenced"] for b in s["brokers"])
                              and all(f"{topic}-{p}" in s["under_replicated"] for p in range(3)) else None)(status(b1.bootstrap)),
                     DEADLINE_S)
        assert next(b for b in s["brokers"] if b["id"] == 3)["leaders"] == 0, s
        assert not s["offline"], "RF 3: every partition keeps a leader"
        q = quorum(b1.bootstrap)
        assert q["leader"] in (1, 2), q
    finally:
        b3.start()
        cluster.wait_ready(timeout_s=DEADLINE_S * 2, nodes=[b3])
    wait_for("broker 3 back and in sync", lambda: (lambda s: not s["under_replicated"] and not any(b["fenced"] for b in s["brokers"]))(status(b1.bootstrap)), DEADLINE_S * 2)

    # Leadership moved off broker 3 and stays off (no automatic rebalance for minutes):
    # balance lists those partitions; --apply elects their preferred replica again.
    r = cli("balance", "--bootstrap", b1.bootstrap, "--format", "json")
    before = json.loads(r.stdout)
    assert before["not_preferred"], before
    md = admin.list_topics(timeout=10).topics
    preferred = {f"{t}-{p}": md[t].partitions[p].replicas[0] for t in md for p in md[t].partitions}
    assert {preferred[tp] for tp in before["not_preferred"]} == {3}, "only broker 3's partitions lost their preferred leader"
    r = cli("balance", "--bootstrap", b1.bootstrap, "--apply", "--format", "json")
    assert r.returncode == 0, r.stderr
    after = json.loads(r.stdout)
    assert sorted(after["elected"]) == sorted(before["not_preferred"]) and not after["refused"], (before, after)
    assert after["not_preferred"] == [] and after["leader_skew"] <= before["leader_skew"], after
    assert after["leaders"].get("3", 0) > 0, after


def test_status_shows_leaders_per_shard(cluster):
    """`status --admin`: leaders and replicas per broker and shard from one node's admin
    listener (the metadata image). They add up to the broker's Kafka-protocol counts, and
    each shard's leaders equal what that node's own shard reports it leads
    (shardlog_shard_leaders in its /metrics, counted by the shard)."""
    from admin_api import scrape
    b1 = cluster.node(1)
    topic = f"shards-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b1.bootstrap})
    admin.create_topics([NewTopic(topic, 8, 2)], operation_timeout=30)[topic].result(timeout=60)
    admin_addr = cluster.node(2).admin_url.removeprefix("http://")

    def consistent():
        r = cli("status", "--bootstrap", b1.bootstrap, "--admin", admin_addr, "--format", "json")
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout)
        if s["under_replicated"] or s["offline"]:
            return None
        shards = {b["broker"]: b["shards"] for b in s["shards"]}
        for b in s["brokers"]:
            per_shard = shards[b["id"]]
            assert [x["shard"] for x in per_shard] == list(range(cluster.shards)), per_shard
            assert sum(x["leaders"] for x in per_shard) == b["leaders"], (b, per_shard)
            assert sum(x["replicas"] for x in per_shard) == b["replicas"], (b, per_shard)
            led = scrape(cluster.node(b["id"]).admin_url).labelled("shardlog_shard_leaders")
            if {ls["shard"]: v for ls, v in led} != {str(x["shard"]): x["leaders"] for x in per_shard}:
                return None
        return s
    s = wait_for("per-shard leaders agree with every shard's own count", consistent, DEADLINE_S)
    leaders = [x["leaders"] for b in s["shards"] for x in b["shards"]]
    assert s["shard_leader_skew"] == max(leaders) - min(leaders), s
    table = cli("status", "--bootstrap", b1.bootstrap, "--admin", admin_addr).stdout.splitlines()
    assert table[1].split()[-1] == "SHARD:LEADERS/REPLICAS", table
    assert any(line.startswith("shard leader skew: ") for line in table), table
