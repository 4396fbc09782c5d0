#!/usr/bin/env bash
# shardlog vs Apache Kafka 4.4 on this machine, in one run (issue 3).
#
#   scripts/bench.sh           # full: W1..W9, W11, T1, T2, A B A B, both generators (~60 min)
#   scripts/bench.sh --quick   # short W1, W3, W5, A B (< 3 min after the build)
#   scripts/bench.sh --smoke   # every workload for a second or two, once (CI: each must
#                              # leave its result rows; the figures mean nothing)
#   scripts/bench.sh --profile # separate profiled runs: W1 and W3 under `perf record`
#                              # (combine with --quick); their figures are perturbed
#   scripts/bench.sh --cluster # W13: 3 local brokers each: RF=3 vs RF=1 acks=all throughput,
#                              # RF=3 latency, 1 GiB catch-up (benches/cluster_bench.py;
#                              # ~15 min, --quick ~5 min)
#   scripts/bench.sh --secure  # W1 and W4 over SASL_SSL (TLS 1.3, AES-GCM, SCRAM-SHA-512)
#                              # beside PLAINTEXT, both brokers, Kafka's own tools
#                              # (benches/security_bench.py; ~10 min, --quick ~3 min)
#   scripts/bench.sh --share   # share groups: 1 partition, 4 KafkaShareConsumers, explicit
#                              # ack, fixed rate (end-to-end latency) and maximum drain
#                              # (benches/share_bench.py; ~10 min, --quick ~3 min)
#   scripts/bench.sh --tiered  # tiered storage (KIP-405), both brokers tiering to one SeaweedFS:
#                              # produce at 30 MB/s with and without uploads, offload, then a
#                              # historical read from offset 0 (benches/tiered_bench.py; Kafka
#                              # through benches/kafka_s3_rsm; 1 GiB per topic x 2 reps ~12 min,
#                              # --quick 256 MiB x 1 rep ~3 min)
#   scripts/bench.sh --soak    # W10: 30 min at 60 % of each broker's measured maximum,
#                              # p99 per minute (BENCH_SOAK_S; --quick 60 s)
#   scripts/bench.sh --partitions # W12 partition scale on one node: 10k, 50k, 100k
#                              # partitions (RF 1), create time, RSS per partition,
#                              # Metadata latency, produce p99 over all partitions,
#                              # restart after a clean shutdown and after kill -9
#                              # (benches/partition_scale_bench.py; ~1 h, --quick 2k ~5 min)
#
# Workloads (1 KiB records): W1 max produce, 6 partitions, acks=1; W2 the same, acks=all;
# W3 fixed 50 MB/s produce (latency); W4 consume a pre-filled topic (2 GiB; 256 MiB
# quick); W5 end-to-end latency at 10 MB/s; W6 1000 partitions at 20 MB/s.
# Production-shaped (issue 29; 100 partitions, 1 KiB records, acks=1). The Java side is
# `producer-fleet` (tests/java: N Apache Kafka 4.4 KafkaProducers in one JVM, linger 5 ms,
# the default partitioner), generator "java-client": Kafka's ProducerPerformance has
# neither many producers nor keys. Scaled to this 2-core machine: rates are a fraction of
# a production node's, the producer counts are the issue's.
# W7 many producers: 50 producers at 20 MB/s in total, 50 at the maximum, 200 at 20 MB/s
# (native: one connection per producer, 5 requests in flight, as max.in.flight 5, and
# --linger-ms 5: at 20 MB/s a connection's batch holds what it intends in 5 ms, as the
# producers' linger.ms 5 sends it; full batches would make its first record wait for
# the batch to fill: 37 ms at 50 connections, 147 ms at 200, for both brokers). Here
# 200 KafkaProducers in one JVM take most of the two cores themselves (their network
# threads): the java-client rows then measure the client as much as the broker.
# W8 keyed records: 10,000 keys over 100 partitions at the maximum, compression none,
# lz4, zstd (native: key k on partition k mod 100, 16 KiB batches; java-client: 4
# producers, murmur2 of the key). Compressed values are half random, half text (~2:1).
# W9 retention while writing: 6 partitions, segment.bytes 32 MiB, retention.bytes
# 256 MiB each (a 1.5 GiB budget, deleted from continuously: both brokers check
# retention every 5 s), 50 MB/s for BENCH_W9_S (120 s; 20 quick); p99 per second.
# W11 backlog drain: a producer at 20 MB/s; after BENCH_W11_BACKLOG_S (120 s; 10 quick)
# a consumer starts at offset 0 and reads until it has caught up; the drain rate, and
# the producer's p99 per second during the drain.
# T1 transactions: 6 partitions, one transactional producer each (idempotent, acks=all),
# 100 records per transaction, committed throughput and the EndTxn round trip (native
# generator only: Kafka's tools commit by time, not by record count); T2 read_committed
# consume of a topic written by T1's producers (1 GiB; 256 MiB quick).
# Durability: both brokers acknowledge without fsync (Kafka's default; shardlog
# --flush never = acked once the page-cache write returned). W2 also runs both with an
# fsync before the ack: shardlog --flush always (group-committed fdatasync) against Kafka
# with log.flush.interval.messages=1 (Kafka flushes in the append path once that many
# messages are unflushed, so every produce is fsynced before it is acknowledged).
# Generators: `shardlog bench` (native) and Kafka's ProducerPerformance /
# ConsumerPerformance / EndToEndLatency (kafka-tools).
# Output: a table on stdout, then every shardlog/Kafka ratio (medians over repetitions),
# results/<timestamp>/{summary.json,report.md,throughput-W*.png,latency-W*.png,
# timeline-W*.png} (report.md: one page, every table and plot), raw outputs in
# results/<timestamp>/runs/; with --profile also profile.txt (top symbols, kernel/user
# split per broker) and runs/*.perf.data. MB = 2^20 bytes, as Kafka's tools count.
#
# Env: BENCH_WORK (data dirs; default target/bench-work, on the repo's disk), BENCH_OUT
#      (the results directory; default results/<timestamp>), BENCH_BIN (the shardlog
#      binary; default target/release/shardlog),
#      SHARDLOG_PORT (29092), KAFKA_PORT (39092), BENCH_NO_BUILD=1 (use the existing
#      release binary), BENCH_REPS (A B repetitions; 1 quick, 2 full), BENCH_PROFILE=1
#      (= --profile), BENCH_PERF_HZ (perf sampling rate, 499), BENCH_WORKLOADS (e.g.
#      "W2": run only these; for trying the script, the targets need W1 W2 W3),
#      BENCH_W9_S, BENCH_W11_BACKLOG_S, BENCH_SOAK_S (see above), BENCH_NO_KAFKA=1
#      (shardlog only: to try the harness; there are no ratios then),
#      BENCH_SHARDLOG_ARGS (more `shardlog serve` flags, to try a lever: e.g.
#      "--shard-spin-before-park-us 50"),
#      BENCH_DURATION_S (each run's measured window; 5 quick, 20 full: e.g. 120 for the
#      steady state, where the kernel's own writeback of Kafka's dirty pages has begun).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
QUICK=0
CLUSTER=0
SECURE=0
SHARE=0
TIERED=0
PARTITIONS=0
SOAK=0
SMOKE=0
PROFILE="${BENCH_PROFILE:-0}"
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    --profile) PROFILE=1 ;;
    --cluster) CLUSTER=1 ;;
    --secure) SECURE=1 ;;
    --share) SHARE=1 ;;
    --tiered) TIERED=1 ;;
    --partitions) PARTITIONS=1 ;;
    --soak) SOAK=1 ;;
    --smoke) SMOKE=1; QUICK=1 ;;
    -h|--help) sed -n '2,83p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick | --smoke] [--profile | --cluster | --secure | --share | --tiered | --partitions | --soak]" >&2; exit 2 ;;
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
if [ "$TIERED" = 1 ]; then
  if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then (cd "$ROOT" && cargo build --release --quiet) >&2; fi
  exec python3 "$ROOT/benches/tiered_bench.py" $([ "$QUICK" = 1 ] && echo --quick --reps "${BENCH_REPS:-1}") --bin "$ROOT/target/release/shardlog"
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
OUT="${BENCH_OUT:-$ROOT/results/$STAMP}"
WORK="${BENCH_WORK:-$ROOT/target/bench-work}"
SL_PORT="${SHARDLOG_PORT:-29092}"
SL_FSYNC_PORT="$((SL_PORT + 10))"
KAFKA_PORT="${KAFKA_PORT:-39092}"
KAFKA_FSYNC_PORT="$((KAFKA_PORT + 10))"
PERF_HZ="${BENCH_PERF_HZ:-499}"
BIN="${BENCH_BIN:-$ROOT/target/release/shardlog}"
RUNS="$OUT/runs.jsonl"
CLK_TCK="$(getconf CLK_TCK)"

if [ "$QUICK" = 1 ]; then
  DUR=5; WARM=2; REPS="${BENCH_REPS:-1}"; FIO_S=10; W4_MB=256; T2_MB=256; E2E_TOOL_MSGS=500
  W9_S=20; W11_BACKLOG_S=10; SOAK_S=60
  WORKLOADS="W1 W3 W5"
else
  DUR=20; WARM=3; REPS="${BENCH_REPS:-2}"; FIO_S=30; W4_MB=2048; T2_MB=1024; E2E_TOOL_MSGS=5000
  W9_S=120; W11_BACKLOG_S=120; SOAK_S=1800
  WORKLOADS="W1 W2 W3 W4 W5 W6 W7 W8 W9 W11 T1 T2"
fi
if [ "$SMOKE" = 1 ]; then
  DUR=1; WARM=1; REPS=1; FIO_S=2; W4_MB=16; T2_MB=16; E2E_TOOL_MSGS=50; W9_S=3; W11_BACKLOG_S=3; SOAK_S=3
  WORKLOADS="W1 W4 W5 W7 W8 W9 W10 W11 T1 T2"
fi
# BENCH_NO_KAFKA=1: shardlog's side only (CI's smoke: the harness and the generators
# against shardlog, in half the time; no ratios).
WITH_KAFKA=1; [ "${BENCH_NO_KAFKA:-0}" = 1 ] && WITH_KAFKA=0
W9_S="${BENCH_W9_S:-$W9_S}"; W11_BACKLOG_S="${BENCH_W11_BACKLOG_S:-$W11_BACKLOG_S}"; SOAK_S="${BENCH_SOAK_S:-$SOAK_S}"
# Profiled runs are their own runs: perf perturbs the figures they would compare.
[ "$PROFILE" = 1 ] && WORKLOADS="W1 W3"
[ "$SOAK" = 1 ] && { WORKLOADS="W10"; REPS=1; }
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
FLEET_JAR="$ROOT/tests/java/target/clienttool.jar"
if [ ! -f "$FLEET_JAR" ] || [ -n "$(find "$ROOT/tests/java/src" "$ROOT/tests/java/pom.xml" -newer "$FLEET_JAR" -print -quit)" ]; then
  log "building tests/java (producer-fleet)"
  mvn -q -B -f "$ROOT/tests/java/pom.xml" package -DskipTests >&2
fi
if [ "$PROFILE" = 1 ] && ! command -v perf >/dev/null; then
  echo "bench: --profile needs perf (linux-perf)" >&2; exit 1
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  log "installing matplotlib (the report's plots)"
  python3 -m pip install -q "$(grep -m1 '^matplotlib' "$ROOT/tests/integration/requirements.txt")" >&2 ||
    python3 -m pip install -q --break-system-packages "$(grep -m1 '^matplotlib' "$ROOT/tests/integration/requirements.txt")" >&2
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
    --data-dir "$dir/data" --flush "$flush" --log-level warn --group-initial-rebalance-delay-ms 0 \
    --log-retention-check-interval-ms 5000 --admin-listener "" ${BENCH_SHARDLOG_ARGS:-} >"$dir/broker.log" 2>&1 </dev/null &
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

create_topic() { "$BIN" topic create "$2" --partitions "$3" --bootstrap "127.0.0.1:$(port_of "$1")" "${@:4}" >/dev/null; }
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
# runs.jsonl; the command's stdout goes to runs/<name>.out (parsed by bench_report.py),
# <name> = WORKLOAD-KIND-BROKER-GENERATOR-rREP. A runs/<name>.window file present when
# the command ends ("[start_s, end_s]", seconds into its measured window) is carried
# into the line as "window" (W11: the drain). RUN_T0 / RUN_T1: the command's wall-clock
# start and end (date +%s.%N), for the caller.
# The command's --warmup-s is recorded so the report can count the MB the broker took in
# the whole command (CPU is measured over the whole command too).
run() {
  local w="$1" broker="$2" gen="$3" kind="$4" rep="$5" topic="$6"; shift 7
  local port pid name t0 t1 status=ok warm=0 prev="" a perf_pid=""
  port="$(port_of "$broker")"; pid="$(pid_of "$broker")"
  name="$w-$kind-$broker-$gen-r$rep"
  for a in "$@"; do [ "$prev" = --warmup-s ] && warm="$a"; prev="$a"; done
  reset_peak_rss "$pid"
  if [ "$PROFILE" = 1 ]; then start_profile "$pid" "$name"; perf_pid="$PERF_PID"; fi
  t0="$(cpu_ticks "$pid")"
  RUN_T0="$(date +%s.%N)"
  "$@" >"$OUT/runs/$name.out" 2>"$OUT/runs/$name.err" || status=failed
  RUN_T1="$(date +%s.%N)"
  t1="$(cpu_ticks "$pid")"
  if [ -n "$perf_pid" ]; then finish_profile "$perf_pid" "$pid" "$name" "$broker"; fi
  local window=""
  [ -f "$OUT/runs/$name.window" ] && window=",\"window\":$(cat "$OUT/runs/$name.window")"
  printf '{"workload":"%s","broker":"%s","generator":"%s","kind":"%s","rep":%s,"durability":"%s","cpu_s":%s,"rss_mb":%s,"warmup_s":%s,"status":"%s","out":"runs/%s.out"%s}\n' \
    "$w" "${broker%-fsync}" "$gen" "$kind" "$rep" "$(durability_of "$broker")" \
    "$(awk -v a="$t0" -v b="$t1" -v h="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / h }')" \
    "$(peak_rss_mb "$pid")" "$warm" "$status" "$name" "$window" >>"$RUNS"
  python3 "$ROOT/scripts/bench_report.py" line "$OUT" "$name" >&2 || true
}

native() { # BROKER MODE args... (the native generator against BROKER)
  local b="$1" mode="$2"; shift 2
  "$BIN" bench "$mode" --bootstrap "127.0.0.1:$(port_of "$b")" --json --quiet "$@"
}
java_tool() { # TIMEOUT_S CLASS args... (a hung tool must not hang the benchmark)
  timeout "$1" java -Xmx1g -cp "$CP" "org.apache.kafka.tools.$2" "${@:3}"
}
fleet() { # TIMEOUT_S BROKER args... (tests/java producer-fleet: N KafkaProducers in one JVM)
  # The GCLocker flag: JDK 17 throws a false OutOfMemoryError when many producers
  # compress with lz4 at once (JDK-8192647); JVM warnings to stderr, the JSON on stdout.
  timeout "$1" java -Xmx1g -XX:+UnlockDiagnosticVMOptions -XX:GCLockerRetryAllocationCount=100 \
    -Xlog:disable -Xlog:all=warning:stderr -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -jar "$FLEET_JAR" producer-fleet \
    --bootstrap "127.0.0.1:$(port_of "$2")" "${@:3}"
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
    n=$(( $(native_rate "$w-produce-$b-native-r$rep") * (DUR + WARM) )); tput=-1
  else
    tput=$(( rate * 1024 )); n=$(( tput * (DUR + WARM) ))
  fi
  run "$w" "$b" kafka-tools producer-perf "$rep" "$t" -- producer_perf "$b" "$t" "$n" "$tput" "$acks" "$batch"
  delete_topic "$b" "$t"
}

# One many-producer or keyed workload (100 partitions, acks=1): native, then java-client.
fleet_pair() { # W BROKER REP KIND PRODUCERS RATE_MB KEYS COMPRESSION
  local w="$1" b="$2" rep="$3" kind="$4" producers="$5" rate="$6" keys="$7" comp="$8" t
  t="$w-$kind-r$rep-$RANDOM"; create_topic "$b" "$t" 100
  run "$w" "$b" native "$kind" "$rep" "$t" -- native "$b" produce --topic "$t" --partitions 100 --acks 1 \
    --rate-mb-s "$rate" --batch-bytes 16384 --linger-ms 5 --connections "$producers" --inflight 5 --keys "$keys" \
    --compression "$comp" --duration-s "$DUR" --warmup-s "$WARM"
  delete_topic "$b" "$t"
  t="$w-$kind-r$rep-$RANDOM"; create_topic "$b" "$t" 100
  run "$w" "$b" java-client "$kind" "$rep" "$t" -- fleet $((DUR + WARM + 120)) "$b" --topic "$t" --producers "$producers" \
    --rate-mb-s "$rate" --keys "$keys" --compression "$comp" --duration-s "$DUR" --warmup-s "$WARM"
  delete_topic "$b" "$t"
}

# W9: a fixed-rate producer into a topic whose old segments are deleted as it writes.
retention_run() { # BROKER REP GENERATOR
  local b="$1" rep="$2" gen="$3" t="W9-r$2-$RANDOM"
  create_topic "$b" "$t" 6 --config segment.bytes=33554432 --config retention.bytes=268435456
  if [ "$gen" = native ]; then
    run W9 "$b" native retention "$rep" "$t" -- native "$b" produce --topic "$t" --partitions 6 --acks 1 --rate-mb-s 50 \
      --batch-bytes 16384 --connections 2 --inflight 8 --duration-s "$W9_S" --warmup-s "$WARM"
  else
    run W9 "$b" java-client retention "$rep" "$t" -- fleet $((W9_S + WARM + 120)) "$b" --topic "$t" --producers 2 \
      --rate-mb-s 50 --duration-s "$W9_S" --warmup-s "$WARM"
  fi
  delete_topic "$b" "$t"
}

# W11: a producer at 20 MB/s builds a backlog for W11_BACKLOG_S; then a consumer reads
# from offset 0 until it has caught up (native: to the high watermark it last saw;
# java-client: ConsumerPerformance reads the backlog's records). The producer keeps
# going for as long again, so the whole drain falls inside its run; the drain's span is
# written to the producer's .window file for the report.
drain_run() { # BROKER REP GENERATOR
  local b="$1" rep="$2" gen="$3" t="W11-r$2-$RANDOM" prod_pid t0 span=$((2 * W11_BACKLOG_S + 5))
  local prod_name="W11-drain-produce-$1-$3-r$2"
  create_topic "$b" "$t" 6
  if [ "$gen" = native ]; then
    run W11 "$b" native drain-produce "$rep" "$t" -- native "$b" produce --topic "$t" --partitions 6 --acks 1 \
      --rate-mb-s 20 --batch-bytes 16384 --connections 2 --inflight 8 --duration-s "$span" --warmup-s 0 &
  else
    run W11 "$b" java-client drain-produce "$rep" "$t" -- fleet $((span + 120)) "$b" --topic "$t" --producers 2 \
      --rate-mb-s 20 --duration-s "$span" --warmup-s 0 &
  fi
  prod_pid=$!
  t0="$(date +%s.%N)"
  sleep "$W11_BACKLOG_S"
  if [ "$gen" = native ]; then
    run W11 "$b" native drain-consume "$rep" "$t" -- native "$b" consume --topic "$t" --partitions 6 --connections 2 \
      --warmup-s 0 --duration-s "$W11_BACKLOG_S"
  else
    run W11 "$b" kafka-tools drain-consume "$rep" "$t" -- java_tool $((W11_BACKLOG_S + 60)) ConsumerPerformance \
      --bootstrap-server "127.0.0.1:$(port_of "$b")" --topic "$t" --messages "$((W11_BACKLOG_S * 20 * 1024))" --timeout 30000
  fi
  # The consumer process's span, in seconds since the producer started (its window opens
  # at once: --warmup-s 0; a JVM consumer's start-up is inside the span).
  awk -v p="$t0" -v a="$RUN_T0" -v b="$RUN_T1" 'BEGIN { printf "[%.1f, %.1f]", a - p, b - p }' >"$OUT/runs/$prod_name.window"
  wait "$prod_pid" || true
  delete_topic "$b" "$t"
}

# W10: 30 minutes at 60 % of the maximum this broker reached in a short native run
# (the soak's own rate per broker, as the issue asks), p99 per minute.
soak_run() { # BROKER
  local b="$1" t="W10-$RANDOM" max rate
  run W10 "$b" native soak-max 1 "$t" -- native "$b" produce --topic "$t" --partitions 6 --acks 1 --batch-bytes 65536 \
    --connections 2 --inflight 8 --duration-s "$DUR" --warmup-s "$WARM"
  delete_topic "$b" "$t"
  max="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mb_s"])' "$OUT/runs/W10-soak-max-$b-native-r1.out")"
  rate="$(awk -v m="$max" 'BEGIN { printf "%.1f", m * 0.6 }')"
  log "W10: $b soak at $rate MB/s (60 % of $max) for $SOAK_S s"
  t="W10-$RANDOM"
  run W10 "$b" native soak 1 "$t" -- native "$b" produce --topic "$t" --partitions 6 --acks 1 --rate-mb-s "$rate" \
    --batch-bytes 16384 --connections 2 --inflight 8 --duration-s "$SOAK_S" --warmup-s "$WARM" \
    --timeline-s "$([ "$QUICK" = 1 ] && echo 10 || echo 60)"
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
      fleet_pair W7 "$b" "$rep" fleet-50-fixed 50 20 0 none
      fleet_pair W7 "$b" "$rep" fleet-50-max 50 0 0 none
      fleet_pair W7 "$b" "$rep" fleet-200-fixed 200 20 0 none
      ;;
    W8)
      for comp in none lz4 zstd; do fleet_pair W8 "$b" "$rep" "keyed-$comp" 4 0 10000 "$comp"; done
      ;;
    W9) retention_run "$b" "$rep" native; retention_run "$b" "$rep" java-client ;;
    W10) soak_run "$b" ;;
    W11) drain_run "$b" "$rep" native; drain_run "$b" "$rep" java-client ;;
    T1)
      t="T1-r$rep-$RANDOM"
      run T1 "$b" native txn "$rep" "$t" -- native "$b" txn --topic "$t" --partitions 6 --txn-records 100 \
        --batch-bytes 16384 --duration-s "$DUR" --warmup-s "$WARM"
      delete_topic "$b" "$t"
      ;;
    T2)
      t="t2-fill"
      if [ ! -f "$WORK/.t2-$b" ]; then
        log "T2: filling $T2_MB MB into $b with transactions of 100 records"
        native "$b" txn --topic "$t" --partitions 6 --txn-records 100 --batch-bytes 16384 --total-mb "$T2_MB" \
          --warmup-s 0 >"$OUT/runs/T2-$b-fill.out" 2>&1
        touch "$WORK/.t2-$b"
      fi
      run T2 "$b" native consume "$rep" "$t" -- native "$b" consume --topic "$t" --partitions 6 --connections 2 \
        --isolation-level read-committed --warmup-s 0 --duration-s 600
      printf 'isolation.level=read_committed\n' >"$WORK/read-committed.properties"
      run T2 "$b" kafka-tools consumer-perf "$rep" "$t" -- java_tool 600 ConsumerPerformance \
        --bootstrap-server "127.0.0.1:$(port_of "$b")" --topic "$t" --messages "$((T2_MB * 1024))" --timeout 30000 \
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
rm -f "$WORK"/.w4-* "$WORK"/.t2-*
# Retention checked every 5 s on both brokers (Kafka's default is 5 min): W9 deletes
# segments as it writes; no other workload sets a retention.
KAFKA_PROPS="log.segment.delete.delay.ms=1000
log.retention.check.interval.ms=5000"
if [ "$WITH_KAFKA" = 1 ]; then
  log "starting Apache Kafka 4.4 (-Xmx1g) on $KAFKA_PORT"
  start_kafka kafka "$KAFKA_PORT" "$KAFKA_PROPS"
fi

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
    [ "$WITH_KAFKA" = 0 ] || start_kafka kafka-fsync "$KAFKA_FSYNC_PORT" "$KAFKA_PROPS
log.flush.interval.messages=1"
  fi
  for rep in $(seq 1 "$REPS"); do
    workload "$w" shardlog "$rep"
    [ "$WITH_KAFKA" = 0 ] || workload "$w" kafka "$rep"
    if [ "$w" = W2 ]; then
      workload W2 shardlog-fsync "$rep"
      [ "$WITH_KAFKA" = 0 ] || workload W2 kafka-fsync "$rep"
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
