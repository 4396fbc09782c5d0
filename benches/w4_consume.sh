#!/usr/bin/env bash
# W4 alone against one shardlog binary, for A/B of builds: fill a 6-partition topic once
# (64 KiB produce batches, FILL_MB, default 1024), then consume it RUNS times with the
# native generator (2 connections), printing MB/s per run and the broker's CPU ticks and
# peak RSS. Alternate two builds' runs; the data dir is kept between runs of one binary
# only (it is removed at the end).
#   benches/w4_consume.sh BIN [RUNS] [FILL_MB]      # PORT=19410
set -u
BIN="$1"; RUNS="${2:-3}"; FILL="${3:-1024}"; P="${PORT:-19410}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
D="$ROOT/target/w4-consume"
rm -rf "$D"; mkdir -p "$D"
"$BIN" serve --config "$ROOT/tuning/throughput.toml" --flush never --data-dir "$D/data" \
  --listen "127.0.0.1:$P" --log-level warn >"$D/broker.log" 2>&1 &
BP=$!
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$P") 2>/dev/null && break; sleep 0.2; done
"$BIN" bench produce --bootstrap "127.0.0.1:$P" --json --quiet --topic w4 --partitions 6 --acks 1 \
  --batch-bytes 65536 --total-mb "$FILL" --warmup-s 0 >"$D/fill.out" 2>&1
for r in $(seq "$RUNS"); do
  "$BIN" bench consume --bootstrap "127.0.0.1:$P" --json --quiet --topic w4 --partitions 6 \
    --connections 2 --warmup-s 0 --duration-s 600 >"$D/consume.out" 2>"$D/consume.err"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("run %s: %.1f MB/s" % (sys.argv[2], d["mb_s"]))' "$D/consume.out" "$r"
done
awk '{print "broker cpu ticks", $14 + $15}' "/proc/$BP/stat"
grep -E "^VmHWM" "/proc/$BP/status"
kill "$BP"; wait "$BP" 2>/dev/null
rm -rf "$D"
