#!/usr/bin/env python3
"""Samples the CPU of a broker process and of the share benchmark's JVM every 0.25 s
until the broker exits (the split behind docs/benchmarks.md's share-group drain figures).

    python3 benches/share_cpu_watch.py BROKER_PID > cpu.txt &
    java -jar tests/java/target/clienttool.jar share-bench ... --rate 0

Each line: seconds since start, the broker's CPU and the JVM's (percent of one core).
"""
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
PERIOD_S = 0.25


def ticks(pid: int):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def bench_jvms() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "clienttool.jar share-bench"], capture_output=True, text=True).stdout.split()
    return [int(x) for x in out]


def main() -> int:
    broker = int(sys.argv[1])
    prev = None
    t0 = time.time()
    while (b := ticks(broker)) is not None:
        now = (b, sum(ticks(p) or 0 for p in bench_jvms()))
        if prev is not None:
            pct = [100 * (n - p) / HZ / PERIOD_S for n, p in zip(now, prev)]
            print(f"{time.time() - t0:5.2f} broker {pct[0]:5.0f}% java {pct[1]:5.0f}%", flush=True)
        prev = now
        time.sleep(PERIOD_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
