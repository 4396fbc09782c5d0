#!/usr/bin/env python3
"""A/B of two shardlog builds over SASL_SSL and PLAINTEXT (issue 24's levers): for each
repetition, each build in turn (alternating, never both running) serves W1 (Kafka's
ProducerPerformance, 1 KiB records, 6 partitions, acks=1) and W4 (ConsumerPerformance over a
pre-filled topic) over both listeners, as `security_bench.py` configures them. Reports the
median MB/s and broker CPU seconds per GB of each build and the B/A ratios: the broker's
CPU per GB is the figure the change can move (the Java client shares the 2 cores).

    python3 benches/tls_ab.py A_BINARY B_BINARY [--reps 3] [--records 600000]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import security_bench as sb  # noqa: E402


def one(cp: str, tls: dict, work: Path, binary: Path, records: int) -> dict:
    b = sb.Broker("shardlog", work, 29192, 29197, tls, cp, binary)
    b.start()
    try:
        r = {}
        for secure in (True, False):
            r[f"W1-{'sasl_ssl' if secure else 'plaintext'}"] = sb.w1(cp, b, secure, records)
        sb.create_topic(cp, b, "w4")
        sb.tool(cp, "ProducerPerformance", "--topic", "w4", "--num-records", str(records), "--record-size", "1024",
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap(False)}", "acks=1",
                "batch.size=65536", "linger.ms=5")
        for secure in (True, False):
            r[f"W4-{'sasl_ssl' if secure else 'plaintext'}"] = sb.w4(cp, b, secure, "w4", records)
        return r
    finally:
        b.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=600_000)
    args = ap.parse_args()
    cp = sb.classpath()
    work = Path(os.environ.get("BENCH_WORK", sb.ROOT / "target" / "bench-work")) / "tls-ab"
    t = sb.tls_material.make_cluster(work / "tls")
    tls = {"pem": t.node_pem, "p12": t.node_pem.parent / "node.p12", "ca": t.ca_pem}
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for rep in range(args.reps):
        for label, binary in (("A", args.a), ("B", args.b)) if rep % 2 == 0 else (("B", args.b), ("A", args.a)):
            print(f"tls_ab: rep {rep + 1} {label}", file=sys.stderr)
            runs[label].append(one(cp, tls, work / "broker", Path(binary), args.records))
    print(f"{'workload':<16}{'A MB/s':>9}{'B MB/s':>9}{'B/A':>7}{'A cpu s/GB':>12}{'B cpu s/GB':>12}{'B/A':>7}")
    summary = {}
    for w in runs["A"][0]:
        med = {k: {m: statistics.median(r[w].get(m, 0) for r in runs[k])
                   for m in ("mb_s", "broker_cpu_s_per_gb", "client_cpu_s_per_gb")} for k in runs}
        summary[w] = med
        a, b = med["A"], med["B"]
        print(f"{w:<16}{a['mb_s']:>9.1f}{b['mb_s']:>9.1f}{b['mb_s'] / a['mb_s']:>7.2f}"
              f"{a['broker_cpu_s_per_gb']:>12.2f}{b['broker_cpu_s_per_gb']:>12.2f}"
              f"{b['broker_cpu_s_per_gb'] / a['broker_cpu_s_per_gb']:>7.2f}"
              f"   client cpu s/GB {a['client_cpu_s_per_gb']:.2f} / {b['client_cpu_s_per_gb']:.2f}")
    out = sb.ROOT / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-tls-ab"
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.json").write_text(json.dumps({"a": args.a, "b": args.b, "runs": runs, "medians": summary}, indent=2))
    print(f"tls_ab: {out / 'runs.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
