#!/usr/bin/env python3
"""W12, partition scale on one node (issue 29), shardlog against Apache Kafka 4.4 in one
run. `scripts/bench.sh --partitions` runs it.

For each count N (10k, 50k, 100k; --quick 2k), on each broker in turn (never both
running), RF 1, topics of 1,000 partitions (the last one smaller):
- create: time from the first CreateTopics until a Metadata answer shows all N
  partitions with a leader;
- RSS: the broker's resident memory empty (before creating) and idle with N partitions
  (10 s after the creation), and the difference per partition;
- Metadata: latency of a Metadata request for every topic (median and max of 5);
- produce: a confluent-kafka producer (acks=all, linger.ms 1) at RATE (500) records/s of
  100 bytes for SECONDS, record i to partition i mod N of the topics in turn, so every
  partition is written; p50 / p99 / max of the time from produce() to its delivery report
  (and the client's CPU seconds: librdkafka's cost grows with the partitions);
- restart, clean: SIGTERM, wait for the exit (the shutdown time), start again; the
  restart time runs from the new process to a Metadata answer showing all N partitions
  with a leader and a produce to the last partition acknowledged;
- restart after kill -9: the same after SIGKILL.
Both brokers acknowledge without fsync (Kafka's default; shardlog --flush never); the
broker's own start-up (JVM included) counts in its restart time, as an operator sees it.
Kafka: heap KAFKA_HEAP (default -Xmx4g, 1 GiB does not hold 100k partitions' metadata),
RLIMIT_NOFILE raised to fs.nr_open (shardlog raises its own at start), and, past 20k
partitions, vm.max_map_count to 262,144 (as root; Kafka's operations guide asks for it).
A broker that cannot reach a step within its time limit (or dies) ends that count's
figures for it: the row says where it stopped, which is a finding, not a failure.

Output: a table with the figures and shardlog/Kafka ratios on stdout, and
results/<stamp>-partitions/summary.json (--out to choose). `--smoke` (CI): one count of
200 partitions on shardlog only, short produce; asserts only that a row was produced.
"""
from __future__ import annotations

import argparse
import json
import resource
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
TOPIC_SIZE = 1000


def log(msg: str) -> None:
    print(f"partition-scale: {msg}", file=sys.stderr, flush=True)


def quiet(bootstrap: str) -> dict:
    """A client's configuration without librdkafka's connect-refused lines (the broker
    is polled while it starts)."""
    return {"bootstrap.servers": bootstrap, "log_level": 0}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def raise_open_files() -> None:
    """Kafka's operators raise `ulimit -n` for many partitions (shardlog raises its own):
    the Kafka process gets fs.nr_open, as shardlog does as root."""
    ceiling = int(Path("/proc/sys/fs/nr_open").read_text())
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, ceiling))
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# Kafka maps two index files per segment: 100k partitions need more than the default
# vm.max_map_count (65,530), as Kafka's operations guide says.
MAX_MAP_COUNT = 262_144


def raise_max_map_count() -> None:
    path = Path("/proc/sys/vm/max_map_count")
    if int(path.read_text()) < MAX_MAP_COUNT:
        try:
            path.write_text(str(MAX_MAP_COUNT))
            log(f"vm.max_map_count raised to {MAX_MAP_COUNT} (Kafka's index mmaps)")
        except OSError as e:
            log(f"cannot raise vm.max_map_count ({e}): Kafka may fail past ~30k partitions")


class Broker:
    """One node of `kind` on `work`; `start` keeps the data there (a restart)."""

    def __init__(self, kind: str, work: Path, port: int, binary: Path):
        self.kind, self.work, self.port, self.binary = kind, work, port, binary
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.kind == "kafka":
            return int((self.work / "kafka.pid").read_text())
        assert self.proc is not None
        return self.proc.pid

    def wipe(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)

    def start(self, timeout_s: float) -> None:
        """Starts the process and returns once it answers Metadata."""
        if self.kind == "kafka":
            env = {**os.environ, "KAFKA_HEAP": os.environ.get("KAFKA_HEAP", "-Xmx4g"),
                   "KAFKA_CONTROLLER_PORT": str(self.port + 1), "KAFKA_START_TIMEOUT_S": str(int(timeout_s)),
                   "KAFKA_EXTRA_PROPS": "num.recovery.threads.per.data.dir=2\n"}
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "start", str(self.work), str(self.port)],
                           check=True, env=env, stdout=subprocess.DEVNULL, preexec_fn=raise_open_files)
        else:
            args = [str(self.binary), "serve", "--config", str(ROOT / "tuning" / "throughput.toml"),
                    "--data-dir", str(self.work / "data"), "--flush", "never", "--log-level", os.environ.get("BENCH_LOG_LEVEL", "warn"),
                    "--max-partitions-per-shard", "100000",
                    "--listen", self.bootstrap, "--admin-listener", f"127.0.0.1:{self.port + 1}"]
            self.proc = subprocess.Popen(args, stdout=open(self.work / "broker.log", "ab"), stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if not self.alive():
                raise RuntimeError(f"{self.kind} exited during start-up")
            try:
                AdminClient(quiet(self.bootstrap)).list_topics(timeout=2)
                return
            except Exception:
                time.sleep(0.1)
        raise TimeoutError(f"{self.kind} did not answer within {timeout_s} s")

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
            return self.kind == "kafka" or self.proc.poll() is None
        except (OSError, ValueError, FileNotFoundError):
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 300) -> float:
        """Sends `sig` and waits for the exit; the seconds it took (SIGKILL after the limit)."""
        pid, began = self.pid, time.monotonic()
        os.kill(pid, sig)
        while time.monotonic() - began < timeout_s:
            if self.kind != "kafka":
                if self.proc.poll() is not None:
                    return time.monotonic() - began
            else:
                try:
                    os.kill(pid, 0)
                    if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                        return time.monotonic() - began
                except (OSError, FileNotFoundError):
                    return time.monotonic() - began
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        return float("inf")

    def close(self) -> None:
        if self.alive():
            self.stop(signal.SIGKILL, timeout_s=30)


def topic_sizes(n: int) -> list[tuple[str, int]]:
    return [(f"scale-{i}", min(TOPIC_SIZE, n - i * TOPIC_SIZE)) for i in range((n + TOPIC_SIZE - 1) // TOPIC_SIZE)]


def led_partitions(bootstrap: str) -> int:
    """Partitions of the scale topics with a leader, per one Metadata answer (0 on error)."""
    try:
        md = AdminClient(quiet(bootstrap)).list_topics(timeout=30)
    except Exception:
        return 0
    return sum(1 for name, t in md.topics.items() if name.startswith("scale-")
               for p in t.partitions.values() if p.leader >= 0 and p.error is None)


def wait_led(b: Broker, n: int, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and b.alive():
        if led_partitions(b.bootstrap) >= n:
            return True
        time.sleep(0.2)
    return False


def create(b: Broker, n: int, timeout_s: float) -> float | None:
    admin = AdminClient(quiet(b.bootstrap))
    began = time.monotonic()
    # Five topics per CreateTopics, as a provisioning script might send them (Kafka
    # refuses a request making over 10,000 metadata records: POLICY_VIOLATION).
    topics = topic_sizes(n)
    for i in range(0, len(topics), 5):
        futures = admin.create_topics([NewTopic(t, k, 1) for t, k in topics[i:i + 5]], request_timeout=timeout_s)
        for f in futures.values():
            f.result(timeout_s)
    return time.monotonic() - began if wait_led(b, n, timeout_s) else None


def metadata_latency(b: Broker) -> list[float]:
    admin = AdminClient(quiet(b.bootstrap))
    admin.list_topics(timeout=30)  # connected
    out = []
    for _ in range(5):
        began = time.monotonic()
        admin.list_topics(timeout=60)
        out.append((time.monotonic() - began) * 1000)
    return out


def produce(b: Broker, n: int, rate: int, seconds: float) -> dict:
    """Spread records over every partition at `rate`; delivery latencies in ms."""
    p = Producer({**quiet(b.bootstrap), "acks": "all", "linger.ms": 1, "enable.idempotence": False,
                  "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 120_000})
    lat: list[float] = []
    errors = [0]

    def report(sent_at):
        def cb(err, _msg):
            if err is not None:
                errors[0] += 1
            else:
                lat.append((time.monotonic() - sent_at) * 1000)
        return cb

    topics = topic_sizes(n)
    value = b"x" * 100
    total = int(rate * seconds)
    cpu, began = os.times(), time.monotonic()
    for i in range(total):
        due = began + i / rate
        while time.monotonic() < due:
            p.poll(0.0005)
        topic, size = topics[(i // TOPIC_SIZE) % len(topics)]
        p.produce(topic, value, partition=i % size, on_delivery=report(time.monotonic()))
        p.poll(0)
    p.flush(120)
    used = os.times()
    lat.sort()
    q = lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))], 2) if lat else None
    return {"records": total, "delivered": len(lat), "errors": errors[0], "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": q(1.0),
            "client_cpu_s": round(used.user + used.system - cpu.user - cpu.system, 1)}


def probe_last(b: Broker, n: int, timeout_s: float) -> bool:
    """One acks=all produce to the last partition, acknowledged."""
    topic, size = topic_sizes(n)[-1]
    p = Producer({**quiet(b.bootstrap), "acks": "all", "message.timeout.ms": int(timeout_s * 1000)})
    done: list = []
    p.produce(topic, b"probe", partition=size - 1, on_delivery=lambda err, _m: done.append(err))
    p.flush(timeout_s)
    return done == [None]


def restart(b: Broker, n: int, sig: int, timeout_s: float) -> dict:
    stopped = b.stop(sig)
    began = time.monotonic()
    b.start(timeout_s)
    ok = wait_led(b, n, max(1.0, timeout_s - (time.monotonic() - began))) and probe_last(b, n, 60)
    return {"stop_s": round(stopped, 2) if sig == signal.SIGTERM else None,
            "restart_s": round(time.monotonic() - began, 2) if ok else None}


def one_count(b: Broker, n: int, a) -> dict:
    row: dict = {"broker": b.kind, "partitions": n}
    b.wipe()
    try:
        b.start(120)
        time.sleep(3)
        row["rss_empty_mib"] = round(rss_mib(b.pid), 1)
        t = create(b, n, a.timeout)
        row["create_s"] = round(t, 2) if t is not None else None
        if t is None:
            row["stopped_at"] = "create"
            return row
        time.sleep(10)
        row["rss_idle_mib"] = round(rss_mib(b.pid), 1)
        row["rss_per_partition_kib"] = round((row["rss_idle_mib"] - row["rss_empty_mib"]) * 1024 / n, 2)
        md = metadata_latency(b)
        row["metadata_ms_median"], row["metadata_ms_max"] = round(statistics.median(md), 1), round(max(md), 1)
        row["produce"] = produce(b, n, a.rate, a.seconds)
        row["clean"] = restart(b, n, signal.SIGTERM, a.timeout)
        if row["clean"]["restart_s"] is None:
            row["stopped_at"] = "clean restart"
            return row
        row["kill9"] = restart(b, n, signal.SIGKILL, a.timeout)
    except Exception as e:  # a finding for this broker and count, recorded
        row["stopped_at"] = f"{type(e).__name__}: {e}"[:300]
        log(f"{b.kind} {n}: {row['stopped_at']}")
    finally:
        b.close()
        for name in ("broker.log", "kafka.log"):  # kept for reading a row's stop
            if (b.work / name).exists():
                shutil.copy(b.work / name, a.out / f"{b.kind}-{n}.log")
    return row


def table(rows: list[dict]) -> str:
    cols = [("create_s", "create s"), ("rss_empty_mib", "RSS empty MiB"), ("rss_per_partition_kib", "KiB/partition"),
            ("metadata_ms_median", "Metadata ms"), ("produce.p99_ms", "produce p99 ms"), ("produce.max_ms", "produce max ms"),
            ("clean.stop_s", "shutdown s"), ("clean.restart_s", "restart s"), ("kill9.restart_s", "restart kill -9 s")]

    def get(r, key):
        v = r
        for k in key.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        return v

    lines = ["| partitions | figure | shardlog | Kafka | shardlog/Kafka |", "|---|---|---|---|---|"]
    for n in sorted({r["partitions"] for r in rows}):
        sl = next((r for r in rows if r["partitions"] == n and r["broker"] == "shardlog"), {})
        kf = next((r for r in rows if r["partitions"] == n and r["broker"] == "kafka"), {})
        for key, name in cols:
            x, y = get(sl, key), get(kf, key)
            ratio = f"{x / y:.2f}" if isinstance(x, (int, float)) and isinstance(y, (int, float)) and y else "-"
            lines.append(f"| {n} | {name} | {x if x is not None else '-'} | {y if y is not None else '-'} | {ratio} |")
        for r in (sl, kf):
            if r.get("stopped_at"):
                lines.append(f"| {n} | {r['broker']} stopped at | {r['stopped_at']} | | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, default=ROOT / "target" / "release" / "shardlog")
    ap.add_argument("--quick", action="store_true", help="2,000 partitions, 10 s of produce")
    ap.add_argument("--smoke", action="store_true", help="CI: 200 partitions, shardlog only, 2 s of produce")
    ap.add_argument("--counts", default="10000,50000,100000")
    ap.add_argument("--brokers", default="shardlog,kafka")
    # librdkafka's own cost grows with the partitions it writes to: at 2,000 records/s over
    # 10k partitions the Python client used 1.5 cores and its queueing dominated both
    # brokers' figures (p50 0.7 s and 2 s); at 500/s it measures the broker.
    ap.add_argument("--rate", type=int, default=500, help="records/s of the produce step")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--timeout", type=float, default=900, help="limit of each step, s")
    ap.add_argument("--shardlog-port", type=int, default=29092, help="its admin listener takes the next port")
    ap.add_argument("--work", type=Path, default=ROOT / "target" / "bench-work" / "partitions")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.quick:
        a.counts, a.seconds = "2000", 10
    if a.smoke:
        a.counts, a.brokers, a.seconds, a.rate, a.timeout = "200", "shardlog", 2, 500, 120
    counts = [int(c) for c in a.counts.split(",")]
    a.out = a.out or ROOT / "results" / (time.strftime("%Y%m%d-%H%M%S") + "-partitions")
    a.out.mkdir(parents=True, exist_ok=True)
    if "kafka" in a.brokers and max(counts) > 20_000:
        raise_max_map_count()
    rows = []
    for n in counts:
        for kind in a.brokers.split(","):
            log(f"{kind}: {n} partitions")
            b = Broker(kind, a.work / kind, a.shardlog_port if kind == "shardlog" else 39092, a.bin)
            rows.append(one_count(b, n, a))
            log(json.dumps(rows[-1]))
    out = a.out
    (out / "summary.json").write_text(json.dumps({"workload": "W12", "rate": a.rate, "seconds": a.seconds, "rows": rows}, indent=1))
    print(table(rows))
    print(f"\nsummary: {out / 'summary.json'}")
    if a.smoke:
        # CI smoke: a result row with every step reached, no timing asserted.
        r = rows[0]
        assert "stopped_at" not in r and r.get("kill9", {}).get("restart_s") is not None, r
    shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
