#!/usr/bin/env bash
# Simulation campaign (issue 28 point 6): the seeded simulations and the storage-fault
# property tests with many more seeds than CI's defaults (cargo test runs those: 4
# controller seeds, 300 + 40 per variant replication seeds, 16 per configuration on the
# real parts, 300 transaction seeds, 16 storage-fault cases). Every seed is
# deterministic: a failure prints its seed, and
# SIM_SEED=N (controller) / SHARDLOG_REPL_SIM_SEEDS with SHARDLOG_REPL_SIM_TRACE (replication)
# replay it.
#
#   scripts/simulation.sh                         the campaign (defaults below)
#   CONTROLLER_SEEDS=200 REPLICATION_SEEDS=2000 STORAGE_CASES=200 scripts/simulation.sh
# Env:
#   CONTROLLER_SEEDS   quorum simulation seeds (controller/simulation.rs; ~3.6 s each
#                      in a debug build on 2 cores)                                 1000
#   REPLICATION_SEEDS  seeds per replication configuration (replication/simulation.rs,
#                      each of its 7 configurations; ~10 ms each)                 1300
#   REAL_PARTS_SEEDS   seeds per configuration of the replication simulation on the
#                      real partition, fetcher and files (replication/real_parts_simulation.rs,
#                      2 configurations; ~0.6 s each)                              1000
#   TXN_SEEDS          transaction simulation seeds (txn/simulation.rs)             2000
#   STORAGE_CASES      proptest cases of each storage-fault property (partition/fault_tests.rs,
#                      storage/truncate_tests.rs)                                   1000
#   RELEASE=1          build the tests optimised (a longer build, faster seeds)
# The defaults make 10,000 controller + replication seeds (about 1 h 10 min in a debug
# build; a short run: CONTROLLER_SEEDS=100 REPLICATION_SEEDS=300 TXN_SEEDS=500
# STORAGE_CASES=100 took 6.5 min, all passing).
# Output: target/simulation/<time>/*.log and a summary line per part. Exit code: the
# first failing part's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CONTROLLER_SEEDS="${CONTROLLER_SEEDS:-1000}"
REPLICATION_SEEDS="${REPLICATION_SEEDS:-1300}"
REAL_PARTS_SEEDS="${REAL_PARTS_SEEDS:-1000}"
TXN_SEEDS="${TXN_SEEDS:-2000}"
STORAGE_CASES="${STORAGE_CASES:-1000}"
profile=()
[ "${RELEASE:-0}" = 1 ] && profile=(--release)
OUT="target/simulation/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
status=0

part() {
  local name="$1"; shift
  local start rc=0
  start=$(date +%s)
  echo "=== simulation.sh: $name ($(date -u +%H:%M:%S))"
  env "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  echo "simulation.sh: $name: exit $rc in $(( $(date +%s) - start )) s; $(grep -E '^test result' "$OUT/$name.log" | tail -1)"
  if [ "$rc" != 0 ]; then
    grep -E 'panicked|seed [0-9]+' "$OUT/$name.log" | head -5 || true
    [ "$status" = 0 ] && status=$rc
  fi
}

part controller SIM_SEEDS="$CONTROLLER_SEEDS" cargo test "${profile[@]}" --lib -- controller::simulation --nocapture
part replication SHARDLOG_REPL_SIM_SEEDS="$REPLICATION_SEEDS" cargo test "${profile[@]}" --lib -- replication::simulation --nocapture
part replication-real-parts SHARDLOG_REAL_SIM_SEEDS="$REAL_PARTS_SEEDS" cargo test "${profile[@]}" --lib -- replication::real_parts_simulation --nocapture
part transactions SHARDLOG_TXN_SIM_SEEDS="$TXN_SEEDS" cargo test "${profile[@]}" --lib -- txn::simulation --nocapture
part storage-faults SHARDLOG_PROPTEST_CASES="$STORAGE_CASES" cargo test "${profile[@]}" --lib -- partition::fault_tests storage::truncate_tests
echo "simulation.sh: controller $CONTROLLER_SEEDS seeds, replication $REPLICATION_SEEDS seeds x each configuration," \
     "replication on the real parts $REAL_PARTS_SEEDS seeds x 2 configurations," \
     "transactions $TXN_SEEDS seeds, storage faults $STORAGE_CASES cases per property; logs in $OUT"
exit "$status"
