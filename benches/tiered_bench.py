#!/usr/bin/env python3
"""Tiered storage (KIP-405) against shardlog and Apache Kafka 4.4, both tiering to the same
S3-compatible object store (issue 30's performance point). `scripts/bench.sh --tiered`
runs it.

The store: one SeaweedFS `weed mini` for the whole run (tests/integration/object_store.py;
the binary scripts/test.sh builds, or $SHARDLOG_WEED), one bucket, a key prefix of its own
for each broker run, emptied after it. Kafka tiers through benches/kafka_s3_rsm (a minimal
S3 RemoteStorageManager with a chunk cache and read-ahead like shardlog's, built here
with mvn if missing), shardlog through its own store; both get the same rsm.config.*
settings. Per broker run:
- topics `plain` (6 partitions, segment.bytes 16 MiB, retention unlimited) and `tiered`
  (the same, remote.storage.enable=true, local.retention.bytes 1 MiB: what is uploaded
  leaves the disk, all but the active segment);
- produce: Kafka's ProducerPerformance, 1 KiB records, acks=1, linger 5 ms, 16 KiB
  batches, at RATE (30 MB/s) for SIZE (1 GiB; --quick 256 MiB) into `plain`, then the
  same into `tiered` while its closed segments upload: MB/s and p99 of each, and their
  ratio (the issue's "produce while uploading within 10 % of tiering off");
- offload: waits until every partition of `tiered` has its local log start (ListOffsets
  earliest-local, -4) past 0, at or below the last uploaded offset + 1 (latest-tiered, -5),
  and both unchanged for SETTLE_S (several upload and retention rounds): everything but
  the active segment is remote and gone locally; records the share of the records that
  are remote only, and the time from the produce's end;
- historical read: Kafka's ConsumerPerformance reads `tiered` whole from offset 0 (the
  remote part from the object store), then `plain` whole (local, for context); MB/s of
  the fetch (the group join excluded);
- history beside the tail (point 2): `mixed`, one partition, gets one partition's share of
  the volume and is offloaded; then Kafka's EndToEndLatency (one 1 KiB record at a time,
  acks=1, consumed from the head: the tailing consumer) alone, a history read of it from
  offset 0 alone, and both at once (the history read repeated until the tail's run ends):
  each one's slowdown beside the other (tail p99 and average, history MB/s).
Both brokers: one node, acknowledgement without fsync (Kafka's default; shardlog --flush
never), upload task and retention check every second (remote.log.manager.task.interval.ms,
log.retention.check.interval.ms; Kafka's defaults 30 s / 5 min would only make the run
wait), one after the other (never both running), alternating A B A B over --reps. On
this 2-core machine the Java tools and the object store share the cores with the broker:
figures are for side-by-side comparison, never absolutes.

Output: a table with medians and shardlog/Kafka ratios on stdout, and
benches/results/<stamp>-tiered/summary.json (raw tool outputs in runs/ beside it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from cluster_harness import free_port  # noqa: E402
from kafkawire import FlexReader, compact_array, compact_string, i8, i32, i64, request, roundtrip, uvarint  # noqa: E402
from object_store import ObjectStore  # noqa: E402

RSM_POM = ROOT / "benches" / "kafka_s3_rsm" / "pom.xml"
RSM_JAR = ROOT / "benches" / "kafka_s3_rsm" / "target" / "kafka-s3-rsm.jar"
PARTITIONS = 6
SEGMENT_BYTES = 16 << 20
LOCAL_RETENTION_BYTES = 1 << 20
RECORD_BYTES = 1024
SETTLE_S = 5.0
OFFLOAD_TIMEOUT_S = 300
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Broker settings, Kafka's names, both brokers (shardlog takes each as a --flag).
COMMON = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "1000",
    "log.retention.check.interval.ms": "1000",
    # Both remote readers keep chunks in memory and read ahead (shardlog's chunk cache,
    # the plugin's the same). 96 MiB: the six partitions' read-ahead fits (6 x 3 chunks
    # of 4 MiB), and a history read of the full run's `mixed` (~150 MiB remote) does not,
    # so its repeated reads beside the tail are not served from memory (in --quick runs
    # they partly are).
    "rsm.config.fetch.chunk.cache.size": str(96 << 20),
    "rsm.config.fetch.chunk.cache.prefetch.max.size": str(8 << 20),
}
# Kafka's alone: the plugin, and its metadata topic (__remote_log_metadata) on one node.
# shardlog keeps the segment records in its metadata quorum and deletes files at once
# (Kafka waits log.segment.delete.delay.ms, default 60 s, before removing deleted files).
KAFKA_ONLY = {
    "remote.log.storage.manager.class.name": "shardlog.bench.S3RemoteStorageManager",
    "remote.log.storage.manager.class.path": str(RSM_JAR),
    "remote.log.metadata.manager.listener.name": "PLAINTEXT",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    "log.segment.delete.delay.ms": "1000",
}
TOPICS = {
    "plain": {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1", "retention.bytes": "-1",
              "remote.storage.enable": "false"},
    "tiered": {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1", "retention.bytes": "-1",
               "remote.storage.enable": "true", "local.retention.bytes": str(LOCAL_RETENTION_BYTES)},
}


def log(msg: str) -> None:
    print(f"tiered-bench: {msg}", file=sys.stderr, flush=True)


def weed_path() -> str:
    """$SHARDLOG_WEED, else where scripts/test.sh builds it (the version tests/objectstore pins)."""
    if os.environ.get("SHARDLOG_WEED"):
        return os.environ["SHARDLOG_WEED"]
    version = next(l.split()[2] for l in (ROOT / "tests" / "objectstore" / "go.mod").read_text().splitlines()
                   if l.split()[:2] == ["require", "github.com/seaweedfs/seaweedfs"])
    cache = Path(os.environ.get("SHARDLOG_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardlog")
    path = cache / f"weed-{version}"
    if not path.exists():
        raise SystemExit(f"tiered-bench: no SeaweedFS at {path}: run scripts/test.sh once (it builds it) or set SHARDLOG_WEED")
    return str(path)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Broker:
    def __init__(self, kind: str, work: Path, binary: Path, settings: dict[str, str]):
        self.kind, self.work, self.binary, self.settings = kind, work, binary, settings
        self.port, self.port2 = free_port(), free_port()  # client listener; controller or admin listener
        self.proc = None
        self.pid = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        if self.kind == "kafka":
            props = {**self.settings, **KAFKA_ONLY}
            env = {**os.environ, "KAFKA_HEAP": os.environ.get("KAFKA_HEAP", "-Xmx1g"), "KAFKA_CONTROLLER_PORT": str(self.port2),
                   "KAFKA_EXTRA_PROPS": "\n".join(f"{k}={v}" for k, v in props.items())}
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "start", str(self.work), str(self.port)],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            self.pid = int((self.work / "kafka.pid").read_text())
        else:
            args = [str(self.binary), "serve", "--config", str(ROOT / "tuning" / "throughput.toml"),
                    "--data-dir", str(self.work / "data"), "--flush", "never", "--log-level", "warn",
                    # As scripts/kafka_local.sh configures Kafka: a consumer group forms at once.
                    "--group-initial-rebalance-delay-ms", "0", "--listen", self.bootstrap,
                    "--admin-listener", f"127.0.0.1:{self.port2}"]
            for k, v in self.settings.items():
                args += ["--" + k.replace(".", "-"), v]
            self.proc = subprocess.Popen(args, stdout=open(self.work / "broker.log", "wb"), stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            self.pid = self.proc.pid
            for _ in range(300):
                if b"listening on" in (self.work / "broker.log").read_bytes():
                    break
                if self.proc.poll() is not None:
                    raise RuntimeError((self.work / "broker.log").read_text()[-3000:])
                time.sleep(0.1)

    def stop(self) -> None:
        if self.kind == "kafka":
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "stop", str(self.work)], stdout=subprocess.DEVNULL)
        elif self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def create_topic(self, topic: str, config: dict[str, str], partitions: int = PARTITIONS) -> None:
        args = [str(self.binary), "topic", "create", topic, "--partitions", str(partitions), "--bootstrap", self.bootstrap]
        for k, v in config.items():
            args += ["--config", f"{k}={v}"]
        for _ in range(60):
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError(f"cannot create {topic} on {self.kind}: {r.stdout}{r.stderr}")


def list_offsets(bootstrap: str, topic: str, timestamp: int, partitions: int = PARTITIONS) -> list[int]:
    """ListOffsets v9 (earliest-local -4 and latest-tiered -5 need v8 / v9) for every
    partition of `topic`: the offsets by partition; any error code raises."""
    parts = [i32(p) + i32(-1) + i64(timestamp) + uvarint(0) for p in range(partitions)]
    body = i32(-1) + i8(0) + compact_array([compact_string(topic) + compact_array(parts) + uvarint(0)]) + uvarint(0)
    r = FlexReader(roundtrip(bootstrap, request(2, 9, 7, body, header_version=2)))
    assert r.i32() == 7
    r.tags()
    r.i32()  # throttle time
    out = {}
    for _ in range(r.uvarint() - 1):
        r.compact_string()
        for _ in range(r.uvarint() - 1):
            p, code = r.i32(), r.i16()
            r.i64()  # timestamp
            offset = r.i64()
            r.i32()  # leader epoch
            r.tags()
            if code != 0:
                raise RuntimeError(f"ListOffsets {topic}/{p} at {timestamp}: error {code}")
            out[p] = offset
        r.tags()
    return [out[p] for p in range(partitions)]


def java_tool(cp: str, cls: str, args: list[str], out: Path, timeout: float) -> str:
    cmd = ["java", "-Xmx1g", "-cp", cp, f"org.apache.kafka.tools.{cls}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out.write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"{cls} failed ({r.returncode}), see {out}: {r.stdout[-1500:]}{r.stderr[-1500:]}")
    return r.stdout


def produce(cp: str, b: Broker, topic: str, records: int, rate: int, out: Path) -> dict:
    c0 = cpu_s(b.pid)
    stdout = java_tool(cp, "ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_BYTES), "--throughput", str(rate),
        "--producer-props", f"bootstrap.servers={b.bootstrap}", "acks=1", "batch.size=16384", "linger.ms=5",
        "compression.type=none", "enable.idempotence=false", "max.in.flight.requests.per.connection=5"],
        out, timeout=records / max(rate, 1) * 3 + 120)
    last = [line for line in stdout.splitlines() if "records sent" in line][-1]
    return {"mb_s": float(re.search(r"\(([\d.]+) MB/sec\)", last).group(1)),
            "p99_ms": float(re.search(r"([\d.]+) ms 99th", last).group(1)),
            "p999_ms": float(re.search(r"([\d.]+) ms 99.9th", last).group(1)),
            "broker_cpu_s": round(cpu_s(b.pid) - c0, 2)}


def consume(cp: str, b: Broker, topic: str, records: int, out: Path) -> dict:
    c0 = cpu_s(b.pid)
    stdout = java_tool(cp, "ConsumerPerformance", [
        "--bootstrap-server", b.bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", f"read-{topic}-{time.time_ns()}", "--timeout", "60000"], out, timeout=1800)
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    row = [line for line in stdout.splitlines() if re.match(r"^\d{4}-", line)][-1].split(",")
    if int(row[4]) < records:
        raise RuntimeError(f"ConsumerPerformance on {b.kind}/{topic} read {row[4]} of {records} records, see {out}")
    return {"mb_s": float(row[3]), "fetch_mb_s": float(row[8]), "rebalance_ms": int(row[6]),
            "broker_cpu_s": round(cpu_s(b.pid) - c0, 2)}


def e2e_latency(cp: str, b: Broker, topic: str, records: int, out: Path) -> dict:
    """Kafka's EndToEndLatency: one record at a time, produced (acks=1) and consumed from
    the partition's head before the next: the tailing consumer's latency."""
    stdout = java_tool(cp, "EndToEndLatency", [b.bootstrap, topic, str(records), "1", str(RECORD_BYTES)], out, timeout=600)
    avg = float(re.search(r"Avg latency: ([\d.]+) ms", stdout).group(1))
    p50, p99, p999 = (int(x) for x in re.search(r"50th = (\d+), 99th = (\d+), 99.9th = (\d+)", stdout).groups())
    return {"avg_ms": avg, "p50_ms": p50, "p99_ms": p99, "p999_ms": p999}


def tail_beside_history(cp: str, b: Broker, records: int, e2e_records: int, out: Path) -> dict:
    """The same partition of `mixed` read two ways: a consumer from offset 0 (its history
    remote) and a tailing one (EndToEndLatency). Each alone, then both at once (the
    history read repeated from 0 until the tail's run ends): how much each slows the
    other (point 2's factor)."""
    res = {"tail_alone": e2e_latency(cp, b, "mixed", e2e_records, out / f"e2e-alone-{b.kind}.out"),
           "history_alone": consume(cp, b, "mixed", records, out / f"history-alone-{b.kind}.out")}
    together: list[dict] = []
    done = threading.Event()

    def history_loop() -> None:
        n = 0
        while not done.is_set():
            together.append(consume(cp, b, "mixed", records, out / f"history-beside-{b.kind}-{n}.out"))
            n += 1
    reader = threading.Thread(target=history_loop)
    reader.start()
    try:
        time.sleep(1)  # the reader past its group join, reading
        res["tail_beside_history"] = e2e_latency(cp, b, "mixed", e2e_records, out / f"e2e-beside-{b.kind}.out")
    finally:
        done.set()
        reader.join()
    res["history_beside_tail"] = {"fetch_mb_s": round(statistics.median(r["fetch_mb_s"] for r in together), 2), "reads": len(together)}
    res["tail_slowdown"] = {k: round(res["tail_beside_history"][k] / max(res["tail_alone"][k], 0.5), 3) for k in ("avg_ms", "p99_ms")}
    res["history_slowdown"] = round(res["history_alone"]["fetch_mb_s"] / max(res["history_beside_tail"]["fetch_mb_s"], 0.01), 3)
    return res


def wait_offloaded(b: Broker, since: float, topic: str = "tiered", partitions: int = PARTITIONS) -> dict:
    """Waits until `topic` is remote but for its active segments (see the module's doc)."""
    deadline = time.monotonic() + OFFLOAD_TIMEOUT_S
    last, steady_from = None, time.monotonic()
    while time.monotonic() < deadline:
        local, tiered = list_offsets(b.bootstrap, topic, -4, partitions), list_offsets(b.bootstrap, topic, -5, partitions)
        state = (local, tiered)
        done = all(0 < l <= t + 1 for l, t in zip(local, tiered))
        if state != last or not done:
            last, steady_from = state, time.monotonic()
        elif time.monotonic() - steady_from >= SETTLE_S:
            end = list_offsets(b.bootstrap, topic, -1, partitions)
            return {"offload_s": round(steady_from - since, 1), "remote_share": round(sum(local) / sum(end), 3),
                    "earliest_local": local, "latest_tiered": tiered, "end": end}
        time.sleep(0.5)
    end = list_offsets(b.bootstrap, topic, -1, partitions)
    raise TimeoutError(f"{b.kind}: `{topic}` not offloaded within {OFFLOAD_TIMEOUT_S} s (every partition needs "
                       f"0 < earliest-local <= latest-tiered + 1, steady for {SETTLE_S} s): earliest-local {last[0]}, "
                       f"latest-tiered {last[1]}, end {end}; see {b.work}")


def bucket_usage(store: ObjectStore, prefix: str) -> dict:
    c, objects, size, token = store.client(), 0, 0, None
    while True:
        page = c.list_objects_v2(Bucket=store.bucket, Prefix=prefix, **({"ContinuationToken": token} if token else {}))
        objects += len(page.get("Contents", []))
        size += sum(o["Size"] for o in page.get("Contents", []))
        if not page.get("IsTruncated"):
            return {"objects": objects, "mb": round(size / 2**20, 1)}
        token = page["NextContinuationToken"]


def wipe(store: ObjectStore, prefix: str) -> None:
    c = store.client()
    keys = store.keys(prefix)
    for i in range(0, len(keys), 1000):
        c.delete_objects(Bucket=store.bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
    if store.keys(prefix):
        raise RuntimeError(f"objects left under {prefix} after the wipe")


def broker_run(kind: str, rep: int, a, cp: str, store: ObjectStore, work: Path, out: Path) -> dict:
    prefix = f"{kind}-{rep}/"
    wipe(store, prefix)
    b = Broker(kind, work / f"tiered-{kind}", Path(a.bin), {**COMMON, **store.broker_settings(prefix)})
    records = a.size_mb * 1024 * 1024 // RECORD_BYTES
    rate = a.rate_mb * 1024 * 1024 // RECORD_BYTES
    res: dict = {"rep": rep, "broker": kind}
    b.start()
    try:
        for topic, config in TOPICS.items():
            b.create_topic(topic, config)
        b.create_topic("mixed", TOPICS["tiered"], partitions=1)
        for topic in ("plain", "tiered"):
            log(f"rep {rep} {kind}: produce {a.size_mb} MiB into {topic} at {a.rate_mb} MB/s")
            res[f"produce_{topic}"] = produce(cp, b, topic, records, rate, out / f"produce-{topic}-{kind}-{rep}.out")
        produced = time.monotonic()
        log(f"rep {rep} {kind}: waiting for the offload")
        res["offload"] = wait_offloaded(b, produced)
        res["bucket"] = bucket_usage(store, prefix)
        for topic, key in (("tiered", "read_remote"), ("plain", "read_local")):
            n = sum(list_offsets(b.bootstrap, topic, -1))
            log(f"rep {rep} {kind}: read {topic} from 0 ({n} records)")
            res[key] = consume(cp, b, topic, n, out / f"read-{topic}-{kind}-{rep}.out")
        # One partition's share of the volume, then its history read beside a tailing consumer.
        history = records // PARTITIONS
        log(f"rep {rep} {kind}: produce {a.size_mb // PARTITIONS} MiB into mixed (1 partition), then tail beside history")
        produce(cp, b, "mixed", history, rate, out / f"produce-mixed-{kind}-{rep}.out")
        res["mixed_offload"] = wait_offloaded(b, time.monotonic(), "mixed", 1)
        res["mixed"] = tail_beside_history(cp, b, history, a.e2e_records, out)
    finally:
        b.stop()
        wipe(store, prefix)
    res["produce_tiered_vs_plain"] = {"mb_s": round(res["produce_tiered"]["mb_s"] / res["produce_plain"]["mb_s"], 3),
                                      "p99": round(res["produce_tiered"]["p99_ms"] / max(res["produce_plain"]["p99_ms"], 1), 3)}
    log(json.dumps(res))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB per topic instead of 1 GiB")
    ap.add_argument("--size-mb", type=int, help="MiB produced into each topic (default 1024; --quick 256)")
    ap.add_argument("--rate-mb", type=int, default=30, help="produce rate, MB/s (default 30)")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", "2")),
                    help="A B repetitions (default $BENCH_REPS or 2)")
    ap.add_argument("--e2e-records", type=int, default=3000, help="EndToEndLatency records per run (default 3000)")
    ap.add_argument("--brokers", default="shardlog,kafka", help="to try one side alone: shardlog or kafka")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "shardlog"))
    a = ap.parse_args()
    a.size_mb = a.size_mb or (256 if a.quick else 1024)
    if a.size_mb * 2**20 < 2 * PARTITIONS * SEGMENT_BYTES:
        raise SystemExit(f"tiered-bench: --size-mb must be at least {2 * PARTITIONS * SEGMENT_BYTES >> 20} "
                         "(two segments per partition, so something is uploaded and deleted locally)")
    kinds = a.brokers.split(",")
    if "kafka" in kinds:  # always: a jar older than the plugin's source would be measured otherwise
        subprocess.run(["mvn", "-q", "-B", "-f", str(RSM_POM), "package"], check=True)
    subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "fetch"], check=True, stdout=subprocess.DEVNULL)
    cp = subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "classpath"], check=True, capture_output=True,
                        text=True).stdout.strip()
    os.environ["SHARDLOG_WEED"] = weed_path()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "benches" / "results" / f"{stamp}-tiered"
    (out / "runs").mkdir(parents=True)
    work = Path(os.environ.get("BENCH_WORK", ROOT / "target" / "bench-work"))
    shutil.rmtree(work / "tiered-weed", ignore_errors=True)
    store = ObjectStore(work / "tiered-weed", out / "runs" / "weed.log", bucket="tiered-bench").start()
    rows = []
    try:
        for rep in range(a.reps):
            for kind in kinds if rep % 2 == 0 else kinds[::-1]:
                rows.append(broker_run(kind, rep, a, cp, store, work, out / "runs"))
    finally:
        store.stop()

    def med(kind: str, path: str) -> float:
        vals = []
        for r in rows:
            if r["broker"] == kind:
                v = r
                for k in path.split("."):
                    v = v[k]
                vals.append(v)
        return statistics.median(vals) if vals else float("nan")
    metrics = (  # (key, label, better): ratio = shardlog's advantage, as the other benches
        ("produce_plain.mb_s", "produce plain MB/s", "higher"),
        ("produce_plain.p99_ms", "produce plain p99 ms", "lower"),
        ("produce_tiered.mb_s", "produce tiered MB/s", "higher"),
        ("produce_tiered.p99_ms", "produce tiered p99 ms", "lower"),
        ("produce_tiered_vs_plain.mb_s", "tiered/plain MB/s", None),
        ("produce_tiered_vs_plain.p99", "tiered/plain p99", None),
        ("offload.offload_s", "offload s after produce", None),  # often 0: uploads keep up with the producer
        ("offload.remote_share", "remote-only share", None),
        ("read_remote.fetch_mb_s", "read tiered MB/s", "higher"),
        ("read_local.fetch_mb_s", "read plain MB/s", "higher"),
        ("mixed.tail_alone.p99_ms", "tail p99 ms, alone", "lower"),
        ("mixed.tail_beside_history.p99_ms", "tail p99 ms, beside history", "lower"),
        ("mixed.tail_slowdown.p99_ms", "tail p99 slowdown", None),
        ("mixed.tail_slowdown.avg_ms", "tail avg slowdown", None),
        ("mixed.history_alone.fetch_mb_s", "history MB/s, alone", "higher"),
        ("mixed.history_beside_tail.fetch_mb_s", "history MB/s, beside tail", "higher"),
        ("mixed.history_slowdown", "history slowdown", None),
        ("produce_tiered.broker_cpu_s", "broker CPU s, tiered", "lower"),
        ("read_remote.broker_cpu_s", "broker CPU s, read tiered", "lower"),
    )
    lines = [f"tiered storage: {PARTITIONS} partitions, 1 KiB records, acks=1, {a.rate_mb} MB/s x {a.size_mb} MiB per "
             f"topic, segment 16 MiB, local.retention.bytes 1 MiB, SeaweedFS; medians of {a.reps}",
             f"{'':28}{'shardlog':>12}{'kafka':>12}{'ratio':>10}"]
    summary = {"size_mb": a.size_mb, "rate_mb_s": a.rate_mb, "reps": a.reps, "partitions": PARTITIONS,
               "segment_bytes": SEGMENT_BYTES, "local_retention_bytes": LOCAL_RETENTION_BYTES,
               "broker_settings": COMMON, "kafka_settings": KAFKA_ONLY, "topics": TOPICS,
               "shardlog_rev": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                              text=True).stdout.strip(),
               "rows": rows, "medians": {}, "ratios": {}}
    for key, label, better in metrics:
        s, k = med("shardlog", key), med("kafka", key)
        summary["medians"][key] = {"shardlog": s, "kafka": k}
        ratio = float("nan")
        if better and s and k:
            ratio = s / k if better == "higher" else k / s
            summary["ratios"][key] = round(ratio, 3)
        lines.append(f"{label:28}{s:12.2f}{k:12.2f}" + (f"{ratio:9.2f}x" if better else ""))
    lines.append("ratio: shardlog's advantage (throughput shardlog/kafka; latency, time and CPU kafka/shardlog); "
                 "tiered/plain: each broker's produce with uploads against without (1.00 = no cost)")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(lines))
    log(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
