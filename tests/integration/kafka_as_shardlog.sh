#!/usr/bin/env bash
# A stand-in for the shardlog binary that runs real Apache Kafka 4.1 behind shardlog's CLI.
# It exists to check the harness's shardlog code path (command lines, readiness line,
# restart on the same data dir, kill -9, the `topic` subcommands) while the broker is
# being written:
#   SHARDLOG_BIN=tests/integration/kafka_as_shardlog.sh SKIP_CARGO=1 scripts/test.sh
#
#   serve --listen 127.0.0.1:PORT --data-dir DIR [--flush always|never] [--auto-create-topics B] [--shards N]
#   topic create NAME --partitions N [--config k=v]... --bootstrap H:P
#   topic list|describe [NAME]|delete NAME --bootstrap H:P
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP="$("$HERE/../../scripts/kafka_local.sh" classpath | tail -1)"

serve() {
  local listen="" dir="" flush="" auto=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --listen) listen="$2"; shift 2 ;;
      --data-dir) dir="$2"; shift 2 ;;
      --flush) flush="$2"; shift 2 ;;
      --auto-create-topics) auto="$2"; shift 2 ;;
      --shards|--config) shift 2 ;;
      *) echo "kafka_as_shardlog: unknown serve flag $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$dir"
  local port="${listen##*:}" cport
  if [ -f "$dir/controller.port" ]; then cport="$(cat "$dir/controller.port")"; else
    cport="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    echo "$cport" > "$dir/controller.port"
  fi
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://$listen,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://$listen
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/logs
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
${flush:+$([ "$flush" = always ] && echo log.flush.interval.messages=1)}
${auto:+auto.create.topics.enable=$auto}
PROPS
  if [ ! -f "$dir/logs/meta.properties" ]; then
    # Kafka's own random-uuid (as scripts/kafka_local.sh): it never starts with '-', which
    # the storage tool would take for an option (a plain base64 uuid4 sometimes does).
    java -cp "$CP" kafka.tools.StorageTool format --standalone \
      -t "$(java -cp "$CP" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" \
      -c "$dir/server.properties" >/dev/null
  fi
  java -Xmx1g -cp "$CP" kafka.Kafka "$dir/server.properties" > "$dir/kafka.out" 2>&1 &
  local pid=$!
  trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 0' TERM INT
  while ! grep -q "Kafka Server started" "$dir/kafka.out" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { cat "$dir/kafka.out" >&2; exit 1; }
    sleep 0.2
  done
  echo "kafka_as_shardlog: listening on $listen (Apache Kafka pid $pid)"
  wait $pid
}

topic() {
  local sub="$1"; shift
  local args=() bootstrap=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --bootstrap) bootstrap="$2"; shift 2 ;;
      --partitions) args+=(--partitions "$2"); shift 2 ;;
      --config) args+=(--config "$2"); shift 2 ;;
      *) args+=(--topic "$1"); shift ;;
    esac
  done
  exec java -cp "$CP" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" "--$sub" "${args[@]}"
}

case "${1:-}" in
  serve) shift; serve "$@" ;;
  topic) shift; topic "$@" ;;
  *) echo "kafka_as_shardlog: unsupported: $*" >&2; exit 2 ;;
esac
