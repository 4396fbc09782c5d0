#!/usr/bin/env python3
"""Turns the raw outputs of scripts/bench.sh into summary.json, PNG plots and one page.

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


# ---------------------------------------------------------------- plots (matplotlib)
# One hue per broker and durability (shardlog blue, kafka orange, their fsync pairs green
# and red), a shade per generator: native, java-client darker, kafka-tools lighter.
COLORS = {"shardlog": ("#1f77b4", "#08306b", "#6baed6"), "shardlog fsync": ("#2ca02c", "#00441b", "#74c476"),
          "kafka": ("#ff7f0e", "#a63603", "#fdae6b"), "kafka fsync": ("#d62728", "#67000d", "#fc9272")}
HATCH = {"native": "", "java-client": "..", "kafka-tools": "//"}
MARKER = {"native": "o", "java-client": "s", "kafka-tools": "^"}
# (label, field, position on the "nines" axis: -log10(1 - p)); max is drawn after p99.99
PERCENTILES = [("p50", "p50_ms", 0.301), ("p90", "p90_ms", 1), ("p95", "p95_ms", 1.301), ("p99", "p99_ms", 2),
               ("p99.9", "p999_ms", 3), ("p99.99", "p9999_ms", 4), ("max", "max_ms", 5)]


def color_of(a):
    shades = COLORS.get(series_label(a).split(" / ")[0], ("#7f7f7f",) * 3)
    return shades[GENERATORS.index(a["generator"])] if a["generator"] in GENERATORS else shades[0]


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "hatch.color": "white"})
    return plt


def unique(xs):
    return list(OrderedDict((x, 1) for x in xs))


def save(plt, fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return os.path.basename(path)


def legend_below(ax, ncol=4):
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper center", ncol=min(ncol, len(handles)), frameon=False,
                  bbox_to_anchor=(0.5, -0.1))


def plot_throughput(plt, rows, w, path):
    """Grouped bars: one group per variant, one bar per broker/durability/generator."""
    rows = [a for a in rows if a["throughput_mb_s"]]
    if not rows:
        return None
    variants, series = unique(a["variant"] for a in rows), unique(series_label(a) for a in rows)
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(5.5, 1.5 + len(variants) * (0.55 * len(series) + 0.5)), 4))
    labelled = set()
    for j, label in enumerate(series):
        for i, v in enumerate(variants):
            a = next((a for a in rows if a["variant"] == v and series_label(a) == label), None)
            if a:
                x = i - 0.4 + width * (j + 0.5)
                ax.bar(x, a["throughput_mb_s"], width * 0.92, color=color_of(a), hatch=HATCH.get(a["generator"], "xx"),
                       label=None if label in labelled else label)
                labelled.add(label)
                ax.annotate(fmt(a["throughput_mb_s"], 0 if a["throughput_mb_s"] >= 10 else 1), (x, a["throughput_mb_s"]),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(variants)), [v or w for v in variants])
    ax.set_ylabel("throughput, MB/s (MB = 2^20 bytes)")
    ax.set_title(f"{w}: throughput (median over repetitions)")
    ax.grid(axis="x", visible=False)
    ax.margins(y=0.12)
    legend_below(ax)
    return save(plt, fig, path)


def log_ms(ax):
    """A log latency axis labelled in plain milliseconds (0.5, 2, 10, not 5x10^-1); the
    2s and 5s between powers of ten are labelled too when it spans 2 decades or less.
    Call it after drawing (it reads the axis limits)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    lo, hi = ax.get_ylim()
    if hi / lo <= 100:
        ax.yaxis.set_minor_locator(LogLocator(subs=(2, 5)))
        ax.yaxis.set_minor_formatter(plain)
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("latency, ms (log scale)")


def percentile_line(ax, a):
    pts = [(x, a[f]) for _, f, x in PERCENTILES if a.get(f) and a[f] > 0]
    if len(pts) >= 2:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color_of(a), marker=MARKER.get(a["generator"], "x"),
                linestyle="--" if a["generator"] == "kafka-tools" else "-", label=series_label(a))


def nines_ticks(ax, rows):
    """A tick for each percentile some row has; p95 (kafka-tools) on a second line, it
    sits close to p90."""
    shown = [(name, x) for name, f, x in PERCENTILES if any(a.get(f) for a in rows)]
    ax.set_xticks([x for _, x in shown], ["\n" + n if n == "p95" else n for n, _ in shown])


def plot_latency(plt, rows, w, path):
    """Latency percentiles per variant: x the percentile on a nines axis, y log ms."""
    rows = [a for a in rows if a["p99_ms"]]
    if not rows:
        return None
    variants = unique(a["variant"] for a in rows)
    cols = min(len(variants), 3)
    nrows = (len(variants) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(max(4.6 * cols, 6.5) + 0.6, 3.8 * nrows + 0.6), squeeze=False)
    for ax, v in zip(axes.flat, variants):
        for a in rows:
            if a["variant"] == v:
                percentile_line(ax, a)
        log_ms(ax)
        nines_ticks(ax, [a for a in rows if a["variant"] == v])
        ax.set_xlabel("percentile (nines scale)")
        ax.set_title(f"{w} {v}".strip())
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    fig.suptitle(f"{w}: latency percentiles (median over repetitions); solid: native / java-client, "
                 "dashed: kafka-tools (whole ms; 0 ms is not drawn)", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    handles = OrderedDict()
    for ax in axes.flat:
        for h, l in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(l, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(4, len(handles)), frameon=False)
    return save(plt, fig, path)


def timeline_axes(plt, with_latency):
    """A figure with one (latency or None, MB/s) pair of axes per variant, stacked; the
    latency axes sits above the MB/s one and shares its time axis."""
    heights = [4.4 if lat else 2.2 for lat in with_latency]
    fig = plt.figure(figsize=(11, sum(heights) + 0.5), layout="constrained")
    subs = fig.subfigures(len(heights), 1, squeeze=False, height_ratios=heights)[:, 0]
    pairs = []
    for sub, lat in zip(subs, with_latency):
        if lat:
            pairs.append(tuple(sub.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})))
        else:
            pairs.append((None, sub.subplots()))
    return fig, pairs


def draw_run_timeline(ax_lat, ax_mb, r, scale, first_rep):
    """p99 solid with markers, p50 dashed, MB/s below; every repetition alike."""
    tl, iv = r["timeline"], r["timeline_interval_s"]
    color, marker = color_of(r), MARKER.get(r["generator"], "x")
    mid = [(e["t_s"] + iv / 2) / scale for e in tl]
    label = series_label(r) if first_rep else None
    for field, style in (("p99_ms", "-"), ("p50_ms", "--")):
        pts = [(x, e[field]) for x, e in zip(mid, tl) if e.get(field)]
        if pts and ax_lat:
            ax_lat.plot(*zip(*pts), linestyle=style, color=color, marker=marker if style == "-" else None,
                        markersize=3, linewidth=1.4 if style == "-" else 1, alpha=0.85, label=label if style == "-" else None)
    pts = [(x, e["mb_s"]) for x, e in zip(mid, tl) if e.get("mb_s") is not None]
    if pts:
        ax_mb.plot(*zip(*pts), color=color, marker=marker, markersize=3, alpha=0.85, label=None if ax_lat else label)
    if r.get("window"):
        (ax_lat or ax_mb).axvspan(r["window"][0] / scale, r["window"][1] / scale, color=color, alpha=0.1,
                                  label=f"drain window ({r['broker']})" if first_rep else None)


def shade_drift_windows(ax, runs, scale):
    span = max(tl_span(r) for r in runs)
    first, last, label = tl_windows(span, runs[0]["timeline_interval_s"])
    size = "5 min" if "5 min" in label else "third"
    for (a, b), name in ((first, "first"), (last, "last")):
        ax.axvspan(a / scale, b / scale, color="grey", alpha=0.08)
        ax.text((a + b) / 2 / scale, 1.01, f"{name} {size}", transform=ax.get_xaxis_transform(), ha="center",
                fontsize=7, color="grey")


def has_latency(runs):
    return any(e.get("p99_ms") for r in runs for e in r["timeline"])


def timeline_panel(ax_lat, ax_mb, runs, w, v):
    """One variant: every run of it, latency above (when its timelines carry any) and MB/s;
    time in minutes from 3 minutes on."""
    scale, unit = (60, "min") if max(tl_span(r) for r in runs) >= 180 else (1, "s")
    seen = set()
    for r in sorted(runs, key=lambda r: r["rep"]):
        draw_run_timeline(ax_lat, ax_mb, r, scale, series_label(r) not in seen)
        seen.add(series_label(r))
    iv = ", ".join(sorted({f"{r['timeline_interval_s']:g} s" for r in runs}))
    what = "latency" if ax_lat else "throughput"
    (ax_lat or ax_mb).set_title(f"{w} {v}: {what} per interval ({iv} intervals)".replace("  ", " "))
    if ax_lat:
        if w in ("W9", "W10") and not is_max(runs[0]):
            shade_drift_windows(ax_lat, runs, scale)
        log_ms(ax_lat)
        ax_lat.tick_params(labelbottom=False)
        ax_lat.plot([], [], color="black", linestyle="-", label="p99 (solid)")
        ax_lat.plot([], [], color="black", linestyle="--", label="p50 (dashed)")
    (ax_lat or ax_mb).legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax_mb.set_ylim(bottom=0, top=max(ax_mb.get_ylim()[1], 1) * 1.05)
    ax_mb.set_ylabel("MB/s")
    ax_mb.set_xlabel(f"time since the measured window opened ({unit}; points at interval midpoints)")


def plot_timeline(plt, runs, w, path):
    """One panel pair per variant: per-interval p99 (solid) and p50 (dashed), MB/s below."""
    runs = [r for r in runs if r.get("timeline") and r["status"] == "ok"]
    if not runs:
        return None
    variants = unique(r["variant"] for r in runs)
    by_variant = [[r for r in runs if r["variant"] == v] for v in variants]
    fig, panels = timeline_axes(plt, [has_latency(vr) for vr in by_variant])
    for (ax_lat, ax_mb), v, vr in zip(panels, variants, by_variant):
        timeline_panel(ax_lat, ax_mb, vr, w, v)
    fig.suptitle(f"{w}: latency and throughput over time (every repetition drawn)", fontsize=10)
    return save(plt, fig, path)


def make_plots(d, agg, runs):
    """{workload: [png names]}; {} with a note on stderr when matplotlib is missing."""
    try:
        plt = pyplot()
    except ImportError:
        print("bench_report: matplotlib missing (pip install -r tests/integration/requirements.txt): no plots",
              file=sys.stderr)
        return {}
    out = OrderedDict()
    for w in sorted({a["workload"] for a in agg}, key=workload_key):
        rows = [a for a in agg if a["workload"] == w]
        names = [plot_throughput(plt, rows, w, os.path.join(d, f"throughput-{w}.png")),
                 plot_latency(plt, rows, w, os.path.join(d, f"latency-{w}.png")),
                 plot_timeline(plt, [r for r in runs if r["workload"] == w], w, os.path.join(d, f"timeline-{w}.png"))]
        out[w] = [n for n in names if n]
    return out


# ---------------------------------------------------------------- the page (Markdown)
def md_table(hdr, rows):
    lines = ["| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return lines


def md_machine(m):
    rows = [[k, ", ".join(map(str, v)) if isinstance(v, list) else v] for k, v in m.items()]
    return ["## Machine and run", ""] + md_table(["item", "value"], rows)


def md_targets(ts):
    rows = [[t["target"], t["value"], "**NOT met**" if t["status"] == "NOT met" else t["status"]] for t in ts]
    return (["## Targets", "", "shardlog against Apache Kafka at equal durability, from the medians over repetitions. "
             "Timeline windows (W9, W10): the **median** of the per-interval p99s inside each window. "
             "W11 'p99 during drain': the **worst** per-interval p99 of the intervals overlapping the drain window. "
             "'-': no data in this run.", ""] + md_table(["target", "measured", "status"], rows))


def md_timeline(rows):
    """W9, W10, W11: the p99 drift table (every native run has a timeline; in the 20-s
    runs of the other workloads a first-vs-last-third comparison says little)."""
    rows = [a for a in rows if a["tl_drift"] is not None and a["workload"] in ("W9", "W10", "W11")]
    if not rows:
        return []
    body = [[a["variant"] or "-", series_label(a), a["tl_window"], fmt(a["tl_first_p99_ms"], 2), fmt(a["tl_last_p99_ms"], 2),
             "x" + fmt(a["tl_drift"], 2)] for a in rows]
    return (["", "p99 over time: the median of the per-interval p99s in each window; first, last and each run's "
             "last/first are medians over repetitions:", ""]
            + md_table(["variant", "series", "windows", "first p99 ms", "last p99 ms", "last/first"], body))


def drain_partner(rows, p):
    """The drain-consume group of drain-produce group P: the same broker and generator, or
    else the one consumer generator no producer generator of that broker has (bench.sh
    drains the java-client producer's backlog with kafka-tools' ConsumerPerformance)."""
    same = lambda a, kind: a["variant"] == kind and a["broker"] == p["broker"] and a["durability"] == p["durability"]
    cands = [a for a in rows if same(a, "drain-consume")]
    match = [a for a in cands if a["generator"] == p["generator"]]
    claimed = {a["generator"] for a in rows if same(a, "drain-produce")}
    rest = [a for a in cands if a["generator"] not in claimed]
    return match[0] if match else (rest[0] if len(rest) == 1 else None)


def md_drain(rows):
    prods = [a for a in rows if a["variant"] == "drain-produce"]
    body = []
    for p in prods:
        c = drain_partner(rows, p)
        body.append([p["broker"] + (" fsync" if p["durability"] == "fsync-before-ack" else ""),
                     f"{fmt(c and c['throughput_mb_s'])} MB/s ({c['generator']})" if c else "-",
                     fmt(p["drain_s"]), fmt(p["drain_p99_worst_ms"], 2), fmt(p["p99_ms"], 2), p["generator"]])
    if not body:
        return []
    return (["", "Drain: the catching-up consumer's rate, and the fixed-rate producer's latency meanwhile:", ""]
            + md_table(["broker", "drain rate", "drain s", "producer p99 during drain, worst interval, ms",
                        "producer p99 whole run, ms", "producer generator"], body))


def md_workload(w, agg, rs, pngs, extra=()):
    rows = [a for a in agg if a["workload"] == w]
    out = ["", f"## {w}: {WORKLOADS.get(w, '')}".rstrip(": "), ""]
    out += md_table(TABLE_HDR[1:], [r[1:] for r in map(table_row, rows)])
    setups = unique(f"{a['variant'] or '-'}: {a['setup']}" for a in rows if a["setup"])
    if setups:
        out += ["", "Setup the generators reported: " + "; ".join(setups)]
    wr = [r for r in rs if r["workload"] == w]
    if wr:
        out += ["", "shardlog/kafka:", ""] + md_table(RATIO_HDR[1:], [r[1:] for r in map(ratio_row, wr)])
    out += md_timeline(rows) + md_drain(rows)
    if extra:
        out += [""] + ["- " + line for line in extra]
    for a in rows:
        if a["n"] < a["of"]:
            out += ["", f"Note: {group_name(a)} {a['broker']}: {a['of'] - a['n']} run(s) failed: "
                        f"{a['note'] or '(see runs/*.err)'}"]
    out += [""] + [f"![{w} {png.split('-')[0]}]({png})" for png in pngs]
    return out


def write_page(d, meta, mach, agg, rs, ts, pngs, disk):
    out = [f"# shardlog vs Apache Kafka: {os.path.basename(os.path.abspath(d))}", ""]
    if meta.get("profiled"):
        out += ["**PROFILED RUN**: perf was sampling the broker, figures are perturbed; compare only unprofiled runs.", ""]
    out += [f"{'Quick' if meta.get('quick') else 'Full'} run, {meta.get('reps', '?')} repetition(s) per side; every figure "
            "is the median over repetitions. MB = 2^20 bytes, latencies in milliseconds. Raw outputs: `runs/`, all "
            "figures: `summary.json`. Latency means different things per generator (docs/benchmarks.md): compare "
            "brokers within one generator.", ""]
    out += md_machine(mach) + [""] + md_targets(ts)
    out += ["", "Per workload below: its medians, then " + ratio_intro(meta) + "."]
    for w in sorted({a["workload"] for a in agg}, key=workload_key):
        out += md_workload(w, agg, rs, pngs.get(w, []), disk_lines(rs, disk, meta) if w == "W1" else ())
    path = os.path.join(d, "report.md")
    open(path, "w").write("\n".join(out) + "\n")
    return path


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
