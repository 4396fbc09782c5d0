"""The plots of a bench results directory (matplotlib, Agg backend): per workload,
throughput bars, latency percentiles on a "nines" axis, and latency and MB/s over time
from the generators' timelines. `make_plots` is called by `bench_report.py summarize`;
matplotlib is imported only here, so `bench_report.py line` runs without it."""
import os
import sys
from collections import OrderedDict

from bench_report import GENERATORS, fmt, is_max, series_label, tl_span, tl_windows, unique, workload_key

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
