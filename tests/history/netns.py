"""A network for a chaos cluster: each node in its own Linux network namespace, all joined
by one bridge in the root namespace, so that the link between any two nodes can be cut
while both keep running (the partition nemeses, nemeses/network.py).

    root namespace      bridge slb<tag>, 10.203.<s>.254/24 (the clients live here)
    node i's namespace  veth end sln<tag><i>, 10.203.<s>.<i>/24, and its own loopback

A cut between nodes a and b is a blackhole route for b's address in a's namespace and one
for a's in b's: packets between them are dropped silently (connections time out, as across
a failed switch), while the clients in the root namespace still reach both. Needs root,
`ip` (iproute2) and `ip netns`; `Net.available()` says why not. `remove()` undoes it all and
never raises.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


class Net:
    def __init__(self, n: int):
        self.n = n
        self.tag = uuid.uuid4().hex[:5]
        # Subnet from the pid and tag: two runs on one machine rarely pick the same one.
        self.subnet = (os.getpid() + int(self.tag, 16)) % 250 + 1
        self.bridge = f"slb{self.tag}"
        self.made_bridge = False
        self.namespaces: list[str] = []
        self.cuts: set[tuple[int, int]] = set()  # node index pairs (a < b), 1-based

    @staticmethod
    def available() -> str | None:
        """None if namespaces can be made here; else why not."""
        if shutil.which("ip") is None:
            return "no `ip` command (iproute2)"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = f"slc-probe-{os.getpid()}"
        r = ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"`ip netns add` fails: {r.stderr.strip()}"
        ip("netns", "del", probe, check=False)
        return None

    def address(self, i: int) -> str:
        return f"10.203.{self.subnet}.{i}"

    def ns(self, i: int) -> str:
        return f"slc-{self.tag}-{i}"

    def prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(i)]

    def hosts(self) -> list[str]:
        return [self.address(i) for i in range(1, self.n + 1)]

    def prefixes(self) -> list[list[str]]:
        return [self.prefix(i) for i in range(1, self.n + 1)]

    def create(self) -> "Net":
        ip("link", "add", self.bridge, "type", "bridge")
        self.made_bridge = True
        ip("addr", "add", f"10.203.{self.subnet}.254/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i in range(1, self.n + 1):
            ns, root_if, ns_if = self.ns(i), f"slr{self.tag}{i}", f"sln{self.tag}{i}"
            ip("netns", "add", ns)
            self.namespaces.append(ns)
            ip("link", "add", root_if, "type", "veth", "peer", "name", ns_if)
            ip("link", "set", ns_if, "netns", ns)
            ip("link", "set", root_if, "master", self.bridge)
            ip("link", "set", root_if, "up")
            inside = ["netns", "exec", ns, "ip"]
            ip(*inside, "addr", "add", f"{self.address(i)}/24", "dev", ns_if)
            ip(*inside, "link", "set", ns_if, "up")
            ip(*inside, "link", "set", "lo", "up")
        return self

    def _route(self, verb: str, a: int, b: int) -> None:
        ip("netns", "exec", self.ns(a), "ip", "route", verb, "blackhole", f"{self.address(b)}/32", check=verb == "add")

    def cut(self, a: int, b: int) -> None:
        """Nodes a and b (1-based) no longer reach each other."""
        pair = (min(a, b), max(a, b))
        if a == b or pair in self.cuts:
            return
        self._route("add", a, b)
        self._route("add", b, a)
        self.cuts.add(pair)

    def split(self, groups: list[list[int]]) -> None:
        """Cuts every link between nodes of different groups."""
        for gi, g in enumerate(groups):
            for h in groups[gi + 1:]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def isolate(self, a: int) -> None:
        self.split([[a], [i for i in range(1, self.n + 1) if i != a]])

    def heal(self) -> None:
        for a, b in sorted(self.cuts):
            self._route("del", a, b)
            self._route("del", b, a)
        self.cuts.clear()

    def remove(self) -> None:
        """Never raises."""
        try:
            self.heal()
        except Exception:
            pass
        for i in range(1, self.n + 1):
            ip("link", "del", f"slr{self.tag}{i}", check=False)  # takes its peer with it
        for ns in self.namespaces:
            ip("netns", "del", ns, check=False)
        if self.made_bridge:
            ip("link", "del", self.bridge, check=False)
