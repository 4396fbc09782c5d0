"""Issue 12, fencing on a closed heartbeat connection: the quorum leader fences a broker
whose heartbeat connection closed when no heartbeat follows within a short grace
(src/controller/liveness.rs), instead of waiting out `broker_session_timeout_ms`.

3 combined nodes with a 120 s session timeout, longer than every deadline here, so a
fencing seen within one can only come from a closed connection:
- `kill -9` of a broker that is not the active controller (its sockets close at once):
  fenced, its partitions move to the other ISR members; restarted, it registers as a new
  incarnation and leads its partitions again;
- a reset of a live broker's heartbeat connection (`ss -K`, as a middlebox RST would):
  whether or not the leader fenced it meanwhile, its next heartbeat (a new connection)
  leaves it registered, unfenced, with the same incarnation (no re-registration), and it
  still leads its partitions.
SIGSTOP still waits out the session timeout (test_cluster_brokers.py, default timeout).
No timed assertions: every wait polls with a generous deadline; how fast fencing is goes in
benches/replication_failover.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from admin_api import scrape
from conftest import wait_for

SESSION_TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "broker-disconnect",
                                        extra_args=["--broker-session-timeout-ms", str(SESSION_TIMEOUT_MS)])


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def state(node, topic: str) -> tuple[set[int], dict[int, tuple[int, list[int]]]] | None:
    """(live brokers, partition → (leader, ISR)) as `node`'s Metadata says."""
    try:
        md = admin(node).list_topics(topic, timeout=10)
    except Exception:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return set(md.brokers), {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}


def replicated_topic(cluster, survivor) -> tuple[str, dict[int, tuple[int, list[int]]]]:
    topic = f"disc-{uuid.uuid4().hex[:8]}"
    a = admin(survivor)  # kept until the result: a dropped client cancels its requests
    a.create_topics([NewTopic(topic, 6, 3)], operation_timeout=30)[topic].result(timeout=60)
    _, parts = wait_for("leaders on every broker, all in sync", lambda: (s := state(survivor, topic)) and
                        {l for l, _ in s[1].values()} == {1, 2, 3} and all(len(i) == 3 for _, i in s[1].values()) and s)
    return topic, parts


def broker_epoch(node, broker_id: int) -> float:
    """`broker_id`'s registration epoch as `node`'s metadata has it (its /metrics): a new
    registration of a restarted process changes it, a reconnect does not."""
    m = scrape(node.admin_url)
    assert m.has("shardlog_broker_epoch", broker=str(broker_id)), f"broker {broker_id} registered"
    return m.total("shardlog_broker_epoch", broker=str(broker_id))


def test_a_killed_broker_is_fenced_on_its_closed_connection_and_registers_again(cluster):
    active, _ = cluster.wait_leader(timeout_s=60)
    victim_id = next(nd.node_id for nd in cluster.nodes if nd.node_id != active)
    victim, survivor = cluster.node(victim_id), cluster.node(active)
    topic, _ = replicated_topic(cluster, survivor)

    victim.kill9()
    brokers, after = wait_for(f"broker {victim_id} fenced well within its {SESSION_TIMEOUT_MS} ms session",
                              lambda: (s := state(survivor, topic)) and victim_id not in s[0] and s)
    for part, (leader, isr) in after.items():
        assert victim_id not in isr, after
        assert leader != victim_id and leader in brokers, after

    registered = broker_epoch(survivor, victim_id)
    victim.start()
    cluster.wait_ready(timeout_s=60, nodes=[victim])
    wait_for(f"broker {victim_id} registered again and back in every ISR",
             lambda: (s := state(survivor, topic)) and victim_id in s[0] and all(victim_id in i for _, i in s[1].values()))
    assert broker_epoch(survivor, victim_id) != registered, "a restarted broker registers as a new incarnation"


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to reset a connection")
def test_a_live_broker_whose_heartbeat_connection_resets_stays_registered(cluster):
    active, _ = cluster.wait_leader(timeout_s=60)
    victim_id = next(nd.node_id for nd in cluster.nodes if nd.node_id != active)
    victim, leader = cluster.node(victim_id), cluster.node(active)
    topic, _ = replicated_topic(cluster, leader)
    pid = victim.proc.pid
    registered = broker_epoch(leader, victim_id)

    def heartbeat_connection_ports() -> list[str] | None:
        # The victim's connection to the leader's controller listener: its forwarded
        # requests (heartbeats) go there.
        out = subprocess.run(["ss", "-Htnp", "state", "established", "dst", f"{leader.host}:{leader.controller_port}"],
                             capture_output=True, text=True).stdout
        return [m.group(1) for line in out.splitlines() if f"pid={pid}," in line
                for m in [re.search(r"^\S+\s+\S+\s+\S+:(\d+)\s", line)] if m] or None

    for port in wait_for("the victim's heartbeat connection", heartbeat_connection_ports):
        # Aborted here, a RST to the leader: what a middlebox reset looks like.
        subprocess.run(["ss", "-K", "-tn", "state", "established", "src", f"{victim.host}:{port}",
                        "dst", f"{leader.host}:{leader.controller_port}"], capture_output=True, check=True)
    # Fenced or not meanwhile, its next heartbeat (a new connection) leaves it registered,
    # unfenced and back in every ISR, as the same process and incarnation.
    wait_for(f"broker {victim_id} live and in every ISR after the reset",
             lambda: (s := state(leader, topic)) and victim_id in s[0] and all(victim_id in i for _, i in s[1].values()))
    wait_for("a new heartbeat connection", heartbeat_connection_ports)
    assert victim.alive() and victim.proc.pid == pid, "the same process, never restarted"
    assert broker_epoch(leader, victim_id) == registered, "a reset connection is no new incarnation"
