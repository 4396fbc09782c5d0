"""Issue 11, point 7: a broker cut off from the controllers is fenced (Linux network
namespaces).

Node 3 of a 3-node combined cluster (tests/integration/cluster_harness.py) runs inside its
own network namespace, joined to the root namespace by a veth pair: 10.201.<n>.1/24 on
the root side (nodes 1 and 2 listen and advertise there), 10.201.<n>.2/24 inside (node 3).
Taking the link down cuts node 3 off from the quorum and from the clients, while its
process keeps running (unlike `kill -9`, test_cluster_brokers.py):
- the quorum of nodes 1 and 2 fences broker 3: Metadata from a survivor no longer lists
  it, its single-replica partitions report LEADER_NOT_AVAILABLE, the others keep their
  leaders;
- a topic can still be created through the majority;
- link up again: broker 3 heartbeats, is unfenced, leads its partitions again, and its
  own Metadata lists the topic created while it was cut off (it caught up).

Skipped, with the reason, where the machine does not allow it (not root, no `ip`, or
`ip netns add` fails, e.g. in an unprivileged container). The namespace and the veth pair
are named per test run and removed by the fixture's finalizer, also when the test fails.
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import wait_for

DEADLINE_S = 60


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


class Link:
    """A network namespace and the veth pair that joins it to the root namespace."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.ns = f"slt-{os.getpid()}-{tag}"
        # Interface names: at most 15 bytes.
        self.root_if, self.ns_if = f"slr{tag}", f"sln{tag}"
        # Two xdist workers never share a subnet (their links may exist at once).
        worker = conftest.xdist_worker() or 0
        subnet = (worker % 2) * 125 + int(tag, 16) % 125 + 1
        self.root_ip, self.ns_ip = f"10.201.{subnet}.1", f"10.201.{subnet}.2"
        self.made_ns = self.made_veth = self.blackholed = False

    def create(self) -> None:
        ip("netns", "add", self.ns)
        self.made_ns = True
        ip("link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if)
        self.made_veth = True
        ip("link", "set", self.ns_if, "netns", self.ns)
        ip("addr", "add", f"{self.root_ip}/24", "dev", self.root_if)
        ip("link", "set", self.root_if, "up")
        ip("netns", "exec", self.ns, "ip", "addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if)
        ip("netns", "exec", self.ns, "ip", "link", "set", self.ns_if, "up")
        ip("netns", "exec", self.ns, "ip", "link", "set", "lo", "up")

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.ns]

    def cut(self) -> None:
        # Link down removes the subnet's route; the blackhole route keeps packets for the
        # namespace from leaving by the default route instead (on some hosts something
        # out there accepts every TCP connection).
        ip("link", "set", self.root_if, "down")
        ip("route", "add", "blackhole", f"{self.ns_ip}/32")
        self.blackholed = True

    def heal(self) -> None:
        ip("route", "del", "blackhole", f"{self.ns_ip}/32")
        self.blackholed = False
        ip("link", "set", self.root_if, "up")

    def remove(self) -> None:
        """Never raises: runs in the finalizer."""
        if self.blackholed:
            ip("route", "del", "blackhole", f"{self.ns_ip}/32", check=False)
        if self.made_veth:
            ip("link", "del", self.root_if, check=False)  # takes its peer with it
        if self.made_ns:
            ip("netns", "del", self.ns, check=False)


def skip_unless_netns() -> None:
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2): network namespaces unavailable")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    probe = f"slt-probe-{os.getpid()}-{uuid.uuid4().hex[:4]}"
    r = ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        pytest.skip(f"`ip netns add` fails here: {r.stderr.strip()}")
    ip("netns", "del", probe, check=False)


@pytest.fixture
def link():
    skip_unless_netns()
    lk = Link()
    try:
        lk.create()
        yield lk
    finally:
        lk.remove()


@pytest.fixture
def cluster(tmp_path_factory, link):
    hosts = [link.root_ip, link.root_ip, link.ns_ip]
    prefixes = [None, None, link.prefix()]
    yield from conftest.running_cluster(tmp_path_factory, "cluster-netns", hosts=hosts, prefixes=prefixes)


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})




def create(node, name: str, partitions: int) -> bool:
    """Creates the topic; an earlier attempt may have created it already (a retry)."""
    a = admin(node)  # kept alive until the future resolves
    try:
        a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(timeout=60)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return True


def metadata(node, topic: str):
    """(broker ids, {partition: (leader, error code)}) as `node`'s Metadata says, or None."""
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or (t.error is not None and t.error.code() != KafkaError.LEADER_NOT_AVAILABLE):
        return None
    parts = {i: (pm.leader, pm.error.code() if pm.error else 0) for i, pm in t.partitions.items()}
    return set(md.brokers), parts


def test_a_broker_cut_off_from_the_controllers_is_fenced_and_comes_back(cluster, link):
    survivor, isolated = cluster.node(1), cluster.node(3)
    wait_for("a quorum leader", cluster.active_controller)
    topic = f"netns-{uuid.uuid4().hex[:8]}"
    wait_for("topic created", lambda: create(survivor, topic, 6))
    before = wait_for("leaders on every broker", lambda: (m := metadata(survivor, topic))
                      and m[0] == {1, 2, 3} and {l for l, _ in m[1].values()} == {1, 2, 3} and m[1])
    # The broker's own listener, across the veth, agrees before the cut.
    assert wait_for("node 3 answers Metadata", lambda: metadata(isolated, topic))[1] == before

    link.cut()
    def fenced():
        m = metadata(survivor, topic)
        return m is not None and 3 not in m[0] and m
    brokers, after = wait_for("broker 3 fenced by the quorum of nodes 1 and 2", fenced)
    assert brokers == {1, 2}
    assert isolated.alive(), "the cut-off node keeps running"
    for part, (leader, _) in before.items():
        if leader == 3:
            assert after[part] == (-1, KafkaError.LEADER_NOT_AVAILABLE), after
        else:
            assert after[part] == (leader, 0), after
    # The majority still commits metadata.
    during = f"{topic}-during"
    wait_for("a topic created through the majority", lambda: create(survivor, during, 2))
    led = wait_for("the new topic's leaders", lambda: (m := metadata(survivor, during)) and all(e == 0 for _, e in m[1].values()) and m)
    assert {l for l, _ in led[1].values()} <= {1, 2}, led

    link.heal()
    wait_for("broker 3 unfenced and leading its partitions again",
             lambda: (m := metadata(survivor, topic)) and m[0] == {1, 2, 3} and m[1] == before)
    # Broker 3 caught up: its own Metadata has the topic created while it was cut off.
    during_leaders = metadata(survivor, during)[1]
    wait_for("node 3 knows the topic created during the cut",
             lambda: (m := metadata(isolated, during)) and m[0] == {1, 2, 3} and m[1] == during_leaders)
    wait_for("node 3 agrees on the first topic", lambda: (m := metadata(isolated, topic)) and m[1] == before)
