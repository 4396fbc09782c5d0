"""One history campaign: a local 3-node cluster, the workload under a nemesis, the checker.
What `scripts/history.sh` runs.

    python3 -m tests.history.campaign --duration 120 --seed 7 --nemesis kill9 [--out-dir DIR]

The cluster is shardlog (cluster_harness.py; SHARDLOG_BIN or target/release/shardlog), or
Apache Kafka with SHARDLOG_TEST_TARGET=kafka. Topic: RF 3, min.insync.replicas 2, acks=all
idempotent producers (--acks 1: not idempotent). The history, the checker's report
(JSON) and the nodes' logs are kept in the output directory.
Exit code: the checker's (0 clean, 1 anomalies), 3 if the workload itself failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from .check import check
from .clusters import REPO, make_cluster, target, wait_brokers
from .nemesis import KillLeader
from .workload import Config, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.history.campaign", description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of load (default 120)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nemesis", choices=["kill9", "none"], default="kill9")
    ap.add_argument("--interval", type=float, default=20.0, help="seconds between kills (default 20)")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--group-consumers", type=int, default=2)
    ap.add_argument("--txn-producers", type=int, default=0, help="transactional producers (Kafka only for now)")
    ap.add_argument("--rc-consumers", type=int, default=0)
    ap.add_argument("--acks", choices=["all", "1"], default="all")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--out-dir", type=Path, default=None,
                    help="default: target/history/<time>-seed<seed>-<nemesis>")
    ap.add_argument("--keep-data", action="store_true", help="keep the nodes' data dirs")
    a = ap.parse_args(argv)

    out = a.out_dir or REPO / "target" / "history" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{a.seed}-{a.nemesis}"
    out.mkdir(parents=True, exist_ok=True)
    tgt = target()
    cluster = make_cluster(out / "cluster", target=tgt, n=a.nodes, log_dir=out, name=f"{tgt}-")
    print(f"campaign: {tgt} cluster of {a.nodes}, {a.duration:g} s, seed {a.seed}, nemesis {a.nemesis}; "
          f"output in {out}", flush=True)
    cfg = Config(partitions=a.partitions, replication=min(3, a.nodes), min_insync=min(2, a.nodes),
                 duration_s=a.duration, seed=a.seed, producers=a.producers, rate=a.rate, acks=a.acks,
                 consumers=a.consumers, group_consumers=a.group_consumers, txn_producers=a.txn_producers,
                 rc_consumers=a.rc_consumers, message_timeout_ms=120000)
    history = out / "history.jsonl"
    try:
        cluster.start()
        cluster.wait_ready(timeout_s=240)
        wait_brokers(cluster)
        during = None
        if a.nemesis == "kill9":
            cfg.topic = f"history-{a.seed}-{int(time.time())}"
            during = KillLeader(cluster, cfg.topic, cfg.partitions, seed=a.seed, first_s=min(10.0, a.duration / 3),
                                interval_s=a.interval)
        bootstrap = ",".join(nd.bootstrap for nd in cluster.nodes if getattr(nd, "is_broker", True))
        w = run(bootstrap, cfg, history, during=during)
    finally:
        cluster.close()
        if not a.keep_data:
            shutil.rmtree(out / "cluster", ignore_errors=True)
    rep = check(w.h.ops)
    (out / "report.json").write_text(json.dumps(rep.to_json(None), indent=1, sort_keys=True))
    print(rep.text())
    kills = sum(1 for op in w.h.ops if op["f"] == "nemesis" and op.get("action") == "kill9" and op["type"] == "ok")
    print(f"campaign: {kills} kill(s); history {history}; report {out / 'report.json'}")
    for e in w.errors:
        print(f"campaign: workload error: {e}", file=sys.stderr)
    if w.errors:
        return 3
    return 0 if rep.valid else 1


if __name__ == "__main__":
    sys.exit(main())
