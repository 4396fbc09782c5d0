#!/usr/bin/env bash
# THE test command for shardlog (README and .ci/run use it).
#
# 1. installs what the tests need, idempotently: kcat (Debian), Python clients (pinned, in
#    tests/integration/requirements.txt), the Java client tool (Maven, kafka-clients 4.4.0)
# 2. the layering check    (scripts/check_layers.py: no lower layer names an upper one),
#    the generated response error table is current (scripts/gen_response_errors.py --check)
#    cargo clippy          (--all-targets, warnings are errors; Cargo.toml lists the allowed lints)
#    cargo fmt --check     (rustfmt.toml: the long-line style)
#    cargo test            (unit + property tests, debug profile)
#    fuzz smoke            (every fuzz target 30 s over its corpus and seeded inputs; campaigns: scripts/fuzz.sh)
# 3. cargo build --release (the integration tests run target/release/shardlog)
# 4. pytest tests/integration -v, then the real-client suites again with flush = never
#
# Env:
#   SHARDLOG_BIN=path           broker binary for the integration tests (skips nothing else)
#   SHARDLOG_TEST_TARGET=kafka  run the integration tests against real Apache Kafka 4.4
#                               instead (skips the cargo steps; checks the tests themselves)
#   SKIP_CARGO=1                skip steps 2 and 3
#   SETUP_ONLY=1                stop after step 1 (install the test dependencies)
#   PYTEST_ARGS="..."           extra pytest arguments (e.g. "-k roundtrip -x"; skips the
#                               second pass with flush = never)
#   SHARDLOG_TEST_FLUSH=never   brokers a test does not pick a mode for run with this flush
#   SHARDLOG_TEST_WORKERS=N     pytest-xdist workers for the integration suites (default 2;
#                               each test file runs whole on one worker; 0 = no xdist)
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
# kcat drives the broker; curl runs README's quick start (test_readme_quickstart.py).
if ! command -v kcat >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  echo "installing kcat and curl (Debian)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat curl >/dev/null
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

# franz-go programs (tests/go) need the Go that tests/go/go.mod names (GO_MIN); Debian 12's
# golang-go (1.19) is too old.
# A missing or older go is replaced, for this script only, by a pinned Go release from the
# Go module proxy, which serves every release as the module golang.org/toolchain (the way
# the go command's own GOTOOLCHAIN switching fetches it). It is unpacked once under the
# cache dir and checked against the pinned h1: hash (the go.sum / sum.golang.org form).
# The object store's module (tests/objectstore) needs the newer of the two.
GO_MIN="$(awk '$1 == "go" {print $2; exit}' tests/go/go.mod tests/objectstore/go.mod | sort -V | tail -1)"
GO_PIN=1.26.8
GO_CACHE="${SHARDLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardlog}/go"
go_new_enough() { # PATH-resolved go is at least GO_MIN
  local v
  v="$(go env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -1)" = "$GO_MIN" ]
}
install_go_toolchain() { # unpacks go$GO_PIN into $GO_CACHE/go$GO_PIN (idempotent); prints its GOROOT
  local arch h1
  case "$(uname -m)" in
    x86_64) arch=amd64; h1="$GO_H1_AMD64" ;;
    aarch64|arm64) arch=arm64; h1="$GO_H1_ARM64" ;;
    *) echo "no pinned Go toolchain for $(uname -m)" >&2; return 1 ;;
  esac
  local mod="golang.org/toolchain@v0.0.1-go$GO_PIN.linux-$arch"
  local root="$GO_CACHE/go$GO_PIN"
  if [ ! -x "$root/bin/go" ]; then
    echo "fetching Go $GO_PIN (linux-$arch) from the Go module proxy" >&2
    mkdir -p "$GO_CACHE"
    local tmp
    tmp="$(mktemp -d "$GO_CACHE/.fetch.XXXXXX")"
    "$PY" - "${GOPROXY_URL:-https://proxy.golang.org}" "$tmp/x" "$mod" "$h1" <<'PYEOF' >&2
import base64, hashlib, io, os, sys, urllib.request, zipfile
proxy, dest, mod, want = sys.argv[1:]
path, version = mod.split("@")
with urllib.request.urlopen(f"{proxy}/{path}/@v/{version}.zip", timeout=600) as r:
    data = r.read()
with zipfile.ZipFile(io.BytesIO(data)) as z:
    names = sorted(n for n in z.namelist() if not n.endswith("/"))
    # dirhash.Hash1: sha256 over "<sha256 hex>  <name>\n" of every file, sorted by name.
    summary = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n" for n in names)
    got = "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()
    if got != want:
        sys.exit(f"Go toolchain {mod}: hash {got}, expected {want}; not installing it")
    prefix = mod + "/"
    for n in names:
        if not n.startswith(prefix) or ".." in n.split("/"):
            sys.exit(f"unexpected path in the toolchain zip: {n}")
        out = os.path.join(dest, n[len(prefix):])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(z.read(n))
        # Module zips keep no file modes: the go command marks bin/ and pkg/tool/ executable.
        rel = n[len(prefix):]
        if rel.startswith("bin/") or rel.startswith("pkg/tool/"):
            os.chmod(out, 0o755)
PYEOF
    # (Called from an `if`, where set -e is off: every step checks its own status.)
    [ -x "$tmp/x/bin/go" ] || { rm -rf "$tmp"; return 1; }
    rm -rf "$root" && mv "$tmp/x" "$root" && rm -rf "$tmp" || return 1
  fi
  echo "$root"
}
# h1: hashes of golang.org/toolchain@v0.0.1-go$GO_PIN.linux-{amd64,arm64}, the form go.sum and
# sum.golang.org use (amd64 checked equal to what `go mod download -json` reports).
GO_H1_AMD64="h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM="
GO_H1_ARM64="h1:sYL/O6MqS68ML0kjsQ36WoYIpJqkw60TxizWUYUKQMc="
GO_BIN=tests/go/target/txnfailfast
if ! go_new_enough; then
  if GOROOT_PINNED="$(install_go_toolchain)"; then
    export PATH="$GOROOT_PINNED/bin:$PATH"
    export GOTOOLCHAIN=local
  fi
fi
if go_new_enough; then
  if [ ! -f "$GO_BIN" ] || [ -n "$(find tests/go \( -name '*.go' -o -name 'go.*' \) -newer "$GO_BIN" -print -quit)" ] \
     || [ ! -f tests/go/target/txnadmin ] || [ ! -f tests/go/target/txneos ] || [ ! -f tests/go/target/saslclient ]; then
    echo "building the franz-go test programs (Go modules)"
    (cd tests/go && go build -o target/txnfailfast ./txnfailfast && go build -o target/txnadmin ./txnadmin \
      && go build -o target/txneos ./txneos && go build -o target/saslclient ./saslclient)
  fi
  echo "franz-go tools: tests/go/target/ (go: $(command -v go), $(go env GOVERSION))"
else
  echo "no Go >= $GO_MIN and none could be fetched: franz-go tests will be skipped"
fi

# The S3-compatible object store of the tiered-storage tests (issue 30): SeaweedFS's `weed`,
# built from the Go module proxy at the version tests/objectstore/go.mod pins, once per
# machine (a few minutes) into the cache dir; tests find it through SHARDLOG_WEED.
WEED_VERSION="$(awk '$1 == "require" && $2 == "github.com/seaweedfs/seaweedfs" {print $3}' tests/objectstore/go.mod)"
WEED_BIN="${SHARDLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardlog}/weed-$WEED_VERSION"
if [ ! -x "$WEED_BIN" ] && go_new_enough; then
  echo "building SeaweedFS $WEED_VERSION (the object store of the tiered-storage tests)"
  mkdir -p "$(dirname "$WEED_BIN")"
  (cd tests/objectstore && go build -o "$WEED_BIN.tmp" github.com/seaweedfs/seaweedfs/weed) && mv "$WEED_BIN.tmp" "$WEED_BIN"
fi
if [ -x "$WEED_BIN" ]; then
  export SHARDLOG_WEED="$WEED_BIN"
  echo "object store: $WEED_BIN"
else
  echo "no SeaweedFS: the tiered-storage tests fail (they need an object store)"
fi

if [ "${SETUP_ONLY:-0}" = 1 ]; then
  step "SETUP_ONLY=1: test dependencies installed, stopping"
  exit 0
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
  "$PY" scripts/gen_response_errors.py --check
  step "cargo clippy --all-targets -- -D warnings (allowed lints: Cargo.toml [lints.clippy])"
  if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null; then
    rustup component add clippy 2>&1 || true
  fi
  if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --all-targets -- -D warnings 2>&1
  else
    # rustup's component server may be out of reach on a fresh machine (only the package
    # registries are): say so loudly rather than fail the tests for want of the linter.
    echo "WARNING: clippy is not installed and could not be added: the lint step is SKIPPED"
  fi
  step "cargo fmt --check (rustfmt.toml)"
  if ! cargo fmt --version >/dev/null 2>&1 && command -v rustup >/dev/null; then
    rustup component add rustfmt 2>&1 || true
  fi
  if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --check 2>&1
  else
    echo "WARNING: rustfmt is not installed and could not be added: the format check is SKIPPED"
  fi
  step "cargo test (unit + property tests)"
  cargo test 2>&1
  # Every fuzz target for 30 s over its corpus and seeded random and mutated inputs
  # (src/fuzzing/smoke_tests.rs; the coverage-guided campaign is scripts/fuzz.sh).
  step "fuzz smoke (30 s, seeded, every target)"
  SHARDLOG_FUZZ_SMOKE_SECS=30 cargo test --lib fuzzing::smoke_tests -- --nocapture 2>&1
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
# Two workers (pytest-xdist), one test file at a time each: the suites mostly wait on
# brokers and clients, so two at once take ~half the time on two cores. Each worker
# takes its ports from its own range (cluster_harness.free_port).
WORKERS="${SHARDLOG_TEST_WORKERS:-2}"
XDIST=""
if [ "$WORKERS" != 0 ]; then XDIST="-n $WORKERS --dist loadfile"; fi
# shellcheck disable=SC2086
"$PY" -m pytest tests/integration -v -rs --durations=15 -p no:cacheprovider $XDIST ${PYTEST_ARGS:-}
rc=$?
# Both storage modes serve the real clients: the brokers above run shardlog's default
# (flush = always: O_DIRECT) unless a test picks a mode; the real-client suites run again
# with flush = never (page cache, zero-copy fetch). The fault, cluster and crash suites
# pick their modes themselves. The whole suite passed both ways when this was added.
# Only the suites whose path reaches the storage write mode run twice (produce, fetch,
# replication, compaction, recovery): the group, admin and config suites were dropped
# from this pass to keep CI under 45 minutes (it took 204 s for 18 suites).
if [ "$rc" = 0 ] && [ "$TARGET" = shardlog ] && [ -z "${PYTEST_ARGS:-}" ]; then
  step "integration tests again with flush = never (SHARDLOG_TEST_FLUSH=never): the data-path suites"
  never_suites=""
  for f in clients_roundtrip list_offsets compaction cross_shard replication follower_fetching \
           offset_for_leader_epoch topic_recreate fetch_limits tiered_storage; do
    never_suites="$never_suites tests/integration/test_$f.py"
  done
  # shellcheck disable=SC2086
  SHARDLOG_TEST_FLUSH=never "$PY" -m pytest $never_suites -v -rs -p no:cacheprovider $XDIST
  rc=$?
fi
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
