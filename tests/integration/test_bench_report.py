"""scripts/bench_report.py on a synthetic results directory (no broker): `summarize`
writes report.md naming every workload, non-empty PNG plots, and the figures the inputs
imply (a shardlog/kafka ratio, the first-vs-last-window p99 drift, the worst p99 inside a
W11 drain window); old directories (W7/W8 = transactions) still summarize as T1/T2; `line`
works without matplotlib."""
import json
import subprocess
import sys
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "scripts" / "bench_report.py"
MB = 2**20


def timeline(minutes, interval_s, p99_at, mb_s=50.0):
    """A timeline of MINUTES at INTERVAL_S: p99 = p99_at(t_s), p50 a fifth of it."""
    n = int(minutes * 60 / interval_s)
    return [{"t_s": i * interval_s, "records": int(mb_s * 1024 * interval_s), "mb_s": mb_s, "p50_ms": p99_at(i * interval_s) / 5,
             "p99_ms": p99_at(i * interval_s), "p999_ms": p99_at(i * interval_s) * 2, "max_ms": p99_at(i * interval_s) * 3}
            for i in range(n)]


def result_json(mb_s, p99, elapsed_s=20.0, **extra):
    """One line as `shardlog bench --json` and producer-fleet print it."""
    lat = {"count": 1000, "p50_ms": p99 / 5, "p90_ms": p99 / 2, "p99_ms": p99, "p999_ms": p99 * 2, "p9999_ms": p99 * 3,
           "max_ms": p99 * 4} if p99 else {"count": 0}
    j = {"records": int(mb_s * 1024 * elapsed_s), "bytes": int(mb_s * MB * elapsed_s), "elapsed_s": elapsed_s,
         "records_s": mb_s * 1024, "mb_s": mb_s, "errors": 0, "latency": lat}
    j.update(extra)
    return json.dumps(j)


def producer_perf(mb_s, p99):
    return (f"100 records sent, 20.0 records/sec (0.02 MB/sec), 1.0 ms avg latency, 3.0 ms max latency.\n"
            f"1000000 records sent, {mb_s * 1024:.1f} records/sec ({mb_s:.2f} MB/sec), 3.0 ms avg latency, "
            f"{p99 * 3:.1f} ms max latency, 1 ms 50th, {p99 // 2} ms 95th, {p99} ms 99th, {p99 * 2} ms 99.9th.")


CONSUMER_PERF = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
                 "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n2026-01-01 00:00:00:000, 2026-01-01 00:00:10:000, 1024.0, "
                 "102.4, 1048576, 104857.6, 3, 9997, {mb}, {rec}")


class Results:
    def __init__(self, root: Path, meta: dict):
        self.root = root
        (root / "runs").mkdir(parents=True)
        (root / "meta.json").write_text(json.dumps(meta))

    def run(self, workload, broker, generator, kind, text, rep=1, status="ok", **line):
        name = f"{workload}-{kind}-{broker}-{generator}-r{rep}"  # as scripts/bench.sh names them
        (self.root / "runs" / f"{name}.out").write_text(text + "\n")
        line.update(workload=workload, broker=broker, generator=generator, kind=kind, rep=rep, durability="no-fsync",
                    cpu_s=10.0, rss_mb=400.0, warmup_s=3, status=status, out=f"runs/{name}.out")
        with open(self.root / "runs.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        return name


def step(before, after, at_s):
    return lambda t: before if t < at_s else after


def new_results(root: Path) -> Results:
    r = Results(root, {"quick": False, "profiled": False, "duration_s": 20, "warmup_s": 3, "reps": 1,
                       "record_bytes": 1024, "disk_seq_write_mb_s": 800.0, "kafka_version": "4.4.0"})
    r.run("W1", "shardlog", "native", "produce", result_json(600.0, 10.0))
    r.run("W1", "kafka", "native", "produce", result_json(300.0, 20.0))
    r.run("W1", "shardlog", "kafka-tools", "producer-perf", producer_perf(200.0, 30))
    r.run("W1", "kafka", "kafka-tools", "producer-perf", "", status="failed")
    fleet = {"tool": "producer-fleet", "producers": 50, "keys": 0, "compression": "none"}
    r.run("W7", "shardlog", "java-client", "fleet-50-fixed", result_json(100.0, 2.0, **fleet))
    r.run("W7", "kafka", "java-client", "fleet-50-fixed", result_json(100.0, 8.0, **fleet))
    r.run("W7", "shardlog", "java-client", "fleet-50-max", result_json(400.0, 40.0, **fleet))
    r.run("W7", "kafka", "java-client", "fleet-50-max", result_json(250.0, 60.0, **fleet))
    keyed = {"tool": "producer-fleet", "producers": 10, "keys": 10000, "compression": "lz4"}
    r.run("W8", "shardlog", "java-client", "keyed-lz4", result_json(300.0, 20.0, **keyed))
    r.run("W8", "kafka", "java-client", "keyed-lz4", result_json(100.0, 30.0, **keyed))
    # W9: 20 min, 60-s intervals; shardlog's p99 steps from 2 to 3 ms after 10 minutes.
    for broker, p99 in (("shardlog", step(2.0, 3.0, 600)), ("kafka", step(10.0, 10.0, 0))):
        r.run("W9", broker, "native", "retention", result_json(50.0, p99(0) * 1.5, elapsed_s=1200, rate_mb_s=50.0,
                                                               timeline_interval_s=60, timeline=timeline(20, 60, p99)))
    # W10: a short maximum-rate run sizes the soak (no targets), then a 30 min soak at 60-s
    # intervals; one 50 ms spike in its last window (the window's median ignores it).
    for broker in ("shardlog", "kafka"):
        r.run("W10", broker, "native", "soak-max", result_json(50.0, 9.0, timeline_interval_s=1,
                                                                timeline=timeline(1 / 3, 1, step(1.0, 9.0, 10))))
    spike = lambda t: 50.0 if t == 1620 else 1.0
    r.run("W10", "shardlog", "native", "soak", result_json(30.0, 1.2, elapsed_s=1800, rate_mb_s=30.0,
                                                             timeline_interval_s=60, timeline=timeline(30, 60, spike)))
    r.run("W10", "kafka", "native", "soak", result_json(30.0, 5.0, elapsed_s=1800, rate_mb_s=30.0,
                                                          timeline_interval_s=60, timeline=timeline(30, 60, lambda t: 5.0)))
    # W11: 60 s at 1-s intervals; the producer's p99 rises during each broker's drain window.
    r.run("W11", "shardlog", "native", "drain-produce",
          result_json(20.0, 1.5, elapsed_s=60, rate_mb_s=20.0, timeline_interval_s=1,
                      timeline=timeline(1, 1, lambda t: 4.0 if 20 <= t < 30 else 1.0)), window=[20, 30])
    r.run("W11", "kafka", "native", "drain-produce",
          result_json(20.0, 6.0, elapsed_s=60, rate_mb_s=20.0, timeline_interval_s=1,
                      timeline=timeline(1, 1, lambda t: 12.0 if 25 <= t < 45 else 2.0)), window=[25, 45])
    r.run("W11", "shardlog", "native", "drain-consume", result_json(900.0, None, elapsed_s=10))
    r.run("W11", "kafka", "native", "drain-consume", result_json(400.0, None, elapsed_s=20))
    # The java-client producer's backlog is drained by ConsumerPerformance (kafka-tools).
    r.run("W11", "shardlog", "kafka-tools", "drain-consume", CONSUMER_PERF.format(mb=700.0, rec=716800.0))
    r.run("W11", "shardlog", "java-client", "drain-produce",
          result_json(20.0, 2.0, elapsed_s=60, rate_mb_s=20.0, tool="producer-fleet", producers=2, timeline_interval_s=1,
                      timeline=timeline(1, 1, lambda t: 7.0 if 20 <= t < 28 else 1.0)), window=[20, 27.5])
    r.run("T1", "shardlog", "native", "txn", result_json(80.0, 5.0))
    r.run("T1", "kafka", "native", "txn", result_json(20.0, 10.0))
    r.run("T2", "shardlog", "native", "consume", result_json(1500.0, None))
    r.run("T2", "kafka", "kafka-tools", "consumer-perf", CONSUMER_PERF.format(mb=800.0, rec=819200.0))
    return r


def summarize(d: Path, *pre):
    p = subprocess.run([sys.executable, *pre, str(REPORT), "summarize", str(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def target(summary, name):
    hits = [t for t in summary["targets"] if t["target"] == name]
    assert len(hits) == 1, (name, [t["target"] for t in summary["targets"]])
    return hits[0]


def test_summarize_writes_page_plots_and_figures(tmp_path):
    new_results(tmp_path)
    out = summarize(tmp_path).stdout
    page = (tmp_path / "report.md").read_text()
    assert f"report: {tmp_path}/report.md" in out
    for w in ["W1", "W7", "W8", "W9", "W10", "W11", "T1", "T2"]:
        assert f"\n## {w}: " in page, w
    pngs = ["throughput-W1.png", "latency-W1.png", "throughput-W7.png", "latency-W7.png", "throughput-W8.png",
            "timeline-W9.png", "timeline-W10.png", "timeline-W11.png", "latency-W11.png", "throughput-W11.png",
            "throughput-T2.png"]
    for png in pngs:
        data = (tmp_path / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, png
        assert f"]({png})" in page, png
    assert not (tmp_path / "timeline-W1.png").exists()

    s = json.loads((tmp_path / "summary.json").read_text())
    assert target(s, "W1 throughput >= 2x kafka")["value"].startswith("x2.00 ")
    assert target(s, "W1 throughput >= 2x kafka")["status"] == "met"
    assert target(s, "W7 fleet-50-max (java-client) throughput >= 2x kafka")["value"].startswith("x1.60 ")
    assert target(s, "W7 fleet-50-fixed (java-client) p99 <= 1/2 of kafka")["status"] == "met"
    assert target(s, "W8 keyed-lz4 (java-client) throughput >= 2x kafka")["value"].startswith("x3.00 ")
    # W9: the median of the per-interval p99s over the first 5 min is 2 ms, over the last 3 ms.
    w9 = target(s, "W9 retention (native) p99 first vs last 5 min: last <= 1.2x first")
    assert w9["value"] == "x1.50 (2.00 -> 3.00 ms)" and w9["status"] == "NOT met"
    w10 = target(s, "W10 soak (native) p99 first vs last 5 min: last <= 1.2x first")
    assert w10["value"].startswith("x1.00 ") and w10["status"] == "met"
    assert target(s, "W10 soak (native) p99 <= 1/2 of kafka")["value"].startswith("x0.24 ")
    # W11: worst interval inside the drain windows, 4 ms against 12 ms; drain rate 900 vs 400 MB/s.
    assert target(s, "W11 drain-produce (native) p99 during drain (worst interval) <= 1/2 of kafka")["value"] \
        == "x0.33 (4.00 vs 12.00 ms)"
    assert target(s, "W11 drain-consume (native) drain rate >= 2x kafka")["value"].startswith("x2.25 ")
    assert target(s, "T1 transactional throughput >= 2x kafka")["status"] == "met"
    assert target(s, "T2 read_committed consume >= kafka")["status"] == "-"  # kafka ran kafka-tools only
    w11 = [m for m in s["medians"] if m["workload"] == "W11" and m["variant"] == "drain-produce"]
    assert {m["tl_window"] for m in w11} == {"first vs last third (timeline < 10 min)"}
    assert "| shardlog | 900.0 MB/s (native) | 10.0 | 4.00 | 1.50 | native |" in page
    assert "| shardlog | 700.0 MB/s (kafka-tools) | 7.5 | 7.00 | 2.00 | java-client |" in page
    assert not [t for t in s["targets"] if "soak-max" in t["target"]]
    failed = [m for m in s["medians"] if m["workload"] == "W1" and m["broker"] == "kafka" and m["generator"] == "kafka-tools"]
    assert failed[0]["n"] == 0 and failed[0]["of"] == 1


def test_old_results_directory_names_transactions_t1_t2(tmp_path):
    r = Results(tmp_path, {"reps": 1, "duration_s": 20, "warmup_s": 3})
    r.run("W3", "shardlog", "native", "produce", result_json(50.0, 2.0, rate_mb_s=50.0))
    r.run("W3", "kafka", "native", "produce", result_json(50.0, 4.0, rate_mb_s=50.0))
    r.run("W7", "shardlog", "native", "txn", result_json(80.0, 5.0))
    r.run("W7", "kafka", "native", "txn", result_json(40.0, 5.0))
    r.run("W8", "shardlog", "native", "consume", result_json(1000.0, None))
    r.run("W8", "kafka", "native", "consume", result_json(800.0, None))
    summarize(tmp_path)
    page = (tmp_path / "report.md").read_text()
    assert "\n## T1: " in page and "\n## T2: " in page and "\n## W7" not in page and "\n## W8" not in page
    s = json.loads((tmp_path / "summary.json").read_text())
    assert target(s, "W3 p99 <= 1/5 of kafka")["value"].startswith("x0.50 ")
    assert target(s, "T2 read_committed consume >= kafka")["value"].startswith("x1.25 ")
    assert target(s, "W7 throughput >= 2x kafka, p99 at fixed rates <= 1/2 of kafka")["status"] == "-"


# As `python3 scripts/bench_report.py ...` would, with the script's directory on the path
# (its page and plots modules live beside it) and matplotlib made unimportable.
NO_MATPLOTLIB = ["-c", "import os, runpy, sys; sys.modules['matplotlib'] = None; sys.argv = sys.argv[1:]; "
                       "sys.path.insert(0, os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')"]


def test_line_and_page_without_matplotlib(tmp_path):
    r = new_results(tmp_path)
    name = r.run("W7", "shardlog", "java-client", "fleet-200-fixed",
                 result_json(100.0, 3.0, tool="producer-fleet", producers=200), rep=2)
    p = subprocess.run([sys.executable, *NO_MATPLOTLIB, str(REPORT), "line", str(tmp_path), name],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and name in p.stderr and "100.0 MB/s  p99 3.00 ms" in p.stderr, p.stderr
    p = summarize(tmp_path, *NO_MATPLOTLIB)
    assert "matplotlib missing" in p.stderr
    assert "\n## W11: " in (tmp_path / "report.md").read_text()
    assert not list(tmp_path.glob("*.png"))
