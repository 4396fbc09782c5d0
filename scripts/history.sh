#!/usr/bin/env bash
# History campaign (issue 28): a local 3-node cluster (tests/integration/cluster_harness.py),
# the Jepsen-style workload of tests/history/ under a nemesis, then the checker over the
# whole history. Not in CI; it grows into the chaos runner (issue 28 point 2).
#
#   scripts/history.sh                          # 120 s, seed 1, kill -9 of a leader every 20 s
#   scripts/history.sh 600 7 kill9              # DURATION_S SEED NEMESIS (kill9 | none)
#   SEEDS="1 2 3" scripts/history.sh 300        # one campaign per seed (stops at the first failure)
#   SHARDLOG_TEST_TARGET=kafka scripts/history.sh 120   # the same on 3 Apache Kafka 4.1 nodes
#
# Env:
#   SEEDS                 seeds to run, one campaign each (default: the SEED argument)
#   HISTORY_INTERVAL_S    seconds between kills                                   20
#   HISTORY_ARGS          more arguments for `python3 -m tests.history.campaign`
#                         (e.g. "--acks 1", "--partitions 12 --rate 300", "--txn-producers 2
#                         --rc-consumers 1" on Kafka)
#   SHARDLOG_BIN          the broker binary (default target/release/shardlog; build it first)
# Output per campaign: target/history/<time>-seed<seed>-<nemesis>/ (history.jsonl, report.json,
# the nodes' logs). Check a history again with: python3 -m tests.history.check FILE
# Exit code: non-zero at the first campaign with an anomaly (1) or a failed workload (3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION_S="${1:-120}"
SEED="${2:-1}"
NEMESIS="${3:-kill9}"
SEEDS="${SEEDS:-$SEED}"
INTERVAL_S="${HISTORY_INTERVAL_S:-20}"
PY="${PYTHON:-python3}"
export PYTHONDONTWRITEBYTECODE=1

case "$NEMESIS" in kill9|none) ;; *) echo "history.sh: nemesis kill9 or none, not '$NEMESIS'" >&2; exit 2 ;; esac
if [ "${SHARDLOG_TEST_TARGET:-shardlog}" = shardlog ]; then
  BIN="${SHARDLOG_BIN:-target/release/shardlog}"
  [ -x "$BIN" ] || { echo "history.sh: no broker binary at $BIN (cargo build --release, or set SHARDLOG_BIN)" >&2; exit 1; }
  export SHARDLOG_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
fi

for seed in $SEEDS; do
  echo "=== history.sh: seed $seed, ${DURATION_S} s, nemesis $NEMESIS ($(date -u +%H:%M:%S))"
  # shellcheck disable=SC2086
  "$PY" -m tests.history.campaign --duration "$DURATION_S" --seed "$seed" --nemesis "$NEMESIS" \
    --interval "$INTERVAL_S" ${HISTORY_ARGS:-}
done
echo "history.sh: every campaign clean (seeds: $SEEDS)"
