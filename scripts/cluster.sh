#!/usr/bin/env bash
# A local shardlog cluster: N combined (broker+controller) nodes on loopback, distinct
# ports and data dirs; or, with --controllers C, C controller-only nodes (ids 1..C) and N
# broker-only nodes (ids C+1..C+N). The layout lives in one place, tests/integration/cluster_harness.py
# (the integration tests use the same code); this script only calls it.
#
#   scripts/cluster.sh start N [--base-port P] [--shards S] [--controllers C] [--secure] [--fresh]
#                                                            # prints host:port,... of the brokers
#   scripts/cluster.sh status                                # roles, pid, active controller per node
#   scripts/cluster.sh stop
#
# --secure: every listener SSL with client certificates (clients, brokers, controllers),
# certificates made with openssl in $SHARDLOG_CLUSTER_DIR/tls, client settings written to
# client.properties (Java) and librdkafka.properties (kcat -F) there.
# Node i listens for clients on P+i-1 and for controller RPCs on P+100+i-1 (P = 19092).
# With 3 brokers or more, topics get 3 replicas by default (--default-replication-factor 3,
# this script's choice; a broker's own default is Kafka's, 1). `start` on a directory that
# holds another cluster's data (other ports, counts or roles) refuses and says how to
# remove it; --fresh removes it first. The same layout again restarts the stopped cluster.
# State, data and logs: $SHARDLOG_CLUSTER_DIR (default target/cluster). The binary:
# $SHARDLOG_BIN (default target/release/shardlog).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec python3 "$here/../tests/integration/cluster_harness.py" "$@"
