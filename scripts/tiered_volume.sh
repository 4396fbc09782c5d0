#!/usr/bin/env bash
# Tiered storage at volume (issue 30): tests/integration/test_tiered_volume.py with the
# issue's figures instead of CI's. A 3-node cluster (RF 3) with small local retention
# against a real SeaweedFS server; a real client produces the volume, then reads every
# record back from offset 0 (most of it from the object store) and checks each one's
# offset and bytes. Prints produce and read MB/s, remote and local sizes. Then the object
# store outage test with the store down for SHARDLOG_TIERED_OUTAGE_S (60) while the
# producer writes on: nothing acknowledged lost, the local log grows, then drains.
#
#   scripts/tiered_volume.sh                            # 2 GiB
#   SHARDLOG_TIERED_VOLUME_MIB=512 scripts/tiered_volume.sh
#
# Env: SHARDLOG_TIERED_VOLUME_MIB (2048; CI runs 48), SHARDLOG_TIERED_OUTAGE_S (60; CI
# keeps the store down only until the uploads have failed), SHARDLOG_BIN (default
# target/release/shardlog), SHARDLOG_WEED (default: the one scripts/test.sh builds).
# Broker and store logs: target/integration-logs/. Needs ~3x the volume of free disk.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SHARDLOG_TIERED_VOLUME_MIB="${SHARDLOG_TIERED_VOLUME_MIB:-2048}"
export SHARDLOG_TIERED_OUTAGE_S="${SHARDLOG_TIERED_OUTAGE_S:-60}"
export PYTHONDONTWRITEBYTECODE=1
BIN="${SHARDLOG_BIN:-target/release/shardlog}"
[ -x "$BIN" ] || { echo "tiered_volume.sh: no broker binary at $BIN (cargo build --release, or set SHARDLOG_BIN)" >&2; exit 1; }
export SHARDLOG_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
if [ -z "${SHARDLOG_WEED:-}" ]; then
  WEED_VERSION="$(awk '$1 == "require" && $2 == "github.com/seaweedfs/seaweedfs" {print $3}' tests/objectstore/go.mod)"
  SHARDLOG_WEED="${SHARDLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardlog}/weed-$WEED_VERSION"
  [ -x "$SHARDLOG_WEED" ] || { echo "tiered_volume.sh: no SeaweedFS at $SHARDLOG_WEED (run scripts/test.sh once, or set SHARDLOG_WEED)" >&2; exit 1; }
  export SHARDLOG_WEED
fi
echo "tiered_volume.sh: ${SHARDLOG_TIERED_VOLUME_MIB} MiB, RF 3 ($(date -u +%H:%M:%S))"
cd tests/integration
"${PYTHON:-python3}" -m pytest test_tiered_volume.py -s -v -p no:cacheprovider
echo "tiered_volume.sh: the object store down for ${SHARDLOG_TIERED_OUTAGE_S} s under load ($(date -u +%H:%M:%S))"
exec "${PYTHON:-python3}" -m pytest test_tiered_storage.py -k object_store_outage -s -v -p no:cacheprovider
