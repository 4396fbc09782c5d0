#!/usr/bin/env bash
# A W3-like load (50 MB/s, 6 partitions, 16 KiB batches, acks=1, flush never) against one
# shardlog binary, counting what going to sleep costs: the broker's membarrier syscalls
# (perf's syscalls:sys_enter_membarrier), the machine's function-call IPIs (CAL in
# /proc/interrupts), the broker's CPU ticks, and the latency the native generator saw.
# For A/B runs of two builds (alternate them; a quiet machine for the latency columns):
#   benches/w3_wakeups.sh BIN TAG        # DUR=15 (seconds), PORT=29192
set -u
BIN="$1"; TAG="$2"; PORT="${PORT:-29192}"; DUR="${DUR:-15}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/target/w3-wakeups-$TAG"
rm -rf "$DIR"; mkdir -p "$DIR"
"$BIN" serve --config "$ROOT/tuning/throughput.toml" --listen "127.0.0.1:$PORT" --data-dir "$DIR/data" \
  --flush never --log-level warn >"$DIR/broker.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do "$BIN" topic list --bootstrap "127.0.0.1:$PORT" >/dev/null 2>&1 && break; sleep 0.2; done
T="w3-$RANDOM"
"$BIN" topic create --bootstrap "127.0.0.1:$PORT" "$T" --partitions 6 >/dev/null 2>&1 || true
ipis() { awk '/CAL:/{s=0; for(i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) s+=$i; print s}' /proc/interrupts; }
ticks() { awk '{print $14+$15}' "/proc/$PID/stat"; }
cal0=$(ipis); cpu0=$(ticks)
perf stat -e 'syscalls:sys_enter_membarrier' -p "$PID" -o "$DIR/perfstat.txt" -- sleep $((DUR + 2)) &
PS=$!
"$BIN" bench produce --json --quiet --bootstrap "127.0.0.1:$PORT" --topic "$T" --partitions 6 --acks 1 \
  --rate-mb-s 50 --batch-bytes 16384 --connections 2 --inflight 8 --duration-s "$DUR" --warmup-s 2 \
  >"$DIR/out.json" 2>"$DIR/bench.err"
wait "$PS"
cal1=$(ipis); cpu1=$(ticks)
kill "$PID"; wait "$PID" 2>/dev/null
lat=$(python3 -c "import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-1]; L=d['latency']; print('mb_s=%.1f p50=%.2f p99=%.2f p999=%.2f max=%.2f'%(d['mb_s'],L['p50_ms'],L['p99_ms'],L['p999_ms'],L['max_ms']))" "$DIR/out.json")
echo "$TAG membarrier=$(awk '/membarrier/{print $1}' "$DIR/perfstat.txt") ipis=$((cal1-cal0)) broker_cpu_ticks=$((cpu1-cpu0)) $lat load=$(cut -d' ' -f1 /proc/loadavg)"
rm -rf "$DIR"
