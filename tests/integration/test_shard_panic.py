"""No silent loss of a shard (issue 9, point 4): a panic on one shard aborts the whole
broker with a log line naming the shard, instead of leaving a process that accepts
connections for partitions nobody serves."""

from __future__ import annotations

import signal

import pytest

from conftest import is_kafka


def test_a_panicking_shard_aborts_the_broker(broker_factory, monkeypatch):
    if is_kafka():
        pytest.skip("shardlog-only: uses the SHARDLOG_TEST_PANIC_SHARD test hook")
    # The hook makes shard 1 panic once the broker has logged that it listens (so it is
    # never ready: not waited for).
    monkeypatch.setenv("SHARDLOG_TEST_PANIC_SHARD", "1")
    broker = broker_factory(shards=2, start=False).start(wait=False)
    code = broker.proc.wait(timeout=60)
    log = broker.log_path.read_text(errors="replace")
    assert code == -signal.SIGABRT, f"exit code {code}; log tail:\n{broker.log_tail()}"
    fatal = [line for line in log.splitlines() if "fatal: panic on thread" in line]
    assert fatal, f"no fatal panic line; log tail:\n{broker.log_tail()}"
    assert "shard-1" in fatal[0] and "Some(1)" in fatal[0], fatal[0]
    assert "shard 1 panics on purpose" in fatal[0], fatal[0]

