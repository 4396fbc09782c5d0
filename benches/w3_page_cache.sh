#!/usr/bin/env bash
# A W3-like load (50 MB/s, 6 partitions, 16 KiB batches, acks=1, flush never; RATE=0 and
# BATCH=65536 for W1-like) against one shardlog binary with extra serve args; prints the
# generator's latency and the CPU seconds of broker and generator. A/B of builds or flags:
#   benches/w3_page_cache.sh BIN TAG [serve args...]     # DUR=20 s, PORT=29192
set -u
BIN="$1"; TAG="$2"; shift 2; PORT="${PORT:-29192}"; DUR="${DUR:-20}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/target/w3-page-cache-$TAG"
rm -rf "$DIR"; mkdir -p "$DIR"
"$BIN" serve --config "$ROOT/tuning/throughput.toml" --listen "127.0.0.1:$PORT" --data-dir "$DIR/data" \
  --flush never --log-level warn "$@" >"$DIR/broker.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do "$BIN" topic list --bootstrap "127.0.0.1:$PORT" >/dev/null 2>&1 && break; sleep 0.2; done
T="w3-$RANDOM"
"$BIN" topic create --bootstrap "127.0.0.1:$PORT" "$T" --partitions 6 >/dev/null 2>&1 || true
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
cpu0=$(ticks $PID)
/usr/bin/time -f "%U %S %e" -o "$DIR/gen.time" "$BIN" bench produce --json --quiet --bootstrap "127.0.0.1:$PORT" --topic "$T" --partitions 6 --acks 1 \
  --rate-mb-s "${RATE:-50}" --batch-bytes "${BATCH:-16384}" --connections 2 --inflight 8 --duration-s "$DUR" --warmup-s 2 \
  >"$DIR/out.json" 2>"$DIR/bench.err"
cpu1=$(ticks $PID)
kill "$PID"; wait "$PID" 2>/dev/null
lat=$(python3 -c "import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-1]; L=d['latency']; print('mb_s=%.1f p50=%.2f p99=%.2f p999=%.2f p9999=%.2f max=%.2f'%(d['mb_s'],L['p50_ms'],L['p99_ms'],L['p999_ms'],L.get('p9999_ms',-1),L['max_ms']))" "$DIR/out.json")
gen=$(awk '{printf "gen_cpu_s=%.1f gen_wall_s=%.1f", $1+$2, $3}' "$DIR/gen.time")
echo "$TAG $lat broker_cpu_s=$(( (cpu1-cpu0) / 100 )) $gen load=$(cut -d' ' -f1 /proc/loadavg)"
rm -rf "$DIR"
