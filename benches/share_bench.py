#!/usr/bin/env python3
"""Share groups (KIP-932) against shardlog and Apache Kafka 4.4 in one run (issue 27's
performance point). `scripts/bench.sh --share` runs it.

Workload: one partition, four KafkaShareConsumer 4.4 (explicit acknowledgement, ACCEPT
sent with the next poll), 1 KiB records, in one JVM with the producer (the client tool's
`share-bench`, tests/java/.../ShareBench.java), so end-to-end latency is one clock's:
- fixed rate: the consumers join, then the producer sends at RATE records/s (acks=1,
  linger 0); delivered records/s and end-to-end p50 / p99 / p99.9;
- maximum: the topic is filled first (acks=1, 64 KiB batches), then the four consumers
  drain it from the start; delivered records/s from the first delivery to the last
  (SHARE_MAX_RECORDS records, 300,000 by default).
Both brokers: one node, acknowledgement without fsync (Kafka's default; shardlog --flush
never), group.initial.rebalance.delay.ms=0, one after the other (never both running),
alternating A B A B over the repetitions. On this 2-core machine the Java client shares
the cores with the broker: figures are for side-by-side comparison, never absolutes.

Each workload also records the broker process's CPU seconds (/proc/<pid>/stat): on this
machine the drain is bound by the Java client's CPU (its acknowledgement bookkeeping), so
the broker's own cost per record shows what the delivered rate cannot.

Output: a table with medians and shardlog/Kafka ratios on stdout, and
benches/results/<stamp>-share/summary.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JAR = ROOT / "tests" / "java" / "target" / "clienttool.jar"


def log(msg: str) -> None:
    print(f"share-bench: {msg}", file=sys.stderr, flush=True)


class Broker:
    def __init__(self, kind: str, work: Path, port: int, binary: Path):
        self.kind, self.work, self.port, self.binary = kind, work, port, binary
        self.proc = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        if self.kind == "kafka":
            env = {**os.environ, "KAFKA_HEAP": "-Xmx1g", "KAFKA_CONTROLLER_PORT": str(self.port + 1)}
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "start", str(self.work), str(self.port)],
                           check=True, env=env, stdout=subprocess.DEVNULL)
        else:
            args = [str(self.binary), "serve", "--config", str(ROOT / "tuning" / "throughput.toml"),
                    "--data-dir", str(self.work / "data"), "--flush", "never", "--log-level", "warn",
                    "--group-initial-rebalance-delay-ms", "0", "--listen", self.bootstrap,
                    "--admin-listener", f"127.0.0.1:{self.port + 1}"]
            self.proc = subprocess.Popen(args, stdout=open(self.work / "broker.log", "wb"), stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
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

    @property
    def pid(self) -> int:
        if self.kind == "kafka":
            return int((self.work / "kafka.pid").read_text())
        return self.proc.pid

    def cpu_seconds(self) -> float:
        """The broker process's user + system CPU so far (/proc/<pid>/stat)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def create_topic(self, topic: str) -> None:
        for _ in range(60):
            r = subprocess.run([str(self.binary), "topic", "create", topic, "--partitions", "1", "--bootstrap", self.bootstrap],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError(f"cannot create {topic} on {self.kind}: {r.stdout}{r.stderr}")


def share_bench(b: Broker, topic: str, records: int, rate: int, out: Path) -> dict:
    b.create_topic(topic)
    cmd = ["java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAR), "share-bench",
           "--bootstrap", b.bootstrap, "--topic", topic, "--group", "g-" + topic, "--consumers", "4",
           "--records", str(records), "--size", "1024", "--rate", str(rate)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out.write_text(r.stdout + r.stderr)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"share-bench on {b.kind} failed ({r.returncode}): {r.stdout[-1500:]}{r.stderr[-1500:]}")
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "shardlog"))
    a = ap.parse_args()
    if not JAR.exists():
        subprocess.run(["mvn", "-q", "-f", str(ROOT / "tests" / "java" / "pom.xml"), "package", "-DskipTests"], check=True)
    subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "fetch"], check=True, stdout=subprocess.DEVNULL)
    reps = int(os.environ.get("BENCH_REPS", "1" if a.quick else "2"))
    rate = int(os.environ.get("SHARE_RATE", "2000" if a.quick else "5000"))
    fixed_records = rate * (10 if a.quick else 30)
    # The drain's size: 300k records drain in ~1-2 s, much of it the client JVM's warm-up;
    # SHARE_MAX_RECORDS sets a longer drain.
    max_records = int(os.environ.get("SHARE_MAX_RECORDS", "50000" if a.quick else "300000"))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "benches" / "results" / f"{stamp}-share"
    (out / "runs").mkdir(parents=True)
    work = Path(os.environ.get("BENCH_WORK", ROOT / "target" / "bench-work"))
    rows = []
    for rep in range(reps):
        for kind in ("shardlog", "kafka") if rep % 2 == 0 else ("kafka", "shardlog"):
            b = Broker(kind, work / f"share-{kind}", 29092 if kind == "shardlog" else 39092, Path(a.bin))
            b.start()
            try:
                for w, records, r in (("fixed", fixed_records, rate), ("max", max_records, 0)):
                    log(f"rep {rep} {kind} {w}")
                    cpu = b.cpu_seconds()
                    res = share_bench(b, f"share-{w}-{rep}", records, r, out / "runs" / f"{w}-{kind}-{rep}.out")
                    # Broker CPU over the whole workload (for "max": the fill and the drain).
                    res["broker_cpu_s"] = b.cpu_seconds() - cpu
                    rows.append({"rep": rep, "broker": kind, "workload": w, **res})
                    log(json.dumps(rows[-1]))
            finally:
                b.stop()

    def med(kind: str, w: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["broker"] == kind and r["workload"] == w)
    lines = [f"share groups: 1 partition, 4 consumers, explicit ack, 1 KiB; fixed {rate} rec/s x {fixed_records}, "
             f"max drain of {max_records}; medians of {reps}",
             f"{'':24}{'shardlog':>12}{'kafka':>12}{'ratio':>10}"]
    summary = {"rate": rate, "fixed_records": fixed_records, "max_records": max_records, "reps": reps, "rows": rows, "ratios": {}}
    for w, key, better in (("fixed", "records_s", "higher"), ("fixed", "p50_ms", "lower"), ("fixed", "p99_ms", "lower"),
                           ("fixed", "p999_ms", "lower"), ("max", "records_s", "higher"),
                           ("fixed", "broker_cpu_s", "lower"), ("max", "broker_cpu_s", "lower")):
        s, k = med("shardlog", w, key), med("kafka", w, key)
        ratio = (s / k if better == "higher" else k / s) if s and k else float("nan")
        summary["ratios"][f"{w}.{key}"] = ratio
        lines.append(f"{w + ' ' + key:24}{s:12.2f}{k:12.2f}{ratio:9.2f}x")
    lines.append("ratio: shardlog's advantage (throughput shardlog/kafka; latency kafka/shardlog)")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(lines))
    log(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
