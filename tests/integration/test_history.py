"""Issue 28, point 1: the Jepsen-style history workload (tests/history/) against a real
broker, judged by the checker (its own tests: test_history_checker.py).

- a clean run on one node: 3 producers (acks=all, idempotent), 2 consumers with all
  partitions assigned (new sessions at random earlier offsets every few seconds), a group
  of 2 committing members, 6 partitions; then the final drain: no anomaly of any kind;
- a negative control: records acknowledged and never read, deleted (DeleteRecords) before
  the final drain, are reported lost, exactly those;
- transactions: 2 transactional producers (commit or abort at random) beside a plain one,
  a read_committed consumer and the read_committed drain: no anomaly. Apache Kafka only
  until shardlog has transactions;
- 3 nodes, RF 3, min.insync.replicas 2, acks=all: kill -9 of a partition leader mid-run,
  restarted: nothing lost, duplicated or inconsistent, and no other anomaly either. On
  shardlog (cluster_harness.py), and on 3 Apache Kafka nodes (kafka_cluster.py) with
  SHARDLOG_TEST_TARGET=kafka.

Every history is kept in target/integration-logs/history/<test>.jsonl; a failing test
prints the checker's report. `scripts/history.sh` runs longer campaigns.
Env: SHARDLOG_HISTORY_DURATION_S (single node, default 25), SHARDLOG_HISTORY_CLUSTER_S
(cluster, default 45).
No timed assertions: durations only size the load; every wait is a bound.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

import conftest
from conftest import LOG_ROOT, is_kafka

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.history.check import check  # noqa: E402
from tests.history.clusters import SETTINGS, shardlog_flags, wait_brokers  # noqa: E402
from tests.history.nemesis import KillLeader  # noqa: E402
from tests.history.workload import Config, run  # noqa: E402

DURATION_S = float(os.environ.get("SHARDLOG_HISTORY_DURATION_S", "25"))
CLUSTER_S = float(os.environ.get("SHARDLOG_HISTORY_CLUSTER_S", "45"))
HISTORY_DIR = LOG_ROOT / "history"
# Well below what the runs write (3 producers x 100/s): only "the run did something".
MIN_ACKED = 1000


def history_file(request) -> Path:
    HISTORY_DIR.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    return HISTORY_DIR / f"{'kafka-' if is_kafka() else ''}{name}.jsonl"


def judge(w, path: Path):
    """The checker's report of a finished run (printed); the workload ran without errors."""
    rep = check(w.h.ops)
    print(f"\nhistory {path}:\n{rep.text(5)}")
    assert w.errors == [], f"the workload itself failed: {w.errors}"
    return rep


def test_clean_run_single_node(broker, request):
    path = history_file(request)
    cfg = Config(partitions=6, producers=3, consumers=2, group_consumers=2, duration_s=DURATION_S,
                 reassign_every_s=8, seed=1)
    w = run(broker.bootstrap, cfg, path)
    rep = judge(w, path)
    assert rep.valid, rep.text()
    s = rep.stats
    assert s["acked"] >= MIN_ACKED, f"only {s['acked']} acknowledged writes"
    assert s["acked_read"] == s["acked"] and s["acked_unchecked"] == 0
    assert s["drained"] == cfg.partitions
    # The drain reads every acknowledged write once, the group once more, the consumers more.
    assert s["reads"] > 2 * s["acked"], f"{s['reads']} reads of {s['acked']} acknowledged writes"
    assert s["commits_ok"] > 0 and s["sessions"] >= 2 + 2 + 1
    broker.assert_alive()


def test_negative_control_records_nobody_read_deleted_before_the_drain_are_lost(broker, request):
    """The whole pipeline finds a real loss: half of partition 0's records, acknowledged
    and never read (no consumers), are deleted (DeleteRecords) before the final drain."""
    path = history_file(request)
    cfg = Config(partitions=2, producers=1, consumers=0, group_consumers=0, duration_s=3, rate=100, seed=5)
    cut: list[int] = []

    def delete_half(w):
        offsets = sorted(op["offset"] for op in w.h.ops if op["f"] == "send" and op["type"] == "ok"
                         and op["partition"] == 0)
        assert offsets == list(range(len(offsets))) and len(offsets) >= 10, offsets[:20]
        cut.append(len(offsets) // 2)
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in a.delete_records([TopicPartition(cfg.topic, 0, cut[0])]).values():
            fut.result(timeout=60)
    w = run(broker.bootstrap, cfg, path, before_drain=delete_half)
    rep = judge(w, path)
    assert {k: n for k, n in rep.counts().items() if n} == {"lost": cut[0]}, rep.text()
    assert sorted((r["partition"], r["offset"]) for r in rep.anomalies["lost"]) == [(0, o) for o in range(cut[0])]
    assert rep.stats["acked"] == rep.stats["acked_read"] + cut[0]


def test_transactional_run_single_node(broker, request):
    path = history_file(request)
    cfg = Config(partitions=6, producers=1, txn_producers=2, consumers=1, rc_consumers=1, group_consumers=0,
                 duration_s=DURATION_S, reassign_every_s=8, seed=2)
    w = run(broker.bootstrap, cfg, path)
    rep = judge(w, path)
    assert rep.valid, rep.text()
    s = rep.stats
    assert s["txn_committed"] > 0 and s["txn_aborted"] > 0, s
    assert s["acked"] >= MIN_ACKED // 4, s
    assert s["acked_read"] == s["acked"] and s["drained"] == cfg.partitions
    rc_reads = sum(len(op["msgs"]) for op in w.h.ops
                   if op["f"] == "poll" and op["type"] == "ok" and op["proc"] in ("r0", "drain-rc"))
    assert rc_reads > 0, "the read_committed readers read something"
    broker.assert_alive()


# == 3 nodes, kill -9 of a leader ===========================================================

def kafka_cluster(tmp_path_factory, name: str):
    yield from conftest.running_kafka_cluster(tmp_path_factory, name, dict(SETTINGS))


@pytest.fixture
def cluster(tmp_path_factory):
    if is_kafka():
        gen = kafka_cluster(tmp_path_factory, "history-cluster")
    else:
        gen = conftest.running_cluster(tmp_path_factory, "history-cluster", extra_args=shardlog_flags(SETTINGS))
    c = next(gen)
    try:
        wait_brokers(c)
        yield c
    finally:
        gen.close()


def test_cluster_kill9_leader_loses_nothing(cluster, request):
    path = history_file(request)
    cfg = Config(topic=f"history-kill9-{uuid.uuid4().hex[:8]}", partitions=6, replication=3, min_insync=2,
                 acks="all", producers=3, consumers=2, group_consumers=2, duration_s=CLUSTER_S,
                 reassign_every_s=10, message_timeout_ms=120000, seed=3)
    nemesis = KillLeader(cluster, cfg.topic, cfg.partitions, seed=3, first_s=min(10.0, CLUSTER_S / 3), kills=1)
    bootstrap = ",".join(nd.bootstrap for nd in cluster.nodes)
    w = run(bootstrap, cfg, path, during=nemesis)
    rep = judge(w, path)
    actions = [(op["action"], op["type"]) for op in w.h.ops if op["f"] == "nemesis"]
    assert ("kill9", "ok") in actions and ("restart", "ok") in actions, actions
    assert ("new-leader", "ok") in actions, f"no other broker took over the killed leader's partition: {actions}"
    counts = rep.counts()
    assert (counts["lost"], counts["duplicate"], counts["inconsistent_offset"]) == (0, 0, 0), rep.text()
    assert rep.valid, rep.text()
    s = rep.stats
    assert s["acked"] >= MIN_ACKED and s["drained"] == cfg.partitions, s
    kill_t = next(op["t"] for op in w.h.ops if op["f"] == "nemesis" and op.get("action") == "kill9")
    after = sum(1 for op in w.h.ops if op["f"] == "send" and op["type"] == "ok" and op["t"] > kill_t)
    assert after > 0, "writes were acknowledged again after the kill"
    for nd in cluster.nodes:
        assert nd.alive(), f"node {nd.node_id} is down at the end"
