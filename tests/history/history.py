"""The history format: one JSON object per line, one line per operation.

Every op has
    "i"     its index in the file (0, 1, ...),
    "proc"  the process that did it ("p0" producer, "t0" transactional producer, "c0"
            consumer with assigned partitions, "g0" group member, "r0" read_committed
            consumer, "drain", "drain-rc", "nemesis"),
    "f"     what it did (below),
    "type"  "ok" (completed, outcome known), "fail" (completed with an error: its effect
            is unknown unless the checker says otherwise), "info" (no outcome at all),
    "t"     seconds since the start of the run (time.monotonic based) when it completed;
            "t0" when it was invoked, where that matters.

Ops ("f"):
  meta       first line: {"topic", "partitions", "config": {...}, "started_at": unix time}
  send       {"value", "partition", "offset"} when ok; {"partition" (requested), "error",
             "code"} when fail; "info" = unknown: a timeout, or no delivery report by the
             end of the run. Failed and unknown sends are both indeterminate.
             "txn": the transaction id for a transactional send.
  txn-begin  {"txn"}: a transaction begins (its sends carry its id).
  txn        a transaction's end: {"txn", "decision": "commit"|"abort", "outcome":
             "committed"|"aborted"|"unknown", "t_begin", "t0" (commit/abort invoked), "t",
             "error" (if any)}. A transaction with no txn op never ended.
  assign     a reader session starts: {"session", "isolation": "read_uncommitted"|
             "read_committed", "start": {partition: first offset to read, or null when
             unknown}, "group" (group members)}. One session = one consumer's continuous
             ownership of these partitions; offsets within it must increase densely (but
             for gaps nobody saw data in).
  revoke     {"session"}: the session ends (group rebalance).
  poll       {"session", "msgs": [[partition, offset, value], ...]} ok; or fail {"error"}.
  commit     {"group", "offsets": {partition: offset}, "t0"} ok or fail {"error"}.
  committed  {"group", "offsets": {partition: offset}, "t0"}: committed offsets fetched
             from the coordinator (-1: the partition has no committed offset).
  drain      {"partition", "isolation", "start" (log start), "end" (high watermark, or
             the last stable offset under read_committed, the drain read up to),
             "complete": the drain read from start to end}
  nemesis    {"action": ..., "node": ..., ...}: a fault injected (informational).

Values are strings, unique per send ("p<producer>-<seq>", "t<producer>-<seq>").
Partition keys in JSON objects are strings ("0"); `load` turns them back into ints.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Iterable


class HistoryWriter:
    """Thread-safe appender of ops to a JSON-lines file (and to `ops`, in memory)."""

    def __init__(self, path: Path | str | None, keep: bool = True):
        self.path = Path(path) if path is not None else None
        self._f = open(self.path, "w") if self.path is not None else None
        self._lock = threading.Lock()
        self._n = 0
        self.t_start = time.monotonic()
        self.keep = keep
        self.ops: list[dict] = []

    def now(self) -> float:
        return round(time.monotonic() - self.t_start, 6)

    def add(self, proc: str, f: str, type_: str = "ok", t: float | None = None, **fields) -> dict:
        op = {"i": 0, "proc": proc, "f": f, "type": type_, "t": self.now() if t is None else t, **fields}
        with self._lock:
            op["i"] = self._n
            self._n += 1
            if self._f is not None:
                self._f.write(json.dumps(op, separators=(",", ":")) + "\n")
            if self.keep:
                self.ops.append(op)
        return op

    def flush(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.flush()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


_INT_KEYED = {"start", "offsets"}


def normalize(op: dict) -> dict:
    """JSON object keys are strings: partition-keyed maps get int keys back."""
    for k in _INT_KEYED:
        v = op.get(k)
        if isinstance(v, dict):
            op[k] = {int(p): o for p, o in v.items()}
    return op


def load(path: Path | str) -> list[dict]:
    """The ops of a history file, in file order. Raises ValueError on a malformed line
    (a truncated last line, as a killed recorder leaves, is dropped)."""
    lines = Path(path).read_text().splitlines()
    ops = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            op = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break  # a torn last line
            raise ValueError(f"{path}:{n}: not JSON: {line[:80]!r}")
        if not isinstance(op, dict) or "f" not in op or "proc" not in op:
            raise ValueError(f"{path}:{n}: not an op (needs proc and f): {line[:80]!r}")
        ops.append(normalize(op))
    return ops


def dump(ops: Iterable[dict], path: Path | str) -> None:
    with open(path, "w") as f:
        for op in ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
