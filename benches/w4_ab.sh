#!/usr/bin/env bash
# W4 A/B of two builds on one data dir (filled once by BEFORE): broker with 1 shard (core 0),
# the native consumer pinned to core 1, each consume after a broker restart (an empty batch
# cache: every read goes to the segments, through the page cache). Prints MB/s and the
# broker's CPU seconds per GiB, alternating BEFORE and AFTER.
#   benches/w4_ab.sh BEFORE_BIN AFTER_BIN     # FILL=1800 (MB) ROUNDS=3
set -u
BEFORE="$1"; AFTER="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; D="$ROOT/target/w4-ab"; P=19420; FILL=${FILL:-1800}; ROUNDS=${ROUNDS:-3}
rm -rf $D; mkdir -p $D
start() { "$1" serve --config $ROOT/tuning/throughput.toml --shards 1 --flush never --data-dir $D/data \
  --listen 127.0.0.1:$P --log-level warn >>$D/broker.log 2>&1 & BP=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.1; done; }
stop() { kill $BP; wait $BP 2>/dev/null; }
ticks() { awk '{print $14 + $15}' /proc/$BP/stat; }
start "$BEFORE"
taskset -c 1 "$BEFORE" bench produce --bootstrap 127.0.0.1:$P --json --quiet --topic w4 --partitions 6 --acks 1 \
  --batch-bytes 65536 --total-mb $FILL --warmup-s 0 >$D/fill.out 2>&1
stop; sync
for r in $(seq $ROUNDS); do for tag in before after; do
  if [ $tag = before ]; then start "$BEFORE"; else start "$AFTER"; fi; t0=$(ticks)
  taskset -c 1 "$AFTER" bench consume --bootstrap 127.0.0.1:$P --json --quiet --topic w4 --partitions 6 \
    --connections 2 --warmup-s 0 --duration-s 600 >$D/consume.out 2>$D/consume.err
  t1=$(ticks); stop
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); mb=d["mb_s"]; tot=d["bytes"]/1048576; print("%s run %s: %.0f MB/s, broker cpu %.2f s for %.0f MB -> %.3f cpu-s/GiB" % (sys.argv[2], sys.argv[3], mb, int(sys.argv[4])/100, tot, int(sys.argv[4])/100/(max(tot,1)/1024)))' $D/consume.out $tag $r $((t1-t0))
done; done
rm -rf $D
