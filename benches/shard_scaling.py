#!/usr/bin/env python3
"""Issue 29 point 4: what one shard costs against two, measured, for the scaling model in
docs/scaling.md.

For 1 and 2 shards (`serve --shards N`), alternating (A B A B), it runs:
  produce   W1's shape: 6 partitions, 1 KiB records, 64 KiB batches, acks=1, 2 connections,
            8 in flight, the maximum rate (native generator: one partition per request)
  produce-kafka-client   the same topic shape through Kafka's ProducerPerformance (one
            request carries every partition with a ready batch: what real clients send)
  consume   W4's shape: 6 partitions, 2 connections, a 1 GiB topic read from the start
and reads, around each run, the broker's CPU time (/proc) and its metrics (admin listener):
requests per shard, cross-shard messages, produce partition writes. Per run it prints MB/s,
broker CPU seconds per GB, requests and cross-shard messages per GB and per request.

On this 2-core machine the generator shares the cores with the broker, so MB/s with 2
shards is not "2 cores of broker": compare CPU seconds per GB (what a shard's core pays
for a GB) and cross-shard messages per request (what a second shard adds), which do not
depend on who else runs. `--reps` (default 3) and medians; quiet machine only; each broker's data (up to ~15 GB
at the maximum rate) is removed when it stops.

  python3 benches/shard_scaling.py [--bin target/release/shardlog] [--reps 3] [--out DIR]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
GB = 2**30


def cpu_s(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def metrics(admin):
    text = urllib.request.urlopen(f"http://{admin}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(shardlog_shard_requests_total|shardlog_shard_cross_shard_messages_total|"
                     r"shardlog_topic_produce_requests_total|shardlog_requests_total)\{([^}]*)\} ([0-9.e+]+)$", line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def total(m, name, label_filter=""):
    return sum(v for (n, labels), v in m.items() if n == name and label_filter in labels)


class Broker:
    def __init__(self, binary, shards, work, port):
        self.shards, self.port, self.admin = shards, port, f"127.0.0.1:{port + 1}"
        self.dir = Path(work) / f"shards{shards}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--config", str(ROOT / "tuning" / "throughput.toml"), "--shards", str(shards),
             "--listen", f"127.0.0.1:{port}", "--admin-listener", self.admin, "--data-dir", str(self.dir / "data"),
             "--flush", "never", "--log-level", "warn"],
            stdout=open(self.dir / "broker.log", "w"), stderr=subprocess.STDOUT)
        self.binary = binary
        for _ in range(150):
            if subprocess.run([str(binary), "topic", "list", "--bootstrap", self.bootstrap], capture_output=True).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"broker with {shards} shards did not start: {(self.dir / 'broker.log').read_text()[-2000:]}")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # A 15-s produce at the maximum leaves ~12 GB: do not keep it.
        shutil.rmtree(self.dir / "data", ignore_errors=True)


def native(b, mode, topic, *args):
    cmd = [str(b.binary), "bench", mode, "--bootstrap", b.bootstrap, "--topic", topic, "--partitions", "6",
           "--json", "--quiet", "--timeline-s", "0", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def producer_perf(b, topic, records, classpath):
    cmd = ["java", "-Xmx1g", "-cp", classpath, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
           "--num-records", str(records), "--record-size", "1024", "--throughput", "-1", "--producer-props",
           f"bootstrap.servers={b.bootstrap}", "acks=1", "batch.size=65536", "linger.ms=5", "compression.type=none",
           "enable.idempotence=false"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    last = [ln for ln in r.stdout.splitlines() if "records sent" in ln][-1]
    return {"mb_s": float(re.search(r"\(([\d.]+) MB/sec\)", last).group(1)), "bytes": records * 1024}


def measure(b, name, fn):
    m0, c0 = metrics(b.admin), cpu_s(b.proc.pid)
    result = fn()
    m1, c1 = metrics(b.admin), cpu_s(b.proc.pid)
    d = lambda n, f="": total(m1, n, f) - total(m0, n, f)
    requests = d("shardlog_shard_requests_total")
    cross = d("shardlog_shard_cross_shard_messages_total")
    gb = result["bytes"] / GB
    return {"shards": b.shards, "run": name, "mb_s": result["mb_s"], "gb": round(gb, 3),
            "cpu_s_per_gb": (c1 - c0) / gb, "requests_per_gb": requests / gb, "cross_shard_per_gb": cross / gb,
            "cross_shard_per_request": cross / requests if requests else 0.0,
            "partition_writes_per_request": d("shardlog_topic_produce_requests_total") / d("shardlog_requests_total", 'request="Produce"')
            if name.startswith("produce") and d("shardlog_requests_total", 'request="Produce"') else None}


def one_rep(binary, shards, work, port, seconds, classpath, rep):
    b = Broker(binary, shards, work, port)
    rows = []
    try:
        t = f"p-{rep}"
        r = lambda: native(b, "produce", t, "--acks", "1", "--batch-bytes", "65536", "--connections", "2", "--inflight", "8",
                           "--duration-s", str(seconds), "--warmup-s", "2")
        rows.append(measure(b, "produce", r))
        if classpath:
            t2 = f"k-{rep}"
            subprocess.run([str(binary), "topic", "create", t2, "--partitions", "6", "--bootstrap", b.bootstrap], check=True,
                           capture_output=True)
            rows.append(measure(b, "produce-kafka-client", lambda: producer_perf(b, t2, 1_000_000, classpath)))
        fill = f"c-{rep}"
        native(b, "produce", fill, "--acks", "1", "--batch-bytes", "65536", "--total-mb", "1024", "--warmup-s", "0")
        c = lambda: native(b, "consume", fill, "--connections", "2", "--warmup-s", "0", "--duration-s", "600")
        rows.append(measure(b, "consume", c))
    finally:
        b.stop()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "shardlog"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--port", type=int, default=29300)
    ap.add_argument("--work", default=str(ROOT / "target" / "shard-scaling"))
    ap.add_argument("--out", default=None, help="write rows and medians as JSON here")
    ap.add_argument("--no-kafka-client", action="store_true", help="skip ProducerPerformance")
    a = ap.parse_args()
    classpath = None
    if not a.no_kafka_client:
        subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "fetch"], check=True)
        classpath = subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "classpath"], check=True, capture_output=True,
                                   text=True).stdout.strip()
    rows = []
    for rep in range(a.reps):
        for shards in (1, 2):
            for r in one_rep(Path(a.bin), shards, a.work, a.port, a.seconds, classpath, rep):
                print(json.dumps(r), file=sys.stderr)
                rows.append(r)
    keys = ["mb_s", "cpu_s_per_gb", "requests_per_gb", "cross_shard_per_gb", "cross_shard_per_request", "partition_writes_per_request"]
    medians = []
    print(f"{'run':<22}{'shards':>7}" + "".join(f"{k:>30}" for k in keys))
    for run in ("produce", "produce-kafka-client", "consume"):
        for shards in (1, 2):
            sel = [r for r in rows if r["run"] == run and r["shards"] == shards]
            if not sel:
                continue
            med = {"run": run, "shards": shards, "n": len(sel)}
            for k in keys:
                vals = [r[k] for r in sel if r[k] is not None]
                med[k] = statistics.median(vals) if vals else None
            medians.append(med)
            print(f"{run:<22}{shards:>7}" + "".join(f"{(med[k] if med[k] is not None else float('nan')):>30.3f}" for k in keys))
    if a.out:
        Path(a.out).write_text(json.dumps({"rows": rows, "medians": medians}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
