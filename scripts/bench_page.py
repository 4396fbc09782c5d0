"""The page of a bench results directory: report.md (Markdown) with the machine, the
targets met and missed, and per workload its table, ratios, timeline and drain figures and
plots. `write_page` is called by `bench_report.py summarize`."""
import os

from bench_report import (RATIO_HDR, TABLE_HDR, WORKLOADS, disk_lines, fmt, group_name, ratio_intro, ratio_row,
                          series_label, table_row, unique, workload_key)

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
