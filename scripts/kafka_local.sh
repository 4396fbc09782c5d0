#!/usr/bin/env bash
# Run a real Apache Kafka 4.4 (KRaft, combined broker+controller, one node) from
# Maven Central jars — no tarball, no Docker. Used to check the integration tests
# themselves (SHARDLOG_TEST_TARGET=kafka) and by the benchmark as the reference.
#
#   scripts/kafka_local.sh fetch                 # jars into $KAFKA_HOME/lib (idempotent)
#   scripts/kafka_local.sh classpath             # print the classpath (after fetch)
#   scripts/kafka_local.sh start DIR [PORT]      # format DIR if new, start, wait until ready
#   scripts/kafka_local.sh stop DIR              # stop the node started on DIR
#
# Env: KAFKA_VERSION (default 4.4.0), KAFKA_HOME (default ~/.cache/shardlog/kafka-4.4),
#      KAFKA_HEAP (default -Xmx1g), KAFKA_EXTRA_PROPS (extra lines for server.properties),
#      KAFKA_START_TIMEOUT_S (how long `start` waits for the node, default 60).
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_HOME="${KAFKA_HOME:-$HOME/.cache/shardlog/kafka-4.4}"
SLF4J_VERSION="2.0.17"

fetch() {
  if [ -f "$KAFKA_HOME/lib/.complete-$KAFKA_VERSION" ]; then return 0; fi
  mkdir -p "$KAFKA_HOME/lib"
  cat > "$KAFKA_HOME/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardlog.local</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$SLF4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
  echo "kafka_local: fetching Apache Kafka $KAFKA_VERSION jars into $KAFKA_HOME/lib" >&2
  rm -f "$KAFKA_HOME"/lib/*.jar
  mvn -q -B -f "$KAFKA_HOME/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$KAFKA_HOME/lib" -DincludeScope=runtime >&2
  # Only one slf4j backend: drop log4j bindings that may come along.
  rm -f "$KAFKA_HOME"/lib/log4j-slf4j*-impl-*.jar "$KAFKA_HOME"/lib/slf4j-reload4j-*.jar
  touch "$KAFKA_HOME/lib/.complete-$KAFKA_VERSION"
}

classpath() { echo "$KAFKA_HOME/lib/*"; }

write_props() { # DIR PORT CONTROLLER_PORT
  local dir="$1" port="$2" cport="$3"
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
${KAFKA_EXTRA_PROPS:-}
PROPS
}

start() {
  local dir="$1" port="${2:-9092}"
  local cport="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
  fetch
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [ ! -f "$dir/server.properties" ]; then write_props "$dir" "$port" "$cport"; fi
  if [ ! -f "$dir/logs/meta.properties" ]; then
    java -cp "$(classpath)" kafka.tools.StorageTool format --standalone \
      -t "$(java -cp "$(classpath)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" \
      -c "$dir/server.properties" >"$dir/format.log" 2>&1
  fi
  nohup java ${KAFKA_HEAP:--Xmx1g} -cp "$(classpath)" kafka.Kafka "$dir/server.properties" \
    >"$dir/kafka.log" 2>&1 </dev/null &
  echo $! > "$dir/kafka.pid"
  for _ in $(seq 1 $((2 * ${KAFKA_START_TIMEOUT_S:-60}))); do
    if grep -q "Kafka Server started" "$dir/kafka.log" 2>/dev/null; then
      echo "kafka_local: listening on 127.0.0.1:$port (pid $(cat "$dir/kafka.pid"), log $dir/kafka.log)"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
      tail -30 "$dir/kafka.log" >&2; echo "kafka_local: Kafka exited" >&2; return 1
    fi
    sleep 0.5
  done
  tail -30 "$dir/kafka.log" >&2; echo "kafka_local: Kafka did not start in ${KAFKA_START_TIMEOUT_S:-60} s" >&2; return 1
}

stop() {
  local dir="$1" pid
  [ -f "$dir/kafka.pid" ] || { echo "kafka_local: no pid file in $dir" >&2; return 0; }
  pid="$(cat "$dir/kafka.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$dir/kafka.pid"
}

case "${1:-}" in
  fetch) fetch ;;
  classpath) fetch; classpath ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 fetch|classpath|start DIR [PORT]|stop DIR" >&2; exit 2 ;;
esac
