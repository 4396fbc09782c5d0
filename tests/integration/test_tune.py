"""Issue 26 point 4: `shardlog tune`, as `rpk redpanda tune`: `--check` prints what the
broker needs of this host and whether it holds, with an exit status that follows the
required checks; `--apply` changes only what the operator names and prints each change;
neither runs without its flag. `shardlog serve` refuses on the same required checks
(unit-tested in src/tune/checks.rs with a host tree whose io_uring is disabled).

On this machine (the real /proc and /sys) and on fake host trees (`--sysroot`, a hidden
test flag) for the failing and the changing cases, so nothing on the machine changes.
shardlog only (Kafka has no such tool).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import SHARDLOG_BIN, skip_unless_shardlog

# One log dir: its three checks sit after kernel, io_uring, memlock and open_files.
CHECKS = ["kernel", "io_uring", "memlock", "open_files", "o_direct", "filesystem", "io_scheduler", "aio_max_nr",
          "transparent_hugepages", "cpu_governor", "irq_affinity", "swappiness", "dirty_writeback", "clock_source"]


@pytest.fixture(autouse=True)
def _shardlog_only():
    skip_unless_shardlog("`shardlog tune` is shardlog's tool")


def tune(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SHARDLOG_BIN), "tune", *args], capture_output=True, text=True, timeout=120)


def fake_host(root: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
    return root


def test_check_reports_every_check_and_exits_by_the_required_ones(tmp_path):
    r = tune("--check", "--format", "json", "--log-dirs", str(tmp_path / "data"))
    out = json.loads(r.stdout)
    assert [c["name"] for c in out["checks"]] == CHECKS, out
    for c in out["checks"]:
        assert c["level"] in ("required", "recommended") and c["outcome"] in ("ok", "fail", "unknown"), c
        assert c["current"] and c["wanted"] and c["fix"], c
    required = {c["name"] for c in out["checks"] if c["level"] == "required"}
    assert {"kernel", "io_uring", "o_direct"} <= required, "flush = always (the default) needs O_DIRECT"
    failed = [c for c in out["checks"] if c["level"] == "required" and c["outcome"] == "fail"]
    assert out["required_failed"] == len(failed)
    assert r.returncode == (1 if failed else 0), r.stderr
    # The suite runs brokers on this machine: nothing required fails here.
    assert not failed, failed
    # The table: a header and a row per check, in the same order.
    t = tune("--check", "--log-dirs", str(tmp_path / "data"))
    lines = t.stdout.splitlines()
    assert lines[0].split()[:3] == ["CHECK", "LEVEL", "RESULT"], t.stdout
    assert [ln.split()[0] for ln in lines[1:]] == CHECKS, t.stdout
    # flush = never: O_DIRECT is only recommended.
    n = json.loads(tune("--check", "--format", "json", "--flush", "never", "--log-dirs", str(tmp_path)).stdout)
    assert next(c for c in n["checks"] if c["name"] == "o_direct")["level"] == "recommended"


def test_a_required_failure_names_itself_and_fails_the_exit_status(tmp_path):
    root = fake_host(tmp_path / "host", {"proc/sys/kernel/osrelease": "6.1.0\n", "proc/sys/kernel/io_uring_disabled": "2\n"})
    r = tune("--check", "--sysroot", str(root), "--log-dirs", str(tmp_path / "data"))
    assert r.returncode == 1, r.stdout + r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("io_uring"))
    assert "FAIL" in row and "kernel.io_uring_disabled = 2" in row, row
    assert "1 required check(s) failed" in r.stderr, r.stderr
    old = fake_host(tmp_path / "old", {"proc/sys/kernel/osrelease": "5.4.0-150-generic\n"})
    r = tune("--check", "--format", "json", "--sysroot", str(old), "--log-dirs", str(tmp_path / "data"))
    assert r.returncode == 1
    kernel = json.loads(r.stdout)["checks"][0]
    assert (kernel["name"], kernel["outcome"], kernel["current"]) == ("kernel", "fail", "5.4.0-150-generic"), kernel


def test_apply_changes_only_what_is_named_and_prints_each_change(tmp_path):
    root = fake_host(tmp_path / "host", {
        "proc/sys/vm/swappiness": "60\n",
        "proc/sys/fs/aio-max-nr": "65536\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
    })
    r = tune("--apply", "swappiness,transparent_hugepages", "--sysroot", str(root))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{root}/proc/sys/vm/swappiness: 60 -> 1",
                                     f"{root}/sys/kernel/mm/transparent_hugepage/enabled: always -> madvise"], r.stdout
    assert (root / "proc/sys/vm/swappiness").read_text() == "1"
    assert (root / "proc/sys/fs/aio-max-nr").read_text() == "65536\n", "not named: untouched"
    # An unknown name writes nothing at all.
    (root / "proc/sys/vm/swappiness").write_text("60\n")
    r = tune("--apply", "swappiness,bogus", "--sysroot", str(root))
    assert r.returncode == 1 and "unknown tuning \"bogus\"" in r.stderr, r.stderr
    assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"
    # Neither --check nor --apply: a usage error, nothing checked or changed.
    r = tune("--sysroot", str(root))
    assert r.returncode == 2 and "--check" in r.stderr, r.stderr


def test_a_report_piped_into_head_ends_quietly():
    """`shardlog tune --check | head -1`: when the reader has gone away the command ends on
    SIGPIPE like any Unix tool, without a panic message on stderr. The pipe's read end is
    closed before the command starts, so its first write meets a missing reader."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(SHARDLOG_BIN), "tune", "--check"], stdout=w, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == -signal.SIGPIPE, (p.returncode, p.stderr.decode(errors="replace"))
    assert b"panicked" not in p.stderr, p.stderr.decode(errors="replace")
