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
- clusters under faults: test_chaos.py (the chaos runner, tests/history/chaos.py).

Every history is kept in target/integration-logs/history/<test>.jsonl; a failing test
prints the checker's report. Env: SHARDLOG_HISTORY_DURATION_S (default 25).
No timed assertions: durations only size the load; every wait is a bound.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import LOG_ROOT, is_kafka

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.history.check import check  # noqa: E402
from tests.history.workload import Config, run  # noqa: E402

DURATION_S = float(os.environ.get("SHARDLOG_HISTORY_DURATION_S", "25"))
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
