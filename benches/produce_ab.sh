#!/usr/bin/env bash
# Per-request cost A/B of two builds: the broker with 1 shard on core 0 (flush = never),
# the native producer pinned to core 1 sending one small record per request (acks=1,
# pipelined), so the connection path's per-request work dominates. Prints requests/s and the
# broker's CPU microseconds per request, alternating BEFORE and AFTER, each on a fresh dir.
#   benches/produce_ab.sh BEFORE_BIN AFTER_BIN     # ROUNDS=3 DURATION_S=10
set -u
BEFORE="$1"; AFTER="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; D="$ROOT/target/produce-ab"; P=19430
ROUNDS=${ROUNDS:-3}; DURATION_S=${DURATION_S:-10}
start() { rm -rf $D/data; "$1" serve --config $ROOT/tuning/throughput.toml --shards 1 --flush never --data-dir $D/data \
  --listen 127.0.0.1:$P --log-level warn >>$D/broker.log 2>&1 & BP=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.1; done; }
stop() { kill $BP; wait $BP 2>/dev/null; }
ticks() { awk '{print $14 + $15}' /proc/$BP/stat; }
rm -rf $D; mkdir -p $D
for r in $(seq $ROUNDS); do for tag in before after; do
  if [ $tag = before ]; then start "$BEFORE"; else start "$AFTER"; fi
  # Warm-up creates the topic; the measured window follows on the same broker.
  taskset -c 1 "$AFTER" bench produce --bootstrap 127.0.0.1:$P --json --quiet --topic ab --partitions 2 --acks 1 \
    --record-size 100 --batch-records 1 --connections 2 --inflight 16 --duration-s 2 --warmup-s 0 >/dev/null 2>&1
  t0=$(ticks)
  taskset -c 1 "$AFTER" bench produce --bootstrap 127.0.0.1:$P --json --quiet --topic ab --partitions 2 --acks 1 \
    --record-size 100 --batch-records 1 --connections 2 --inflight 16 --duration-s $DURATION_S --warmup-s 0 >$D/out.json 2>$D/err
  t1=$(ticks); stop
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=d["records"]; cpu=int(sys.argv[4])/100; print("%s run %s: %.0f requests/s, p99 %.2f ms, broker cpu %.2f s -> %.2f us/request" % (sys.argv[2], sys.argv[3], d["records_s"], d["latency"]["p99_ms"], cpu, cpu*1e6/max(n,1)))' $D/out.json $tag $r $((t1-t0))
done; done
rm -rf $D
