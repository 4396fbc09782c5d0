#!/usr/bin/env bash
# Replication soak (issue 12): the fault tests of tests/integration/test_replication_faults.py
# with larger parameters than CI's, repeated. Real processes, real clients; prints each
# round's accounting (attempted / acknowledged / lost / duplicated, the longest
# unavailability, what the deposed leader answered).
#
#   scripts/replication_soak.sh                      # 2M records, 20 leader kills every 10 s; then SIGSTOP; 1 round
#   ROUNDS=5 scripts/replication_soak.sh             # five rounds (stops at the first failure)
#   SHARDLOG_CHAOS_RECORDS=500000 SHARDLOG_CHAOS_KILLS=8 scripts/replication_soak.sh
#   SHARDLOG_TEST_TARGET=kafka scripts/replication_soak.sh   # the same against 3 Apache Kafka 4.1 nodes
#
# Env (defaults for the soak; CI runs 200k records, 5 kills):
#   SHARDLOG_CHAOS_RECORDS      records the idempotent producer writes (at least)   2000000
#   SHARDLOG_CHAOS_KILLS        kill -9 of a partition leader, restarted each time  20
#   SHARDLOG_CHAOS_INTERVAL_S   seconds between kills                               10
#   SHARDLOG_CHAOS_REJOIN_WAIT_S  bound on waiting for the restarted broker to be
#                               back in every ISR before the next kill              60
#   SHARDLOG_SIGSTOP_S          how long the SIGSTOP test keeps its leader stopped  15
#   ROUNDS                      repetitions of the whole set                        1
#   CHAOS_TESTS                 pytest -k expression of the tests to run
#                               default: "kill9_leader_every or sigstop_leader"
#   SHARDLOG_BIN                the broker binary (default target/release/shardlog;
#                               build it first: cargo build --release)
# Broker logs: target/integration-logs/. Exit code: non-zero on the first failing round.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SHARDLOG_CHAOS_RECORDS="${SHARDLOG_CHAOS_RECORDS:-2000000}"
export SHARDLOG_CHAOS_KILLS="${SHARDLOG_CHAOS_KILLS:-20}"
export SHARDLOG_CHAOS_INTERVAL_S="${SHARDLOG_CHAOS_INTERVAL_S:-10}"
export PYTHONDONTWRITEBYTECODE=1
ROUNDS="${ROUNDS:-1}"
CHAOS_TESTS="${CHAOS_TESTS:-kill9_leader_every or sigstop_leader}"
PY="${PYTHON:-python3}"

if [ "${SHARDLOG_TEST_TARGET:-shardlog}" = shardlog ]; then
  BIN="${SHARDLOG_BIN:-target/release/shardlog}"
  [ -x "$BIN" ] || { echo "replication_soak.sh: no broker binary at $BIN (cargo build --release, or set SHARDLOG_BIN)" >&2; exit 1; }
  export SHARDLOG_BIN="$BIN"
fi

echo "replication_soak.sh: ${ROUNDS} round(s) of [$CHAOS_TESTS]: ${SHARDLOG_CHAOS_RECORDS} records," \
     "${SHARDLOG_CHAOS_KILLS} kills every ${SHARDLOG_CHAOS_INTERVAL_S} s" \
     "(target: ${SHARDLOG_TEST_TARGET:-shardlog}${SHARDLOG_BIN:+ $SHARDLOG_BIN})"
for round in $(seq 1 "$ROUNDS"); do
  echo "=== replication_soak.sh round $round/$ROUNDS ($(date -u +%H:%M:%S))"
  # -s: the tests print their accounting; -x: stop at the first failure (logs kept).
  "$PY" -m pytest tests/integration/test_replication_faults.py -k "$CHAOS_TESTS" \
    -s -x -v -p no:cacheprovider
done
echo "replication_soak.sh: ${ROUNDS} round(s) passed"
