#!/usr/bin/env python3
"""Turns the raw outputs of scripts/bench.sh into summary.json, PNG plots and one page:
the runs, medians, ratios and targets here; the plots in bench_plots.py, the page in
bench_page.py.

  bench_report.py line DIR NAME     one status line for a finished run (stderr)
  bench_report.py summarize DIR     the files below, then the table, ratios and targets on stdout
  bench_report.py profile DIR       profile.txt from runs/*.perf.txt (perf report output)

`summarize` reads DIR/meta.json, DIR/runs.jsonl (one line per run: workload, broker,
generator, kind, rep, durability, cpu_s, rss_mb, warmup_s, status, out, and for a W11
drain-produce run an optional "window": [start_s, end_s]) and each run's stdout
DIR/runs/NAME.out, and writes into DIR:

  summary.json               machine, every run, medians per group, ratios, targets
  report.md                  THE page: machine and run, targets met / missed, then per
                             workload its table, shardlog/kafka ratios, p99 of the first and
                             last timeline windows (W9, W10, W11), drain figures (W11), plots
  throughput-W.png           per workload W: MB/s, grouped bars per variant (kind), one bar
                             per broker, durability and generator
  latency-W.png              per workload W: latency percentiles on a "nines" axis (p50 ..
                             p99.99, max), log milliseconds, one panel per variant
  timeline-W.png             per workload W whose runs printed a timeline (every native run
                             does): p99 (solid) and p50 (dashed) per interval against time,
                             MB/s below, one panel per variant, every repetition drawn

Groups are (workload, variant, broker, durability, generator); the variant is the run's
kind (fleet-50-fixed, keyed-lz4, retention, soak, drain-produce, ...), or empty for the
older kinds that only named the generator's mode (produce, producer-perf, ...). Every
figure is the median over repetitions. Old results directories still summarize: their W7
(kind txn) and W8 (a consume) are the transactional workloads now called T1 and T2.

Parsers read each generator's own output: one JSON line from `shardlog bench --json`
(native) or the Java producer-fleet tool (java-client), or the text of Kafka's
ProducerPerformance / ConsumerPerformance / EndToEndLatency (kafka-tools). A run that
failed or printed nothing parseable is kept in summary.json with status "failed" and null
figures. Plots need matplotlib (tests/integration/requirements.txt); it is imported only
by `summarize`, which writes the page without plots when it is missing.
"""
import json
import os
import platform
import re
import statistics
import sys
from collections import OrderedDict

FIELDS = ["throughput_mb_s", "records_s", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms"]
MB = 2**20
# Per-run figures computed from a timeline (see timeline_stats), aggregated like FIELDS.
TIMELINE_FIELDS = ["tl_first_p99_ms", "tl_last_p99_ms", "tl_drift", "drain_p99_worst_ms", "drain_s"]
AGG_FIELDS = FIELDS + ["p95_ms", "cpu_s", "cpu_s_per_mb", "rss_mb"] + TIMELINE_FIELDS
# Kinds that only named the generator's mode: a workload that has them has one variant.
MODE_KINDS = {"produce", "consume", "e2e", "txn", "producer-perf", "consumer-perf", "e2e-latency"}
GENERATORS = ["native", "java-client", "kafka-tools"]
WINDOW_S = 300  # W9/W10: p99 over the first and the last 5 minutes of the timeline

WORKLOADS = OrderedDict([
    ("W1", "maximum produce, 6 partitions, acks=1"),
    ("W2", "maximum produce, 6 partitions, acks=all (also with an fsync before the ack)"),
    ("W3", "fixed 50 MB/s produce, 6 partitions, acks=1: latency"),
    ("W4", "consume a pre-filled topic, 6 partitions"),
    ("W5", "end-to-end latency at 10 MB/s, 1 partition"),
    ("W6", "1000 partitions at 20 MB/s"),
    ("W7", "many producers (50, then 200) on 100 partitions: a fixed total rate, then maximum"),
    ("W8", "keyed records: 10,000 keys, 100 partitions, no compression / lz4 / zstd"),
    ("W9", "retention while writing: a fixed rate while old segments are deleted"),
    ("W10", "soak: 30 min at 60% of the maximum rate"),
    ("W11", "backlog drain: a consumer starts behind and catches up while a producer writes at a fixed rate"),
    ("T1", "transactional produce: one transactional producer per partition, 100 records per transaction"),
    ("T2", "read_committed consume of a transactionally written topic"),
])


# ---------------------------------------------------------------- parsers
def parse_native(text):
    """The last JSON line of `shardlog bench --json` or producer-fleet (same fields)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and "mb_s" in j and "records_s" in j:
            return native_fields(j)
    return None


def native_fields(j):
    lat = j.get("latency") or {}
    r = {"throughput_mb_s": j["mb_s"], "records_s": j["records_s"], "latency_from": j.get("latency_from"),
         "window_s": j.get("elapsed_s")}
    r["window_mb"] = j["bytes"] / MB if j.get("bytes") is not None else j["mb_s"] * (r["window_s"] or 0)
    if lat.get("count"):
        for k in ["p50", "p90", "p99", "p999", "p9999", "max"]:
            if lat.get(k + "_ms") is not None:
                r[k + "_ms"] = lat[k + "_ms"]
    if j.get("errors"):
        r["errors"] = j["errors"]
    for k in ["tool", "producers", "keys", "compression", "rate_mb_s"]:
        if j.get(k) is not None:
            r[k] = j[k]
    tl = [e for e in j.get("timeline") or [] if isinstance(e, dict) and isinstance(e.get("t_s"), (int, float))]
    if tl:
        r["timeline"] = tl
        r["timeline_interval_s"] = j.get("timeline_interval_s") or 1
    return r


PP = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def parse_producer_perf(text):
    for line in reversed(text.splitlines()):
        m = PP.search(line)
        if m:
            g = m.groups()
            return {"throughput_mb_s": float(g[2]), "records_s": float(g[1]), "p50_ms": float(g[5]), "p95_ms": float(g[6]),
                    "p99_ms": float(g[7]), "p999_ms": float(g[8]), "max_ms": float(g[4]),
                    "latency_from": "send() to callback", "total_records": int(g[0])}
    return None


def parse_consumer_perf(text):
    lines = [l for l in text.splitlines() if l.strip()]
    for i, l in enumerate(lines):
        if l.startswith("start.time") and i + 1 < len(lines):
            keys = [k.strip() for k in l.split(",")]
            vals = [v.strip() for v in lines[i + 1].split(",")]
            d = dict(zip(keys, vals))
            try:
                return {"throughput_mb_s": float(d["fetch.MB.sec"]), "records_s": float(d["fetch.nMsg.sec"]),
                        "total_mb": float(d["data.consumed.in.MB"])}
            except (KeyError, ValueError):
                return None
    return None


def parse_e2e_latency(text):
    m = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)", text)
    if not m:
        return None
    return {"p50_ms": float(m.group(1)), "p99_ms": float(m.group(2)), "p999_ms": float(m.group(3)),
            "latency_from": "send to receive, one record at a time"}


def parse_output(text):
    """Whichever generator printed TEXT: the kind no longer says which tool ran."""
    for parse in (parse_native, parse_producer_perf, parse_consumer_perf, parse_e2e_latency):
        r = parse(text)
        if r:
            return r
    return None


def broker_mb(meta, parsed, run_meta):
    """MB the broker took in (produce) or served (consume) during the whole command, the
    span its CPU seconds were measured over. Exact for Kafka's tools (they count records);
    for the JSON generators, which report their measured window only, the window's rate
    times (warm-up + window): a warm-up slower than the window makes this a little high,
    the same way for both brokers."""
    if parsed.get("total_mb") is not None:
        return parsed["total_mb"]
    if parsed.get("total_records") is not None:
        return parsed["total_records"] * meta.get("record_bytes", 1024) / MB
    if run_meta["kind"] == "e2e-latency":
        return meta.get("e2e_tool_msgs", 0) * meta.get("record_bytes", 1024) / MB or None
    if parsed.get("window_mb") is not None:
        if not parsed.get("window_s"):
            return parsed["window_mb"] or None
        warm = float(run_meta.get("warmup_s", meta.get("warmup_s", 0)))
        return parsed["window_mb"] * (parsed["window_s"] + warm) / parsed["window_s"] or None
    return None


# ---------------------------------------------------------------- timelines
def tl_points(run):
    """The timeline's intervals that carry a p99 (intervals with no records carry none)."""
    return [e for e in run.get("timeline") or [] if e.get("p99_ms") is not None and e.get("records", 1)]


def tl_span(run):
    tl = run.get("timeline") or []
    return max(e["t_s"] for e in tl) + run["timeline_interval_s"] if tl else 0


def tl_windows(span, interval):
    """(first, last, label): the windows compared for the p99 drift, as [start, end) in
    seconds since the measured window opened: 5 minutes each when the timeline covers 10
    minutes or more, else its first and last third."""
    if span >= 2 * WINDOW_S:
        return (0, WINDOW_S), (span - WINDOW_S, span), "first vs last 5 min"
    third = max(span / 3, interval)
    return (0, third), (span - third, span), "first vs last third (timeline < 10 min)"


def in_window(points, interval, w):
    """Intervals lying inside window W (an interval at least half inside counts)."""
    return [e for e in points if e["t_s"] + interval / 2 >= w[0] and e["t_s"] + interval / 2 <= w[1]]


def timeline_stats(run, window=None):
    """Per-run figures from the timeline: the median of the per-interval p99s in the first
    and in the last window and their ratio (tl_drift); for a run with a drain WINDOW the
    worst per-interval p99 of the intervals overlapping it."""
    pts, interval = tl_points(run), run.get("timeline_interval_s") or 1
    if len(pts) < 2:
        return {}
    first, last, label = tl_windows(tl_span(run), interval)
    a = [e["p99_ms"] for e in in_window(pts, interval, first)] or [pts[0]["p99_ms"]]
    b = [e["p99_ms"] for e in in_window(pts, interval, last)] or [pts[-1]["p99_ms"]]
    s = {"tl_first_p99_ms": statistics.median(a), "tl_last_p99_ms": statistics.median(b), "tl_window": label}
    s["tl_drift"] = ratio(s["tl_last_p99_ms"], s["tl_first_p99_ms"])
    if window:
        inside = [e["p99_ms"] for e in pts if e["t_s"] < window[1] and e["t_s"] + interval > window[0]]
        s["drain_p99_worst_ms"] = max(inside) if inside else None
        s["drain_s"] = window[1] - window[0]
    return s


# ---------------------------------------------------------------- loading
def load_meta(d):
    try:
        return json.load(open(os.path.join(d, "meta.json")))
    except (OSError, ValueError):
        return {}


def legacy_name(meta):
    """Results from before issue 29 called the transactional workloads W7 and W8."""
    if meta["workload"] == "W7" and meta["kind"] == "txn":
        return "T1"
    if meta["workload"] == "W8" and meta["kind"] in ("consume", "consumer-perf"):
        return "T2"
    return meta["workload"]


def err_tail(d, meta):
    err = os.path.join(d, meta["out"][:-4] + ".err")
    return (open(err).read().strip().splitlines() or [""])[-1] if os.path.exists(err) else ""


def load_run(d, bench_meta, meta):
    try:
        parsed = parse_output(open(os.path.join(d, meta["out"])).read())
    except (OSError, ValueError, KeyError):
        parsed = None
    run = OrderedDict(workload=legacy_name(meta), broker=meta["broker"], generator=meta["generator"],
                      durability=meta["durability"], kind=meta["kind"])
    run["variant"] = "" if meta["kind"] in MODE_KINDS else meta["kind"]
    if run["workload"] != meta["workload"]:
        run["renamed_from"] = meta["workload"]
    for f in FIELDS:
        run[f] = None
    run.update(cpu_s=meta["cpu_s"], cpu_s_per_mb=None, rss_mb=meta["rss_mb"], rep=meta["rep"], tool=meta["kind"],
               status="ok" if parsed else "failed", out=meta["out"])
    if meta.get("window"):
        run["window"] = meta["window"]
    if not parsed:
        run["note"] = err_tail(d, meta)[:200]
        return run
    mb = broker_mb(bench_meta, parsed, meta)
    for k in ["window_mb", "window_s", "total_records", "total_mb"]:
        parsed.pop(k, None)
    run.update(parsed)
    run["broker_mb"] = mb
    run["cpu_s_per_mb"] = meta["cpu_s"] / mb if mb else None
    run.update(timeline_stats(run, meta.get("window")))
    if meta["status"] != "ok":
        # e.g. EndToEndLatency against shardlog: figures printed, then the tool
        # fails at close on FIND_COORDINATOR (no consumer groups yet).
        run["note"] = ("tool exited non-zero after reporting: " + err_tail(d, meta))[:200]
    return run


def load_runs(d):
    bench_meta = load_meta(d)
    path = os.path.join(d, "runs.jsonl")
    if not os.path.exists(path):
        return []
    return [load_run(d, bench_meta, json.loads(line)) for line in open(path) if line.strip()]


# ---------------------------------------------------------------- aggregation
def fmt(v, digits=1):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def series_label(r):
    b = r["broker"] + (" fsync" if r["durability"] == "fsync-before-ack" else "")
    return f"{b} / {r['generator']}"


def workload_key(w):
    m = re.match(r"([A-Za-z]*)(\d*)(.*)", w)
    return ({"W": 0, "T": 1}.get(m.group(1), 2), m.group(1), int(m.group(2) or 0), m.group(3))


def setup_of(r):
    """What the producer-fleet tool says it ran (producers, keys, compression)."""
    parts = [f"{r['producers']} producers" if r.get("producers") else "", f"{r['keys']} keys" if r.get("keys") else "",
             f"compression {r['compression']}" if r.get("compression") not in (None, "", "none") else ""]
    return ", ".join(p for p in parts if p)


def aggregate(runs):
    """Median over repetitions per (workload, variant, broker, durability, generator): one
    noisy repetition on a shared machine moves a median less than a mean."""
    groups = OrderedDict()
    for r in runs:
        groups.setdefault((r["workload"], r["variant"], r["broker"], r["durability"], r["generator"]), []).append(r)
    variant_order = {}
    for r in runs:
        variant_order.setdefault((r["workload"], r["variant"]), len(variant_order))
    out = []
    for (w, v, b, dur, g), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        a = OrderedDict(workload=w, variant=v, kind=rs[0]["kind"], broker=b, durability=dur, generator=g, n=len(ok), of=len(rs))
        for f in AGG_FIELDS:
            vals = [r[f] for r in ok if r.get(f) is not None]
            a[f] = statistics.median(vals) if vals else None
        a["fixed_rate"] = any(r.get("rate_mb_s") for r in ok) or "fixed" in v
        a["setup"] = next((setup_of(r) for r in ok if setup_of(r)), "")
        a["tl_window"] = next((r["tl_window"] for r in ok if r.get("tl_window")), None)
        a["note"] = next((r.get("note") for r in rs if r.get("note")), None)
        out.append(a)
    order = {"shardlog": 0, "kafka": 1}
    out.sort(key=lambda a: (workload_key(a["workload"]), variant_order[(a["workload"], a["variant"])],
                            GENERATORS.index(a["generator"]) if a["generator"] in GENERATORS else 9,
                            order.get(a["broker"], 2), a["durability"] != "no-fsync"))
    return out


def find(agg, w, broker, gen="native", dur="no-fsync", variant=None):
    for a in agg:
        if (a["workload"] == w and a["broker"] == broker and a["generator"] == gen and a["durability"] == dur
                and (variant is None or a["variant"] == variant)):
            return a
    return None


def pairs(agg, w=None):
    """(shardlog, kafka) medians of the same workload, variant, durability and generator."""
    for s in agg:
        if s["broker"] == "shardlog" and (w is None or s["workload"] == w):
            k = find(agg, s["workload"], "kafka", s["generator"], s["durability"], s["variant"])
            if k:
                yield s, k


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


# (field, label, which way is better for shardlog/kafka)
RATIO_METRICS = [("throughput_mb_s", "MB/s", "higher"), ("p50_ms", "p50", "lower"), ("p99_ms", "p99", "lower"),
                 ("p999_ms", "p99.9", "lower"), ("cpu_s_per_mb", "CPU s/MB", "lower")]


def ratios(agg, disk):
    """shardlog/kafka for every metric of every (workload, variant, durability, generator)
    both brokers ran, from the medians over repetitions; W1 also as fractions of the disk
    ceiling measured in the same run."""
    out = []
    for s, k in pairs(agg):
        r = OrderedDict(workload=s["workload"], variant=s["variant"], durability=s["durability"], generator=s["generator"],
                        runs_shardlog=f"{s['n']}/{s['of']}", runs_kafka=f"{k['n']}/{k['of']}", metrics=OrderedDict())
        for f, label, better in RATIO_METRICS:
            r["metrics"][f] = OrderedDict(shardlog=s[f], kafka=k[f], ratio=ratio(s[f], k[f]), better=better)
        if s["workload"] == "W1" and disk:
            fs, fk = ratio(s["throughput_mb_s"], disk), ratio(k["throughput_mb_s"], disk)
            r["metrics"]["fraction_of_disk_ceiling"] = OrderedDict(shardlog=fs, kafka=fk, ratio=ratio(fs, fk), better="higher")
        out.append(r)
    return out


# ---------------------------------------------------------------- targets
def check(ok):
    return "-" if ok is None else ("met" if ok else "NOT met")


def target(name, value, ok, workload):
    return OrderedDict(workload=workload, target=name, value=value, status=check(ok))


def ratio_target(name, s, k, field, limit, workload, unit):
    """shardlog/kafka of FIELD against LIMIT (>= for throughput, <= for latencies)."""
    r = ratio(s and s[field], k and k[field])
    higher = field == "throughput_mb_s"
    ok = None if r is None else (r >= limit if higher else r <= limit)
    value = f"x{fmt(r, 2)} ({fmt(s[field], 2)} vs {fmt(k[field], 2)} {unit})" if r is not None else "no data"
    return target(name, value, ok, workload)


def group_name(a):
    dur = ", fsync-before-ack" if a["durability"] == "fsync-before-ack" else ""
    return f"{a['workload']}{' ' + a['variant'] if a['variant'] else ''} ({a['generator']}{dur})"


def classic_targets(agg, disk):
    """W1..W6 and the transactional T1/T2: native generator, equal durability."""
    t = []
    f = lambda w, b, dur="no-fsync": find(agg, w, b, dur=dur)
    t.append(ratio_target("W1 throughput >= 2x kafka", f("W1", "shardlog"), f("W1", "kafka"), "throughput_mb_s", 2, "W1", "MB/s"))
    t.append(ratio_target("W2 throughput >= 2x kafka", f("W2", "shardlog"), f("W2", "kafka"), "throughput_mb_s", 2, "W2", "MB/s"))
    t.append(ratio_target("W2 fsync-before-ack throughput >= 2x kafka", f("W2", "shardlog", "fsync-before-ack"),
                          f("W2", "kafka", "fsync-before-ack"), "throughput_mb_s", 2, "W2", "MB/s"))
    t.append(ratio_target("W3 p99 <= 1/5 of kafka", f("W3", "shardlog"), f("W3", "kafka"), "p99_ms", 0.2, "W3", "ms"))
    t.append(ratio_target("W3 p99.9 <= 1/10 of kafka", f("W3", "shardlog"), f("W3", "kafka"), "p999_ms", 0.1, "W3", "ms"))
    w1 = f("W1", "shardlog")
    if disk and w1 and w1["throughput_mb_s"]:
        t.append(target(f"W1 >= half the disk ceiling ({disk} MB/s)", f"{w1['throughput_mb_s'] / disk:.2f} of it",
                        w1["throughput_mb_s"] >= disk / 2, "W1"))
    # Transactions (issue 23): T1 committed throughput and the EndTxn round trip, T2 a
    # read_committed consume of a transactionally written topic.
    t.append(ratio_target("T1 transactional throughput >= 2x kafka", f("T1", "shardlog"), f("T1", "kafka"),
                          "throughput_mb_s", 2, "T1", "MB/s"))
    t.append(ratio_target("T1 EndTxn p99 <= 1/2 of kafka", f("T1", "shardlog"), f("T1", "kafka"), "p99_ms", 0.5, "T1", "ms"))
    t.append(ratio_target("T2 read_committed consume >= kafka", f("T2", "shardlog"), f("T2", "kafka"),
                          "throughput_mb_s", 1, "T2", "MB/s"))
    return t


def scale_targets(agg, w):
    """W7, W8: throughput >= 2x kafka at maximum rate, p99 <= 1/2 of kafka at fixed rates,
    for every variant and generator both brokers ran."""
    t = []
    for s, k in pairs(agg, w):
        if s["fixed_rate"]:
            t.append(ratio_target(f"{group_name(s)} p99 <= 1/2 of kafka", s, k, "p99_ms", 0.5, w, "ms"))
        else:
            t.append(ratio_target(f"{group_name(s)} throughput >= 2x kafka", s, k, "throughput_mb_s", 2, w, "MB/s"))
    return t or [target(f"{w} throughput >= 2x kafka, p99 at fixed rates <= 1/2 of kafka", "no data", None, w)]


def drift_target(s):
    name = f"{group_name(s)} p99 {s['tl_window'] or 'last vs first window'}: last <= 1.2x first"
    if s["tl_drift"] is None:
        return target(name, "no timeline", None, s["workload"])
    value = f"x{fmt(s['tl_drift'], 2)} ({fmt(s['tl_first_p99_ms'], 2)} -> {fmt(s['tl_last_p99_ms'], 2)} ms)"
    return target(name, value, s["tl_drift"] <= 1.2, s["workload"])


def is_max(a):
    """A maximum-rate variant (fleet-50-max; W10's soak-max, which only sizes the soak)."""
    return "max" in a["variant"].split("-")


def steady_targets(agg, w):
    """W9, W10: shardlog's p99 does not drift up (median of the per-interval p99s of the
    last window <= 1.2x the first's) and its whole-run p99 <= 1/2 of kafka's; maximum-rate
    variants (W10's soak-max) are not held to them."""
    t = [drift_target(s) for s in agg if s["workload"] == w and s["broker"] == "shardlog" and s["p99_ms"] is not None
         and not is_max(s)]
    t += [ratio_target(f"{group_name(s)} p99 <= 1/2 of kafka", s, k, "p99_ms", 0.5, w, "ms") for s, k in pairs(agg, w)
          if not is_max(s)]
    return t or [target(f"{w} p99 drift <= 1.2x, p99 <= 1/2 of kafka", "no data", None, w)]


def drain_targets(agg):
    """W11: drain rate (the catching-up consumer's throughput) >= 2x kafka's; the fixed-
    rate producer's p99 <= 1/2 of kafka's, over the run and in the worst interval of the
    drain."""
    t = []
    for s, k in pairs(agg, "W11"):
        if s["variant"] == "drain-produce":
            t.append(ratio_target(f"{group_name(s)} p99 <= 1/2 of kafka", s, k, "p99_ms", 0.5, "W11", "ms"))
            t.append(ratio_target(f"{group_name(s)} p99 during drain (worst interval) <= 1/2 of kafka", s, k,
                                  "drain_p99_worst_ms", 0.5, "W11", "ms"))
        else:
            t.append(ratio_target(f"{group_name(s)} drain rate >= 2x kafka", s, k, "throughput_mb_s", 2, "W11", "MB/s"))
    return t or [target("W11 drain rate >= 2x kafka, producer p99 <= 1/2 of kafka", "no data", None, "W11")]


def targets(agg, disk):
    ts = (classic_targets(agg, disk) + scale_targets(agg, "W7") + scale_targets(agg, "W8")
          + steady_targets(agg, "W9") + steady_targets(agg, "W10") + drain_targets(agg))
    return sorted(ts, key=lambda t: workload_key(t["workload"]))


# ---------------------------------------------------------------- text output
TABLE_HDR = ["workload", "variant", "broker", "durability", "generator", "MB/s", "rec/s", "p50 ms", "p99 ms", "p99.9 ms",
             "max ms", "cpu s", "cpu s/MB", "RSS MB", "runs"]


def table_row(a):
    return [a["workload"], a["variant"] or "-", a["broker"], a["durability"], a["generator"], fmt(a["throughput_mb_s"]),
            fmt(a["records_s"], 0), fmt(a["p50_ms"], 2), fmt(a["p99_ms"], 2), fmt(a["p999_ms"], 2), fmt(a["max_ms"], 2),
            fmt(a["cpu_s"]), fmt(a["cpu_s_per_mb"], 3), fmt(a["rss_mb"], 0), f"{a['n']}/{a['of']}"]


def print_table(hdr, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    print("  ".join(h.ljust(w) for h, w in zip(hdr, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


ARROW = {"higher": "higher better", "lower": "lower better"}
RATIO_HDR = ["workload", "variant", "durability", "generator"] + [f"{label} ({ARROW[b]})" for _, label, b in RATIO_METRICS] \
    + ["runs s/k"]


def ratio_row(r):
    m = r["metrics"]
    return ([r["workload"], r["variant"] or "-", r["durability"], r["generator"]]
            + [("x" + fmt(m[f]["ratio"], 2)) if m[f]["ratio"] is not None else "-" for f, _, _ in RATIO_METRICS]
            + [f"{r['runs_shardlog']} {r['runs_kafka']}"])


def ratio_intro(meta):
    return (f"shardlog/kafka ratios (medians over {meta.get('reps', '?')} repetition(s) per side, same variant, durability "
            "and generator): x>1 is better for shardlog where the column says 'higher better', x<1 where it says "
            "'lower better'")


def disk_lines(rs, disk, meta):
    out = []
    for r in rs:
        c = r["metrics"].get("fraction_of_disk_ceiling")
        if c:
            out.append(f"{r['workload']} {r['durability']} {r['generator']}: fraction of the disk ceiling ({disk} MB/s, "
                       f"higher better): shardlog {fmt(c['shardlog'], 2)}, kafka {fmt(c['kafka'], 2)}, x{fmt(c['ratio'], 2)}")
    if disk:
        out.append(f"disk ceiling: {meta.get('disk_ceiling_method', 'fio')}. With no fsync before the ack both brokers "
                   "acknowledge from the page cache (shardlog --flush never) and can exceed it until dirty pages are throttled.")
    return out


def print_ratios(rs, disk, meta):
    print()
    print(ratio_intro(meta))
    print_table(RATIO_HDR, [ratio_row(r) for r in rs])
    for line in disk_lines(rs, disk, meta):
        print(line)


def print_targets(ts):
    print("targets (issue 3, 23, 29; equal durability; W1..W6, T1, T2 with the native generator):")
    for t in ts:
        if t["status"] != "-":
            print(f"  {t['target']}: {t['value']} {t['status']}")
    missing = [t for t in ts if t["status"] == "-"]
    if missing:
        print(f"  ({len(missing)} target(s) without data in this run: " + ", ".join(sorted({t['workload'] for t in missing},
                                                                                        key=workload_key)) + ")")


def unique(xs):
    return list(OrderedDict((x, 1) for x in xs))



# ---------------------------------------------------------------- commands
def machine(meta):
    m = OrderedDict()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    m["cpu"] = cpu
    m["cores"] = os.cpu_count()
    try:
        m["mem_gib"] = round(int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    m["kernel"] = platform.release()
    try:
        m["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    m.update(meta)
    return m


def cmd_line(d, name):
    """The run whose stdout is runs/NAME.out."""
    for r in load_runs(d):
        if os.path.basename(r["out"]) == name + ".out":
            extra = f"  p99 {fmt(r['tl_first_p99_ms'], 2)} -> {fmt(r['tl_last_p99_ms'], 2)} ms" if r.get("tl_drift") else ""
            print(f"  {name:<34} {fmt(r['throughput_mb_s'])} MB/s  p99 {fmt(r['p99_ms'], 2)} ms  "
                  f"cpu {fmt(r['cpu_s'])} s  rss {fmt(r['rss_mb'], 0)} MB  {r['status']}{extra}", file=sys.stderr)


def print_summary(d, meta, agg, rs, ts, disk, page):
    print()
    if meta.get("profiled"):
        print("PROFILED RUN: perf was sampling the broker, figures are perturbed; compare only unprofiled runs")
    print_table(TABLE_HDR, [table_row(a) for a in agg])
    for a in agg:
        if a["n"] < a["of"]:
            print(f"note: {group_name(a)} {a['broker']}: {a['of'] - a['n']} run(s) failed: {a['note'] or '(see runs/*.err)'}")
    print()
    print_ratios(rs, disk, meta)
    print()
    print(f"results: {d}/summary.json, report.md, *.png (figures are medians over repetitions; "
          f"{'quick run' if meta.get('quick') else 'full run'}, {meta.get('reps', '?')} rep(s))")
    print_targets(ts)
    get = lambda a, k: a[k] if a else None
    r_w1 = ratio(get(find(agg, "W1", "shardlog"), "throughput_mb_s"), get(find(agg, "W1", "kafka"), "throughput_mb_s"))
    r_p99 = ratio(get(find(agg, "W3", "shardlog"), "p99_ms"), get(find(agg, "W3", "kafka"), "p99_ms"))
    print(f"shardlog/kafka: W1 throughput x{fmt(r_w1, 2)}, W3 p99 x{fmt(r_p99, 2)}")
    print(f"report: {page}")


def cmd_summarize(d):
    meta = load_meta(d)
    runs = load_runs(d)
    agg = aggregate(runs)
    disk = meta.get("disk_seq_write_mb_s")
    rs = ratios(agg, disk)
    ts = targets(agg, disk)
    mach = machine(meta)
    summary = OrderedDict(machine=mach, runs=runs, medians=agg, ratios=rs, targets=ts)
    json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
    # Imported here: they import this module's helpers (no import cycle at load time).
    from bench_page import write_page
    from bench_plots import make_plots
    pngs = make_plots(d, agg, runs)
    page = write_page(d, meta, mach, agg, rs, ts, pngs, disk)
    print_summary(d, meta, agg, rs, ts, disk, page)


PERF_LINE = re.compile(r"^\s*([\d.]+)%\s+\[(.)\]\s+(.*?)\s*$")


def parse_perf_report(text):
    """(samples, [(self %, mode, symbol)]) from `perf report --no-children --sort sym
    -g none --stdio`; mode is perf's marker: k kernel, . user (JIT code included)."""
    m = re.search(r"# Samples: (\S+)", text)
    samples = m.group(1) if m else "?"
    rows = []
    for line in text.splitlines():
        p = PERF_LINE.match(line)
        if p:
            rows.append((float(p.group(1)), p.group(2), p.group(3)))
    return samples, rows


def cmd_profile(d, top=10):
    meta = load_meta(d)
    names = sorted(f[:-len(".perf.txt")] for f in os.listdir(os.path.join(d, "runs")) if f.endswith(".perf.txt"))
    out = [f"Profiles: perf record -g -e cpu-clock -p <broker pid> over each run's measured window "
           f"({meta.get('duration_s', '?')} s after {meta.get('warmup_s', '?')} s of warm-up). Profiled runs are "
           "separate runs: do not compare their throughput or latency with unprofiled ones.",
           "self % = share of the broker's samples in that symbol itself; kernel/user from perf's [k]/[.] marks."]
    for n in names:
        samples, rows = parse_perf_report(open(os.path.join(d, "runs", n + ".perf.txt")).read())
        out.append("")
        if not rows:
            out.append(f"== {n}: no samples (see runs/{n}.perf.log)")
            continue
        kernel = sum(p for p, mode, _ in rows if mode == "k")
        user = sum(p for p, mode, _ in rows if mode != "k")
        out.append(f"== {n}: {samples} samples; kernel {kernel:.1f}%, user {user:.1f}%")
        for p, mode, sym in sorted(rows, key=lambda r: -r[0])[:top]:
            out.append(f"  {p:6.2f}%  [{mode}] {sym[:110]}")
    text = "\n".join(out) + "\n"
    open(os.path.join(d, "profile.txt"), "w").write(text)
    print()
    print(text, end="")
    print(f"profile: {d}/profile.txt (perf data in runs/*.perf.data: perf report -i FILE)")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "line":
        cmd_line(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "summarize":
        cmd_summarize(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "profile":
        cmd_profile(sys.argv[2])
    else:
        sys.exit(__doc__)
