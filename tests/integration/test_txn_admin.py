"""ListTransactions / DescribeTransactions through real admin clients, before any transaction
exists: shardlog answers as Kafka 4.1 does — ListTransactions: an empty list, NONE;
DescribeTransactions for an unknown id: TRANSACTIONAL_ID_NOT_FOUND (the first coordinator lookup
creates __transaction_state, as Kafka's does). Every client must end promptly with a clear
answer, never retry until its timeout:
- Kafka's `kafka-transactions list` prints an empty table (test_admin_compat.py) and
  `kafka-transactions describe --transactional-id X` exits non-zero naming the id;
- the Java AdminClient: listTransactions() is empty; describeTransactions() fails;
- franz-go's kadm: ListTransactions is empty; DescribeTransactions fails for the id.
librdkafka (confluent-kafka 2.16)
has no transaction admin calls. Each call gets a bound (60 s); reaching it is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clients import java_tool, json_lines, kafka_tool
from conftest import REPO, is_kafka

BOUND_S = 60
GO_TOOL = Path(os.environ.get("SHARDLOG_GO_TXN_ADMIN", REPO / "tests" / "go" / "target" / "txnadmin"))
# What Java's Admin and kadm get for an unknown transactional id (see the module comment).
JAVA_UNKNOWN_ID = "TransactionalIdNotFoundException"
CLI_UNKNOWN_ID = "failed because the ID could not be found"
KADM_UNKNOWN_ID = "TRANSACTIONAL_ID_NOT_FOUND"


def _admin_props() -> str:
    # The bound: the call must answer before it (a TimeoutException means the client retried).
    return f"default.api.timeout.ms={BOUND_S * 1000},request.timeout.ms={BOUND_S * 1000}"


def test_transactions_cli_describe_unknown_id(bootstrap):
    r = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap,
                   "describe", "--transactional-id", "admin-no-such-txn", timeout=BOUND_S + 60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "admin-no-such-txn" in out and "TimeoutException" not in out, out[-3000:]
    assert "Failed to describe transaction state of transactional-id `admin-no-such-txn`" in out, out[-3000:]
    assert CLI_UNKNOWN_ID in out, out[-3000:]


def test_java_admin_list_and_describe_transactions(bootstrap):
    (listed,) = json_lines(java_tool("list-transactions", "--bootstrap", bootstrap, "--prop", _admin_props(),
                                     timeout=BOUND_S + 60).stdout)
    assert listed == {"transactions": []}, listed
    (d,) = json_lines(java_tool("describe-transactions", "--bootstrap", bootstrap, "--txn-ids", "admin-java-txn",
                                "--prop", _admin_props(), timeout=BOUND_S + 60).stdout)
    assert d["id"] == "admin-java-txn" and d.get("error") == JAVA_UNKNOWN_ID, d


def test_franz_go_kadm_list_and_describe_transactions(bootstrap):
    if not GO_TOOL.exists():
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: the franz-go tool (tests/go) cannot be built")
        pytest.fail(f"{GO_TOOL} missing: scripts/test.sh builds it (cd tests/go && go build -o target/txnadmin ./txnadmin)")
    r = subprocess.run([str(GO_TOOL), "-bootstrap", bootstrap, "-txn-id", "admin-kadm-txn", "-bound", f"{BOUND_S}s"],
                       capture_output=True, text=True, timeout=BOUND_S + 60)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    assert [l["call"] for l in lines] == ["list", "describe"], (lines, r.stderr[-2000:])
    listed, described = lines
    assert listed == {"call": "list", "transactions": []}, listed
    assert not described.get("timed_out") and KADM_UNKNOWN_ID in described.get("error", ""), described
