#!/usr/bin/env bash
# THE test command for shardlog (README and .ci/run use it).
#
# 1. installs what the tests need, idempotently: kcat (Debian), Python clients (pinned, in
#    tests/integration/requirements.txt), the Java client tool (Maven, kafka-clients 4.1.x)
# 2. the layering check    (scripts/check_layers.py: no lower layer names an upper one)
#    cargo test            (unit + property tests, debug profile)
# 3. cargo build --release (the integration tests run target/release/shardlog)
# 4. pytest tests/integration -v
#
# Env:
#   SHARDLOG_BIN=path           broker binary for the integration tests (skips nothing else)
#   SHARDLOG_TEST_TARGET=kafka  run the integration tests against real Apache Kafka 4.1
#                               instead (skips the cargo steps; checks the tests themselves)
#   SKIP_CARGO=1                skip steps 2 and 3
#   PYTEST_ARGS="..."           extra pytest arguments (e.g. "-k roundtrip -x")
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

step() { echo; echo "=== [test.sh $(date +%H:%M:%S)] $*"; }
t_start=$(date +%s)

# ---------------------------------------------------------------------------------------
step "install test dependencies"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if ! command -v kcat >/dev/null 2>&1; then
  echo "installing kcat (Debian)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi
echo "kcat: $(kcat -V 2>&1 | head -1)"

PY="${PYTHON:-python3}"
if ! "$PY" - <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
want = {}
for line in open("tests/integration/requirements.txt"):
    line = line.split("#")[0].strip()
    if line:
        name, ver = line.split("==")
        want[name] = ver
sys.exit(0 if all(version(n) == v for n, v in want.items()) else 1)
PYEOF
then
  echo "installing Python test packages (pip, pinned)"
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -r tests/integration/requirements.txt
fi
"$PY" -c 'import confluent_kafka, kafka, pytest; print("python clients: confluent-kafka", confluent_kafka.__version__, "(librdkafka", confluent_kafka.libversion()[0] + "), kafka-python", kafka.__version__, ", pytest", pytest.__version__)'

JAR=tests/java/target/clienttool.jar
if [ ! -f "$JAR" ] || [ -n "$(find tests/java/pom.xml tests/java/src -newer "$JAR" -print -quit)" ]; then
  echo "building the Java client tool (Maven)"
  mvn -q -B -f tests/java/pom.xml package -DskipTests
fi
echo "java client tool: $JAR"

# franz-go programs (tests/go): built when Go is installed; their tests skip otherwise.
GO_BIN=tests/go/target/txnfailfast
if command -v go >/dev/null 2>&1; then
  if [ ! -f "$GO_BIN" ] || [ -n "$(find tests/go -name '*.go' -newer "$GO_BIN" -print -quit)" ]; then
    echo "building the franz-go test programs (Go modules)"
    (cd tests/go && go build -o target/txnfailfast ./txnfailfast)
  fi
  echo "franz-go tool: $GO_BIN"
else
  echo "go not installed: franz-go tests will be skipped"
fi

# ---------------------------------------------------------------------------------------
TARGET="${SHARDLOG_TEST_TARGET:-shardlog}"
if [ "$TARGET" = "kafka" ]; then
  SKIP_CARGO=1
  step "fetching Apache Kafka jars (SHARDLOG_TEST_TARGET=kafka)"
  scripts/kafka_local.sh fetch
fi

if [ "${SKIP_CARGO:-0}" != 1 ]; then
  step "layering check (dependencies point down)"
  "$PY" scripts/check_layers.py --self-test
  "$PY" scripts/check_layers.py
  step "cargo test (unit + property tests)"
  cargo test 2>&1
  # The benchmarks are not run here, but they must keep compiling (debug profile).
  cargo build --benches 2>&1
  if [ -z "${SHARDLOG_BIN:-}" ]; then
    step "cargo build --release"
    cargo build --release --bin shardlog 2>&1
  fi
fi

# ---------------------------------------------------------------------------------------
step "integration tests (target: $TARGET${SHARDLOG_BIN:+, SHARDLOG_BIN=$SHARDLOG_BIN})"
export PYTHONDONTWRITEBYTECODE=1
set +e
# shellcheck disable=SC2086
"$PY" -m pytest tests/integration -v -rs --durations=15 -p no:cacheprovider ${PYTEST_ARGS:-}
rc=$?
set -e
if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then
  echo "broker logs of every test: $ROOT/target/integration-logs/"
fi
if [ "$rc" = 5 ]; then
  echo "pytest collected no tests: that is a failure here"
  rc=1
fi
step "done in $(( $(date +%s) - t_start )) s, exit code $rc"
exit "$rc"
