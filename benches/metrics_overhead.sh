#!/usr/bin/env bash
# Issue 25's overhead measurement: W1 (max produce, 6 partitions, acks=1, 64 KiB batches)
# and W3 (50 MB/s fixed rate, 16 KiB batches: its p99 is the figure) with the native
# generator, against one broker, its /metrics not scraped (off) or scraped every second
# (as Prometheus would, more often than its usual 15 s), alternating A B B A so the drift
# of the disk over the run cancels; every run on new topics. Prints each run and the
# medians' ratios (scraped / off). The target: scraped at most 2 % slower (W1 MB/s, W3
# p99). ADMIN_OFF=1 runs the "off" side on a second broker with the admin listener off
# (fresh brokers per run, A B A B) instead.
#
#   benches/metrics_overhead.sh            # 4 repetitions, 12 s runs
#   REPS=6 DUR=20 benches/metrics_overhead.sh
# Env: BIN (target/release/shardlog), BENCH_WORK (target/bench-work), PORT (29092).
# Run it on a quiet machine (no build, no other suite): both sides share it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/target/release/shardlog}"
WORK="${BENCH_WORK:-$ROOT/target/bench-work}/metrics-overhead"
PORT="${PORT:-29092}"; ADMIN_PORT=$((PORT + 1))
REPS="${REPS:-4}"; DUR="${DUR:-12}"; WARM="${WARM:-3}"
OUT="$WORK/results.tsv"
mkdir -p "$WORK"; : >"$OUT"

start() { # ADMIN_LISTENER -> pid
  rm -rf "$WORK/data"
  "$BIN" serve --config "$ROOT/tuning/throughput.toml" --listen "127.0.0.1:$PORT" --admin-listener "$1" \
    --data-dir "$WORK/data" --flush never --log-level warn >"$WORK/broker.log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 100); do
    "$BIN" topic list --bootstrap "127.0.0.1:$PORT" >/dev/null 2>&1 && { echo "$pid"; return 0; }
    sleep 0.2
  done
  tail -20 "$WORK/broker.log" >&2; return 1
}

# The scraper stands for a Prometheus on another host: its own CPU (a curl process a
# second) is not the broker's overhead, so it runs under SCHED_IDLE (chrt --idle) and
# takes no core from a busy shard. SCRAPER_PRIORITY=normal runs it as any process.
scraper() { # scrapes /metrics every second until killed
  local prefix=()
  [ "${SCRAPER_PRIORITY:-idle}" = idle ] && command -v chrt >/dev/null && prefix=(chrt --idle 0)
  while :; do "${prefix[@]}" curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/metrics" || true; sleep 1; done
}

stop() { # PID: the broker is not this shell's child (started in a command substitution):
  # wait for it to exit, so the next start can bind its ports.
  kill "$1"
  while kill -0 "$1" 2>/dev/null; do sleep 0.1; done
}

SHARED=""
run() { # MODE REP WORKLOAD RATE BATCH
  local mode="$1" rep="$2" w="$3" rate="$4" batch="$5" spid="" pid
  if [ -n "$SHARED" ]; then
    pid="$SHARED"
  elif [ "$mode" = scraped ]; then
    pid="$(start "127.0.0.1:$ADMIN_PORT")"
  else
    pid="$(start "")"
  fi
  [ "$mode" = scraped ] && { scraper & spid=$!; }
  local json
  json="$("$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic "$w-$mode-$rep" --partitions 6 --acks 1 \
    --rate-mb-s "$rate" --batch-bytes "$batch" --connections 2 --inflight 8 --duration-s "$DUR" --warmup-s "$WARM" --json --quiet)"
  [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
  local scrapes=0
  [ "$mode" = scraped ] && scrapes="$(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^shardlog_requests_total/ {n++} END {print n+0}')"
  if [ -n "$SHARED" ]; then
    # The shared broker keeps no run's data: a W1 run writes ~10 GB.
    "$BIN" topic delete "$w-$mode-$rep" --bootstrap "127.0.0.1:$PORT" >/dev/null
    for _ in $(seq 1 100); do
      compgen -G "$WORK/data/$w-$mode-$rep-*" >/dev/null || break
      sleep 0.2
    done
  else
    stop "$pid"
  fi
  python3 - "$w" "$mode" "$rep" "$json" >>"$OUT" <<'PY'
import json, sys
w, mode, rep, doc = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
print(f"{w}\t{mode}\t{rep}\t{doc['mb_s']:.1f}\t{doc['latency']['p99_ms']:.3f}\t{doc['latency']['p50_ms']:.3f}")
PY
  tail -1 "$OUT"
}

echo "workload mode rep MB/s p99_ms p50_ms"
if [ "${ADMIN_OFF:-0}" = 1 ]; then
  order="off scraped"
else
  SHARED="$(start "127.0.0.1:$ADMIN_PORT")"
fi
for rep in $(seq 1 "$REPS"); do
  # A B B A: odd repetitions off first, even ones scraped first.
  [ "${ADMIN_OFF:-0}" = 1 ] || { [ $((rep % 2)) = 1 ] && order="off scraped" || order="scraped off"; }
  for mode in $order; do
    run "$mode" "$rep" W1 0 65536
    run "$mode" "$rep" W3 50 16384
  done
done
[ -n "$SHARED" ] && stop "$SHARED"
python3 - "$OUT" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
def med(w, mode, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == w and r[1] == mode)
w1_off, w1_on = med("W1", "off", 3), med("W1", "scraped", 3)
w3_off, w3_on = med("W3", "off", 4), med("W3", "scraped", 4)
print(f"W1 MB/s median: off {w1_off:.1f}, scraped {w1_on:.1f}, scraped/off {w1_on / w1_off:.3f} (target >= 0.98)")
print(f"W3 p99 ms median: off {w3_off:.3f}, scraped {w3_on:.3f}, scraped/off {w3_on / w3_off:.3f} (target <= 1.02)")
print(f"W3 p50 ms median: off {med('W3', 'off', 5):.3f}, scraped {med('W3', 'scraped', 5):.3f}")
PY
