"""Transaction-coordinator faults for history runs (issue 23): find the broker that
coordinates a transactional id (FindCoordinator, key type 1) and kill -9 it while the
workload's transactional producer runs, then restart it. Recorded as "nemesis" ops.

Works on the chaos runner's cluster objects (cluster_harness.Cluster or
kafka_cluster.KafkaCluster). Standard library only for the wire part, so the coordinator
can be asked of any broker without a client library's own coordinator cache.
"""

from __future__ import annotations

import socket
import struct
import time

from .nemeses.common import poll as _poll

FIND_COORDINATOR = 10
KEY_GROUP, KEY_TRANSACTION = 0, 1


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


def find_coordinator_at(bootstrap: str, key: str, key_type: int = KEY_TRANSACTION,
                        timeout_s: float = 10) -> tuple[int, int, str | None]:
    """FindCoordinator v1 to one broker: (error code, coordinator node id, error message)."""
    host, port = bootstrap.rsplit(":", 1)
    body = _string(key) + struct.pack(">b", key_type)
    header = struct.pack(">hhi", FIND_COORDINATOR, 1, 4242) + _string("shardlog-txn-nemesis")
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    corr, _throttle, err = struct.unpack_from(">iih", resp, 0)
    if corr != 4242:
        raise ValueError(f"FindCoordinator: correlation id {corr}")
    i = 10
    (mlen,) = struct.unpack_from(">h", resp, i)
    i += 2
    msg = None
    if mlen >= 0:
        msg = resp[i:i + mlen].decode("utf-8", "replace")
        i += mlen
    (node,) = struct.unpack_from(">i", resp, i)
    return err, node, msg


def find_coordinator(bootstraps: list[str], key: str, key_type: int = KEY_TRANSACTION,
                     not_id: int | None = None) -> int | None:
    """The coordinator node id that the first answering broker of `bootstraps` names
    without an error (and other than `not_id`); None if none does just now."""
    for b in bootstraps:
        try:
            err, node, _ = find_coordinator_at(b, key, key_type)
        except (OSError, ValueError, struct.error):
            continue
        if err == 0 and node >= 0 and node != not_id:
            return node
    return None


def live_bootstraps(cluster, but: int | None = None) -> list[str]:
    return [nd.bootstrap for nd in cluster.nodes
            if nd.alive() and nd.node_id != but and getattr(nd, "is_broker", True)]


class KillTxnCoordinator:
    """Once the workload's transactional producer `proc` has committed `after_commits`
    transactions: kill -9 the coordinator of `txn_id`, wait (bounded) until a survivor
    names another coordinator and until `proc` commits again while the node is down,
    keep it down at least `down_s`, restart it and wait until it is ready.

    Ops: nemesis kill9 {node}, new-coordinator {node, was}, committed-while-down {txn},
    restart {node}; "info" instead of "ok" where a bound was reached (the test judges)."""

    def __init__(self, cluster, txn_id: str, proc: str = "t0", after_commits: int = 5,
                 down_s: float = 5.0, bound_s: float = 90.0):
        self.cluster = cluster
        self.txn_id = txn_id
        self.proc = proc
        self.after_commits = after_commits
        self.down_s = down_s
        self.bound_s = bound_s

    def _commits(self, w, after_t: float = -1.0) -> list[dict]:
        return [op for op in list(w.h.ops) if op["f"] == "txn" and op["proc"] == self.proc
                and op.get("outcome") == "committed" and op["t"] > after_t]

    def __call__(self, w, duration_s: float | None = None) -> None:
        h = w.h
        duration_s = w.cfg.duration_s if duration_s is None else duration_s
        end = time.monotonic() + duration_s
        if not _poll(lambda: len(self._commits(w)) >= self.after_commits, self.bound_s):
            h.add("nemesis", "nemesis", "info", action="kill9", error=f"{self.proc} committed too little")
            return
        coord = _poll(lambda: find_coordinator(live_bootstraps(self.cluster), self.txn_id), self.bound_s)
        if coord is None:
            h.add("nemesis", "nemesis", "info", action="kill9", error="no coordinator found")
            return
        node = next(nd for nd in self.cluster.nodes if nd.node_id == coord)
        kill = h.add("nemesis", "nemesis", "ok", action="kill9", node=coord, txn_id=self.txn_id)
        t_down = time.monotonic()
        node.kill9()
        new = _poll(lambda: find_coordinator(live_bootstraps(self.cluster, but=coord), self.txn_id, not_id=coord),
                    self.bound_s)
        h.add("nemesis", "nemesis", "ok" if new else "info", action="new-coordinator", node=new, was=coord)
        later = _poll(lambda: self._commits(w, kill["t"]), self.bound_s)
        h.add("nemesis", "nemesis", "ok" if later else "info", action="committed-while-down",
              txn=later[0]["txn"] if later else None, node=coord)
        while time.monotonic() < t_down + self.down_s:
            time.sleep(0.1)
        node.start()
        self.cluster.wait_ready(timeout_s=self.bound_s, nodes=[node])
        h.add("nemesis", "nemesis", "ok", action="restart", node=coord)
        while time.monotonic() < end:
            time.sleep(0.2)
