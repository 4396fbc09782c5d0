"""Transactional producers against a broker without transactions (issue 13, point 4): each
client must fail fast with a clear error, not retry forever. shardlog answers
FindCoordinator(TRANSACTION) and InitProducerId with a transactional id with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the message "transactions are not supported by
this broker", which every client treats as fatal:
- Java kafka-clients 4.1: initTransactions() throws TransactionalIdAuthorizationException;
- kafka-python: init_transactions() raises TransactionalIdAuthorizationFailedError;
- franz-go: the first transactional produce fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
librdkafka is covered in test_admin_compat.py. Each client gets a bound (60 s); reaching
it is a failure (the client hung), so no test here depends on timing.
Kafka has a transaction coordinator, so these run against shardlog only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clients import admin_create_topic, java_tool, json_lines
from conftest import REPO, skip_unless_shardlog

BOUND_S = 60
GO_TOOL = Path(os.environ.get("SHARDLOG_GO_TXN_TOOL", REPO / "tests" / "go" / "target" / "txnfailfast"))


@pytest.fixture(autouse=True)
def _shardlog_only():
    skip_unless_shardlog("Kafka has a transaction coordinator")


def test_java_init_transactions_fails_fast(bootstrap):
    r = java_tool("init-transactions", "--bootstrap", bootstrap, "--txn-id", "ff-java",
                  "--max-block-ms", str(BOUND_S * 1000), timeout=BOUND_S + 60)
    (d,) = json_lines(r.stdout)
    assert d.get("error") == "TransactionalIdAuthorizationException", d


def test_kafka_python_init_transactions_fails_fast(bootstrap):
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError, TransactionalIdAuthorizationFailedError

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="ff-kafka-python",
                      max_block_ms=BOUND_S * 1000)
    try:
        with pytest.raises(Exception) as e:
            p.init_transactions()
        assert not isinstance(e.value, KafkaTimeoutError), f"kafka-python hung until the bound: {e.value!r}"
        assert isinstance(e.value, TransactionalIdAuthorizationFailedError), repr(e.value)
    finally:
        p.close(timeout=5)


def test_franz_go_transactional_produce_fails_fast(bootstrap):
    if not GO_TOOL.exists():
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: the franz-go tool (tests/go) cannot be built")
        pytest.fail(f"{GO_TOOL} missing: scripts/test.sh builds it (cd tests/go && go build -o target/txnfailfast ./txnfailfast)")
    topic = "ff-franz-go"
    admin_create_topic(bootstrap, topic, 1)
    r = subprocess.run([str(GO_TOOL), "-bootstrap", bootstrap, "-topic", topic, "-txn-id", "ff-franz-go",
                        "-bound", f"{BOUND_S}s"], capture_output=True, text=True, timeout=BOUND_S + 60)
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" in d and not d.get("timed_out"), d
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in d["error"], d
