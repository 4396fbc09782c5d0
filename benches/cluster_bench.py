#!/usr/bin/env python3
"""Replication cost on 3 local brokers, shardlog against Apache Kafka 4.1 run the same way
(issue 12, Measure; `scripts/bench.sh --cluster` runs this).

Both sides: 3 combined (broker + controller) nodes on loopback, started by the shared
harness (tests/integration/cluster_harness.py, kafka_cluster.py); shardlog with
tuning/throughput.toml and one shard per core, Kafka with -Xmx1g and its default GC (as
the single-node bench). The same generator drives both: Kafka's ProducerPerformance
(kafka-tools; the native generator talks to one broker only), 1 KiB records, no
compression, acks=all, linger.ms=5, leaders spread over the 3 brokers.

Workloads, 6 partitions each:
  RF3      as fast as possible, RF=3, min.insync.replicas=2, 64 KiB batches
  RF1      the same with RF=1 (the cost of replication is RF3 / RF1)
  RF3-lat  a fixed 20 MB/s, RF=3, 16 KiB batches: latency p50 / p99 / p99.9
           (ProducerPerformance has no warm-up: its first seconds, a cold client JVM
           and fresh partitions, weigh on its p99)
  RF3-lat-native  the same load from the native generator (`shardlog bench produce`,
           3 s warm-up, latency from each record's intended send time), every
           partition led by node 1 (replicas [1, 2, 3]: it talks to one broker)
Each repetition starts fresh clusters, shardlog then Kafka (A B A B). Then, once per
broker kind, catch-up: with broker 3 down, 1 GiB is produced (RF=3, acks=all, minISR=2);
broker 3 is restarted and the time from its start until it is back in every partition's
ISR is the sample (Kafka's includes its JVM start).

CPU: user+system seconds of the 3 broker processes over each run (the generator's own CPU
is not counted), per GiB produced.

Usage: benches/cluster_bench.py [--quick] [--reps N] [--duration S] [--bin PATH]
                                [--only shardlog|kafka] [--no-catchup] [--workloads RF3-lat]
                                [--shardlog-args "--replica-fetch-wait-max-ms 100"]
Results: benches/results/cluster/<stamp>/ (runs.jsonl, runs/*.out, summary.md).
The machine must be quiet (no builds or tests running) for the figures to count.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from cluster_harness import Cluster  # noqa: E402
from kafka_cluster import KafkaCluster  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from bench_report import parse_native, parse_producer_perf  # noqa: E402

PARTITIONS = 6
RECORD = 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB_RECORDS = (1 << 30) // RECORD


def log(msg: str) -> None:
    print(f"cluster-bench: {msg}", file=sys.stderr, flush=True)


def cpu_ticks(pid: int | None) -> int:
    """utime + stime of `pid` in clock ticks (0 if gone)."""
    if pid is None:
        return 0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def kafka_classpath() -> str:
    subprocess.run([str(REPO / "scripts" / "kafka_local.sh"), "fetch"], check=True)
    return subprocess.run([str(REPO / "scripts" / "kafka_local.sh"), "classpath"], check=True,
                          capture_output=True, text=True).stdout.strip()


def start_cluster(kind: str, root: Path, a) -> Cluster:
    if kind == "shardlog":
        c = Cluster(3, root / "shardlog", shards=0, binary=a.bin,
                    extra_args=["--config", str(REPO / "tuning" / "throughput.toml"),
                                "--log-level", "info",  # the harness waits for an info line
                                *a.shardlog_args.split()])
    else:
        c = KafkaCluster(3, root / "kafka", a.classpath, jvm_opts=["-Xmx1g"])
    try:
        c.start()
        c.wait_ready(timeout_s=180)
        wait_brokers(c.bootstrap, 3)
    except BaseException:
        c.close()  # no node outlives a failed start
        raise
    return c


def wait_brokers(bootstrap: str, n: int, timeout_s: float = 120) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers) >= n:
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{n} brokers not registered within {timeout_s} s")


def topic_state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]] | None:
    try:
        t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5).topics[topic]
        if t.error is not None:
            return None
        return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}
    except Exception:
        return None


def create_topic(bootstrap: str, topic: str, rf: int, led_by: int | None = None) -> None:
    """`led_by`: every partition on replicas [led_by, then the others] (the native
    generator talks to one broker); else the broker's own placement."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"min.insync.replicas": "2" if rf >= 3 else "1"}
    if led_by is None:
        new = NewTopic(topic, PARTITIONS, rf, config=cfg)
    else:
        replicas = [led_by] + [b for b in (1, 2, 3) if b != led_by][: rf - 1]
        new = NewTopic(topic, PARTITIONS, replica_assignment=[replicas] * PARTITIONS, config=cfg)
    admin.create_topics([new])[topic].result(60)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        st = topic_state(bootstrap, topic)
        if st and len(st) == PARTITIONS and all(leader >= 0 and len(isr) == rf for leader, isr in st.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not fully in sync after 60 s")


def producer_perf(a, bootstrap: str, topic: str, records: int, throughput: int, batch: int, out: Path) -> dict | None:
    cmd = ["java", "-Xmx1g", "-cp", a.classpath, "org.apache.kafka.tools.ProducerPerformance",
           "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD),
           "--throughput", str(throughput),
           "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all", f"batch.size={batch}", "linger.ms=5",
           "compression.type=none", "enable.idempotence=false", "max.in.flight.requests.per.connection=5"]
    with open(out, "w") as f:
        f.write("# " + " ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=max(600, records // 1000))
    return parse_producer_perf(out.read_text())


def native_latency(a, c: Cluster, topic: str, name: str) -> dict:
    """The native generator (`shardlog bench produce`) at 20 MB/s, acks=all, 16 KiB
    batches against node 1, which leads every partition: latency from each record's
    intended send time (coordinated omission corrected), after a warm-up."""
    out = a.out / "runs" / f"{name}.out"
    cmd = [str(a.bin), "bench", "produce", "--bootstrap", c.node(1).bootstrap, "--topic", topic,
           "--partitions", str(PARTITIONS), "--acks", "all", "--rate-mb-s", "20", "--batch-bytes", "16384",
           "--connections", "2", "--inflight", "8", "--duration-s", str(a.duration), "--warmup-s", "3", "--json", "--quiet"]
    pids = broker_pids(c)
    t0 = sum(cpu_ticks(p) for p in pids)
    with open(out, "w") as f:
        f.write("# " + " ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=a.duration * 4 + 60)
    r = parse_native(out.read_text()) or {}
    r["cpu_s"] = round((sum(cpu_ticks(p) for p in pids) - t0) / CLK_TCK, 2)
    return r


def broker_pids(c: Cluster) -> list[int | None]:
    return [nd.pid() for nd in c.nodes]


def measured(a, c: Cluster, name: str, **kw) -> dict:
    pids = broker_pids(c)
    t0 = sum(cpu_ticks(p) for p in pids)
    w0 = time.monotonic()
    r = producer_perf(a, c.bootstrap, out=a.out / "runs" / f"{name}.out", **kw) or {}
    r["wall_s"] = round(time.monotonic() - w0, 2)
    r["cpu_s"] = round((sum(cpu_ticks(p) for p in pids) - t0) / CLK_TCK, 2)
    gib = r.get("total_records", 0) * RECORD / (1 << 30)
    r["cpu_s_per_gib"] = round(r["cpu_s"] / gib, 1) if gib else None
    return r


def keep(a, rows: list[dict], r: dict) -> None:
    log(f"{r['broker']} {r['workload']} rep {r['rep']}: {r.get('throughput_mb_s')} MB/s, p50 {r.get('p50_ms')} ms, "
        f"p99 {r.get('p99_ms')} ms, p99.9 {r.get('p999_ms')} ms, brokers {r['cpu_s']} CPU-s ({r.get('cpu_s_per_gib')}/GiB)")
    rows.append(r)
    with open(a.out / "runs.jsonl", "a") as f:
        f.write(json.dumps(r) + "\n")


def one_rep(a, kind: str, rep: int, sized: dict) -> list[dict]:
    root = a.work / f"r{rep}"
    c = start_cluster(kind, root, a)
    rows = []
    try:
        for w, rf, batch, rate_mb in (("RF3", 3, 65536, 0), ("RF1", 1, 65536, 0), ("RF3-lat", 3, 16384, 20)):
            if a.workloads and w not in a.workloads.split(","):
                continue
            topic = f"{w.lower()}-{rep}"
            create_topic(c.bootstrap, topic, rf)
            key = (kind, w)
            if rate_mb:
                throughput = rate_mb * 1024 * 1024 // RECORD
                records = throughput * a.duration
            else:
                if key not in sized:
                    # A probe run sizes the measured one to about --duration seconds.
                    probe = measured(a, c, f"{w}-{kind}-probe", topic=topic, records=a.probe_records,
                                     throughput=-1, batch=batch)
                    rate = probe.get("records_s") or 50_000
                    sized[key] = int(rate * a.duration)
                    log(f"{kind} {w}: probe {probe.get('throughput_mb_s')} MB/s -> {sized[key]} records")
                throughput, records = -1, sized[key]
            r = measured(a, c, f"{w}-{kind}-r{rep}", topic=topic, records=records, throughput=throughput, batch=batch)
            r.update(workload=w, broker=kind, rep=rep, rf=rf, batch_bytes=batch, target_mb_s=rate_mb)
            keep(a, rows, r)
        if not a.workloads or "RF3-lat-native" in a.workloads.split(","):
            w = "RF3-lat-native"
            topic = f"rf3-native-{rep}"
            create_topic(c.bootstrap, topic, 3, led_by=1)
            r = native_latency(a, c, topic, f"{w}-{kind}-r{rep}")
            r.update(workload=w, broker=kind, rep=rep, rf=3, batch_bytes=16384, target_mb_s=20, cpu_s_per_gib=None)
            keep(a, rows, r)
    finally:
        c.close()
    return rows


def catchup(a, kind: str) -> dict:
    """Broker 3 down, 1 GiB produced, broker 3 restarted: seconds until it is in every ISR."""
    c = start_cluster(kind, a.work / "catchup", a)
    try:
        topic = "catchup"
        create_topic(c.bootstrap, topic, 3)
        c.node(3).kill9()
        end = time.monotonic() + 120
        while time.monotonic() < end:
            st = topic_state(c.node(1).bootstrap, topic)
            if st and all(3 not in isr for _, isr in st.values()):
                break
            time.sleep(0.2)
        else:
            raise TimeoutError("broker 3 never left the ISRs")
        r = producer_perf(a, c.node(1).bootstrap + "," + c.node(2).bootstrap, topic, a.catchup_records, -1, 65536,
                          a.out / "runs" / f"catchup-{kind}-produce.out") or {}
        t0 = time.monotonic()
        c.node(3).start()
        ready_s = None
        end = t0 + 600
        while time.monotonic() < end:
            if ready_s is None and c.node(3).ready():
                ready_s = time.monotonic() - t0
            st = topic_state(c.node(1).bootstrap, topic)
            if st and all(3 in isr for _, isr in st.values()):
                break
            time.sleep(0.05)
        else:
            raise TimeoutError("broker 3 not back in every ISR within 600 s")
        total = time.monotonic() - t0
        row = {"workload": "catchup", "broker": kind, "gib": round(a.catchup_records * RECORD / (1 << 30), 2),
               "produced_mb_s": r.get("throughput_mb_s"), "start_to_isr_s": round(total, 2),
               "ready_s": round(ready_s, 2) if ready_s is not None else None,
               "ready_to_isr_s": round(total - ready_s, 2) if ready_s is not None else None}
        log(f"{kind} catch-up of {row['gib']} GiB: {row['start_to_isr_s']} s from start "
            f"({row['ready_to_isr_s']} s after it listened)")
        with open(a.out / "runs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        return row
    finally:
        c.close()


def med(rows: list[dict], kind: str, w: str, key: str):
    xs = [r[key] for r in rows if r.get("broker") == kind and r.get("workload") == w and r.get(key) is not None]
    return statistics.median(xs) if xs else None


def summarize(a, rows: list[dict], catchups: list[dict]) -> str:
    lines = [f"# Cluster bench {a.out.name}", "",
             f"3 local nodes each; ProducerPerformance, {PARTITIONS} partitions, 1 KiB records, acks=all; "
             f"{a.reps} repetition(s) of {a.duration} s, medians.", "",
             "| workload | broker | MB/s | p50 ms | p99 ms | p99.9 ms | broker CPU-s/GiB |", "|---|---|---|---|---|---|---|"]
    for w in ("RF3", "RF1", "RF3-lat", "RF3-lat-native"):
        for kind in ("shardlog", "kafka"):
            if med(rows, kind, w, "throughput_mb_s") is None:
                continue
            lines.append(f"| {w} | {kind} | {med(rows, kind, w, 'throughput_mb_s')} | {med(rows, kind, w, 'p50_ms')} | "
                         f"{med(rows, kind, w, 'p99_ms')} | {med(rows, kind, w, 'p999_ms')} | {med(rows, kind, w, 'cpu_s_per_gib')} |")
    lines += ["", "Ratios (shardlog / Kafka; for latency and CPU lower is better):", ""]

    def ratio(w, key):
        s, k = med(rows, "shardlog", w, key), med(rows, "kafka", w, key)
        return f"{s / k:.2f}" if s is not None and k else "n/a"

    lines.append(f"- RF3 throughput x{ratio('RF3', 'throughput_mb_s')}, RF1 throughput x{ratio('RF1', 'throughput_mb_s')}")
    lines.append(f"- RF3-lat p99 x{ratio('RF3-lat', 'p99_ms')}, p99.9 x{ratio('RF3-lat', 'p999_ms')}")
    lines.append(f"- RF3-lat-native p50 x{ratio('RF3-lat-native', 'p50_ms')}, p99 x{ratio('RF3-lat-native', 'p99_ms')}, "
                 f"p99.9 x{ratio('RF3-lat-native', 'p999_ms')}")
    lines.append(f"- broker CPU per GiB at RF3 x{ratio('RF3', 'cpu_s_per_gib')}")
    for kind in ("shardlog", "kafka"):
        r3, r1 = med(rows, kind, "RF3", "throughput_mb_s"), med(rows, kind, "RF1", "throughput_mb_s")
        if r3 and r1:
            lines.append(f"- {kind}: RF3 / RF1 throughput = {r3 / r1:.2f}")
    for c in catchups:
        lines.append(f"- catch-up {c['broker']}: {c['gib']} GiB in {c['start_to_isr_s']} s from process start "
                     f"({c['ready_to_isr_s']} s after it listened)")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition of 8 s, catch-up of 256 MiB")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--duration", type=int, default=None, help="seconds per measured run (20)")
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog")))
    ap.add_argument("--only", choices=["shardlog", "kafka"], default=None)
    ap.add_argument("--no-catchup", action="store_true")
    ap.add_argument("--workloads", default="", help="a subset, e.g. RF3-lat (to try a lever)")
    ap.add_argument("--shardlog-args", default="", help="extra shardlog serve flags (a lever to try)")
    a = ap.parse_args()
    a.reps = a.reps or (1 if a.quick else 2)
    a.duration = a.duration or (8 if a.quick else 20)
    a.probe_records = 100_000 if a.quick else 300_000
    a.catchup_records = GIB_RECORDS // 4 if a.quick else GIB_RECORDS
    a.classpath = kafka_classpath()
    a.out = REPO / "benches" / "results" / "cluster" / time.strftime("%Y%m%d-%H%M%S")
    (a.out / "runs").mkdir(parents=True)
    a.work = Path(os.environ.get("BENCH_WORK", REPO / "target" / "bench-work")) / "cluster"
    kinds = [a.only] if a.only else ["shardlog", "kafka"]
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    (a.out / "meta.json").write_text(json.dumps({"argv": sys.argv, "reps": a.reps, "duration_s": a.duration,
                                                 "shardlog_rev": rev, "cores": os.cpu_count()}) + "\n")
    rows, catchups, sized = [], [], {}
    for rep in range(1, a.reps + 1):
        for kind in kinds:
            subprocess.run(["rm", "-rf", str(a.work)])
            rows += one_rep(a, kind, rep, sized)
    if not a.no_catchup:
        for kind in kinds:
            subprocess.run(["rm", "-rf", str(a.work)])
            catchups.append(catchup(a, kind))
    subprocess.run(["rm", "-rf", str(a.work)])
    text = summarize(a, rows, catchups)
    (a.out / "summary.md").write_text(text)
    print(text)
    print(f"results: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
