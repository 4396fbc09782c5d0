"""Issue 28, points 2-3: the chaos runner (tests/history/chaos.py), short and seeded, as CI
runs it: a 4-node cluster of real processes (3 replicas per partition, a broker to spare)
under a mixed schedule of every nemesis this machine can run (kill -9 and SIGSTOP of
leaders, followers, the controller and the group coordinator; network partitions between
namespaces; disk full, fsync and write EIO, torn writes, slow disk, power loss;
reassignments and preferred elections; a broker decommissioned and brought back), the history
workload (idempotent acks=all producers, assigned consumers, a committing group) and the
checker over the whole history: nothing lost, duplicated or inconsistent, no other
anomaly, every partition drained, faults actually injected.

Against Apache Kafka (SHARDLOG_TEST_TARGET=kafka) the runner drops the shardlog-only
nemeses (the storage fault seam) and says so. Longer campaigns: scripts/chaos.sh.
Env: SHARDLOG_CHAOS_SEED (default 1), SHARDLOG_CHAOS_DURATION_S (default 120),
SHARDLOG_CHAOS_NEMESIS (default all). The run's output (history, report, summary, the
nodes' logs) stays in target/integration-logs/chaos/. No timed assertions: the duration
only sizes the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import LOG_ROOT, REPO, SHARDLOG_BIN, is_kafka

SEED = int(os.environ.get("SHARDLOG_CHAOS_SEED", "1"))
DURATION_S = float(os.environ.get("SHARDLOG_CHAOS_DURATION_S", "120"))
NEMESIS = os.environ.get("SHARDLOG_CHAOS_NEMESIS", "all")
# Far below what 3 producers at 100/s write in the run: only "the run did something".
MIN_ACKED = 1000


def test_seeded_mixed_chaos_run_loses_nothing():
    out = LOG_ROOT / "chaos" / f"{'kafka' if is_kafka() else 'shardlog'}-seed{SEED}-{NEMESIS.replace(',', '+')}"
    env = dict(os.environ, SHARDLOG_BIN=str(SHARDLOG_BIN), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "tests.history.chaos", "--seed", str(SEED), "--duration", str(DURATION_S),
           "--nemesis", NEMESIS, "--skip-unavailable", "--out-dir", str(out)]
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=DURATION_S + 900)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if not ln.startswith("%")]  # librdkafka's logs
    print("\n".join(lines[-40:]))
    assert r.returncode == 0, f"chaos runner exit {r.returncode} (1 anomalies, 2 could not run, 3 workload failed)"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] and not summary["anomalies"], summary
    assert sum(n for name, n in summary["faults"].items() if name != "halted") > 0, "no fault was injected"
    s = summary["stats"]
    assert s["acked"] >= MIN_ACKED and s["acked_read"] == s["acked"], s
    assert s["drained"] == s["partitions"], s
