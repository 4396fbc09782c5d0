"""N real `shardlog` processes on loopback as one cluster: the one place that knows how a
local cluster is laid out. Used by the cluster tests (later issues reuse it) and by
`scripts/cluster.sh` (through the command line at the bottom).

Layout, for base port P and node ids 1..N (combined broker+controller nodes, the default):
    node i: client listener 127.0.0.1:P+i-1, controller listener 127.0.0.1:P+100+i-1,
            admin listener (/metrics, /v1/status/*) 127.0.0.1:P+200+i-1,
            data dir <root>/node-<i>/data, log <root>/node-<i>.log, pid <root>/node-<i>.pid
    controller_quorum_voters = 1@127.0.0.1:P+100,2@127.0.0.1:P+101,...
Split layout (`controllers=C`, N brokers): nodes 1..C are controller-only voters (no
client listener), nodes C+1..C+N broker-only observers (raft learners; their controller
listener is where the quorum leader replicates the metadata log to). Same port scheme.
Without a base port the tests pick free ports (no clash with other suites).
Secured (`secure=True`, `cluster.sh start N --secure`): every listener is SSL with client
certificates required — clients, the inter-broker traffic and the controller quorum —
with material made by openssl in <root>/tls (tls_material.make_cluster): one CA, the
nodes' certificate (a super user), an admin client certificate (a super user), and
<root>/client.properties (Kafka's client settings) and <root>/librdkafka.properties.
Optional, per node (tests/integration/test_cluster_netns.py): a host IP to listen on and
advertise instead of 127.0.0.1, and a command prefix (e.g. `ip netns exec NS`) to run
the node inside a network namespace.

The active controller is read from the nodes' admin listeners (/metrics:
shardlog_raft_current_leader and shardlog_raft_current_epoch): the node answering with
the highest epoch names it. (DescribeQuorum, API 55, answers the same on the wire; the
harness reads /metrics so it needs no Kafka client; a SIGSTOPped node does not answer and
is left out.)

No pytest import: this file is also a command-line tool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# An unlabelled gauge sample of /metrics: `name value`.
GAUGE_LINE = re.compile(r"^(shardlog_\w+) (-?\d+)$", re.M)
CONTROLLER_PORT_OFFSET = 100
ADMIN_PORT_OFFSET = 200


def default_bin() -> Path:
    return Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog"))


def xdist_worker() -> int | None:
    """The pytest-xdist worker this process is (`scripts/test.sh` runs the integration
    suites on two: gw0, gw1), None outside xdist."""
    w = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(w[2:]) if w.startswith("gw") and w[2:].isdigit() else None


# Each xdist worker's own port range, below the kernel's ephemeral range (32768-60999 by
# default, where client sockets take theirs).
WORKER_PORT_BASE, WORKER_PORT_SPAN = 20000, 3000
_next_port: list[int] = []
_handed_out: set[int] = set()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing listens on. Outside xdist the kernel picks one (never the
    same twice in a process). Under xdist
    each worker walks its own range, so two workers never hand out the same port between
    one's check and its broker's bind (brokers bind with SO_REUSEPORT: two of them on one
    port would share it silently)."""
    worker = xdist_worker()
    if worker is None:
        # The kernel may hand out a port again once its probe socket is closed: never
        # return one twice (a cluster takes its ports before any node binds them).
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    lo = WORKER_PORT_BASE + (worker % 4) * WORKER_PORT_SPAN
    if not _next_port:
        _next_port.append(lo + (os.getpid() * 7919) % WORKER_PORT_SPAN)
    for _ in range(WORKER_PORT_SPAN):
        port = lo + (_next_port[0] - lo) % WORKER_PORT_SPAN
        _next_port[0] = port + 1
        if _bindable(port):
            return port
    raise ClusterError(f"no free port in {lo}..{lo + WORKER_PORT_SPAN}")


class ClusterError(Exception):
    pass


class Node:
    """One shardlog process of the cluster; survives kill -9 / restart with its data dir."""

    def __init__(self, cluster: "Cluster", node_id: int, port: int, controller_port: int,
                 admin_port: int | None = None, roles: str = "broker,controller", rack: str | None = None,
                 host: str = "127.0.0.1", prefix: list[str] | None = None):
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles  # process_roles, comma-separated
        self.rack = rack
        self.port = port
        self.controller_port = controller_port
        # The HTTP admin listener (/metrics, /v1/status/*); None: not served.
        self.admin_port = admin_port
        self.host = host
        self.prefix = list(prefix or [])
        self.data_dir = cluster.root / f"node-{node_id}" / "data"
        self.log_path = cluster.log_dir / f"{cluster.name}node-{node_id}.log"
        self.pid_path = cluster.root / f"node-{node_id}.pid"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._log_offset = 0
        self.extra_args: list[str] = []  # this node's own flags, after the cluster's
        self.env: dict[str, str] = {}  # this node's own environment variables
        # KIP-853: a node added to a running cluster joins through these controllers
        # (controller_quorum_bootstrap_servers) instead of being a configured voter.
        self.bootstrap_servers: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    @property
    def controller_listener(self) -> str:
        return f"{self.host}:{self.controller_port}"

    @property
    def metadata_dir(self) -> Path:
        """The dir whose meta.properties names this node's directory.id."""
        return self.data_dir

    @property
    def admin_url(self) -> str:
        assert self.admin_port is not None, f"node {self.node_id} serves no admin listener"
        return f"http://{self.host}:{self.admin_port}"

    def controller_listener_args(self) -> list[str]:
        """Voters bind their voter entry. A broker-only node binds every interface and
        announces its loopback address (advertised_controller_listener), as a broker on
        a machine with several interfaces would."""
        if self.is_controller:
            return ["--controller-listener", self.controller_listener]
        return ["--controller-listener", f"0.0.0.0:{self.controller_port}",
                "--advertised-controller-listener", self.controller_listener]

    def command(self) -> list[str]:
        return [*self.prefix, str(self.cluster.binary), "serve",
                "--node-id", str(self.node_id),
                "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir),
                "--process-roles", self.roles,
                *self.controller_listener_args(),
                "--admin-listener", f"{self.host}:{self.admin_port}" if self.admin_port else "",
                *(["--controller-quorum-voters", "", "--controller-quorum-bootstrap-servers", self.bootstrap_servers]
                  if self.bootstrap_servers else ["--controller-quorum-voters", self.cluster.voters]),
                "--shards", str(self.cluster.shards),
                *(["--broker-rack", self.rack] if self.rack is not None else []),
                *self.cluster.flush_args(),
                *self.cluster.extra_args,
                *self.extra_args]

    def start(self) -> "Node":
        """Starts the process (does not wait; see Cluster.wait_ready)."""
        if self.alive():
            raise ClusterError(f"node {self.node_id} already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            env = dict(os.environ)
            env.setdefault("RUST_BACKTRACE", "1")
            env.update(self.env)
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        self.pid_path.write_text(f"{self.proc.pid}\n")
        return self

    def pid(self) -> int | None:
        """The process id, also for a cluster started by another process (cluster.sh)."""
        if self.proc is not None:
            return self.proc.pid if self.proc.poll() is None else None
        try:
            pid = int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _pid_alive(pid, self.log_path) else None

    def alive(self) -> bool:
        return self.pid() is not None

    def ready(self) -> bool:
        """Its admin listener's /v1/status/ready: a broker registered, unfenced, caught up
        with the metadata log and with every partition it leads open; a controller-only
        node once the quorum has a leader. Without an admin listener, its start log line."""
        if self.admin_port:
            return status_ready(self.admin_url)
        if not self.is_broker:
            return f"shardlog node {self.node_id} is a controller only" in self.log_since_start()
        return f"listening on {self.bootstrap}" in self.log_since_start()

    def log_since_start(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def latest_leader(self) -> tuple[int, int] | None:
        """(term, leader id) as this node's /metrics report them (raft_current_epoch and
        raft_current_leader); None when it does not answer within half a second (stopped,
        cut off, starting) or knows no leader."""
        try:
            with urllib.request.urlopen(self.admin_url + "/metrics", timeout=0.5) as r:
                text = r.read().decode()
        except (OSError, ValueError):
            return None
        gauges = dict(GAUGE_LINE.findall(text))
        term, leader = int(gauges.get("shardlog_raft_current_epoch", "0")), int(gauges.get("shardlog_raft_current_leader", "-1"))
        return (term, leader) if leader >= 0 else None

    def _signal(self, sig: int) -> None:
        pid = self.pid()
        if pid is None:
            return
        try:
            os.killpg(pid, sig)  # the node runs in its own session: its whole group
        except ProcessLookupError:
            pass

    def kill9(self) -> None:
        self._signal(signal.SIGKILL)
        self._wait_exit(30)

    def pause(self) -> None:
        """SIGSTOP: the process stays, answers nothing (a hung machine)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 20) -> None:
        if not self.alive():
            return
        self.resume()
        self._signal(signal.SIGTERM)
        if not self._wait_exit(timeout_s):
            self.kill9()

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=0.05)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if not self.alive():
                return True
            time.sleep(0.05)
        return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def status_ready(admin_url: str) -> bool:
    """True once a shardlog node's /v1/status/ready answers 200 (503 while not ready; no
    answer while starting)."""
    try:
        with urllib.request.urlopen(admin_url + "/v1/status/ready", timeout=1) as r:
            return r.status == 200
    except (OSError, ValueError):  # HTTPError (503) is an OSError too
        return False


def _pid_alive(pid: int, log_path: Path) -> bool:
    """True if pid runs a shardlog (guards against a recycled pid after a reboot)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, PermissionError):
        return False
    return b"shardlog" in cmdline and b"serve" in cmdline


class Cluster:
    """N combined nodes on loopback, or (`controllers=C`) C controller-only nodes and N
    broker-only nodes (`Cluster(root=..., controllers=3, brokers=2)` or
    `Cluster(2, root, controllers=3)`). `start()` then `wait_ready()`; always `close()`."""

    def __init__(self, n: int | None = None, root: Path | None = None, base_port: int | None = None,
                 log_dir: Path | None = None, name: str = "", shards: int = 1,
                 extra_args: list[str] | None = None, binary: Path | None = None,
                 racks: list[str] | None = None, controllers: int = 0, brokers: int | None = None,
                 hosts: list[str] | None = None, prefixes: list[list[str] | None] | None = None,
                 secure: bool = False):
        n = brokers if n is None else n
        if n is None or root is None:
            raise ClusterError("a cluster needs a node (broker) count and a root dir")
        if n < 1:
            raise ClusterError("a cluster has at least 1 broker")
        if controllers < 0:
            raise ClusterError("controllers must be >= 0 (0 = combined nodes)")
        if racks is not None and len(racks) != n:
            raise ClusterError("racks names one rack per broker")
        # The k-th broker's broker_rack is racks[k-1]; None = no racks.
        # Node i listens on and advertises hosts[i-1] and runs behind prefixes[i-1].
        total = n + controllers
        if (hosts is not None and len(hosts) != total) or (prefixes is not None and len(prefixes) != total):
            raise ClusterError("hosts and prefixes name one entry per node")
        self.racks = racks
        self.controllers = controllers
        self.root = Path(root)
        self.log_dir = Path(log_dir) if log_dir is not None else self.root
        self.name = name
        self.shards = shards
        self.extra_args = list(extra_args or [])
        self.binary = binary or default_bin()
        self.nodes: list[Node] = []
        taken: set[int] = set()

        def fresh_port() -> int:
            # free_port closes its socket, so two calls can return the same port: the
            # nodes (which bind with SO_REUSEPORT) would then share a listener.
            while (p := free_port()) in taken:
                pass
            taken.add(p)
            return p

        for i in range(1, controllers + n + 1):
            if base_port is None:
                port, cport, aport = fresh_port(), fresh_port(), fresh_port()
            else:
                port, cport = base_port + i - 1, base_port + CONTROLLER_PORT_OFFSET + i - 1
                aport = base_port + ADMIN_PORT_OFFSET + i - 1
            if controllers == 0:
                roles = "broker,controller"
            else:
                roles = "controller" if i <= controllers else "broker"
            broker_index = i - controllers - 1  # 0-based among the brokers
            rack = racks[broker_index] if racks is not None and broker_index >= 0 else None
            host = hosts[i - 1] if hosts else "127.0.0.1"
            self.nodes.append(Node(self, i, port, cport, admin_port=aport, roles=roles, rack=rack, host=host,
                                   prefix=prefixes[i - 1] if prefixes else None))
        self.voters = ",".join(f"{nd.node_id}@{nd.controller_listener}" for nd in self.nodes if nd.is_controller)
        self.secure = secure
        self.tls = None
        if secure:
            import tls_material
            tls_dir = self.root / "tls"
            self.tls = tls_material.make_cluster(tls_dir) if not (tls_dir / "node-keystore.pem").exists() else \
                tls_material.ClusterTls(tls_dir / "ca.pem", tls_dir / "node-keystore.pem", tls_dir / "client.key",
                                        tls_dir / "client.crt", tls_dir / "client-keystore.pem")
            for nd in self.nodes:
                nd.extra_args = self.secure_args(nd)

    def secure_args(self, node: "Node") -> list[str]:
        """A secured node's flags: its one listener SSL, as are the controller's and the
        inter-broker traffic; StandardAuthorizer with the node and the admin client as
        super users."""
        import tls_material
        t = self.tls
        return ["--listeners", f"SSL://{node.bootstrap}",
                "--listener-security-protocol-map", "SSL:SSL,CONTROLLER:SSL",
                "--inter-broker-listener-name", "SSL",
                "--ssl-keystore-type", "PEM", "--ssl-keystore-location", str(t.node_pem),
                "--ssl-truststore-type", "PEM", "--ssl-truststore-location", str(t.ca_pem),
                "--ssl-client-auth", "required",
                "--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "--super-users", f"{tls_material.NODE_PRINCIPAL};{tls_material.CLIENT_PRINCIPAL}"]

    def write_client_properties(self) -> None:
        t = self.tls
        (self.root / "librdkafka.properties").write_text(
            f"security.protocol=SSL\nssl.ca.location={t.ca_pem}\n"
            f"ssl.certificate.location={t.client_cert}\nssl.key.location={t.client_key}\n")
        (self.root / "client.properties").write_text(
            f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={t.ca_pem}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={t.client_pem}\n")

    def flush_args(self) -> list[str]:
        """`--flush` from `SHARDLOG_TEST_FLUSH` unless the test chose a mode itself."""
        mode = os.environ.get("SHARDLOG_TEST_FLUSH")
        return ["--flush", mode] if mode and "--flush" not in self.extra_args else []

    def node(self, node_id: int) -> Node:
        return next(nd for nd in self.nodes if nd.node_id == node_id)

    def add_node(self, node_id: int, roles: str = "controller", join_through: list[Node] | None = None) -> Node:
        """A new node on fresh ports that joins the running quorum (KIP-853) through the
        controller listeners of `join_through` (default: every controller node) as its
        controller_quorum_bootstrap_servers: it follows the log as an observer until
        `kafka-metadata-quorum add-controller` makes it a voter. Not started."""
        if any(nd.node_id == node_id for nd in self.nodes):
            raise ClusterError(f"node {node_id} exists already")
        taken = {p for nd in self.nodes for p in (nd.port, nd.controller_port, nd.admin_port)}
        ports = []
        while len(ports) < 3:
            p = free_port()
            if p not in taken and p not in ports:
                ports.append(p)
        nd = Node(self, node_id, ports[0], ports[1], admin_port=ports[2], roles=roles)
        nd.bootstrap_servers = ",".join(c.controller_listener for c in (join_through or self.controller_nodes))
        if self.secure:
            nd.extra_args = self.secure_args(nd)
        self.nodes.append(nd)
        return nd

    @property
    def brokers(self) -> list[Node]:
        return [nd for nd in self.nodes if nd.is_broker]

    @property
    def controller_nodes(self) -> list[Node]:
        """The quorum voters."""
        return [nd for nd in self.nodes if nd.is_controller]

    @property
    def bootstrap(self) -> str:
        """The brokers' client listeners (controller-only nodes have none)."""
        return ",".join(nd.bootstrap for nd in self.brokers)

    def start(self) -> "Cluster":
        if not self.binary.exists():
            raise ClusterError(f"shardlog binary {self.binary} not found: build it or set SHARDLOG_BIN")
        for nd in self.nodes:
            nd.start()
        return self

    def wait_ready(self, timeout_s: float = 60, nodes: list[Node] | None = None) -> None:
        """Waits until every given (default: every) node is ready (`Node.ready`)."""
        nodes = self.nodes if nodes is None else nodes
        deadline = time.monotonic() + timeout_s
        while True:
            pending = [nd for nd in nodes if not nd.ready()]
            if not pending:
                return
            for nd in pending:
                if not nd.alive():
                    raise ClusterError(f"node {nd.node_id} exited before it was ready; log tail:\n{nd.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"nodes {[nd.node_id for nd in pending]} not ready within {timeout_s} s")
            time.sleep(0.05)

    def active_controller(self) -> tuple[int, int] | None:
        """(leader id, term) as the live node with the highest term reports it; None if no
        live node knows a leader."""
        best = None
        for nd in self.nodes:
            if not nd.alive():
                continue
            seen = nd.latest_leader()
            if seen is not None and seen[1] >= 0 and (best is None or seen[0] > best[0]):
                best = seen
        return None if best is None else (best[1], best[0])

    def wait_leader(self, timeout_s: float = 30, not_id: int | None = None) -> tuple[int, int]:
        """Waits for a live active controller (other than `not_id`); returns (id, term)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.active_controller()
            if got is not None and got[0] != not_id and self.node(got[0]).alive():
                return got
            if time.monotonic() > deadline:
                raise ClusterError(f"no quorum leader (other than {not_id}) within {timeout_s} s")
            time.sleep(0.02)

    def close(self) -> None:
        """Stops every node (SIGTERM to all at once, then SIGKILL to any still running
        after 20 s); never raises. All at once: each node's controlled shutdown commits
        while the quorum is still there (one by one, the last voters would wait for a
        quorum that is gone)."""
        for nd in self.nodes:
            try:
                if nd.alive():
                    nd.resume()
                    nd._signal(signal.SIGTERM)
            except Exception as e:  # cleanup goes on for the other nodes
                print(f"cluster_harness: signalling node {nd.node_id}: {e}", file=sys.stderr)
        for nd in self.nodes:
            try:
                nd.stop()
            except Exception as e:
                print(f"cluster_harness: stopping node {nd.node_id}: {e}", file=sys.stderr)

    def status_lines(self) -> list[str]:
        active = self.active_controller()
        lines = []
        for nd in self.nodes:
            pid = nd.pid()
            mark = " (active controller)" if active is not None and active[0] == nd.node_id and pid else ""
            client = nd.bootstrap if nd.is_broker else "none"
            lines.append(f"node {nd.node_id}: roles={nd.roles} pid={pid if pid else 'down'} "
                         f"client={client} controller={nd.controller_listener} "
                         f"admin={nd.admin_url if nd.admin_port else 'none'}{mark}")
        lines.append(f"active controller: {'node %d (term %d)' % active if active else 'unknown'}")
        return lines


# -- command line (scripts/cluster.sh) ---------------------------------------------------
STATE_FILE = "cluster.state"


def _save(cluster: Cluster, base_port: int) -> None:
    (cluster.root / STATE_FILE).write_text(f"{len(cluster.brokers)} {base_port} {cluster.controllers} {int(cluster.secure)}\n")


def _load(root: Path) -> Cluster:
    try:
        fields = [int(x) for x in (root / STATE_FILE).read_text().split()]
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {root} (run start first)")
    n, base, controllers, secure = (fields + [0, 0])[:4]  # older state files: combined, plaintext
    return Cluster(n, root, base_port=base, controllers=controllers, secure=bool(secure))


LAYOUT_FILE = "cluster.layout"


def _check_stale(root: Path, layout: dict, fresh: bool) -> None:
    """`start` on a directory that holds an earlier cluster's data: the same layout restarts
    it; another (other ports, node counts or roles) would leave each node looking for its
    quorum at the old addresses, so it is refused, naming what is there, unless `--fresh`
    removes it first."""
    nodes = sorted(p.name for p in root.glob("node-*") if p.is_dir()) if root.is_dir() else []
    if not nodes:
        return
    saved_file = root / LAYOUT_FILE
    saved = json.loads(saved_file.read_text()) if saved_file.exists() else None
    if fresh:
        for name in nodes:
            shutil.rmtree(root / name)
        for f in (LAYOUT_FILE, STATE_FILE):
            (root / f).unlink(missing_ok=True)
        shutil.rmtree(root / "tls", ignore_errors=True)
        print(f"cluster.sh: removed the earlier cluster's data in {root} ({', '.join(nodes)})", file=sys.stderr)
        return
    if saved == layout:
        return
    was = ", ".join(f"{k} {v}" for k, v in sorted(saved.items())) if saved else "an unknown layout"
    now = ", ".join(f"{k} {v}" for k, v in sorted(layout.items()))
    raise ClusterError(
        f"{root} holds the data of another cluster ({', '.join(nodes)}; started with {was}; now asked for {now}): "
        f"its nodes would look for their quorum at the old addresses. Remove it (rm -rf {root}) or start with "
        f"--fresh, which removes it first")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cluster.sh", description="a local shardlog cluster")
    ap.add_argument("--dir", type=Path, default=Path(os.environ.get("SHARDLOG_CLUSTER_DIR", REPO / "target" / "cluster")))
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start")
    st.add_argument("n", type=int)
    st.add_argument("--base-port", type=int, default=19092)
    st.add_argument("--shards", type=int, default=1)
    st.add_argument("--controllers", type=int, default=0,
                    help="C controller-only nodes (ids 1..C) and N broker-only nodes; 0 = N combined nodes")
    st.add_argument("--secure", action="store_true",
                    help="every listener SSL with client certificates (clients, brokers, controllers); "
                         "client settings in <dir>/client.properties and <dir>/librdkafka.properties")
    st.add_argument("--fresh", action="store_true",
                    help="remove the data of an earlier cluster in the directory first")
    sub.add_parser("stop")
    sub.add_parser("status")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "start":
            if (a.dir / STATE_FILE).exists() and any(nd.alive() for nd in _load(a.dir).nodes):
                raise ClusterError(f"a cluster already runs in {a.dir}: stop it first")
            layout = {"nodes": a.n, "base_port": a.base_port, "shards": a.shards, "controllers": a.controllers, "secure": a.secure}
            _check_stale(a.dir, layout, a.fresh)
            a.dir.mkdir(parents=True, exist_ok=True)
            # A cluster of 3 brokers or more gets replicated topics by default (a choice of
            # this script, documented in docs/cluster.md: a broker's own default is Kafka's, 1).
            brokers = a.n
            extra = ["--default-replication-factor", "3"] if brokers >= 3 else []
            c = Cluster(a.n, a.dir, base_port=a.base_port, shards=a.shards, controllers=a.controllers, secure=a.secure,
                        extra_args=extra)
            (a.dir / LAYOUT_FILE).write_text(json.dumps(layout, sort_keys=True))
            _save(c, a.base_port)
            if a.secure:
                c.write_client_properties()
            try:
                c.start()
                c.wait_ready()
                c.wait_leader()
            except Exception:
                c.close()
                raise
            print(c.bootstrap)  # the only host:port output of start
            if a.secure:
                print(f"cluster.sh: SSL with client certificates; client settings: {a.dir / 'client.properties'} "
                      f"(Java), {a.dir / 'librdkafka.properties'} (librdkafka, kcat -F)", file=sys.stderr)
        elif a.cmd == "stop":
            c = _load(a.dir)
            c.close()
            (a.dir / STATE_FILE).unlink(missing_ok=True)
        else:
            for line in _load(a.dir).status_lines():
                print(line)
        return 0
    except ClusterError as e:
        print(f"cluster.sh: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def kafka_uuid() -> str:
    """A random Kafka Uuid in its text form (base64url, no padding) that does not start
    with '-', as Kafka's Uuid.randomUuid avoids: its tools would read one as an option."""
    import base64
    import uuid
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text
