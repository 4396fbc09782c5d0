"""Judges a whole history (format: history.py) the way Jepsen's Kafka workload does.

    python3 -m tests.history.check history.jsonl [--json report.json] [--limit 20]

Prints a summary (operations, outcomes, reads) and every anomaly kind found with its
count and the first offending records; `--json -` prints the report as JSON instead.
Exit code: 0 nothing found, 1 anomalies found, 2 the history could not be read.

Anomaly kinds (each with the records that show it):
  lost                an acknowledged write (a plain send acked ok, or a send of a
                      transaction that committed) that no reader ever saw, although readers
                      read past its offset in that partition, or a complete final drain
                      ended at or below it; also a committed transactional write that no
                      read_committed reader saw although a complete read_committed drain
                      read past it
  duplicate           one sent value at two (partition, offset)s (acks and reads)
  inconsistent_offset two different values read at one (partition, offset)
  overwritten         a write acknowledged at a (partition, offset) where readers saw another
                      value (or another write was acknowledged): the log that acked it was
                      truncated, as when a deposed leader acks acks=1 writes or an unclean
                      election picks a replica without them. The write is lost too (counted
                      under lost when readers got past it); this names how
  nonmonotonic        within one reader session, an offset at or below the previous one
                      read from that partition, or below the session's start offset
  skip                within one reader session, offsets jumped over where some reader saw
                      data this session should have seen (for read_committed: a plain or
                      committed record; transaction markers and aborted data leave gaps
                      nobody sees data in, which are fine). `--allow-gaps` turns this off
                      (compacted topics: the cleaner removes records earlier readers saw;
                      there an unread acknowledged write is not lost when a later record
                      with its key is known at a higher offset: it was superseded)
  aborted_read        a read_committed reader saw a value of an aborted transaction
  uncommitted_read    a read_committed reader saw a value of a transaction that never
                      ended, or saw it before the transaction's commit was even invoked
  commit_backwards    a consumer group's committed offset for a partition below one that
                      a commit which had completed before (in real time) had set: either a
                      later successful commit, or a committed-offset fetch
  phantom             a value read that no producer ever sent

Sends that failed or got no answer are indeterminate: they may or may not be in the log
(the summary counts those found). Writes the readers never got near are "unchecked",
not lost.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from .history import load

KINDS = ("lost", "duplicate", "inconsistent_offset", "overwritten", "nonmonotonic", "skip", "aborted_read",
         "uncommitted_read", "commit_backwards", "phantom")

RC = "read_committed"


@dataclass
class Report:
    anomalies: dict[str, list[dict]] = field(default_factory=lambda: {k: [] for k in KINDS})
    stats: dict = field(default_factory=dict)

    def add(self, kind: str, **rec) -> None:
        self.anomalies[kind].append(rec)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.anomalies.items()}

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def to_json(self, limit: int | None = 20) -> dict:
        return {"valid": self.valid, "counts": self.counts(), "stats": self.stats,
                "anomalies": {k: (v if limit is None else v[:limit]) for k, v in self.anomalies.items() if v}}

    def text(self, limit: int = 20) -> str:
        s = self.stats
        out = [f"history: {s.get('ops', 0)} ops; sends ok={s.get('sends_ok', 0)} fail={s.get('sends_fail', 0)} "
               f"unknown={s.get('sends_unknown', 0)}; transactions committed={s.get('txn_committed', 0)} "
               f"aborted={s.get('txn_aborted', 0)} unknown={s.get('txn_unknown', 0)} open={s.get('txn_open', 0)}",
               f"reads: {s.get('reads', 0)} records in {s.get('sessions', 0)} sessions, "
               f"{s.get('distinct_read', 0)} distinct values; commits ok={s.get('commits_ok', 0)} "
               f"fail={s.get('commits_fail', 0)}; drained partitions {s.get('drained', 0)}/{s.get('partitions', '?')}",
               f"acknowledged writes: {s.get('acked', 0)} (read {s.get('acked_read', 0)}, "
               f"unchecked {s.get('acked_unchecked', 0)}"
               + (f", superseded by a later record with the key {s['acked_superseded']}" if s.get("acked_superseded") else "")
               + "); indeterminate sends found in the log: "
               f"{s.get('indeterminate_read', 0)}"]
        counts = self.counts()
        out.append("anomalies: " + (", ".join(f"{k}={n}" for k, n in counts.items() if n) or "none"))
        for k in KINDS:
            recs = self.anomalies[k]
            if not recs:
                continue
            out.append(f"== {k}: {len(recs)}" + (f" (first {limit})" if len(recs) > limit else ""))
            for r in recs[:limit]:
                out.append("  " + json.dumps(r, sort_keys=True))
        out.append("VALID" if self.valid else "INVALID")
        return "\n".join(out)


def _src(op: dict, what: str) -> dict:
    return {"by": op["proc"], "op": op.get("i"), "what": what, "t": op.get("t")}


def check(ops: list[dict], allow_gaps: bool | None = None, sources_kept: int = 4) -> Report:
    """The report for a history (its ops, in file order)."""
    rep = Report()
    meta = next((op for op in ops if op["f"] == "meta"), {})
    if allow_gaps is None:
        allow_gaps = bool(meta.get("config", {}).get("compacted", False))

    sends: dict[str, dict] = {}
    txn_of: dict[str, str] = {}
    txn_end: dict[str, dict] = {}
    txn_seen: set[str] = set()
    sessions: dict[tuple[str, object], dict] = {}
    current_session: dict[str, object] = {}
    reads: list[tuple[dict, str, object, int, int, str]] = []  # (op, proc, session, p, o, v)
    drains: list[dict] = []
    commits: list[dict] = []
    fetches: list[dict] = []
    poll_errors = 0
    for op in ops:
        f = op["f"]
        if f == "send":
            v = op.get("value")
            if v is not None:
                sends[v] = op
                if op.get("txn") is not None:
                    txn_of[v] = op["txn"]
                    txn_seen.add(op["txn"])
        elif f == "txn":
            txn_end[op["txn"]] = op
            txn_seen.add(op["txn"])
        elif f == "txn-begin":
            txn_seen.add(op["txn"])
        elif f == "assign":
            key = (op["proc"], op.get("session"))
            sessions[key] = {"isolation": op.get("isolation", "read_uncommitted"),
                             "start": op.get("start") or {}, "group": op.get("group"), "op": op["i"]}
            current_session[op["proc"]] = op.get("session")
        elif f == "poll":
            if op.get("type") != "ok":
                poll_errors += 1
                continue
            sess = op.get("session", current_session.get(op["proc"]))
            for p, o, v in op.get("msgs", []):
                reads.append((op, op["proc"], sess, int(p), int(o), v))
        elif f == "drain":
            drains.append(op)
        elif f == "commit":
            commits.append(op)
        elif f == "committed":
            fetches.append(op)

    def session_of(proc: str, sess) -> dict:
        return sessions.get((proc, sess), {"isolation": "read_uncommitted", "start": {}, "group": None})

    # -- what sits where: acks and reads ---------------------------------------------
    at: dict[tuple[int, int], dict[str, list[dict]]] = defaultdict(dict)
    where: dict[str, dict[tuple[int, int], list[dict]]] = defaultdict(dict)

    def note(p: int, o: int, v: str, src: dict) -> None:
        lst = at[(p, o)].setdefault(v, [])
        if len(lst) < sources_kept:
            lst.append(src)
        lst2 = where[v].setdefault((p, o), [])
        if len(lst2) < sources_kept:
            lst2.append(src)

    for v, op in sends.items():
        if op.get("type") == "ok" and op.get("offset") is not None and op["offset"] >= 0:
            note(int(op["partition"]), int(op["offset"]), v, _src(op, "ack"))
    for op, proc, sess, p, o, v in reads:
        note(p, o, v, _src(op, f"read (session {sess})"))

    for (p, o), vals in sorted(at.items()):
        if len(vals) > 1:
            read = [v for v, srcs in vals.items() if any(s["what"] != "ack" for s in srcs)]
            kind = "inconsistent_offset" if len(read) > 1 else "overwritten"
            rep.add(kind, partition=p, offset=o, values={v: srcs for v, srcs in sorted(vals.items())})
    for v, places in where.items():
        if len(places) > 1:
            rep.add("duplicate", value=v,
                    at=[{"partition": p, "offset": o, "sources": srcs} for (p, o), srcs in sorted(places.items())])

    # -- visibility of a value ------------------------------------------------------
    def status(v: str) -> str:
        """plain | committed | aborted | indeterminate (txn outcome unknown) | open | phantom"""
        if v not in sends:
            return "phantom"
        txn = txn_of.get(v)
        if txn is None:
            return "plain"
        end = txn_end.get(txn)
        if end is None:
            return "open"
        return {"committed": "committed", "aborted": "aborted"}.get(end.get("outcome"), "indeterminate")

    phantoms: dict[str, list[dict]] = {}
    for op, proc, sess, p, o, v in reads:
        if v not in sends:
            phantoms.setdefault(v, []).append({"by": proc, "op": op["i"], "partition": p, "offset": o})
    for v, seen in phantoms.items():
        rep.add("phantom", value=v, read=seen[:sources_kept])

    seen_any: dict[int, list[int]] = defaultdict(list)
    seen_visible: dict[int, list[int]] = defaultdict(list)
    for (p, o), vals in at.items():
        readers = [v for v, srcs in vals.items() if any(s["what"] != "ack" for s in srcs)]
        if readers:
            seen_any[p].append(o)
            if any(status(v) in ("plain", "committed") for v in readers):
                seen_visible[p].append(o)
    for d in (seen_any, seen_visible):
        for lst in d.values():
            lst.sort()

    # -- sessions: monotonic, dense, read_committed ------------------------------------
    last: dict[tuple[str, object, int], int] = {}
    for op, proc, sess, p, o, v in reads:
        info = session_of(proc, sess)
        rc = info["isolation"] == RC
        key = (proc, sess, p)
        prev = last.get(key)
        start = info["start"].get(p)
        if prev is None:
            if start is not None and o < start:
                rep.add("nonmonotonic", proc=proc, session=sess, partition=p, offset=o, value=v,
                        previous=None, start=start, op=op["i"], why="read below the session's start offset")
            gap_from = start  # offsets [start, o) must hold nothing this session sees
        else:
            if o <= prev:
                rep.add("nonmonotonic", proc=proc, session=sess, partition=p, offset=o, value=v,
                        previous=prev, op=op["i"], why="offset at or below the previous read")
            gap_from = prev + 1
        if gap_from is not None and o > gap_from and not allow_gaps:
            lst = (seen_visible if rc else seen_any)[p]
            lo, hi = bisect.bisect_left(lst, gap_from), bisect.bisect_left(lst, o)
            if hi > lo:
                rep.add("skip", proc=proc, session=sess, partition=p, isolation=info["isolation"],
                        previous=prev, start=start if prev is None else None, offset=o, op=op["i"],
                        missed=lst[lo:min(hi, lo + 10)], missed_count=hi - lo)
        if prev is None or o > prev:
            last[key] = o
        if rc:
            st = status(v)
            txn = txn_of.get(v)
            if st == "aborted":
                rep.add("aborted_read", proc=proc, session=sess, partition=p, offset=o, value=v, txn=txn,
                        op=op["i"], t=op.get("t"), txn_end=txn_end[txn]["i"])
            elif st == "open":
                rep.add("uncommitted_read", proc=proc, session=sess, partition=p, offset=o, value=v, txn=txn,
                        op=op["i"], t=op.get("t"), why="the transaction never ended")
            elif txn is not None and op.get("t") is not None and txn_end[txn].get("t0") is not None \
                    and op["t"] < txn_end[txn]["t0"]:
                rep.add("uncommitted_read", proc=proc, session=sess, partition=p, offset=o, value=v, txn=txn,
                        op=op["i"], t=op["t"], commit_invoked=txn_end[txn]["t0"],
                        why="read before the transaction's commit was invoked")

    # -- lost -------------------------------------------------------------------------
    read_values = {v for _, _, _, _, _, v in reads}
    rc_read_values = {v for _, proc, sess, _, _, v in reads if session_of(proc, sess)["isolation"] == RC}
    reach: dict[int, int] = {}
    for _, _, _, p, o, _ in reads:
        reach[p] = max(reach.get(p, 0), o + 1)
    ru_end: dict[int, int] = {}
    rc_end: dict[int, int] = {}
    drained = set()
    for d in drains:
        if not d.get("complete"):
            continue
        p, end = int(d["partition"]), int(d["end"])
        drained.add(p)
        target = rc_end if d.get("isolation") == RC else ru_end
        target[p] = max(target.get(p, 0), end)
        if d.get("isolation") != RC:
            reach[p] = max(reach.get(p, 0), end)

    # Compacted topics: the newest offset known to hold each (partition, key), from acks
    # and reads. The cleaner may remove a record once a later one with its key exists.
    newest: dict[tuple[int, str], int] = {}
    if allow_gaps:
        for (p, o), vals in at.items():
            for v in vals:
                k = sends.get(v, {}).get("key")
                if k is not None and o > newest.get((p, k), -1):
                    newest[(p, k)] = o

    acked = 0
    acked_read = 0
    superseded = 0
    unchecked = 0
    for v, op in sends.items():
        if op.get("type") != "ok" or op.get("offset") is None:
            continue
        st = status(v)
        if st not in ("plain", "committed"):
            continue
        acked += 1
        p, o = int(op["partition"]), int(op["offset"])
        if v in read_values:
            acked_read += 1
            if st == "committed" and v not in rc_read_values and rc_end.get(p, 0) > o:
                rep.add("lost", value=v, partition=p, offset=o, proc=op["proc"], op=op["i"], txn=txn_of.get(v),
                        why=f"committed, read only by read_uncommitted readers; the read_committed drain "
                            f"read this partition up to {rc_end[p]}")
            continue
        k = op.get("key")
        if k is not None and newest.get((p, k), -1) > o:
            superseded += 1  # compacted away, legitimately: a later record has its key
            continue
        if o < reach.get(p, 0):
            rep.add("lost", value=v, partition=p, offset=o, proc=op["proc"], op=op["i"], txn=txn_of.get(v),
                    why=f"never read; readers reached offset {reach[p] - 1}")
        elif p in ru_end:
            rep.add("lost", value=v, partition=p, offset=o, proc=op["proc"], op=op["i"], txn=txn_of.get(v),
                    why=f"beyond the end of the log at the final drain ({ru_end[p]})")
        else:
            unchecked += 1

    # -- committed offsets never move backwards -------------------------------------------
    # An event (a commit or a fetch of committed offsets) must not name an offset below one
    # set by a successful commit that completed before the event was invoked.
    done = sorted(((c["t"], c) for c in commits if c.get("type") == "ok"), key=lambda x: x[0])
    events = [(e.get("t0", e["t"]), e) for e in commits + fetches if e.get("type") == "ok"]
    events.sort(key=lambda x: x[0])
    best: dict[tuple[str, int], tuple[int, dict]] = {}
    k = 0
    for t0, e in events:
        while k < len(done) and done[k][0] < t0:
            c = done[k][1]
            for p, off in (c.get("offsets") or {}).items():
                key = (c.get("group"), int(p))
                if key not in best or off > best[key][0]:
                    best[key] = (off, c)
            k += 1
        for p, off in (e.get("offsets") or {}).items():
            key = (e.get("group"), int(p))
            if key in best and off < best[key][0]:
                prev_off, c = best[key]
                rep.add("commit_backwards", group=e.get("group"), partition=int(p), offset=off, op=e["i"],
                        proc=e["proc"], what=e["f"], t0=t0,
                        earlier={"offset": prev_off, "op": c["i"], "proc": c["proc"], "t": c["t"]})

    # -- stats ------------------------------------------------------------------------------
    send_ops = [op for op in ops if op["f"] == "send"]
    outcomes = [op.get("outcome") for op in txn_end.values()]
    rep.stats = {
        "ops": len(ops),
        "partitions": meta.get("partitions"),
        "sends_ok": sum(1 for op in send_ops if op.get("type") == "ok"),
        "sends_fail": sum(1 for op in send_ops if op.get("type") == "fail"),
        "sends_unknown": sum(1 for op in send_ops if op.get("type") == "info"),
        "txn_committed": outcomes.count("committed"),
        "txn_aborted": outcomes.count("aborted"),
        "txn_unknown": sum(1 for o in outcomes if o not in ("committed", "aborted")),
        "txn_open": len(txn_seen - set(txn_end)),
        "reads": len(reads),
        "distinct_read": len(read_values),
        "sessions": len({(proc, sess) for _, proc, sess, _, _, _ in reads}),
        "poll_errors": poll_errors,
        "commits_ok": sum(1 for c in commits if c.get("type") == "ok"),
        "commits_fail": sum(1 for c in commits if c.get("type") != "ok"),
        "drained": len(drained),
        "acked": acked,
        "acked_read": acked_read,
        "acked_unchecked": unchecked,
        "acked_superseded": superseded,
        "indeterminate_read": sum(1 for v, op in sends.items() if op.get("type") != "ok" and v in read_values),
        "nemesis": sum(1 for op in ops if op["f"] == "nemesis"),
    }
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.history.check", description=__doc__.split("\n")[0])
    ap.add_argument("history", help="a history file (JSON lines, tests/history/history.py)")
    ap.add_argument("--json", metavar="PATH", help="also write the report as JSON (- for stdout only)")
    ap.add_argument("--limit", type=int, default=20, help="offending records shown per kind (default 20)")
    ap.add_argument("--allow-gaps", action="store_true", default=None,
                    help="do not report skips (compacted topics); default: the history's meta says")
    a = ap.parse_args(argv)
    try:
        ops = load(a.history)
    except (OSError, ValueError) as e:
        print(f"check: {e}", file=sys.stderr)
        return 2
    rep = check(ops, allow_gaps=a.allow_gaps)
    if a.json == "-":
        print(json.dumps(rep.to_json(a.limit), indent=1, sort_keys=True))
    else:
        print(rep.text(a.limit))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rep.to_json(None), f, indent=1, sort_keys=True)
    return 0 if rep.valid else 1


if __name__ == "__main__":
    sys.exit(main())
