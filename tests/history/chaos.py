"""The chaos runner (issue 28, point 2): one seeded run = a local cluster built for the
chosen nemeses, the history workload (workload.py) under a schedule of faults drawn from
the seed, then the checker (check.py) over the whole history.

    python3 -m tests.history.chaos --seed 7 --duration 600 --nemesis kill-leader
    python3 -m tests.history.chaos --seed 1 --duration 180 --nemesis all      # mixed
    python3 -m tests.history.chaos --workload acks-1 --nemesis network

Nemeses (nemeses/): process (kill -9 / SIGSTOP of a leader, follower, controller,
coordinator), network (partitions between nodes in namespaces: isolate one, isolate the
controller, minority/majority, bridge, flapping), disk (disk full, fsync and write EIO,
torn write, slow disk, power loss), membership (reassignment, preferred election; broker
decommission: drained, stopped, unregistered, back and rebalanced, on a 4th node built for
it). Names and groups: `--nemesis` takes a comma-separated list; `all` is every one.

Schedule: after `--first` seconds, repeatedly: pick a nemesis (seeded), inject its fault,
hold it for a seeded time in `--hold`, heal it, restart a node that halted (a broker
halts when a log goes offline, as Kafka's does: src/storage/log_dir_failure.rs), wait (bounded) until the cluster is whole
again (every node up, every ISR full), rest a seeded time in `--interval`. The last fault
is healed before the producers stop, so the final drain reads a whole cluster. The seed
fixes every choice; what a choice hits (which node leads) depends on the run.

Workloads: acks-all (idempotent, RF 3, min.insync.replicas 2: nothing may be lost,
duplicated or inconsistent), acks-1 (not idempotent: lost, overwritten and duplicated
writes are reported and tolerated, every other anomaly fails the run: a leader acks before
its followers have the write, so a deposed leader's acks are lost), unclean (acks-1 on a topic with
unclean.leader.election.enable: an out-of-sync replica may lead, so losses are expected and
reported, as acks-1's), compacted (acks-all on a
compacted topic: sends carry one of 50 keys, segments roll every 3 s and the cleaner runs
during the run; a write the cleaner removed is judged superseded, not lost, when a later
record with its key is known). Every workload has assigned consumers and a committing
consumer group.

The cluster: shardlog (cluster_harness.py; SHARDLOG_BIN or target/release/shardlog) or
Apache Kafka (SHARDLOG_TEST_TARGET=kafka; shardlog-only nemeses are skipped and said so).
Output dir: history.jsonl, report.json, summary.json (the figures a campaign adds up), the
nodes' logs. Exit code: 0 clean, 1 anomalies, 2 nothing could run here, 3 the workload or
the cluster failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from .check import check
from .clusters import REPO, make_cluster, target, wait_brokers
from .nemeses import GROUPS, select
from .nemeses.common import Context, healthy, poll, restart_halted
from .nemeses.disk import NodeDisk
from .netns import Net
from .workload import Config, run

WORKLOADS = {
    # name: (acks, compacted topic, more topic configs, anomaly kinds tolerated)
    "acks-all": ("all", False, {}, set()),
    "acks-1": ("1", False, {}, {"lost", "duplicate", "overwritten"}),
    "unclean": ("1", False, {"unclean.leader.election.enable": "true"}, {"lost", "duplicate", "overwritten"}),
    "compacted": ("all", True, {}, set()),
}


def schedule(ctx: Context, nemeses, first_s: float, hold: tuple[float, float], interval: tuple[float, float],
             counts: Counter):
    """The workload's `during`: faults until the run's end (see the module comment)."""
    def during(w) -> None:
        ctx.history = w.h
        end = time.monotonic() + w.cfg.duration_s
        rng = ctx.rng
        next_at = time.monotonic() + first_s
        while True:
            now = time.monotonic()
            if now >= end or end - max(now, next_at) < hold[0]:
                break
            if now < next_at:
                time.sleep(min(0.2, next_at - now))
                continue
            nem = rng.choice(nemeses)
            hold_s = min(rng.uniform(*hold), end - now)
            fault = nem.inject(ctx)
            if fault is not None:
                counts[nem.name] += 1
                nem.hold(ctx, fault, time.monotonic() + hold_s)
                nem.heal(ctx, fault)
                halted = restart_halted(ctx)
                if halted:
                    counts["halted"] += len(halted)
            whole = poll(lambda: healthy(ctx), ctx.bound_s, step_s=0.5)
            ctx.record("ok" if whole else "info", action="healthy", after=nem.name)
            next_at = time.monotonic() + rng.uniform(*interval)
        while time.monotonic() < end:
            time.sleep(0.2)
    return during


def unavailable() -> dict[str, str]:
    """The needs (nemeses/base.py) this machine cannot meet, with why."""
    out = {}
    why = Net.available()
    if why:
        out["netns"] = why
    if os.geteuid() != 0 or shutil.which("mount") is None:
        out["disks"] = "a tmpfs per node needs root and mount(8)"
    return out


def build(args, nemeses, out: Path):
    """The cluster the nemeses need (unstarted), its Net (or None) and per-node disks."""
    needs = set().union(*(n.needs for n in nemeses)) if nemeses else set()
    tgt = target()
    net = None
    if "netns" in needs:
        why = Net.available()
        if why:
            raise RuntimeError(f"partition nemeses need network namespaces: {why}")
        net = Net(args.nodes).create()
    extra = []
    if "storage-faults" in needs:
        extra += ["--storage-fault", "drop-unsynced"]
    if args.flush:
        extra += ["--flush", args.flush]
    cluster = make_cluster(out / "cluster", target=tgt, n=args.nodes, log_dir=out, name=f"{tgt}-",
                           hosts=net.hosts() if net else None, prefixes=net.prefixes() if net else None,
                           extra_args=extra)
    disks = {}
    for nd in cluster.nodes:
        disk = NodeDisk(nd.data_dir, out / "cluster" / f"node-{nd.node_id}" / "storage-faults")
        disk.fault_file.parent.mkdir(parents=True, exist_ok=True)
        if "disks" in needs:
            disk.mount()
        if "storage-faults" in needs:
            disk.clear()
            nd.env.update({"SHARDLOG_TEST_HOOKS": "1", "SHARDLOG_TEST_STORAGE_FAULTS_FILE": str(disk.fault_file)})
        disks[nd.node_id] = disk
    return cluster, net, disks


def parse_range(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(",")
    return float(lo), float(hi or lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.history.chaos", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=180.0, help="seconds of load (default 180)")
    ap.add_argument("--nemesis", default="all", help=f"names and groups, comma-separated; groups: {sorted(GROUPS)}")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="acks-all")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=100.0, help="sends per second per producer")
    ap.add_argument("--first", type=float, default=8.0, help="seconds before the first fault")
    ap.add_argument("--hold", default="4,15", help="seconds a fault is held: MIN,MAX (default 4,15)")
    ap.add_argument("--interval", default="2,8", help="seconds between faults: MIN,MAX (default 2,8)")
    ap.add_argument("--flush", default="", help="shardlog's flush mode (default: the broker's, always)")
    ap.add_argument("--out-dir", type=Path, default=None)
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--skip-unavailable", action="store_true",
                    help="drop the nemeses this machine cannot run (no namespaces, not root) instead of failing")
    a = ap.parse_args(argv)

    tgt = target()
    nemeses = select(a.nemesis)
    if tgt == "kafka":
        skipped = [n.name for n in nemeses if not n.kafka]
        nemeses = [n for n in nemeses if n.kafka]
        if skipped:
            print(f"chaos: against Kafka, skipped (shardlog only): {', '.join(skipped)}", flush=True)
    if a.skip_unavailable:
        missing = unavailable()
        dropped = [n.name for n in nemeses if n.needs & set(missing)]
        nemeses = [n for n in nemeses if not n.needs & set(missing)]
        if dropped:
            print(f"chaos: skipped here: {', '.join(dropped)} ({'; '.join(missing.values())})", flush=True)
    if not nemeses:
        print("chaos: no nemesis left to run", file=sys.stderr)
        return 2
    if any("spare-broker" in n.needs for n in nemeses) and a.nodes < 4:
        print("chaos: 4 nodes, so a broker can be decommissioned (3 replicas per partition)", flush=True)
        a.nodes = 4
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = a.out_dir or REPO / "target" / "chaos" / f"{stamp}-{tgt}-seed{a.seed}-{a.nemesis.replace(',', '+')}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        cluster, net, disks = build(a, nemeses, out)
    except RuntimeError as e:
        print(f"chaos: {e}", file=sys.stderr)
        return 2
    acks, compacted, topic_config, tolerated = WORKLOADS[a.workload]
    cfg = Config(partitions=a.partitions, replication=min(3, a.nodes), min_insync=min(2, a.nodes),
                 duration_s=a.duration, seed=a.seed, producers=3, rate=a.rate, acks=acks, consumers=2,
                 group_consumers=2, message_timeout_ms=120000, compacted=compacted, keys=50 if compacted else 0,
                 topic_config=topic_config)
    cfg.topic = f"chaos-{a.seed}-{int(time.time())}"
    cfg.group = f"chaos-group-{a.seed}"
    counts: Counter = Counter()
    history = out / "history.jsonl"
    print(f"chaos: {tgt} cluster of {a.nodes}, seed {a.seed}, {a.duration:g} s, workload {a.workload}, "
          f"nemeses {[n.name for n in nemeses]}; output {out}", flush=True)
    failure = None
    w = None
    try:
        cluster.start()
        cluster.wait_ready(timeout_s=240)
        wait_brokers(cluster)
        ctx = Context(cluster=cluster, topic=cfg.topic, partitions=cfg.partitions, group=cfg.group, history=None,
                      rng=random.Random(a.seed), net=net, disks=disks)
        bootstrap = ",".join(nd.bootstrap for nd in cluster.nodes if getattr(nd, "is_broker", True))
        w = run(bootstrap, cfg, history,
                during=schedule(ctx, nemeses, a.first, parse_range(a.hold), parse_range(a.interval), counts))
    except Exception as e:
        failure = f"{type(e).__name__}: {e}"
    finally:
        cluster.close()
        if net is not None:
            net.remove()
        for d in disks.values():
            d.unmount()
        if not a.keep_data:
            shutil.rmtree(out / "cluster", ignore_errors=True)
    if w is None:
        print(f"chaos: the run failed before a history: {failure}", file=sys.stderr)
        return 3
    rep = check(w.h.ops)
    drained, parts = rep.stats.get("drained", 0), rep.stats.get("partitions")
    if failure is None and parts is not None and drained < parts:
        # The final drain could not read every partition: their acknowledged writes went
        # unchecked, and a cluster that cannot serve a read at the end is no clean run.
        failure = (f"the final drain read {drained} of {parts} partitions "
                   f"({rep.stats.get('acked_unchecked', 0)} acknowledged writes unchecked)")
    # A nemesis that never found its target judged nothing (kill-coordinator once ran a
    # whole campaign that way): a run whose nemeses all injected nothing is no run.
    idle = [n.name for n in nemeses if counts[n.name] == 0]
    if failure is None and nemeses and len(idle) == len(nemeses):
        failure = f"no fault injected: {', '.join(idle)} found no target (see the nemesis lines of history.jsonl)"
    elif idle:
        print(f"chaos: nemeses with no fault this run (not drawn, or no target found): {', '.join(idle)}", file=sys.stderr)
    found = {k: len(v) for k, v in rep.anomalies.items() if v}
    fatal = {k: n for k, n in found.items() if k not in tolerated}
    summary = {"target": tgt, "seed": a.seed, "duration_s": a.duration, "workload": a.workload,
               "nemeses": [n.name for n in nemeses], "faults": dict(counts), "ops": len(w.h.ops),
               "stats": rep.stats, "anomalies": found, "tolerated": sorted(tolerated & set(found)),
               "valid": not fatal and not w.errors and failure is None, "workload_errors": w.errors, "idle_nemeses": idle}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out / "report.json").write_text(json.dumps(rep.to_json(None), indent=1, sort_keys=True))
    print(rep.text())
    print(f"chaos: faults {dict(counts)}; {len(w.h.ops)} ops; anomalies {found or 'none'}"
          f"{' (tolerated under ' + a.workload + ': ' + ', '.join(sorted(tolerated & set(found))) + ')' if tolerated & set(found) else ''}; "
          f"output {out}", flush=True)
    for e in w.errors:
        print(f"chaos: workload error: {e}", file=sys.stderr)
    if failure:
        print(f"chaos: run failed: {failure}", file=sys.stderr)
    if failure or w.errors:
        return 3
    return 1 if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
