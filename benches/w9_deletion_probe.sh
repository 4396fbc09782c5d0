#!/usr/bin/env bash
# W9's step (docs/benchmarks.md): 50 MB/s into 6 partitions for 70 s with 32 MiB segments
# and retention.bytes RET per partition, retention checked every 5 s; prints the per-second
# p99 timeline. Spikes at every retention pass = segment deletion stalls the produce path.
#   benches/w9_deletion_probe.sh 268435456 deleting     # deletes from ~31 s on
#   benches/w9_deletion_probe.sh 1099511627776 keeping  # never deletes
# (As root, `mount -o remount,nodiscard /` before and `,discard` after shows the discard's
# share.) Env: BIN (default target/release/shardlog).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BIN:-$ROOT/target/release/shardlog}; RET=$1; LABEL=$2
rm -rf /tmp/w9p; $BIN serve --config "$ROOT/tuning/throughput.toml" --listen 127.0.0.1:29800 --admin-listener "" --data-dir /tmp/w9p --flush never --log-level warn --log-retention-check-interval-ms 5000 > /tmp/w9p.log 2>&1 &
pid=$!; sleep 3
$BIN topic create w9 --partitions 6 --bootstrap 127.0.0.1:29800 --config segment.bytes=33554432 --config retention.bytes=$RET >/dev/null
$BIN bench produce --bootstrap 127.0.0.1:29800 --topic w9 --partitions 6 --acks 1 --rate-mb-s 50 --batch-bytes 16384 --connections 2 --inflight 8 --duration-s 70 --warmup-s 3 --json --quiet > /tmp/w9p.json
kill $pid; wait $pid 2>/dev/null
python3 - "$LABEL" <<'PY'
import json, sys
d = json.load(open("/tmp/w9p.json"))
tl = [e["p99_ms"] for e in d["timeline"]]
late = tl[35:]
print(sys.argv[1], "p99", d["latency"]["p99_ms"], "| seconds 35+: max", max(late), "spikes>10ms", sum(1 for x in late if x > 10), "| timeline", " ".join(f"{x:.0f}" for x in tl))
PY
