#!/usr/bin/env bash
# Chaos campaign (issue 28): the chaos runner (tests/history/chaos.py) over SEEDS x NEMESES,
# each run DURATION_S seconds on a fresh 3-node cluster of real processes, judged by the
# history checker; then the figures of every run added up (faults injected, acknowledged
# writes, anomalies). CI runs one short mixed run (tests/integration/test_chaos.py).
#
#   scripts/chaos.sh                                   # 5 seeds x each nemesis x 600 s, acks-all
#   SEEDS="1 2" NEMESES="all" DURATION_S=180 scripts/chaos.sh
#   NEMESES="process network" WORKLOAD=acks-1 scripts/chaos.sh
#   SHARDLOG_TEST_TARGET=kafka scripts/chaos.sh        # the same against Apache Kafka 4.4
#                                                      # (shardlog-only nemeses skipped)
# Env:
#   SEEDS        seeds, one run per seed and nemesis                        "1 2 3 4 5"
#   NEMESES      names or groups (process network disk membership all), one run each;
#                default: every nemesis on its own (python3 -m tests.history.nemeses)
#   DURATION_S   seconds of load per run                                    600
#   WORKLOAD     acks-all | acks-1 | unclean | compacted (chaos.py says each) acks-all
#   CHAOS_ARGS   more arguments for the runner (e.g. "--rate 200 --hold 10,30")
#   KEEP_GOING   1: run everything even after a failed run                 0
#   SHARDLOG_BIN the broker binary (default target/release/shardlog; cargo build --release)
# Output: target/chaos/campaign-<time>/ (one dir per run: history.jsonl, report.json,
# summary.json, the nodes' logs; campaign.json adds them up). Exit code: 0 every run clean,
# else the first failing run's (1 anomalies, 2 could not run, 3 workload or cluster failed, or no
# fault injected: the nemeses found no target).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONDONTWRITEBYTECODE=1
PY="${PYTHON:-python3}"
SEEDS="${SEEDS:-1 2 3 4 5}"
DURATION_S="${DURATION_S:-600}"
WORKLOAD="${WORKLOAD:-acks-all}"
NEMESES="${NEMESES:-$("$PY" -m tests.history.nemeses)}"
KEEP_GOING="${KEEP_GOING:-0}"

if [ "${SHARDLOG_TEST_TARGET:-shardlog}" = shardlog ]; then
  BIN="${SHARDLOG_BIN:-target/release/shardlog}"
  [ -x "$BIN" ] || { echo "chaos.sh: no broker binary at $BIN (cargo build --release, or set SHARDLOG_BIN)" >&2; exit 1; }
  export SHARDLOG_BIN="$BIN"
fi

OUT="target/chaos/campaign-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
runs=$(( $(wc -w <<<"$SEEDS") * $(wc -w <<<"$NEMESES") ))
echo "chaos.sh: $runs run(s): seeds [$SEEDS] x nemeses [$NEMESES], ${DURATION_S} s each, $WORKLOAD" \
     "(target ${SHARDLOG_TEST_TARGET:-shardlog}); output $OUT"
status=0
for seed in $SEEDS; do
  for nemesis in $NEMESES; do
    echo "=== chaos.sh: seed $seed, $nemesis ($(date -u +%H:%M:%S))"
    rc=0
    # librdkafka's own log lines (%...) are dropped from the console; the runner's stay.
    # shellcheck disable=SC2086
    "$PY" -m tests.history.chaos --seed "$seed" --duration "$DURATION_S" --nemesis "$nemesis" \
      --workload "$WORKLOAD" --out-dir "$OUT/seed$seed-$nemesis" ${CHAOS_ARGS:-} 2>&1 | grep -v '^%' || rc=${PIPESTATUS[0]}
    if [ "$rc" != 0 ]; then
      echo "chaos.sh: seed $seed, $nemesis FAILED (exit $rc): $OUT/seed$seed-$nemesis"
      [ "$status" = 0 ] && status=$rc
      [ "$KEEP_GOING" = 1 ] || break 2
    fi
  done
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys
from collections import Counter
from pathlib import Path
out = Path(sys.argv[1])
runs = [json.loads(p.read_text()) for p in sorted(out.glob("*/summary.json"))]
faults, anomalies, stats = Counter(), Counter(), Counter()
for r in runs:
    faults.update(r["faults"]); anomalies.update(r["anomalies"])
    stats.update({k: r["stats"][k] for k in ("acked", "acked_read", "ops", "reads", "commits_ok")})
total = {"runs": len(runs), "valid": sum(r["valid"] for r in runs), "faults": dict(faults),
         "anomalies": dict(anomalies), "stats": dict(stats),
         "failed": [f"seed{r['seed']}-{'+'.join(r['nemeses'])}" for r in runs if not r["valid"]]}
(out / "campaign.json").write_text(json.dumps(total, indent=1, sort_keys=True))
print(f"chaos.sh: {total['valid']}/{total['runs']} runs valid; faults {dict(faults)}; "
      f"{stats['acked']} acknowledged writes, {stats['acked_read']} read back; anomalies {dict(anomalies) or 'none'}")
PYEOF
exit "$status"
