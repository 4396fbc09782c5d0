#!/usr/bin/env python3
"""W1 and W4 over SASL_SSL (TLS 1.3, AES-GCM, SCRAM-SHA-512) against shardlog and Apache
Kafka 4.4 configured identically, each beside its own PLAINTEXT figure (issue 24's
performance point). `scripts/bench.sh --secure` runs it.

Both brokers: one node, group.initial.rebalance.delay.ms=0, a PLAINTEXT and a SASL_SSL listener, the same PEM/PKCS12
certificate (openssl), TLS 1.3 only with TLS_AES_128_GCM_SHA256, SCRAM-SHA-512 user
`bench`, acknowledgement without fsync (Kafka's default; shardlog --flush never), one
after the other (never both running). Generators: Kafka's own ProducerPerformance (W1:
1 KiB records, 6 partitions, acks=1, batch 64 KiB, linger 5 ms, as fast as it goes) and
ConsumerPerformance (W4: a pre-filled 6-partition topic read whole; MB/s over the whole
read including the group join, and fetch MB/s without it), with the same client
settings file for both brokers: the same client work on both sides, so the ratio is the
brokers'. Broker CPU seconds per GB from /proc/<pid>/stat, the generator's (client CPU
s/GB) from the rusage of the waited-for Java process. On a 2-core machine the Java
client shares the cores with the broker (and its TLS costs it more than the broker's
does): figures are for this machine, compared side by side, never as absolutes.

Output: a table on stdout and results/<stamp>-secure/summary.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import tls_material  # noqa: E402

PASSWORD = "bench-secret"
SUITE = "TLS_AES_128_GCM_SHA256"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    """CPU seconds of the waited-for child processes so far (the Java generators)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def classpath() -> str:
    subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "fetch"], check=True, stdout=subprocess.DEVNULL)
    return subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "classpath"], check=True, capture_output=True, text=True).stdout.strip()


def tool(cp: str, cls: str, *args: str, timeout: float = 900) -> str:
    r = subprocess.run(["java", "-Xmx1g", "-cp", cp, f"org.apache.kafka.tools.{cls}", *args],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{cls} failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


class Broker:
    def __init__(self, kind: str, work: Path, plain: int, secure: int, tls, cp: str, binary: Path):
        self.kind, self.work, self.plain, self.secure, self.tls, self.cp, self.binary = kind, work, plain, secure, tls, cp, binary
        self.pid = 0
        self.proc = None

    def start(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        common = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.enabled.protocols": "TLSv1.3",
            "ssl.cipher.suites": SUITE,
        }
        listeners = f"PLAINTEXT://127.0.0.1:{self.plain},SASL_SSL://127.0.0.1:{self.secure}"
        if self.kind == "kafka":
            props = {**common, "listeners": f"{listeners},CONTROLLER://127.0.0.1:{self.plain + 1}",
                     "advertised.listeners": listeners,
                     "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.tls["p12"]),
                     "ssl.keystore.password": tls_material.PASSWORD, "ssl.key.password": tls_material.PASSWORD,
                     "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                         "org.apache.kafka.common.security.scram.ScramLoginModule required;"}
            env = {**os.environ, "KAFKA_HEAP": "-Xmx1g", "KAFKA_CONTROLLER_PORT": str(self.plain + 1),
                   "KAFKA_EXTRA_PROPS": "\n".join(f"{k}={v}" for k, v in props.items())}
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "start", str(self.work), str(self.plain)],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            self.pid = int((self.work / "kafka.pid").read_text())
        else:
            args = [str(self.binary), "serve", "--config", str(ROOT / "tuning" / "throughput.toml"),
                    "--data-dir", str(self.work / "data"), "--flush", "never", "--log-level", "warn",
                    # As scripts/kafka_local.sh configures Kafka: a consumer group forms at once.
                    "--group-initial-rebalance-delay-ms", "0",
                    "--listeners", listeners, "--ssl-keystore-type", "PEM", "--ssl-keystore-location", str(self.tls["pem"])]
            for k, v in common.items():
                args += ["--" + k.replace(".", "-"), v]
            self.proc = subprocess.Popen(args, stdout=open(self.work / "broker.log", "wb"), stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            self.pid = self.proc.pid
            for _ in range(200):
                if b"listening on" in (self.work / "broker.log").read_bytes():
                    break
                if self.proc.poll() is not None:
                    raise RuntimeError((self.work / "broker.log").read_text()[-3000:])
                time.sleep(0.1)
        # The SCRAM user, through the PLAINTEXT listener.
        for _ in range(30):
            r = subprocess.run(["java", "-Xmx256m", "-cp", self.cp, "org.apache.kafka.tools.ConfigCommand",
                                "--bootstrap-server", f"127.0.0.1:{self.plain}", "--alter", "--entity-type", "users",
                                "--entity-name", "bench", "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"],
                               capture_output=True, text=True, timeout=120)
            if r.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError(f"cannot create the SCRAM user: {r.stdout}{r.stderr}")

    def stop(self) -> None:
        if self.kind == "kafka":
            subprocess.run([str(ROOT / "scripts" / "kafka_local.sh"), "stop", str(self.work)], stdout=subprocess.DEVNULL)
        elif self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def client_config(self, secure: bool) -> Path:
        p = self.work / ("secure.properties" if secure else "plain.properties")
        if secure:
            p.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                         f'username="bench" password="{PASSWORD}";\n'
                         f"ssl.truststore.type=PEM\nssl.truststore.location={self.tls['ca']}\n"
                         f"ssl.enabled.protocols=TLSv1.3\nssl.cipher.suites={SUITE}\n")
        else:
            p.write_text("security.protocol=PLAINTEXT\n")
        return p

    def bootstrap(self, secure: bool) -> str:
        return f"127.0.0.1:{self.secure if secure else self.plain}"


def create_topic(cp: str, b: Broker, topic: str) -> None:
    tool(cp, "TopicCommand", "--bootstrap-server", b.bootstrap(False), "--create", "--topic", topic, "--partitions", "6")


def w1(cp: str, b: Broker, secure: bool, records: int) -> dict:
    topic = f"w1-{'secure' if secure else 'plain'}"
    create_topic(cp, b, topic)
    c0, g0 = cpu_s(b.pid), client_cpu_s()
    out = tool(cp, "ProducerPerformance", "--topic", topic, "--num-records", str(records), "--record-size", "1024",
               "--throughput", "-1", "--producer.config", str(b.client_config(secure)), "--producer-props",
               f"bootstrap.servers={b.bootstrap(secure)}", "acks=1", "batch.size=65536", "linger.ms=5",
               "compression.type=none", "enable.idempotence=false")
    cpu, gen = cpu_s(b.pid) - c0, client_cpu_s() - g0
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    mb_s = float(re.search(r"\(([\d.]+) MB/sec\)", last).group(1))
    p99 = float(re.search(r"([\d.]+) ms 99th", last).group(1))
    mb = records / 1024
    return {"mb_s": mb_s, "p99_ms": p99, "broker_cpu_s_per_gb": round(cpu / mb * 1024, 2),
            "client_cpu_s_per_gb": round(gen / mb * 1024, 2)}


def w4(cp: str, b: Broker, secure: bool, topic: str, records: int) -> dict:
    c0, g0 = cpu_s(b.pid), client_cpu_s()
    out = tool(cp, "ConsumerPerformance", "--bootstrap-server", b.bootstrap(secure), "--topic", topic,
               "--messages", str(records), "--command-config", str(b.client_config(secure)),
               "--group", f"w4-{'secure' if secure else 'plain'}-{time.time_ns()}", "--timeout", "60000")
    cpu, gen = cpu_s(b.pid) - c0, client_cpu_s() - g0
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    row = [line for line in out.splitlines() if re.match(r"^\d{4}-", line)][-1].split(",")
    return {"mb_s": float(row[3]), "rebalance_ms": int(row[6]), "fetch_mb_s": float(row[8]),
            "broker_cpu_s_per_gb": round(cpu / float(row[2]) * 1024, 2),
            "client_cpu_s_per_gb": round(gen / float(row[2]) * 1024, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "shardlog"))
    a = ap.parse_args()
    w1_records = 300_000 if a.quick else 2_000_000
    w4_records = 300_000 if a.quick else 1_000_000
    cp = classpath()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "results" / f"{stamp}-secure"
    work = Path(os.environ.get("BENCH_WORK", ROOT / "target" / "bench-work")) / "secure"
    out.mkdir(parents=True, exist_ok=True)
    t = tls_material.make_cluster(work / "tls")
    tls = {"pem": t.node_pem, "p12": t.node_pem.parent / "node.p12", "ca": t.ca_pem}
    results: dict[str, dict] = {}
    for kind, port in (("shardlog", 29192), ("kafka", 39192)):
        b = Broker(kind, work / kind, port, port + 5, tls, cp, Path(a.bin))
        print(f"security_bench: {kind}", file=sys.stderr)
        b.start()
        try:
            r: dict[str, dict] = {}
            for secure in (False, True):
                r[f"W1-{'sasl_ssl' if secure else 'plaintext'}"] = w1(cp, b, secure, w1_records)
            create_topic(cp, b, "w4")
            tool(cp, "ProducerPerformance", "--topic", "w4", "--num-records", str(w4_records), "--record-size", "1024",
                 "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap(False)}", "acks=1",
                 "batch.size=65536", "linger.ms=5")
            for secure in (False, True):
                r[f"W4-{'sasl_ssl' if secure else 'plaintext'}"] = w4(cp, b, secure, "w4", w4_records)
            results[kind] = r
        finally:
            b.stop()
    summary = {"suite": SUITE, "protocol": "TLSv1.3", "mechanism": "SCRAM-SHA-512", "results": results, "ratios": {}}
    print(f"{'workload':<18}{'shardlog MB/s':>15}{'kafka MB/s':>12}{'ratio':>8}{'sl cpu s/GB':>13}{'kafka cpu s/GB':>16}"
          f"{'client cpu s/GB sl / kafka':>28}")
    for w in results["shardlog"]:
        s, k = results["shardlog"][w], results["kafka"][w]
        ratio = s["mb_s"] / k["mb_s"] if k["mb_s"] else 0
        summary["ratios"][w] = round(ratio, 2)
        print(f"{w:<18}{s['mb_s']:>15.1f}{k['mb_s']:>12.1f}{ratio:>8.2f}{s['broker_cpu_s_per_gb']:>13.2f}{k['broker_cpu_s_per_gb']:>16.2f}"
              f"{s['client_cpu_s_per_gb']:>20.2f} / {k['client_cpu_s_per_gb']:.2f}")
        if "fetch_mb_s" in s:
            print(f"{'  fetch only':<18}{s['fetch_mb_s']:>15.1f}{k['fetch_mb_s']:>12.1f}{s['fetch_mb_s'] / k['fetch_mb_s']:>8.2f}"
                  f"   (group join {s['rebalance_ms']} / {k['rebalance_ms']} ms)")
    for kind in ("shardlog", "kafka"):
        for w in ("W1", "W4"):
            tls_share = results[kind][f"{w}-sasl_ssl"]["mb_s"] / results[kind][f"{w}-plaintext"]["mb_s"]
            summary["ratios"][f"{kind}-{w}-sasl_ssl/plaintext"] = round(tls_share, 2)
            print(f"{kind} {w}: SASL_SSL / PLAINTEXT = {tls_share:.2f}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"security_bench: {out / 'summary.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
