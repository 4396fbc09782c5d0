"""The history checker (tests/history/check.py) on synthetic histories: a clean one finds
nothing, and each anomaly kind is reported exactly, with the records that show it. No
broker needed. The workload and a real run are in test_history.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.history.check import KINDS, check  # noqa: E402
from tests.history.history import dump, load  # noqa: E402


class H:
    """A synthetic history, built op by op (times default to the op's index)."""

    def __init__(self, partitions: int = 2, **config):
        self.ops: list[dict] = []
        self.add("meta", "meta", topic="t", partitions=partitions, config=config)

    def add(self, proc: str, f: str, type_: str = "ok", t: float | None = None, **fields) -> dict:
        op = {"i": len(self.ops), "proc": proc, "f": f, "type": type_,
              "t": float(len(self.ops)) if t is None else t, **fields}
        self.ops.append(op)
        return op

    def send(self, proc, value, p, o=None, type_="ok", txn=None, **kw):
        fields = {"value": value, "partition": p, "t0": kw.pop("t0", None)}
        if o is not None:
            fields["offset"] = o
        if txn is not None:
            fields["txn"] = txn
        if type_ == "fail":
            fields.update(error="NOT_ENOUGH_REPLICAS", code=19)
        return self.add(proc, "send", type_, **fields, **kw)

    def txn(self, proc, txn, outcome, decision=None, t0=None, **kw):
        decision = decision or ("abort" if outcome == "aborted" else "commit")
        t0 = float(len(self.ops)) if t0 is None else t0
        return self.add(proc, "txn", "ok" if outcome != "unknown" else "fail", txn=txn, decision=decision,
                        outcome=outcome, t0=t0, **kw)

    def assign(self, proc, session, start, isolation="read_uncommitted", group=None):
        return self.add(proc, "assign", session=session, start=start, isolation=isolation, group=group)

    def poll(self, proc, session, msgs, t=None):
        return self.add(proc, "poll", session=session, msgs=[list(m) for m in msgs], t=t)

    def drain(self, partitions_ends: dict[int, int], records: dict[int, list[tuple[int, str]]],
              isolation="read_uncommitted", proc="drain"):
        self.assign(proc, 0, {p: 0 for p in partitions_ends}, isolation=isolation)
        for p, recs in records.items():
            if recs:
                self.poll(proc, 0, [(p, o, v) for o, v in recs])
        for p, end in partitions_ends.items():
            self.add(proc, "drain", partition=p, isolation=isolation, start=0, end=end, complete=True)

    def commit(self, proc, group, offsets, t0, t, type_="ok"):
        return self.add(proc, "commit", type_, t=t, t0=t0, group=group, offsets=offsets)

    def committed(self, proc, group, offsets, t0, t):
        return self.add(proc, "committed", t=t, t0=t0, group=group, offsets=offsets)


def clean() -> tuple[H, dict[int, list[tuple[int, str]]]]:
    """p0 writes 3 values to each of 2 partitions, c0 reads them all, the drain too."""
    h = H()
    log = {0: [], 1: []}
    for seq in range(6):
        p = seq % 2
        o = len(log[p])
        v = f"p0-{seq}"
        h.send("p0", v, p, o)
        log[p].append((o, v))
    h.assign("c0", 1, {0: 0, 1: 0})
    h.poll("c0", 1, [(0, o, v) for o, v in log[0]] + [(1, o, v) for o, v in log[1]])
    return h, log


def counts(rep) -> dict[str, int]:
    return {k: n for k, n in rep.counts().items() if n}


def test_clean_history_is_valid():
    h, log = clean()
    h.drain({0: 3, 1: 3}, log)
    rep = check(h.ops)
    assert rep.valid, rep.text()
    assert counts(rep) == {}
    assert rep.stats["sends_ok"] == 6 and rep.stats["acked"] == 6 and rep.stats["acked_read"] == 6
    assert rep.stats["reads"] == 12 and rep.stats["drained"] == 2 and rep.stats["acked_unchecked"] == 0


def test_lost_write_read_past_and_beyond_the_drained_end():
    h, log = clean()
    h.send("p1", "p1-0", 0, 3)   # acked at 0/3; the drain below ends at 3: beyond its end
    h.send("p1", "p1-1", 1, 3)   # acked at 1/3; someone read 1/4 but nobody saw it
    h.send("p1", "p1-2", 1, 4)
    h.drain({0: 3, 1: 5}, {0: log[0], 1: log[1] + [(4, "p1-2")]})
    rep = check(h.ops)
    # The drain jumps from 1/2 to 1/4: no skip, as nobody read anything at 1/3.
    assert counts(rep) == {"lost": 2}, rep.text()
    lost = {r["value"]: r for r in rep.anomalies["lost"]}
    assert set(lost) == {"p1-0", "p1-1"}
    assert (lost["p1-0"]["partition"], lost["p1-0"]["offset"]) == (0, 3)
    assert "beyond the end of the log at the final drain (3)" in lost["p1-0"]["why"]
    assert (lost["p1-1"]["partition"], lost["p1-1"]["offset"]) == (1, 3)
    assert "readers reached offset 4" in lost["p1-1"]["why"]


def test_lost_write_without_a_drain_is_unchecked_not_lost():
    h, log = clean()
    h.send("p1", "p1-0", 0, 3)  # nobody read partition 0 past offset 2, and no drain ran
    rep = check(h.ops)
    assert rep.valid, rep.text()
    assert rep.stats["acked_unchecked"] == 1 and rep.stats["acked"] == 7


def test_lost_write_where_a_reader_read_another_value_at_its_offset():
    h, log = clean()
    h.send("p1", "p1-0", 0, 3)                  # acked at 0/3 ...
    h.send("p1", "p1-1", 0, type_="fail")
    h.poll("c0", 1, [(0, 3, "p1-1")])           # ... where c0 reads another value; no drain
    rep = check(h.ops)
    # Only one value was read there: the acked one was overwritten (a truncated log).
    assert counts(rep) == {"lost": 1, "overwritten": 1}, rep.text()
    assert rep.anomalies["lost"][0]["value"] == "p1-0"
    assert "readers reached offset 3" in rep.anomalies["lost"][0]["why"]
    [ow] = rep.anomalies["overwritten"]
    assert (ow["partition"], ow["offset"], sorted(ow["values"])) == (0, 3, ["p1-0", "p1-1"])
    assert [s["what"] for s in ow["values"]["p1-0"]] == ["ack"]


def test_two_writes_acknowledged_at_one_offset_are_overwritten_not_inconsistent():
    h, log = clean()
    h.send("p1", "p1-0", 0, 3)                  # acked at 0/3 by a leader later deposed ...
    h.send("p1", "p1-1", 0, 3)                  # ... and another write acked there by its successor
    h.drain({0: 4, 1: 3}, {0: log[0] + [(3, "p1-1")], 1: log[1]})
    rep = check(h.ops)
    assert counts(rep) == {"lost": 1, "overwritten": 1}, rep.text()
    assert rep.anomalies["lost"][0]["value"] == "p1-0"


def test_failed_and_unknown_sends_are_indeterminate():
    h, log = clean()
    h.send("p1", "p1-0", 0, type_="fail")
    h.send("p1", "p1-1", 1, type_="info")
    h.send("p1", "p1-2", 0, type_="fail")  # failed, yet in the log: allowed
    h.drain({0: 4, 1: 3}, {0: log[0] + [(3, "p1-2")], 1: log[1]})
    rep = check(h.ops)
    assert rep.valid, rep.text()
    assert (rep.stats["sends_fail"], rep.stats["sends_unknown"], rep.stats["indeterminate_read"]) == (2, 1, 1)


def test_duplicate_value_at_two_offsets():
    h, log = clean()
    h.poll("c0", 1, [(0, 3, "p0-0")])  # p0-0 again, at offset 3
    h.drain({0: 4, 1: 3}, {0: log[0] + [(3, "p0-0")], 1: log[1]})
    rep = check(h.ops)
    assert counts(rep) == {"duplicate": 1}, rep.text()
    [d] = rep.anomalies["duplicate"]
    assert d["value"] == "p0-0"
    assert [(a["partition"], a["offset"]) for a in d["at"]] == [(0, 0), (0, 3)]
    assert {s["by"] for s in d["at"][1]["sources"]} == {"c0", "drain"}


def test_inconsistent_offset_between_two_readers():
    h, log = clean()
    h.send("p1", "p1-0", 1, type_="fail")  # its send failed (indeterminate) ...
    bad = [(o, v) if o != 1 else (1, "p1-0") for o, v in log[1]]  # ... the drain sees it at 1/1
    h.drain({0: 3, 1: 3}, {0: log[0], 1: bad})
    rep = check(h.ops)
    # p0-3 was acked at 1/1 and c0 read it there, the drain read p1-0 there.
    [inc] = rep.anomalies["inconsistent_offset"]
    assert (inc["partition"], inc["offset"]) == (1, 1)
    assert set(inc["values"]) == {"p0-3", "p1-0"}
    assert {s["what"] for s in inc["values"]["p0-3"]} == {"ack", "read (session 1)"}
    assert [s["by"] for s in inc["values"]["p1-0"]] == ["drain"]
    assert counts(rep) == {"inconsistent_offset": 1}, rep.text()


def test_nonmonotonic_read_within_a_session_and_below_its_start():
    h, log = clean()
    h.assign("c1", 7, {0: 1})
    h.poll("c1", 7, [(0, 1, "p0-2"), (0, 2, "p0-4")])
    h.poll("c1", 7, [(0, 2, "p0-4")])        # again 2 in the same session
    h.assign("c2", 1, {0: 2})
    h.poll("c2", 1, [(0, 1, "p0-2")])        # below its start
    # A new session of c1 may read the same offsets again.
    h.assign("c1", 8, {0: 0})
    h.poll("c1", 8, [(0, 0, "p0-0"), (0, 1, "p0-2")])
    h.drain({0: 3, 1: 3}, log)
    rep = check(h.ops)
    assert counts(rep) == {"nonmonotonic": 2}, rep.text()
    a, b = rep.anomalies["nonmonotonic"]
    assert (a["proc"], a["session"], a["offset"], a["previous"]) == ("c1", 7, 2, 2)
    assert (b["proc"], b["offset"], b["start"], b["previous"]) == ("c2", 1, 2, None)


def test_skip_over_data_another_reader_saw():
    h, log = clean()
    h.assign("c1", 1, {0: 0, 1: 0})
    h.poll("c1", 1, [(0, 0, "p0-0"), (0, 2, "p0-4")])   # skips 0/1, which c0 read
    h.poll("c1", 1, [(1, 1, "p0-3")])                    # skips 1/0 from its start
    h.drain({0: 3, 1: 3}, log)
    rep = check(h.ops)
    assert counts(rep) == {"skip": 2}, rep.text()
    s1, s2 = rep.anomalies["skip"]
    assert (s1["partition"], s1["previous"], s1["offset"], s1["missed"]) == (0, 0, 2, [1])
    assert (s2["partition"], s2["start"], s2["offset"], s2["missed"]) == (1, 0, 1, [0])


def test_gaps_nobody_saw_data_in_are_no_skip_and_allow_gaps_turns_skips_off():
    h = H(partitions=1)
    h.send("p0", "a", 0, 0)
    h.send("p0", "b", 0, 5)  # offsets 1..4: transaction markers, compacted records...
    h.assign("c0", 1, {0: 0})
    h.poll("c0", 1, [(0, 0, "a"), (0, 5, "b")])
    h.drain({0: 6}, {0: [(0, "a"), (5, "b")]})
    assert check(h.ops).valid
    h.assign("c1", 1, {0: 0})
    h.poll("c1", 1, [(0, 5, "b")])  # skips a
    assert counts(check(h.ops)) == {"skip": 1}
    assert check(h.ops, allow_gaps=True).valid
    h.ops[0]["config"]["compacted"] = True  # the history says so itself
    assert check(h.ops).valid


def test_compacted_an_unread_write_superseded_by_its_key_is_not_lost_the_newest_is():
    """Compacted topic: the cleaner removed a (key k1, superseded by c at 0/2); the drain
    reads b and c. d (key k2, the newest for k2) was removed too: that one is lost."""
    h = H(partitions=1)
    h.ops[0]["config"]["compacted"] = True
    h.send("p0", "a", 0, 0, key="k1")
    h.send("p0", "b", 0, 1, key="k2")
    h.send("p0", "c", 0, 2, key="k1")
    h.send("p0", "d", 0, 3, key="k3")
    h.send("p0", "e", 0, 4, key="k2")
    h.drain({0: 5}, {0: [(1, "b"), (2, "c"), (4, "e")]})
    rep = check(h.ops)
    assert counts(rep) == {"lost": 1}, rep.text()
    assert rep.anomalies["lost"][0]["value"] == "d"
    assert rep.stats["acked_superseded"] == 1 and rep.stats["acked_read"] == 3
    h.ops[0]["config"]["compacted"] = False  # not compacted: a is lost too
    assert sorted(r["value"] for r in check(h.ops).anomalies["lost"]) == ["a", "d"]


def txn_history():
    """t0 commits txn t0-1 (t0-0 at 0/1, t0-1 at 1/0) and aborts t0-2 (t0-2 at 0/3, with
    its marker at 0/4); p0 writes plain records around them; markers at 0/2 and 1/1."""
    h = H()
    h.send("p0", "p0-0", 0, 0)
    h.send("t0", "t0-0", 0, 1, txn="t0-1")
    h.send("t0", "t0-1", 1, 0, txn="t0-1")
    h.txn("t0", "t0-1", "committed")
    h.send("t0", "t0-2", 0, 3, txn="t0-2")
    h.txn("t0", "t0-2", "aborted")
    h.send("p0", "p0-1", 0, 5)
    h.send("p0", "p0-2", 1, 2)
    ru = {0: [(0, "p0-0"), (1, "t0-0"), (3, "t0-2"), (5, "p0-1")], 1: [(0, "t0-1"), (2, "p0-2")]}
    rc = {0: [(0, "p0-0"), (1, "t0-0"), (5, "p0-1")], 1: [(0, "t0-1"), (2, "p0-2")]}
    return h, ru, rc


def test_transactions_clean_under_both_isolation_levels():
    h, ru, rc = txn_history()
    h.assign("r0", 1, {0: 0, 1: 0}, isolation="read_committed")
    h.poll("r0", 1, [(0, o, v) for o, v in rc[0]] + [(1, o, v) for o, v in rc[1]])
    h.drain({0: 6, 1: 3}, ru)
    h.drain({0: 6, 1: 3}, rc, isolation="read_committed", proc="drain-rc")
    rep = check(h.ops)
    assert rep.valid, rep.text()
    assert (rep.stats["txn_committed"], rep.stats["txn_aborted"], rep.stats["acked"]) == (1, 1, 5)


def test_aborted_read_under_read_committed():
    h, ru, rc = txn_history()
    h.assign("r0", 1, {0: 0}, isolation="read_committed")
    h.poll("r0", 1, [(0, 0, "p0-0"), (0, 1, "t0-0"), (0, 3, "t0-2"), (0, 5, "p0-1")])
    h.drain({0: 6, 1: 3}, ru)  # read_uncommitted: the aborted record is fine there
    rep = check(h.ops)
    assert counts(rep) == {"aborted_read": 1}, rep.text()
    [a] = rep.anomalies["aborted_read"]
    assert (a["proc"], a["partition"], a["offset"], a["value"], a["txn"]) == ("r0", 0, 3, "t0-2", "t0-2")


def test_read_committed_skipping_committed_data_is_a_skip_and_skipping_aborted_is_not():
    h, ru, rc = txn_history()
    h.assign("r0", 1, {0: 0}, isolation="read_committed")
    h.poll("r0", 1, [(0, 0, "p0-0"), (0, 5, "p0-1")])  # jumps over committed t0-0 at 0/1
    h.drain({0: 6, 1: 3}, ru)
    rep = check(h.ops)
    assert counts(rep) == {"skip": 1}, rep.text()
    assert rep.anomalies["skip"][0]["missed"] == [1]  # not 3 (aborted), not 2/4 (markers)
    # A read_uncommitted session jumping over the aborted record skips data it should see.
    h.assign("c0", 1, {0: 0})
    h.poll("c0", 1, [(0, 0, "p0-0"), (0, 1, "t0-0"), (0, 5, "p0-1")])
    rep = check(h.ops)
    assert counts(rep) == {"skip": 2}, rep.text()
    assert rep.anomalies["skip"][1]["missed"] == [3]


def test_uncommitted_read_of_an_open_transaction_and_before_commit():
    h = H(partitions=1)
    h.send("t0", "t0-0", 0, 0, txn="t0-1")
    h.assign("r0", 1, {0: 0}, isolation="read_committed")
    h.poll("r0", 1, [(0, 0, "t0-0")], t=2.0)      # read at 2.0 ...
    h.txn("t0", "t0-1", "committed", t0=3.0)      # ... commit invoked only at 3.0
    h.send("t0", "t0-1", 0, 2, txn="t0-2")        # t0-2 never ends
    h.poll("r0", 1, [(0, 2, "t0-1")], t=6.0)
    h.send("t0", "t0-2", 0, 4, txn="t0-3")        # read well after its commit: fine
    h.txn("t0", "t0-3", "committed", t0=8.0)
    h.poll("r0", 1, [(0, 4, "t0-2")], t=9.0)
    rep = check(h.ops)
    assert counts(rep) == {"uncommitted_read": 2}, rep.text()
    a, b = rep.anomalies["uncommitted_read"]
    assert (a["value"], a["commit_invoked"], a["why"]) == ("t0-0", 3.0, "read before the transaction's commit was invoked")
    assert (b["value"], b["txn"], b["why"]) == ("t0-1", "t0-2", "the transaction never ended")
    assert rep.stats["txn_open"] == 1


def test_committed_transaction_invisible_to_read_committed_is_lost():
    h, ru, rc = txn_history()
    h.drain({0: 6, 1: 3}, ru)
    rc_missing = {0: [(0, "p0-0"), (5, "p0-1")], 1: rc[1]}  # t0-0 (committed) not served
    h.drain({0: 6, 1: 3}, rc_missing, isolation="read_committed", proc="drain-rc")
    rep = check(h.ops)
    assert counts(rep) == {"lost": 1, "skip": 1}, rep.text()
    [lost] = rep.anomalies["lost"]
    assert lost["value"] == "t0-0" and "read only by read_uncommitted readers" in lost["why"]


def test_unknown_transaction_outcome_is_not_judged():
    h = H(partitions=1)
    h.send("t0", "t0-0", 0, 0, txn="t0-1")
    h.txn("t0", "t0-1", "unknown")
    h.assign("r0", 1, {0: 0}, isolation="read_committed")
    h.poll("r0", 1, [(0, 0, "t0-0")])
    h.drain({0: 1}, {0: []})  # and the drain did not see it: not lost either (not acknowledged)
    rep = check(h.ops)
    assert rep.valid, rep.text()
    assert rep.stats["txn_unknown"] == 1 and rep.stats["acked"] == 0


def test_group_commit_moving_backwards():
    h, log = clean()
    h.commit("g0", "grp", {0: 3, 1: 2}, t0=10.0, t=11.0)
    h.commit("g1", "grp", {0: 2}, t0=12.0, t=13.0)             # below 3, committed before it began
    h.commit("g1", "grp", {1: 1}, t0=10.5, t=14.0)             # overlaps the first: no order, fine
    h.committed("g2", "grp", {0: 3, 1: 1}, t0=15.0, t=15.5)    # fetch below the completed 2 for partition 1
    h.commit("g0", "other", {0: 1}, t0=16.0, t=16.5)           # another group
    h.commit("g0", "grp", {0: 1}, t0=17.0, t=17.5, type_="fail")  # failed: not judged
    h.committed("g3", "grp", {0: -1}, t0=18.0, t=18.5)         # no committed offset any more
    h.drain({0: 3, 1: 3}, log)
    rep = check(h.ops)
    assert counts(rep) == {"commit_backwards": 3}, rep.text()
    a, b, c = rep.anomalies["commit_backwards"]
    assert (a["what"], a["proc"], a["partition"], a["offset"], a["earlier"]["offset"]) == ("commit", "g1", 0, 2, 3)
    assert (b["what"], b["proc"], b["partition"], b["offset"], b["earlier"]["offset"]) == ("committed", "g2", 1, 1, 2)
    assert (c["what"], c["proc"], c["partition"], c["offset"], c["earlier"]["offset"]) == ("committed", "g3", 0, -1, 3)


def test_phantom_value_nobody_sent():
    h, log = clean()
    h.drain({0: 4, 1: 3}, {0: log[0] + [(3, "zz-9")], 1: log[1]})
    rep = check(h.ops)
    assert counts(rep) == {"phantom": 1}, rep.text()
    [ph] = rep.anomalies["phantom"]
    assert ph["value"] == "zz-9"
    assert [(r["by"], r["partition"], r["offset"]) for r in ph["read"]] == [("drain", 0, 3)]


def test_every_kind_is_covered_by_a_test_above():
    names = " ".join(n for n in globals() if n.startswith("test_"))
    for kind in KINDS:
        word = {"inconsistent_offset": "inconsistent", "commit_backwards": "commit_moving_backwards",
                "aborted_read": "aborted_read", "uncommitted_read": "uncommitted_read"}.get(kind, kind)
        assert word in names, f"no synthetic test for {kind}"


def test_command_line_exit_codes_and_json(tmp_path):
    h, log = clean()
    h.drain({0: 3, 1: 3}, log)
    good = tmp_path / "good.jsonl"
    dump(h.ops, good)
    r = subprocess.run([sys.executable, "-m", "tests.history.check", str(good)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "anomalies: none" in r.stdout and r.stdout.strip().endswith("VALID")

    h.send("p1", "p1-0", 0, 1)  # acked at 0/1, where p0-2 is read
    bad = tmp_path / "bad.jsonl"
    dump(h.ops, bad)
    with open(bad, "a") as f:
        f.write('{"i": 99, "proc": "p1", "f": "se')  # a torn last line is dropped
    r = subprocess.run([sys.executable, "-m", "tests.history.check", str(bad), "--json", "-"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["valid"] is False
    assert {k: n for k, n in out["counts"].items() if n} == {"overwritten": 1, "lost": 1}
    assert out["anomalies"]["lost"][0]["value"] == "p1-0"
    assert len(load(bad)) == len(h.ops)

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n{}\n")
    r = subprocess.run([sys.executable, "-m", "tests.history.check", str(garbage)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
