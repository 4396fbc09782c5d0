#!/usr/bin/env python3
"""Turns the raw outputs of scripts/bench.sh into summary.json, a table, two SVG charts.

  bench_report.py line DIR NAME     one status line for a finished run (stderr)
  bench_report.py summarize DIR     summary.json, latency.svg, throughput.svg, table, ratios
  bench_report.py profile DIR       profile.txt from runs/*.perf.txt (perf report output)

Standard library only (no matplotlib): the SVG is written by hand.
Parsers read each generator's own output format; a run that failed or printed nothing
parseable is kept in summary.json with status "failed" and null figures.
"""
import json
import math
import os
import platform
import re
import statistics
import sys
from collections import OrderedDict

FIELDS = ["throughput_mb_s", "records_s", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms"]
MB = 2**20


def parse_native(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            lat = j.get("latency") or {}
            r = {"throughput_mb_s": j["mb_s"], "records_s": j["records_s"], "latency_from": j.get("latency_from"),
                 "window_mb": j["bytes"] / MB, "window_s": j["elapsed_s"]}
            if lat.get("count"):
                for k in ["p50", "p90", "p99", "p999", "p9999", "max"]:
                    r[k + "_ms"] = lat[k + "_ms"]
            if j.get("errors"):
                r["errors"] = j["errors"]
            return r
    return None


PP = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def parse_producer_perf(text):
    for line in reversed(text.splitlines()):
        m = PP.search(line)
        if m:
            g = m.groups()
            return {"throughput_mb_s": float(g[2]), "records_s": float(g[1]), "p50_ms": float(g[5]), "p99_ms": float(g[7]),
                    "p999_ms": float(g[8]), "max_ms": float(g[4]), "latency_from": "send() to callback",
                    "total_records": int(g[0])}
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


PARSERS = {"produce": parse_native, "consume": parse_native, "e2e": parse_native, "txn": parse_native,
           "producer-perf": parse_producer_perf, "consumer-perf": parse_consumer_perf, "e2e-latency": parse_e2e_latency}


def broker_mb(meta, parsed, run_meta):
    """MB the broker took in (produce) or served (consume) during the whole command, the
    span its CPU seconds were measured over. Exact for Kafka's tools (they count records);
    for the native generator, which reports its measured window only, the window's rate
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


def load_meta(d):
    try:
        return json.load(open(os.path.join(d, "meta.json")))
    except (OSError, ValueError):
        return {}


def load_runs(d):
    runs = []
    bench_meta = load_meta(d)
    path = os.path.join(d, "runs.jsonl")
    if not os.path.exists(path):
        return runs
    for line in open(path):
        meta = json.loads(line)
        text = ""
        try:
            text = open(os.path.join(d, meta["out"])).read()
        except OSError:
            pass
        parsed = None
        try:
            parsed = PARSERS[meta["kind"]](text)
        except (ValueError, KeyError):
            parsed = None
        run = OrderedDict((k, meta[k]) for k in ["workload", "broker", "generator", "durability"])
        for f in FIELDS:
            run[f] = None
        run["cpu_s"] = meta["cpu_s"]
        run["cpu_s_per_mb"] = None
        run["rss_mb"] = meta["rss_mb"]
        run["rep"] = meta["rep"]
        run["tool"] = meta["kind"]
        run["status"] = "ok" if parsed else "failed"
        if parsed:
            mb = broker_mb(bench_meta, parsed, meta)
            for k in ["window_mb", "window_s", "total_records", "total_mb"]:
                parsed.pop(k, None)
            run.update(parsed)
            run["broker_mb"] = mb
            run["cpu_s_per_mb"] = meta["cpu_s"] / mb if mb else None
            if meta["status"] != "ok":
                # e.g. EndToEndLatency against shardlog: figures printed, then the tool
                # fails at close on FIND_COORDINATOR (no consumer groups yet).
                err = os.path.join(d, meta["out"][:-4] + ".err")
                tail = (open(err).read().strip().splitlines() or [""])[-1] if os.path.exists(err) else ""
                run["note"] = ("tool exited non-zero after reporting: " + tail)[:200]
        else:
            err = os.path.join(d, meta["out"][:-4] + ".err")
            tail = (open(err).read().strip().splitlines() or [""])[-1] if os.path.exists(err) else ""
            run["note"] = tail[:200]
        runs.append(run)
    return runs


def fmt(v, digits=1):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def series_label(r):
    b = r["broker"] + (" fsync" if r["durability"] == "fsync-before-ack" else "")
    return f"{b} / {r['generator']}"


AGG_FIELDS = FIELDS + ["cpu_s", "cpu_s_per_mb", "rss_mb"]


def aggregate(runs):
    """Median over repetitions per (workload, broker, durability, generator): one noisy
    repetition on a shared machine moves a median less than a mean."""
    groups = OrderedDict()
    for r in runs:
        groups.setdefault((r["workload"], r["broker"], r["durability"], r["generator"]), []).append(r)
    out = []
    for (w, b, dur, g), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        a = OrderedDict(workload=w, broker=b, durability=dur, generator=g, n=len(ok), of=len(rs))
        for f in AGG_FIELDS:
            vals = [r[f] for r in ok if r.get(f) is not None]
            a[f] = statistics.median(vals) if vals else None
        a["note"] = next((r.get("note") for r in rs if r.get("note")), None)
        out.append(a)
    order = {"shardlog": 0, "kafka": 1}
    out.sort(key=lambda a: (a["workload"], a["generator"] != "native", order.get(a["broker"], 2), a["durability"] != "no-fsync"))
    return out


def find(agg, w, broker, gen="native", dur="no-fsync"):
    for a in agg:
        if a["workload"] == w and a["broker"] == broker and a["generator"] == gen and a["durability"] == dur:
            return a
    return None


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


# (field, label, which way is better for shardlog/kafka)
RATIO_METRICS = [("throughput_mb_s", "MB/s", "higher"), ("p50_ms", "p50", "lower"), ("p99_ms", "p99", "lower"),
                 ("p999_ms", "p99.9", "lower"), ("cpu_s_per_mb", "CPU s/MB", "lower")]


def ratios(agg, disk):
    """shardlog/kafka for every metric of every (workload, durability, generator) both
    brokers ran, from the medians over repetitions; W1 also as fractions of the disk
    ceiling measured in the same run."""
    out = []
    for s in agg:
        if s["broker"] != "shardlog":
            continue
        k = find(agg, s["workload"], "kafka", s["generator"], s["durability"])
        if not k:
            continue
        r = OrderedDict(workload=s["workload"], durability=s["durability"], generator=s["generator"],
                        runs_shardlog=f"{s['n']}/{s['of']}", runs_kafka=f"{k['n']}/{k['of']}", metrics=OrderedDict())
        for f, label, better in RATIO_METRICS:
            r["metrics"][f] = OrderedDict(shardlog=s[f], kafka=k[f], ratio=ratio(s[f], k[f]), better=better)
        if s["workload"] == "W1" and disk:
            fs, fk = ratio(s["throughput_mb_s"], disk), ratio(k["throughput_mb_s"], disk)
            r["metrics"]["fraction_of_disk_ceiling"] = OrderedDict(shardlog=fs, kafka=fk, ratio=ratio(fs, fk), better="higher")
        out.append(r)
    return out


def print_table(hdr, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    print("  ".join(h.ljust(w) for h, w in zip(hdr, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


def print_ratios(rs, disk, meta):
    arrow = {"higher": "higher better", "lower": "lower better"}
    print()
    print(f"shardlog/kafka ratios (medians over {meta.get('reps', '?')} repetition(s) per side, same durability and "
          "generator): x>1 is better for shardlog where the column says 'higher better', x<1 where it says 'lower better'")
    hdr = ["workload", "durability", "generator"] + [f"{label} ({arrow[b]})" for _, label, b in RATIO_METRICS] + ["runs s/k"]
    rows = []
    for r in rs:
        m = r["metrics"]
        rows.append([r["workload"], r["durability"], r["generator"]]
                    + [("x" + fmt(m[f]["ratio"], 2)) if m[f]["ratio"] is not None else "-" for f, _, _ in RATIO_METRICS]
                    + [f"{r['runs_shardlog']} {r['runs_kafka']}"])
    print_table(hdr, rows)
    for r in rs:
        c = r["metrics"].get("fraction_of_disk_ceiling")
        if c:
            print(f"{r['workload']} {r['durability']} {r['generator']}: fraction of the disk ceiling ({disk} MB/s, "
                  f"higher better): shardlog {fmt(c['shardlog'], 2)}, kafka {fmt(c['kafka'], 2)}, x{fmt(c['ratio'], 2)}")
    if disk:
        print(f"disk ceiling: {meta.get('disk_ceiling_method', 'fio')}. With no fsync before the ack both brokers "
              "acknowledge from the page cache (shardlog --flush never) and can exceed it until dirty pages are throttled.")


# ---------------------------------------------------------------- SVG
COLORS = {"shardlog": "#1f77b4", "shardlog fsync": "#2ca02c", "kafka": "#ff7f0e"}


def color_of(label):
    return COLORS.get(label.split(" / ")[0], "#7f7f7f")


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def latency_svg(agg, path):
    pct = [("p50", "p50_ms", 0.5), ("p90", "p90_ms", 0.9), ("p99", "p99_ms", 0.99), ("p99.9", "p999_ms", 0.999),
           ("p99.99", "p9999_ms", 0.9999), ("max", "max_ms", 0.99999)]
    workloads = [w for w in ["W1", "W2", "W3", "W5", "W6", "W7"] if any(a["workload"] == w and a["p99_ms"] for a in agg)]
    if not workloads:
        return
    pw, ph, ml, mt, mb = 360, 300, 60, 40, 90
    width = ml + len(workloads) * (pw + 30)
    height = mt + ph + mb
    vals = [a[k] for a in agg for _, k, _ in pct if a["workload"] in workloads and a.get(k)]
    lo = 10 ** math.floor(math.log10(max(min(vals), 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    if hi <= lo:
        hi = lo * 10
    y = lambda v: mt + ph - (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * ph
    xs = [math.log10(1 / (1 - p)) for _, _, p in pct]
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{ml}" y="16" font-size="14">Latency percentiles (ms, log scale); solid: native generator, dashed: kafka-tools</text>']
    labels = OrderedDict()
    for i, w in enumerate(workloads):
        x0 = ml + i * (pw + 30)
        x = lambda v: x0 + (v - xs[0]) / (xs[-1] - xs[0]) * pw
        s.append(f'<rect x="{x0}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        s.append(f'<text x="{x0 + pw / 2}" y="{mt - 6}" text-anchor="middle" font-size="13">{w}</text>')
        e = 0
        while lo * 10 ** e <= hi:
            v = lo * 10 ** e
            s.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
            if i == 0:
                s.append(f'<text x="{x0 - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
            e += 1
        for (name, _, _), xv in zip(pct, xs):
            s.append(f'<text x="{x(xv):.1f}" y="{mt + ph + 14}" text-anchor="middle">{name}</text>')
        for a in agg:
            if a["workload"] != w:
                continue
            pts = [(x(xv), y(a[k])) for (_, k, _), xv in zip(pct, xs) if a.get(k)]
            if len(pts) < 2:
                continue
            label = series_label(a)
            labels[label] = a["generator"]
            dash = ' stroke-dasharray="5,3"' if a["generator"] != "native" else ""
            s.append(f'<polyline fill="none" stroke="{color_of(label)}" stroke-width="2"{dash} points="'
                     + " ".join(f"{px:.1f},{py:.1f}" for px, py in pts) + '"/>')
            for px, py in pts:
                s.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{color_of(label)}"/>')
    ly = mt + ph + 34
    for j, (label, gen) in enumerate(labels.items()):
        lx = ml + (j % 3) * 260
        yy = ly + (j // 3) * 16
        dash = ' stroke-dasharray="5,3"' if gen != "native" else ""
        s.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{yy}" y2="{yy}" stroke="{color_of(label)}" stroke-width="2"{dash}/>')
        s.append(f'<text x="{lx + 30}" y="{yy + 4}">{esc(label)}</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s))


def throughput_svg(agg, path):
    rows = [a for a in agg if a["throughput_mb_s"]]
    if not rows:
        return
    workloads = list(OrderedDict((a["workload"], 1) for a in rows))
    series = list(OrderedDict((series_label(a), 1) for a in rows))
    bw, gap, ml, mt, ph = 18, 24, 60, 40, 300
    gw = len(series) * bw + gap
    width = ml + len(workloads) * gw + 20
    height = mt + ph + 60 + 16 * ((len(series) + 2) // 3)
    top = max(a["throughput_mb_s"] for a in rows) * 1.15
    y = lambda v: mt + ph - v / top * ph
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{ml}" y="16" font-size="14">Throughput (MB/s, 2^20 bytes); hatched: kafka-tools generator</text>',
         '<defs><pattern id="h" width="4" height="4" patternUnits="userSpaceOnUse"><path d="M0,4 l4,-4" stroke="white" stroke-width="1"/></pattern></defs>']
    step = 10 ** math.floor(math.log10(top / 2))
    v = 0.0
    while v <= top:
        s.append(f'<line x1="{ml}" x2="{width - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        s.append(f'<text x="{ml - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step if top / step < 12 else step * 5
    for i, w in enumerate(workloads):
        x0 = ml + i * gw + gap / 2
        s.append(f'<text x="{x0 + len(series) * bw / 2:.1f}" y="{mt + ph + 16}" text-anchor="middle" font-size="13">{w}</text>')
        for j, label in enumerate(series):
            a = next((a for a in rows if a["workload"] == w and series_label(a) == label), None)
            if not a:
                continue
            x = x0 + j * bw
            v = a["throughput_mb_s"]
            s.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bw - 2}" height="{mt + ph - y(v):.1f}" fill="{color_of(label)}"/>')
            if a["generator"] != "native":
                s.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bw - 2}" height="{mt + ph - y(v):.1f}" fill="url(#h)"/>')
            s.append(f'<text x="{x + bw / 2 - 1:.1f}" y="{y(v) - 3:.1f}" text-anchor="middle" font-size="8">{v:.0f}</text>')
    for j, label in enumerate(series):
        lx = ml + (j % 3) * 240
        yy = mt + ph + 36 + (j // 3) * 16
        s.append(f'<rect x="{lx}" y="{yy - 8}" width="14" height="10" fill="{color_of(label)}"/>')
        if "kafka-tools" in label:
            s.append(f'<rect x="{lx}" y="{yy - 8}" width="14" height="10" fill="url(#h)"/>')
        s.append(f'<text x="{lx + 20}" y="{yy + 1}">{esc(label)}</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s))


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
    runs = [r for r in load_runs(d) if f"{r['workload']}-" in name]
    for r in runs:
        n = f"{r['workload']}-{r['broker']}{'-fsync' if r['durability'] == 'fsync-before-ack' else ''}-{r['generator']}-r{r['rep']}"
        if n == name:
            print(f"  {name:<34} {fmt(r['throughput_mb_s'])} MB/s  p99 {fmt(r['p99_ms'], 2)} ms  "
                  f"cpu {fmt(r['cpu_s'])} s  rss {fmt(r['rss_mb'], 0)} MB  {r['status']}", file=sys.stderr)


def cmd_summarize(d):
    meta = load_meta(d)
    runs = load_runs(d)
    agg = aggregate(runs)
    disk = meta.get("disk_seq_write_mb_s")
    rs = ratios(agg, disk)
    summary = OrderedDict(machine=machine(meta), runs=runs, medians=agg, ratios=rs)
    json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
    latency_svg(agg, os.path.join(d, "latency.svg"))
    throughput_svg(agg, os.path.join(d, "throughput.svg"))

    hdr = ["workload", "broker", "durability", "generator", "MB/s", "rec/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "cpu s",
           "cpu s/MB", "RSS MB", "runs"]
    rows = [[a["workload"], a["broker"], a["durability"], a["generator"], fmt(a["throughput_mb_s"]), fmt(a["records_s"], 0),
             fmt(a["p50_ms"], 2), fmt(a["p99_ms"], 2), fmt(a["p999_ms"], 2), fmt(a["max_ms"], 2), fmt(a["cpu_s"]),
             fmt(a["cpu_s_per_mb"], 3), fmt(a["rss_mb"], 0), f"{a['n']}/{a['of']}"] for a in agg]
    print()
    if meta.get("profiled"):
        print("PROFILED RUN: perf was sampling the broker, figures are perturbed; compare only unprofiled runs")
    print_table(hdr, rows)
    failed = [a for a in agg if a["n"] < a["of"]]
    for a in failed:
        print(f"note: {a['workload']} {a['broker']} {a['generator']}: {a['of'] - a['n']} run(s) failed: {a['note'] or '(see runs/*.err)'}")
    print()
    print_ratios(rs, disk, meta)
    print()
    print(f"results: {d}/summary.json, latency.svg, throughput.svg (figures are medians over repetitions; "
          f"{'quick run' if meta.get('quick') else 'full run'}, {meta.get('reps', '?')} rep(s))")
    w1s, w1k = find(agg, "W1", "shardlog"), find(agg, "W1", "kafka")
    w2s, w2k = find(agg, "W2", "shardlog"), find(agg, "W2", "kafka")
    w2fs, w2fk = find(agg, "W2", "shardlog", dur="fsync-before-ack"), find(agg, "W2", "kafka", dur="fsync-before-ack")
    w3s, w3k = find(agg, "W3", "shardlog"), find(agg, "W3", "kafka")
    get = lambda a, k: a[k] if a else None
    r_w1 = ratio(get(w1s, "throughput_mb_s"), get(w1k, "throughput_mb_s"))
    r_w2 = ratio(get(w2s, "throughput_mb_s"), get(w2k, "throughput_mb_s"))
    r_w2f = ratio(get(w2fs, "throughput_mb_s"), get(w2fk, "throughput_mb_s"))
    r_p99 = ratio(get(w3s, "p99_ms"), get(w3k, "p99_ms"))
    r_p999 = ratio(get(w3s, "p999_ms"), get(w3k, "p999_ms"))
    check = lambda ok: "-" if ok is None else ("met" if ok else "NOT met")
    print("targets (native generator, equal durability):")
    if r_w1 is not None:
        print(f"  W1 throughput >= 2x kafka: x{fmt(r_w1, 2)} {check(r_w1 >= 2)}")
    if r_w2 is not None:
        print(f"  W2 throughput >= 2x kafka: x{fmt(r_w2, 2)} {check(r_w2 >= 2)}")
    if r_w2f is not None:
        print(f"  W2 fsync-before-ack throughput >= 2x kafka: x{fmt(r_w2f, 2)} {check(r_w2f >= 2)}")
    if r_p99 is not None:
        print(f"  W3 p99 <= 1/5 of kafka: x{fmt(r_p99, 2)} {check(r_p99 <= 0.2)}")
    if r_p999 is not None:
        print(f"  W3 p99.9 <= 1/10 of kafka: x{fmt(r_p999, 2)} {check(r_p999 <= 0.1)}")
    # Transactions (issue 23): W7 committed throughput and the EndTxn round trip, W8 a
    # read_committed consume of a transactionally written topic.
    w7s, w7k = find(agg, "W7", "shardlog"), find(agg, "W7", "kafka")
    w8s, w8k = find(agg, "W8", "shardlog"), find(agg, "W8", "kafka")
    r_w7 = ratio(get(w7s, "throughput_mb_s"), get(w7k, "throughput_mb_s"))
    r_w7_p99 = ratio(get(w7s, "p99_ms"), get(w7k, "p99_ms"))
    r_w8 = ratio(get(w8s, "throughput_mb_s"), get(w8k, "throughput_mb_s"))
    if r_w7 is not None:
        print(f"  W7 transactional throughput >= 2x kafka: x{fmt(r_w7, 2)} {check(r_w7 >= 2)}")
    if r_w7_p99 is not None:
        print(f"  W7 EndTxn p99 <= 1/2 of kafka: x{fmt(r_w7_p99, 2)} {check(r_w7_p99 <= 0.5)}")
    if r_w8 is not None:
        print(f"  W8 read_committed consume >= kafka: x{fmt(r_w8, 2)} {check(r_w8 >= 1)}")
    if disk and w1s and w1s["throughput_mb_s"]:
        print(f"  W1 >= half the disk ceiling ({disk} MB/s): {w1s['throughput_mb_s'] / disk:.2f} of it "
              f"{check(w1s['throughput_mb_s'] >= disk / 2)}")
    print(f"shardlog/kafka: W1 throughput x{fmt(r_w1, 2)}, W3 p99 x{fmt(r_p99, 2)}")


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
