"""Issue 26 point 8: README's quick start, run as it is written.

The block between `<!-- quickstart:begin -->` and `<!-- quickstart:end -->` in README.md
runs under `bash -euo pipefail`, with only what a test must change, each by exact
substitution of a string the test asserts is there (so the test fails when the README
changes shape instead of silently running something else):
- `cargo build --release` is skipped and `$PWD/target/release` (put on PATH) becomes the
  directory of SHARDLOG_BIN (the binary under test);
- the client and admin listeners 127.0.0.1:9092 / 127.0.0.1:9644 become free ports, and
  `./data` a fresh directory, so the test runs beside other brokers.

Then the output must show what the README promises: the broker ready, both records read
back by the plain consumer and by the group member, the topic and the group listed, and
the broker stopped cleanly (the block ends with `kill` and `wait`, whose status is the
broker's exit status). shardlog only.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, SHARDLOG_BIN, free_port, skip_unless_shardlog

BEGIN, END = "<!-- quickstart:begin -->", "<!-- quickstart:end -->"


def quickstart_block() -> str:
    readme = (REPO / "README.md").read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1, "README.md must mark its quick start once"
    section = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    m = re.fullmatch(r"\s*```sh\n(.*?)```\s*", section, re.S)
    assert m, f"the quick start must be one ```sh block between the markers, got:\n{section}"
    return m.group(1)


def substitute(script: str, replacements: list[tuple[str, str]]) -> str:
    for old, new in replacements:
        assert old in script, f"README's quick start no longer contains {old!r}: update this test with it"
        script = script.replace(old, new)
    return script


def test_readme_quickstart_runs_verbatim(tmp_path):
    skip_unless_shardlog("the quick start runs shardlog's own binary and CLI")
    if not shutil.which("kcat"):
        pytest.skip("kcat not installed (scripts/test.sh installs the Debian package)")
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    assert SHARDLOG_BIN.name == "shardlog" and SHARDLOG_BIN.exists(), SHARDLOG_BIN

    port, admin_port = free_port(), free_port()
    data = tmp_path / "data"
    script = substitute(quickstart_block(), [
        ("cargo build --release\n", ""),
        ('export PATH="$PWD/target/release:$PATH"', f'export PATH="{SHARDLOG_BIN.parent.resolve()}:$PATH"'),
        ("--data-dir ./data ", f"--data-dir {data} "),
        ("127.0.0.1:9092", f"127.0.0.1:{port}"),
        ("127.0.0.1:9644", f"127.0.0.1:{admin_port}"),
    ])
    # Nothing of the original addresses or paths is left to reach another broker.
    for stale in ("127.0.0.1:9092", "127.0.0.1:9644", "./data", "cargo "):
        assert stale not in script, f"{stale!r} left in the quick start after substitution:\n{script}"

    log = tmp_path / "quickstart.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            rc = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"the quick start did not finish in 180 s:\n{log.read_text()}")
        finally:
            # The block stops its broker; should it fail before, no process outlives the test.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = log.read_text()
    assert rc == 0, f"the quick start exited {rc}:\n{text}"

    lines = text.splitlines()
    # The plain consumer: partition, offset, key=value; each record once.
    for kv in ("k1=hello", "k2=world"):
        assert sum(1 for l in lines if re.fullmatch(rf"\d+ 0 {kv}", l)) == 1, f"{kv} not read back once:\n{text}"
        assert f"group read {kv}" in lines, f"the group member did not read {kv}:\n{text}"
    assert "demo" in lines or any(re.match(r"^demo\b", l) for l in lines), f"topic list shows no demo:\n{text}"
    assert any(re.match(r"^demo-group\s", l) for l in lines), f"group list shows no demo-group:\n{text}"
    # The group member committed what it read (kcat commits when it leaves).
    committed = [l for l in lines if re.match(r"^demo\s+\d+\s+1\s+1\s+0\b", l)]
    assert len(committed) == 2, f"group describe does not show both records committed:\n{text}"
    assert "deleted topic demo" in lines, text
    broker_log = (tmp_path / "shardlog.log").read_text()
    assert "shut down cleanly" in broker_log, f"the broker was not stopped cleanly:\n{broker_log[-3000:]}"
    # The broker the block started was stopped by it (SIGTERM, controlled shutdown).
    out = subprocess.run(["pgrep", "-f", "--", f"--data-dir {data} "], capture_output=True, text=True)
    assert out.stdout.strip() == "", f"a broker of the quick start still runs: {out.stdout}"
