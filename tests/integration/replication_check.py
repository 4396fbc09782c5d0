"""Bookkeeping for the replication fault tests (test_replication_faults.py): what the
producer was told (delivery reports) against what the log holds afterwards, and how long
partitions went without acknowledgements. Pure functions over plain data, no clients, so
the accounting itself is unit-tested on synthetic data (test_checker_* in the test file).

Terms, as the issue's test spec uses them:
- attempted: records handed to the producer;
- acknowledged: records whose delivery report had no error, each with the (partition,
  offset) the leader gave it;
- lost: acknowledged records not in the log at the offset they were acknowledged with
  (missing, or another record there) — `moved` says how many of those sit elsewhere;
- duplicated: records (values) that occur more than once in the log;
- gaps: a partition whose offsets do not run densely from its start (no compaction, no
  transactions: every offset holds one record);
- double_acked: two different records acknowledged at the same (partition, offset).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Iterable


@dataclass
class LogCheck:
    attempted: int
    acknowledged: int
    in_log: int
    lost: list[tuple[int, int, Hashable]] = field(default_factory=list)
    moved: int = 0
    duplicated: list[Hashable] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    double_acked: list[tuple[int, int]] = field(default_factory=list)
    unknown: int = 0  # records in the log that were never attempted

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.gaps or self.double_acked or self.unknown)

    def summary(self) -> str:
        return (f"attempted={self.attempted} acknowledged={self.acknowledged} in_log={self.in_log} "
                f"lost={len(self.lost)} (of which at another offset: {self.moved}) "
                f"duplicated={len(self.duplicated)} gaps={len(self.gaps)} "
                f"double_acked={len(self.double_acked)} unknown={self.unknown}")

    def details(self, limit: int = 10) -> str:
        out = [self.summary()]
        if self.lost:
            out.append(f"lost (partition, offset, value), first {limit}: {self.lost[:limit]}")
        if self.duplicated:
            out.append(f"duplicated values, first {limit}: {self.duplicated[:limit]}")
        if self.gaps:
            out.append(f"offset gaps, first {limit}: {self.gaps[:limit]}")
        if self.double_acked:
            out.append(f"offsets acknowledged twice, first {limit}: {self.double_acked[:limit]}")
        return "\n".join(out)


def check_log(attempted: Iterable[Hashable] | int,
              acked: Iterable[tuple[int, int, Hashable]],
              log: dict[int, list[tuple[int, Hashable]]],
              log_start: dict[int, int] | None = None) -> LogCheck:
    """`acked`: (partition, offset, value) from the delivery reports; `log`: partition →
    [(offset, value)] in the order read; `log_start`: partition → first offset expected
    (default 0: nothing was deleted). `attempted`: the values handed to the producer (or
    just their count, then `unknown` is not checked)."""
    attempted_set = None if isinstance(attempted, int) else set(attempted)
    n_attempted = attempted if isinstance(attempted, int) else len(attempted_set)
    res = LogCheck(attempted=n_attempted, acknowledged=0, in_log=sum(len(v) for v in log.values()))

    at: dict[tuple[int, int], Hashable] = {}
    where: dict[Hashable, tuple[int, int]] = {}
    counts: Counter = Counter()
    for part in sorted(log):
        records = log[part]
        expect = (log_start or {}).get(part, 0)
        for off, value in records:
            if off != expect:
                res.gaps.append(f"partition {part}: offset {off} where {expect} was expected")
                expect = off  # report each break once, then follow the log
            expect += 1
            at[(part, off)] = value
            where.setdefault(value, (part, off))
            counts[value] += 1
            if attempted_set is not None and value not in attempted_set:
                res.unknown += 1
    res.duplicated = sorted((v for v, n in counts.items() if n > 1), key=repr)

    acked_at: dict[tuple[int, int], Hashable] = {}
    for part, off, value in acked:
        res.acknowledged += 1
        prev = acked_at.setdefault((part, off), value)
        if prev != value:
            res.double_acked.append((part, off))
        if at.get((part, off)) != value:
            res.lost.append((part, off, value))
            if value in where:
                res.moved += 1
    return res


def longest_ack_gap(ack_times: dict[int, list[float]]) -> tuple[float, int | None]:
    """The longest time between two successive acknowledgements of one partition:
    (seconds, partition); (0.0, None) when no partition has two. Times need not be sorted."""
    best, best_part = 0.0, None
    for part, times in ack_times.items():
        ts = sorted(times)
        for a, b in zip(ts, ts[1:]):
            if b - a > best:
                best, best_part = b - a, part
    return best, best_part


def unavailability_after_kills(kill_times: list[float], ack_times: dict[int, list[float]],
                               partitions: Iterable[int]) -> list[float | None]:
    """For each kill: seconds from the kill until every partition has acknowledged a record
    again (the slowest partition's first acknowledgement after the kill); None if some
    partition acknowledged nothing after it."""
    sorted_times = {p: sorted(ack_times.get(p, [])) for p in partitions}
    out: list[float | None] = []
    for k in kill_times:
        worst = 0.0
        for ts in sorted_times.values():
            i = bisect.bisect_left(ts, k)
            if i == len(ts):
                worst = None
                break
            worst = max(worst, ts[i] - k)
        out.append(worst)
    return out


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of the non-None values; None if there are none."""
    vs = sorted(v for v in values if v is not None)
    if not vs:
        return None
    rank = max(1, min(len(vs), int(-(-q * len(vs) // 100))))
    return vs[rank - 1]
