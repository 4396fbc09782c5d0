"""Issue 29: the benchmark workloads run here in a short smoke form (seconds each) so a
change that breaks one is seen; they assert only that each produced its result row,
never a timing (the figures come from `scripts/bench.sh` on a quiet machine)."""
import json
import os
import socket
import subprocess
import sys

from cluster_harness import free_port
from conftest import REPO, SHARDLOG_BIN, skip_unless_shardlog


def free_port_pair() -> int:
    """A port whose next port is free too (the bench's broker and its admin listener)."""
    for _ in range(100):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                    return port
                except OSError:
                    continue
    raise RuntimeError("no two adjacent free ports")


def test_w12_partition_scale_smoke(tmp_path):
    skip_unless_shardlog("the bench starts its own brokers")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(REPO / "benches" / "partition_scale_bench.py"), "--smoke", "--bin", str(SHARDLOG_BIN),
                        "--out", str(out), "--work", str(tmp_path / "work"), "--shardlog-port", str(free_port_pair())],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [(row["broker"], row["partitions"]) for row in rows] == [("shardlog", 200)]
    row = rows[0]
    assert "stopped_at" not in row, row
    # Every step left its figure (the values are not judged here).
    for key in ("create_s", "rss_idle_mib", "metadata_ms_median"):
        assert isinstance(row[key], (int, float)), row
    assert row["produce"]["delivered"] == row["produce"]["records"] > 0, row
    assert isinstance(row["clean"]["restart_s"], float) and isinstance(row["kill9"]["restart_s"], float), row


# Every row `scripts/bench.sh --smoke` must leave, per broker: (workload, kind, generator).
SMOKE_ROWS = {
    ("W1", "produce", "native"), ("W1", "producer-perf", "kafka-tools"),
    ("W4", "consume", "native"), ("W4", "consumer-perf", "kafka-tools"),
    ("W5", "e2e", "native"), ("W5", "e2e-latency", "kafka-tools"),
    *((("W7", k, g) for k in ("fleet-50-fixed", "fleet-50-max", "fleet-200-fixed") for g in ("native", "java-client"))),
    *((("W8", f"keyed-{c}", g) for c in ("none", "lz4", "zstd") for g in ("native", "java-client"))),
    ("W9", "retention", "native"), ("W9", "retention", "java-client"),
    ("W10", "soak-max", "native"), ("W10", "soak", "native"),
    ("W11", "drain-produce", "native"), ("W11", "drain-consume", "native"),
    ("W11", "drain-produce", "java-client"), ("W11", "drain-consume", "kafka-tools"),
    ("T1", "txn", "native"),
    ("T2", "consume", "native"), ("T2", "consumer-perf", "kafka-tools"),
}


def test_bench_workloads_smoke(tmp_path):
    """`scripts/bench.sh --smoke`: every workload of the shardlog-vs-Kafka benchmark for a
    second or two, each generator (native, Kafka's tools, the Java producer-fleet); each run
    must finish and leave its row and its output, and the report must name every workload.
    Against shardlog only (BENCH_NO_KAFKA=1), to keep CI within its budget: both brokers
    take 3.5 min here, shardlog alone about half. `scripts/bench.sh --smoke` runs both."""
    skip_unless_shardlog("the bench starts its own shardlog and Kafka")
    out = tmp_path / "out"
    env = dict(os.environ, BENCH_NO_BUILD="1", BENCH_NO_KAFKA="1", BENCH_BIN=str(SHARDLOG_BIN), BENCH_OUT=str(out),
               BENCH_WORK=str(tmp_path / "work"), SHARDLOG_PORT=str(free_port()), KAFKA_PORT=str(free_port_pair()))
    r = subprocess.run(["bash", str(REPO / "scripts" / "bench.sh"), "--smoke"], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    seen = {(x["workload"], x["kind"], x["generator"], x["broker"]) for x in runs}
    for broker in ("shardlog",):
        missing = {row for row in SMOKE_ROWS if (*row, broker) not in seen}
        assert not missing, (broker, sorted(missing))
    failed = [x for x in runs if x["status"] != "ok"]
    assert not failed, [(x["out"], (out / x["out"].replace(".out", ".err")).read_text()[-500:]) for x in failed]
    for x in runs:
        assert (out / x["out"]).stat().st_size > 0, x
    # The drain's span reached the producer's row (the report shades it).
    drains = [x for x in runs if x["kind"] == "drain-produce"]
    assert all(len(x.get("window", [])) == 2 for x in drains), drains
    page = (out / "report.md").read_text()
    for w in ("W1", "W4", "W5", "W7", "W8", "W9", "W10", "W11", "T1", "T2"):
        assert w in page, w
