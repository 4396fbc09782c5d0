#!/usr/bin/env bash
# shardlog vs Apache Kafka 4.4 on this machine, in one run (issue 3).
#
#   scripts/bench.sh           # full: W1..W6, A B A B, both generators (~20 min)
#   scripts/bench.sh --quick   # smoke: short W1, W3, W5, A B (< 3 min after the build)
#   scripts/bench.sh --profile # separate profiled runs: W1 and W3 under `perf record`
#                              # (combine with --quick); their figures are perturbed
#   scripts/bench.sh --cluster # 3 local brokers each: RF=3 vs RF=1 acks=all throughput,
#                              # RF=3 latency, 1 GiB catch-up (benches/cluster_bench.py;
#                              # ~15 min, --quick ~5 min)
#   scripts/bench.sh --secure  # W1 and W4 over SASL_SSL (TLS 1.3, AES-GCM, SCRAM-SHA-512)
#                              # beside PLAINTEXT, both brokers, Kafka's own tools
#                              # (benches/security_bench.py; ~10 min, --quick ~3 min)
#   scripts/bench.sh --share   # share groups: 1 partition, 4 KafkaShareConsumers, explicit
#                              # ack, fixed rate (end-to-end latency) and maximum drain
#                              # (benches/share_bench.py; ~10 min, --quick ~3 min)
#   scripts/bench.sh --partitions # W12 partition scale on one node: 10k, 50k, 100k
#                              # partitions (RF 1), create time, RSS per partition,
#                              # Metadata latency, produce p99 over all partitions,
#                              # restart after a clean shutdown and after kill -9
#                              # (benches/partition_scale_bench.py; ~1 h, --quick 2k ~5 min)
#
# Workloads (1 KiB records): W1 max produce, 6 partitions, acks=1; W2 the same, acks=all;
# W3 fixed 50 MB/s produce (latency); W4 consume a pre-filled topic (2 GiB; 256 MiB
# quick); W5 end-to-end latency at 10 MB/s; W6 1000 partitions at 20 MB/s;
# W7 transactions: 6 partitions, one transactional producer each (idempotent, acks=all),
# 100 records per transaction, committed throughput and the EndTxn round trip (native
# generator only: Kafka's tools commit by time, not by record count); W8 read_committed
# consume of a topic written by W7's producers (1 GiB; 256 MiB quick).
# Durability: both brokers acknowledge without fsync (Kafka's default; shardlog
# --flush never = acked once the page-cache write returned). W2 also runs both with an
# fsync before the ack: shardlog --flush always (group-committed fdatasync) against Kafka
# with log.flush.interval.messages=1 (Kafka flushes in the append path once that many
# messages are unflushed, so every produce is fsynced before it is acknowledged).
# Generators: `shardlog bench` (native) and Kafka's ProducerPerformance /
# ConsumerPerformance / EndToEndLatency (kafka-tools).
# Output: a table on stdout, then every shardlog/Kafka ratio (medians over repetitions),
# results/<timestamp>/{summary.json,latency.svg,throughput.svg}, raw outputs in
# results/<timestamp>/runs/; with --profile also profile.txt (top symbols, kernel/user
# split per broker) and runs/*.perf.data. MB = 2^20 bytes, as Kafka's tools count.
#
# Env: BENCH_WORK (data dirs; default target/bench-work, on the repo's disk),
#      SHARDLOG_PORT (29092), KAFKA_PORT (39092), BENCH_NO_BUILD=1 (use the existing
#      release binary), BENCH_REPS (A B repetitions; 1 quick, 2 full), BENCH_PROFILE=1
#      (= --profile), BENCH_PERF_HZ (perf sampling rate, 499), BENCH_WORKLOADS (e.g.
#      "W2": run only these; for trying the script, the targets need W1 W2 W3),
#      BENCH_DURATION_S (each run's measured window; 5 quick, 20 full: e.g. 120 for the
#      steady state, where the kernel's own writeback of Kafka's dirty pages has begun).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
QUICK=0
CLUSTER=0
SECURE=0
SHARE=0
PARTITIONS=0
PROFILE="${BENCH_PROFILE:-0}"
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    --profile) PROFILE=1 ;;
    --cluster) CLUSTER=1 ;;
    --secure) SECURE=1 ;;
    --share) SHARE=1 ;;
    --partitions) PARTITIONS=1 ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick] [--profile | --cluster | --secure | --share | --partitions]" >&2; exit 2 ;;
  esac
done
if [ "$SECURE" = 1 ]; then
  if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then (cd "$ROOT" && cargo build --release --quiet) >&2; fi
  exec python3 "$ROOT/benches/security_bench.py" $([ "$QUICK" = 1 ] && echo --quick) --bin "$ROOT/target/release/shardlog"
fi
if [ "$SHARE" = 1 ]; then
  if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then (cd "$ROOT" && cargo build --release --quiet) >&2; fi
  exec python3 "$ROOT/benches/share_bench.py" $([ "$QUICK" = 1 ] && echo --quick) --bin "$ROOT/target/release/shardlog"
fi
if [ "$PARTITIONS" = 1 ]; then
  if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then (cd "$ROOT" && cargo build --release --quiet) >&2; fi
  exec python3 "$ROOT/benches/partition_scale_bench.py" $([ "$QUICK" = 1 ] && echo --quick) --bin "$ROOT/target/release/shardlog"
fi
if [ "$CLUSTER" = 1 ]; then
  if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then (cd "$ROOT" && cargo build --release --quiet) >&2; fi
  exec python3 "$ROOT/benches/cluster_bench.py" $([ "$QUICK" = 1 ] && echo --quick) --bin "$ROOT/target/release/shardlog"
fi

STAMP="$(date +%Y%m%d-%H%M%S)"
OUT="$ROOT/results/$STAMP"
WORK="${BENCH_WORK:-$ROOT/target/bench-work}"
SL_PORT="${SHARDLOG_PORT:-29092}"
SL_FSYNC_PORT="$((SL_PORT + 10))"
KAFKA_PORT="${KAFKA_PORT:-39092}"
KAFKA_FSYNC_PORT="$((KAFKA_PORT + 10))"
PERF_HZ="${BENCH_PERF_HZ:-499}"
BIN="$ROOT/target/release/shardlog"
RUNS="$OUT/runs.jsonl"
CLK_TCK="$(getconf CLK_TCK)"

if [ "$QUICK" = 1 ]; then
  DUR=5; WARM=2; REPS="${BENCH_REPS:-1}"; FIO_S=10; W4_MB=256; W8_MB=256; E2E_TOOL_MSGS=500
  WORKLOADS="W1 W3 W5"
else
  DUR=20; WARM=3; REPS="${BENCH_REPS:-2}"; FIO_S=30; W4_MB=2048; W8_MB=1024; E2E_TOOL_MSGS=5000
  WORKLOADS="W1 W2 W3 W4 W5 W6 W7 W8"
fi
# Profiled runs are their own runs: perf perturbs the figures they would compare.
[ "$PROFILE" = 1 ] && WORKLOADS="W1 W3"
WORKLOADS="${BENCH_WORKLOADS:-$WORKLOADS}"
DUR="${BENCH_DURATION_S:-$DUR}"

log() { echo "bench: $*" >&2; }
mkdir -p "$OUT/runs" "$WORK"

# ---------------------------------------------------------------- build, tools
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  log "cargo build --release"
  (cd "$ROOT" && cargo build --release --quiet) >&2
fi
[ -x "$BIN" ] || { echo "bench: $BIN missing (cargo build --release)" >&2; exit 1; }
"$ROOT/scripts/kafka_local.sh" fetch
CP="$("$ROOT/scripts/kafka_local.sh" classpath)"
if [ "$PROFILE" = 1 ] && ! command -v perf >/dev/null; then
  echo "bench: --profile needs perf (linux-perf)" >&2; exit 1
fi
if ! command -v fio >/dev/null; then
  log "installing fio"
  (apt-get install -y fio >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y fio >/dev/null; }) >&2
fi

# ---------------------------------------------------------------- helpers
cpu_ticks() { # utime+stime of PID, in clock ticks (fields 14, 15 after the comm field)
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
reset_peak_rss() { echo 5 > "/proc/$1/clear_refs" 2>/dev/null || true; } # resets VmHWM
peak_rss_mb() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0; }

SL_PID=""; SLF_PID=""
start_shardlog() { # NAME PORT FLUSH -> echoes pid
  local name="$1" port="$2" flush="$3" dir="$WORK/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  # group.initial.rebalance.delay.ms 0, as scripts/kafka_local.sh gives Kafka: W4's
  # ConsumerPerformance counts the group join in its MB/s.
  "$BIN" serve --config "$ROOT/tuning/throughput.toml" --listen "127.0.0.1:$port" \
    --data-dir "$dir/data" --flush "$flush" --log-level warn --group-initial-rebalance-delay-ms 0 >"$dir/broker.log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 100); do
    if "$BIN" topic list --bootstrap "127.0.0.1:$port" >/dev/null 2>&1; then echo "$pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/broker.log" >&2; return 1; }
    sleep 0.2
  done
  tail -20 "$dir/broker.log" >&2; return 1
}
start_kafka() { # NAME PORT EXTRA_PROPS (fresh data dir, -Xmx1g, controller on PORT+1)
  local dir="$WORK/$1"
  "$ROOT/scripts/kafka_local.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  KAFKA_HEAP=-Xmx1g KAFKA_CONTROLLER_PORT=$(($2 + 1)) KAFKA_EXTRA_PROPS="$3" \
    "$ROOT/scripts/kafka_local.sh" start "$dir" "$2" >&2
}
stop_pid() { [ -n "${1:-}" ] && kill "$1" 2>/dev/null && { for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; kill -9 "$1" 2>/dev/null; } || true; }

cleanup() {
  stop_pid "$SL_PID"; stop_pid "$SLF_PID"
  "$ROOT/scripts/kafka_local.sh" stop "$WORK/kafka" >/dev/null 2>&1 || true
  "$ROOT/scripts/kafka_local.sh" stop "$WORK/kafka-fsync" >/dev/null 2>&1 || true
}
trap cleanup EXIT

port_of() {
  case "$1" in shardlog) echo "$SL_PORT" ;; shardlog-fsync) echo "$SL_FSYNC_PORT" ;;
    kafka) echo "$KAFKA_PORT" ;; kafka-fsync) echo "$KAFKA_FSYNC_PORT" ;; esac
}
pid_of() {
  case "$1" in shardlog) echo "$SL_PID" ;; shardlog-fsync) echo "$SLF_PID" ;;
    kafka|kafka-fsync) cat "$WORK/$1/kafka.pid" ;; esac
}
durability_of() { case "$1" in *-fsync) echo "fsync-before-ack" ;; *) echo "no-fsync" ;; esac; }

create_topic() { "$BIN" topic create "$2" --partitions "$3" --bootstrap "127.0.0.1:$(port_of "$1")" >/dev/null; }
delete_topic() { "$BIN" topic delete "$2" --bootstrap "127.0.0.1:$(port_of "$1")" >/dev/null 2>&1 || true; }

# Profiles the broker PID for DUR seconds after WARM seconds (the generator's measured
# window, not its warm-up) with perf's cpu-clock event (software: works on a VM without
# a PMU). Root, or perf_event_paranoid <= 1, is needed for kernel samples; otherwise only
# user space is sampled and the kernel/user split says so.
PERF_PID=""
start_profile() { # PID NAME -> PERF_PID (a child of this shell, so finish_profile can wait)
  local ev=cpu-clock
  if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -ge 2 ]; then ev=cpu-clock:u; fi
  ( sleep "$WARM"
    exec perf record -g -e "$ev" -F "$PERF_HZ" -p "$1" -o "$OUT/runs/$2.perf.data" -- sleep "$DUR"
  ) >"$OUT/runs/$2.perf.log" 2>&1 &
  PERF_PID=$!
}
finish_profile() { # PERF_SUBSHELL_PID BROKER_PID NAME BROKER
  wait "$1" 2>/dev/null || true
  # JIT-compiled Java has no symbols on disk: JDK 17's Compiler.perfmap writes
  # /tmp/perf-<pid>.map, which perf report reads for those addresses.
  case "$4" in kafka*) jcmd "$2" Compiler.perfmap >/dev/null 2>&1 || log "jcmd Compiler.perfmap failed: Java frames stay unnamed" ;; esac
  perf report -i "$OUT/runs/$3.perf.data" --no-children --sort sym -g none --percent-limit 0 --stdio \
    >"$OUT/runs/$3.perf.txt" 2>>"$OUT/runs/$3.perf.log" || true
}

# run WORKLOAD BROKER GENERATOR KIND REP TOPIC -- command...
# Measures the broker's CPU seconds and peak RSS around the command; appends a line to
# runs.jsonl; the command's stdout goes to runs/<name>.out (parsed by bench_report.py).
# The command's --warmup-s is recorded so the report can count the MB the broker took in
# the whole command (CPU is measured over the whole command too).
run() {
  local w="$1" broker="$2" gen="$3" kind="$4" rep="$5" topic="$6"; shift 7
  local port pid name t0 t1 status=ok warm=0 prev="" a perf_pid=""
  port="$(port_of "$broker")"; pid="$(pid_of "$broker")"
  name="$w-$broker-$gen-r$rep"
  for a in "$@"; do [ "$prev" = --warmup-s ] && warm="$a"; prev="$a"; done
  reset_peak_rss "$pid"
  if [ "$PROFILE" = 1 ]; then start_profile "$pid" "$name"; perf_pid="$PERF_PID"; fi
  t0="$(cpu_ticks "$pid")"
  "$@" >"$OUT/runs/$name.out" 2>"$OUT/runs/$name.err" || status=failed
  t1="$(cpu_ticks "$pid")"
  if [ -n "$perf_pid" ]; then finish_profile "$perf_pid" "$pid" "$name" "$broker"; fi
  printf '{"workload":"%s","broker":"%s","generator":"%s","kind":"%s","rep":%s,"durability":"%s","cpu_s":%s,"rss_mb":%s,"warmup_s":%s,"status":"%s","out":"runs/%s.out"}\n' \
    "$w" "${broker%-fsync}" "$gen" "$kind" "$rep" "$(durability_of "$broker")" \
    "$(awk -v a="$t0" -v b="$t1" -v h="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / h }')" \
    "$(peak_rss_mb "$pid")" "$warm" "$status" "$name" >>"$RUNS"
  python3 "$ROOT/scripts/bench_report.py" line "$OUT" "$name" >&2 || true
}

native() { # BROKER MODE args... (the native generator against BROKER)
  local b="$1" mode="$2"; shift 2
  "$BIN" bench "$mode" --bootstrap "127.0.0.1:$(port_of "$b")" --json --quiet "$@"
}
java_tool() { # TIMEOUT_S CLASS args... (a hung tool must not hang the benchmark)
  timeout "$1" java -Xmx1g -cp "$CP" "org.apache.kafka.tools.$2" "${@:3}"
}
producer_perf() { # BROKER TOPIC RECORDS THROUGHPUT ACKS BATCH_BYTES
  java_tool $((DUR * 4 + 60)) ProducerPerformance --topic "$2" --num-records "$3" --record-size 1024 --throughput "$4" \
    --producer-props "bootstrap.servers=127.0.0.1:$(port_of "$1")" "acks=$5" "batch.size=$6" linger.ms=5 \
    compression.type=none enable.idempotence=false max.in.flight.requests.per.connection=5
}
# records/s the native generator reached in runs/NAME.out (to size the kafka-tools run to
# about the same duration; ProducerPerformance counts records, not seconds)
native_rate() { python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["records_s"]))' "$OUT/runs/$1.out" 2>/dev/null || echo 100000; }

# One produce workload: native then kafka-tools on BROKER.
produce_pair() { # W BROKER REP PARTITIONS ACKS RATE_MB BATCH_BYTES
  local w="$1" b="$2" rep="$3" parts="$4" acks="$5" rate="$6" batch="$7" t n tput
  t="$w-r$rep-$RANDOM"
  run "$w" "$b" native produce "$rep" "$t" -- native "$b" produce --topic "$t" --partitions "$parts" \
    --acks "$acks" --rate-mb-s "$rate" --batch-bytes "$batch" --connections 2 --inflight 8 \
    --duration-s "$DUR" --warmup-s "$WARM"
  delete_topic "$b" "$t"
  t="$w-r$rep-$RANDOM"; create_topic "$b" "$t" "$parts"
  if [ "$rate" = 0 ]; then
    n=$(( $(native_rate "$w-$b-native-r$rep") * (DUR + WARM) )); tput=-1
  else
    tput=$(( rate * 1024 )); n=$(( tput * (DUR + WARM) ))
  fi
  run "$w" "$b" kafka-tools producer-perf "$rep" "$t" -- producer_perf "$b" "$t" "$n" "$tput" "$acks" "$batch"
  delete_topic "$b" "$t"
}

workload() { # W BROKER REP
  local w="$1" b="$2" rep="$3" t
  case "$w" in
    W1) produce_pair W1 "$b" "$rep" 6 1 0 65536 ;;
    W2) produce_pair W2 "$b" "$rep" 6 all 0 65536 ;;
    W3) produce_pair W3 "$b" "$rep" 6 1 50 16384 ;;
    W6) produce_pair W6 "$b" "$rep" 1000 1 20 16384 ;;
    W4)
      t="w4-fill"
      if [ ! -f "$WORK/.w4-$b" ]; then
        log "W4: filling $W4_MB MB into $b"
        native "$b" produce --topic "$t" --partitions 6 --acks 1 --batch-bytes 65536 --total-mb "$W4_MB" --warmup-s 0 >"$OUT/runs/W4-$b-fill.out" 2>&1
        touch "$WORK/.w4-$b"
      fi
      run W4 "$b" native consume "$rep" "$t" -- native "$b" consume --topic "$t" --partitions 6 --connections 2 --warmup-s 0 --duration-s 600
      run W4 "$b" kafka-tools consumer-perf "$rep" "$t" -- java_tool 600 ConsumerPerformance \
        --bootstrap-server "127.0.0.1:$(port_of "$b")" --topic "$t" --messages "$((W4_MB * 1024))" --timeout 30000
      ;;
    W7)
      t="W7-r$rep-$RANDOM"
      run W7 "$b" native txn "$rep" "$t" -- native "$b" txn --topic "$t" --partitions 6 --txn-records 100 \
        --batch-bytes 16384 --duration-s "$DUR" --warmup-s "$WARM"
      delete_topic "$b" "$t"
      ;;
    W8)
      t="w8-fill"
      if [ ! -f "$WORK/.w8-$b" ]; then
        log "W8: filling $W8_MB MB into $b with transactions of 100 records"
        native "$b" txn --topic "$t" --partitions 6 --txn-records 100 --batch-bytes 16384 --total-mb "$W8_MB" \
          --warmup-s 0 >"$OUT/runs/W8-$b-fill.out" 2>&1
        touch "$WORK/.w8-$b"
      fi
      run W8 "$b" native consume "$rep" "$t" -- native "$b" consume --topic "$t" --partitions 6 --connections 2 \
        --isolation-level read-committed --warmup-s 0 --duration-s 600
      printf 'isolation.level=read_committed\n' >"$WORK/read-committed.properties"
      run W8 "$b" kafka-tools consumer-perf "$rep" "$t" -- java_tool 600 ConsumerPerformance \
        --bootstrap-server "127.0.0.1:$(port_of "$b")" --topic "$t" --messages "$((W8_MB * 1024))" --timeout 30000 \
        --consumer.config "$WORK/read-committed.properties"
      ;;
    W5)
      t="W5-r$rep-$RANDOM"
      run W5 "$b" native e2e "$rep" "$t" -- native "$b" e2e --topic "$t" --partitions 1 --acks 1 --rate-mb-s 10 \
        --batch-bytes 16384 --duration-s "$DUR" --warmup-s "$WARM"
      delete_topic "$b" "$t"
      t="W5-r$rep-$RANDOM"; create_topic "$b" "$t" 1
      # EndToEndLatency sends one record and waits for it before the next (not 10 MB/s).
      run W5 "$b" kafka-tools e2e-latency "$rep" "$t" -- java_tool $((DUR * 3 + 60)) EndToEndLatency \
        "127.0.0.1:$(port_of "$b")" "$t" "$E2E_TOOL_MSGS" 1 1024
      delete_topic "$b" "$t"
      ;;
  esac
}

# ---------------------------------------------------------------- disk ceiling
# The device's sequential-write ceiling, not the page cache's: O_DIRECT (--direct=1), so
# every byte counted reached the device, through the same filesystem and directory the
# brokers write to. A buffered fio would measure memcpy into the page cache until dirty
# limits throttle it, which says nothing about the disk.
FIO_METHOD="fio sequential write, O_DIRECT (device, not page cache), libaio QD16, 1 MiB blocks, ${FIO_S} s, on $(df --output=source "$WORK" | tail -1)"
log "fio: ${FIO_METHOD} (the ceiling for W1)"
fio --name=ceiling --filename="$WORK/fio.tmp" --rw=write --bs=1M --iodepth=16 --direct=1 \
  --ioengine=libaio --size=4G --runtime="$FIO_S" --time_based --output-format=json >"$OUT/fio.json" 2>"$OUT/fio.err" || true
rm -f "$WORK/fio.tmp"
FIO_MB_S="$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["write"]["bw_bytes"]/2**20,1))' "$OUT/fio.json" 2>/dev/null || echo 0)"
echo "disk ceiling ($FIO_METHOD): $FIO_MB_S MB/s"
# Free page reporting (virtio-balloon, e.g. Firecracker): freed guest memory is handed back
# to the host, so every fresh page (page-cache writes, large mallocs) faults on the host.
# It caps page-cache write throughput on such VMs (issue 10 notes); record it with the run.
PAGE_REPORTING_ORDER="$(grep -o 'page_reporting.page_reporting_order=[0-9]*' /proc/cmdline | cut -d= -f2 || true)"
PAGE_REPORTING_ORDER="${PAGE_REPORTING_ORDER:-none}"
echo "free page reporting (page_reporting_order on the kernel command line): $PAGE_REPORTING_ORDER"

# ---------------------------------------------------------------- brokers
log "starting shardlog (tuning/throughput.toml, --flush never) on $SL_PORT"
SL_PID="$(start_shardlog shardlog "$SL_PORT" never)"
log "starting Apache Kafka 4.1 (-Xmx1g) on $KAFKA_PORT"
rm -f "$WORK"/.w4-* "$WORK"/.w8-*
KAFKA_PROPS="log.segment.delete.delay.ms=1000"
start_kafka kafka "$KAFKA_PORT" "$KAFKA_PROPS"

cat >"$OUT/meta.json" <<META
{"quick": $([ "$QUICK" = 1 ] && echo true || echo false), "profiled": $([ "$PROFILE" = 1 ] && echo true || echo false),
 "duration_s": $DUR, "warmup_s": $WARM, "reps": $REPS, "e2e_tool_msgs": $E2E_TOOL_MSGS, "record_bytes": 1024,
 "disk_seq_write_mb_s": $FIO_MB_S, "disk_ceiling_method": "$FIO_METHOD", "page_reporting_order": "$PAGE_REPORTING_ORDER",
 "shardlog_rev": "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "kafka_version": "${KAFKA_VERSION:-4.4.0}", "shardlog_config": "tuning/throughput.toml"}
META

# ---------------------------------------------------------------- workloads, A B A B
for w in $WORKLOADS; do
  if [ "$w" = W2 ]; then
    # The fsync-before-ack pair, started for W2 alone so it does not sit on the cores
    # during the other runs, and kept across W2's repetitions (a JVM restarted for each
    # would run its first produce cold). Same partitions, records, generators and
    # durations as the no-fsync pair.
    log "starting shardlog --flush always on $SL_FSYNC_PORT, Kafka log.flush.interval.messages=1 on $KAFKA_FSYNC_PORT"
    SLF_PID="$(start_shardlog shardlog-fsync "$SL_FSYNC_PORT" always)"
    start_kafka kafka-fsync "$KAFKA_FSYNC_PORT" "$KAFKA_PROPS
log.flush.interval.messages=1"
  fi
  for rep in $(seq 1 "$REPS"); do
    workload "$w" shardlog "$rep"
    workload "$w" kafka "$rep"
    if [ "$w" = W2 ]; then
      workload W2 shardlog-fsync "$rep"
      workload W2 kafka-fsync "$rep"
    fi
  done
  if [ "$w" = W2 ]; then
    stop_pid "$SLF_PID"; SLF_PID=""
    "$ROOT/scripts/kafka_local.sh" stop "$WORK/kafka-fsync" >/dev/null 2>&1 || true
  fi
done

cleanup; trap - EXIT
python3 "$ROOT/scripts/bench_report.py" summarize "$OUT"
if [ "$PROFILE" = 1 ]; then python3 "$ROOT/scripts/bench_report.py" profile "$OUT"; fi
