"""Issue 29: the benchmark workloads run here in a short smoke form (seconds each) so a
change that breaks one is seen; they assert only that each produced its result row,
never a timing (the figures come from `scripts/bench.sh` on a quiet machine)."""
import json
import socket
import subprocess
import sys

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
