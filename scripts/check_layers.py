#!/usr/bin/env python3
"""Fails when a lower layer of src/ names an upper one (issue 8, DESIGN.md's map).

Layers, top to bottom:  server -> {group, replication} -> {partition, cluster, protocol, controller}
-> storage -> record -> runtime; config -> security -> runtime; {storage, partition, replication, server} -> metrics -> runtime.  bench/ and cli/ are clients: they know the wire
(protocol, record) and nothing of the broker's inside. A module may name itself, the
layers below it, and `config` (the one config struct).

A reference is any `crate::<module>` path outside a comment, including grouped
imports (`use crate::{a, b}`). Run with `--self-test` to check the checker itself on
a violating and a clean example.
"""
import re
import sys
from pathlib import Path

# module -> modules it must never name
FORBIDDEN = {
    "runtime": {"metrics", "security", "txn", "config", "record", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    "record": {"metrics", "security", "txn", "config", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    "storage": {"security", "txn", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    "partition": {"security", "txn", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication"},
    "cluster": {"txn", "protocol", "controller", "group", "server", "bench", "cli", "replication"},
    "protocol": {"txn", "storage", "partition", "cluster", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    "controller": {"txn", "partition", "protocol", "group", "server", "bench", "cli", "replication"},
    "group": {"controller", "server", "bench", "cli", "replication", "txn"},
    "txn": {"controller", "server", "bench", "cli", "replication", "group"},
    "config": {"metrics", "txn", "record", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    "bench": {"txn", "storage", "partition", "cluster", "controller", "group", "server", "replication", "remote"},
    "cli": {"txn", "storage", "partition", "cluster", "controller", "group", "server", "replication", "remote"},
    "replication": {"group", "server", "bench", "cli", "txn"},
    # Per-shard counters, the stall detector and the admin listener: recorded into by the
    # data path, so below it; it names only runtime.
    "metrics": {"security", "txn", "config", "record", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
    # Tiered storage (issue 30): the object store and the remote segment records, below
    # partition, cluster, controller and server; it names storage, record, config, runtime.
    "remote": {"metrics", "security", "txn", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication"},
    # Host checks (`shardlog tune`): reads /proc and /sys, names no broker module.
    "tune": {"metrics", "security", "txn", "config", "record", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "runtime", "remote"},
    # Listeners and TLS: below config (which resolves listeners), above runtime.
    "security": {"metrics", "txn", "config", "record", "storage", "partition", "cluster", "protocol", "controller", "group", "server", "bench", "cli", "replication", "remote"},
}
# The fuzz targets' bodies (`fuzzing/`, tests and the fuzzing feature only) may name any
# layer; no layer names them.
for _banned in FORBIDDEN.values():
    _banned.add("fuzzing")
for _top in ("server", "group", "replication", "bench", "cli", "txn", "partition", "cluster", "protocol", "controller"):
    FORBIDDEN.setdefault(_top, set()).add("fuzzing")

PATH = re.compile(r"\bcrate::(\{[^}]*\}|\w+)")


def strip_comment(line: str) -> str:
    # Good enough for this code base: no `//` inside string literals on import lines.
    i = line.find("//")
    return line if i < 0 else line[:i]


def named_modules(text: str):
    """(line number, module) for every crate:: reference outside comments."""
    for no, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(strip_comment(line)):
            target = m.group(1)
            if target.startswith("{"):
                for part in target[1:-1].split(","):
                    name = part.strip().split("::")[0].strip()
                    if name:
                        yield no, name
            else:
                yield no, target


def module_of(src: Path, path: Path) -> str:
    rel = path.relative_to(src)
    return rel.parts[0][:-3] if len(rel.parts) == 1 else rel.parts[0]


def violations(src: Path):
    out = []
    for path in sorted(src.rglob("*.rs")):
        module = module_of(src, path)
        banned = FORBIDDEN.get(module, set())
        for no, name in named_modules(path.read_text()):
            if name in banned:
                out.append(f"{path}:{no}: `{module}` names `crate::{name}` (an upper layer)")
    return out


def self_test() -> int:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = Path(d)
        (src / "storage").mkdir()
        (src / "storage" / "log.rs").write_text(
            "// crate::server in a comment is fine\nuse crate::runtime::ShardId;\n"
            "use crate::{record, server::shard};\nfn f() { crate::group::x(); }\n")
        (src / "record").mkdir()
        (src / "record" / "mod.rs").write_text("use crate::runtime::now_ms;\n")
        found = violations(src)
        want = {"server", "group"}
        got = {v.split("`crate::")[1].split("`")[0] for v in found}
        if got != want or len(found) != 2:
            print(f"check_layers self-test FAILED: expected violations {want}, got {found}")
            return 1
    print("check_layers self-test: ok (a violating tree is caught, comments and lower layers pass)")
    return 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    src = Path(__file__).resolve().parent.parent / "src"
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print(f"check_layers: {len(found)} upward import(s); see the layer map in scripts/check_layers.py")
        return 1
    print("check_layers: ok (no lower layer names an upper one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
