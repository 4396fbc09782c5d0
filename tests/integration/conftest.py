"""Fixtures for shardlog's integration tests: start the real broker binary.

Target: the `shardlog` binary (default: target/release/shardlog, override with
SHARDLOG_BIN). With SHARDLOG_TEST_TARGET=kafka the same tests run against a real
Apache Kafka 4.4 node (jars fetched by scripts/kafka_local.sh) — that is how the
tests themselves are checked.

Every broker's stdout+stderr goes to a file under target/integration-logs/; when a
test fails, the tail of each broker log the test used is attached to its report.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("SHARDLOG_TEST_TARGET", "shardlog")
# The binary's test hooks (--storage-fault, SHARDLOG_TEST_PANIC_SHARD, ...) run only with
# this switch (src/server/test_hooks.rs); the processes the tests start inherit it.
os.environ.setdefault("SHARDLOG_TEST_HOOKS", "1")
SHARDLOG_BIN = Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog"))
LOG_ROOT = Path(os.environ.get("SHARDLOG_TEST_LOG_DIR", REPO / "target" / "integration-logs"))
START_TIMEOUT_S = float(os.environ.get("SHARDLOG_START_TIMEOUT_S", 30 if TARGET == "shardlog" else 120))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_harness import free_port, kafka_uuid, status_ready, xdist_worker  # noqa: E402  (one port picker for every harness)

# Brokers started during the current test (for failure reports).
_LIVE: list["Broker"] = []


def is_kafka() -> bool:
    return TARGET == "kafka"


def skip_unless_shardlog(reason: str) -> None:
    if is_kafka():
        pytest.skip(f"shardlog-only: {reason}")


def default_flush() -> str | None:
    """The flush mode of brokers a test does not choose one for: `SHARDLOG_TEST_FLUSH`
    (`never` or `always`), else the broker's default (`always`). `scripts/test.sh` runs
    the real-client suites once more with `never`, so both storage modes (page cache and
    O_DIRECT) serve them."""
    mode = os.environ.get("SHARDLOG_TEST_FLUSH") or None
    if mode not in (None, "never", "always"):
        raise ValueError(f"SHARDLOG_TEST_FLUSH={mode!r}: never or always")
    return mode


class Broker:
    """One broker process on a fixed loopback port and data dir.

    start() waits for the readiness log line; restart() reuses port and data dir;
    kill9() sends SIGKILL (no clean shutdown); stop() sends SIGTERM, then SIGKILL.
    """

    def __init__(self, data_dir: Path, log_path: Path, shards: int | None = None,
                 flush: str | None = None, auto_create_topics: bool | None = None,
                 extra_args: list[str] | None = None, log_dirs: list[Path] | None = None,
                 ssl: dict[str, str] | None = None, sasl_plain_users: dict[str, str] | None = None,
                 sasl_mechanisms: list[str] | None = None, settings: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        # Several log dirs (JBOD): `--log-dirs` / Kafka's log.dirs; None = one, in data_dir.
        self.log_dirs = [Path(d) for d in log_dirs] if log_dirs else None
        self.log_path = Path(log_path)
        self.port = free_port()
        self.controller_port = free_port() if is_kafka() else None
        self.shards = shards
        self.flush = flush
        self.auto_create_topics = auto_create_topics
        self.extra_args = list(extra_args or [])
        # An SSL listener besides the PLAINTEXT one: Kafka's ssl.* settings (both targets
        # take the same keys; shardlog's flags are the keys with dashes).
        self.ssl = dict(ssl) if ssl else None
        # Kafka broker settings both targets take under the same name (shardlog's flag is
        # the name with dashes).
        self.settings = dict(settings or {})
        self.ssl_port = free_port() if ssl else None
        # SASL listeners besides: SASL_PLAINTEXT, and SASL_SSL when `ssl` is given; the
        # mechanisms enabled (default PLAIN), PLAIN's users (SCRAM users are created with
        # kafka-configs, in the metadata log).
        self.sasl_plain_users = dict(sasl_plain_users) if sasl_plain_users else None
        self.sasl_mechanisms = list(sasl_mechanisms or (["PLAIN"] if sasl_plain_users else []))
        self.sasl_port = free_port() if self.sasl_mechanisms else None
        self.sasl_ssl_port = free_port() if self.sasl_mechanisms and ssl else None
        # The HTTP admin listener (/metrics, /v1/status/*) of a shardlog broker.
        self.admin_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def ssl_bootstrap(self) -> str:
        assert self.ssl_port is not None, "this broker has no SSL listener"
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_bootstrap(self) -> str:
        assert self.sasl_port is not None, "this broker has no SASL_PLAINTEXT listener"
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        assert self.sasl_ssl_port is not None, "this broker has no SASL_SSL listener"
        return f"127.0.0.1:{self.sasl_ssl_port}"

    def _listeners(self) -> str:
        out = f"PLAINTEXT://{self.bootstrap}"
        out += f",SSL://{self.ssl_bootstrap}" if self.ssl else ""
        out += f",SASL_PLAINTEXT://{self.sasl_bootstrap}" if self.sasl_port else ""
        out += f",SASL_SSL://{self.sasl_ssl_bootstrap}" if self.sasl_ssl_port else ""
        return out

    def _plain_jaas(self) -> str:
        users = " ".join(f'user_{u}="{p}"' for u, p in (self.sasl_plain_users or {}).items())
        return f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"

    # -- command lines -------------------------------------------------------------
    def _shardlog_cmd(self) -> list[str]:
        cmd = [str(SHARDLOG_BIN), "serve", "--listen", self.bootstrap, "--admin-listener", f"127.0.0.1:{self.admin_port}"]
        if self.log_dirs:
            cmd += ["--log-dirs", ",".join(str(d) for d in self.log_dirs)]
        else:
            cmd += ["--data-dir", str(self.data_dir)]
        if self.shards is not None:
            cmd += ["--shards", str(self.shards)]
        flush = self.flush if self.flush is not None else default_flush()
        if flush is not None:
            cmd += ["--flush", flush]
        if self.auto_create_topics is not None:
            cmd += ["--auto-create-topics", "true" if self.auto_create_topics else "false"]
        if self.ssl or self.sasl_mechanisms:
            cmd += ["--listeners", self._listeners()]
            for k, v in (self.ssl or {}).items():
                cmd += ["--" + k.replace(".", "-").replace("_", "-"), v]
        if self.sasl_mechanisms:
            cmd += ["--sasl-enabled-mechanisms", ",".join(self.sasl_mechanisms)]
        if self.sasl_plain_users:
            cmd += ["--sasl-jaas-config", self._plain_jaas()]
        for k, v in self.settings.items():
            if k.startswith("listener.name."):
                # Kafka's per-listener settings keep their name (`--listener-setting`).
                cmd += ["--listener-setting", f"{k}={v}"]
            else:
                cmd += ["--" + k.replace(".", "-").replace("_", "-"), v]
        return cmd + self.extra_args

    def _kafka_cmd(self) -> list[str]:
        cp = kafka_classpath()
        props = self.data_dir / "server.properties"
        if not props.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            lines = [
                "process.roles=broker,controller", "node.id=1",
                f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
                f"listeners={self._listeners()},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners={self._listeners()}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={','.join(str(d) for d in self.kafka_log_dirs())}",
                "num.partitions=1",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
            ]
            if self.flush == "always":
                lines.append("log.flush.interval.messages=1")
            if self.auto_create_topics is not None:
                lines.append(f"auto.create.topics.enable={'true' if self.auto_create_topics else 'false'}")
            lines += [f"{k}={v}" for k, v in {**(self.ssl or {}), **self.settings}.items()]
            if self.sasl_mechanisms:
                lines.append(f"sasl.enabled.mechanisms={','.join(self.sasl_mechanisms)}")
                for name in ("sasl_plaintext", "sasl_ssl"):
                    if self.sasl_plain_users:
                        lines.append(f"listener.name.{name}.plain.sasl.jaas.config={self._plain_jaas()}")
                    # Kafka wants a login module per SCRAM mechanism even with nothing to log in.
                    for m in self.sasl_mechanisms:
                        if m.startswith("SCRAM-"):
                            lines.append(f"listener.name.{name}.{m.lower()}.sasl.jaas.config="
                                         "org.apache.kafka.common.security.scram.ScramLoginModule required;")
                    # OAUTHBEARER with JWTs checked against the JWKS (Kafka's default validator
                    # takes unsigned tokens; shardlog only validates).
                    if "OAUTHBEARER" in self.sasl_mechanisms:
                        lines.append(f"listener.name.{name}.oauthbearer.sasl.jaas.config="
                                     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
                        lines.append(f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class="
                                     "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler")
            props.write_text("\n".join(lines) + "\n")
        if not (self.kafka_log_dirs()[0] / "meta.properties").exists():
            subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "--standalone",
                            "-t", kafka_uuid(), "-c", str(props)],
                           check=True, capture_output=True, timeout=120)
        jvm = []
        if "sasl.oauthbearer.jwks.endpoint.url" in self.settings:
            # Kafka 4 reads JWKS (and token) URLs only when allowed by this system property.
            jvm.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.settings['sasl.oauthbearer.jwks.endpoint.url']}")
        return ["java", "-Xmx1g", *jvm, "-cp", cp, "kafka.Kafka", str(props)]

    def kafka_log_dirs(self) -> list[Path]:
        return self.log_dirs or [self.data_dir / "logs"]

    def _ready_pattern(self) -> re.Pattern:
        return re.compile(r"Kafka Server started")

    # -- lifecycle -----------------------------------------------------------------
    def start(self, wait: bool = True) -> "Broker":
        """Starts the broker; with `wait`, returns once it is ready (shardlog's
        /v1/status/ready, Kafka's start line)."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        if not is_kafka() and not SHARDLOG_BIN.exists():
            pytest.fail(f"broker binary {SHARDLOG_BIN} not found: run `cargo build --release` "
                        "or set SHARDLOG_BIN")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self._kafka_cmd() if is_kafka() else self._shardlog_cmd()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            offset = log.tell()
            env = dict(os.environ)
            env.setdefault("RUST_BACKTRACE", "1")
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        if self not in _LIVE:
            _LIVE.append(self)
        if not wait:
            return self
        pattern = self._ready_pattern()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if is_kafka():
                with open(self.log_path, "rb") as f:
                    f.seek(offset)
                    if pattern.search(f.read().decode("utf-8", "replace")):
                        return self
            elif status_ready(self.admin_url):
                return self
            if self.proc.poll() is not None:
                pytest.fail(f"broker exited with code {self.proc.returncode} before it was ready; "
                            f"log tail:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill9()
                what = f"printed no '{pattern.pattern}'" if is_kafka() else f"was not ready ({self.admin_url}/v1/status/ready)"
                pytest.fail(f"broker {what} within {START_TIMEOUT_S} s; "
                            f"log tail:\n{self.log_tail()}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL to the broker's whole process group (its own session), no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 20) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with open(self.log_path, "ab") as log:
                log.write(b"\n===== test harness: no exit after SIGTERM, sending SIGKILL\n")
            self.kill9()

    def restart(self, kill: bool = False) -> "Broker":
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start()

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def assert_alive(self) -> None:
        assert self.alive(), (f"broker died (exit code {self.proc.returncode}); log tail:\n"
                              f"{self.log_tail()}")


_KAFKA_CP: str | None = None


def kafka_classpath() -> str:
    global _KAFKA_CP
    if _KAFKA_CP is None:
        out = subprocess.run([str(REPO / "scripts" / "kafka_local.sh"), "classpath"], check=True,
                             capture_output=True, text=True, timeout=900)
        _KAFKA_CP = out.stdout.strip().splitlines()[-1]
    return _KAFKA_CP


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


class BrokerFactory:
    def __init__(self, tmp_path_factory, name: str):
        self.tmp_path_factory = tmp_path_factory
        self.name = _safe(name)
        self.brokers: list[Broker] = []

    def __call__(self, data_dir: Path | None = None, start: bool = True, **kw) -> Broker:
        n = len(self.brokers)
        if data_dir is None:
            data_dir = self.tmp_path_factory.mktemp(f"data-{self.name}-")
        log_path = LOG_ROOT / f"{self.name}-{n}.log"
        if log_path.exists():
            log_path.unlink()
        b = Broker(data_dir, log_path, **kw)
        self.brokers.append(b)
        if start:
            b.start()
        return b

    def close(self) -> None:
        for b in self.brokers:
            b.stop()
            if b in _LIVE:
                _LIVE.remove(b)



def wait_for(what: str, check, deadline_s: float = 60):
    """Polls `check` until it returns something truthy and returns that; fails the test
    after `deadline_s` (generous: a bound for a wait, not a timed assertion). An exception
    counts as not yet: a node restarting, or cut off, refuses or times out meanwhile."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.2)
    pytest.fail(f"not within {deadline_s} s: {what} (last: {last!r})")


def serve_cluster(c, timeout_s: float):
    """Starts a constructed cluster (shardlog or Kafka nodes) for a fixture to yield from:
    ready on return, closed after (nodes added meanwhile too); failing tests get the
    nodes' log tails in their report."""
    _LIVE.extend(c.nodes)
    try:
        c.start()
        c.wait_ready(timeout_s=timeout_s)
        yield c
    finally:
        c.close()
        for nd in c.nodes:
            if nd in _LIVE:
                _LIVE.remove(nd)


def running_cluster(tmp_path_factory, name: str, n: int = 3, **kwargs):
    """A started local shardlog cluster (tests/integration/cluster_harness.py)."""
    from cluster_harness import Cluster
    skip_unless_shardlog("the cluster harness starts shardlog processes")
    c = Cluster(n, tmp_path_factory.mktemp(name), log_dir=LOG_ROOT, name=f"test_{name.replace('-', '_')}-",
                binary=SHARDLOG_BIN, **kwargs)
    yield from serve_cluster(c, 60)


def running_kafka_cluster(tmp_path_factory, name: str, props: dict[str, str], n: int = 3, **kwargs):
    """A started cluster of `n` Kafka 4.4 nodes (brokers, with `controllers=C` besides)
    laid out as the shardlog harness's (tests/integration/kafka_cluster.py), `props` their
    extra server.properties."""
    from kafka_cluster import KafkaCluster
    c = KafkaCluster(n, tmp_path_factory.mktemp(name), kafka_classpath(), props=props,
                     log_dir=LOG_ROOT, name=f"kafka_{name.replace('-', '_')}-", **kwargs)
    yield from serve_cluster(c, 240)

@pytest.fixture
def broker_factory(tmp_path_factory, request):
    """Start extra brokers (own data dir and port) for one test; all stopped afterwards."""
    f = BrokerFactory(tmp_path_factory, request.node.name)
    yield f
    f.close()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory, request):
    """One broker shared by the tests of a module (tests use distinct topic names)."""
    f = BrokerFactory(tmp_path_factory, request.module.__name__)
    b = f()
    yield b
    f.close()


@pytest.fixture
def broker(module_broker):
    """The module's broker, restarted if an earlier test left it dead."""
    if not module_broker.alive():
        module_broker.start()
    return module_broker


@pytest.fixture
def bootstrap(broker) -> str:
    return broker.bootstrap


@pytest.fixture
def topic_name(request) -> str:
    return "t-" + _safe(request.node.name).replace(".", "-")[:60] + "-" + uuid.uuid4().hex[:6]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in list(_LIVE):
            state = "running" if b.alive() else f"exited ({b.proc.returncode if b.proc else 'never started'})"
            rep.sections.append((f"broker log {b.log_path} [{state}]", b.log_tail()))


def pytest_report_header(config):
    if is_kafka():
        return "integration target: Apache Kafka 4.4 (SHARDLOG_TEST_TARGET=kafka)"
    return f"integration target: shardlog binary {SHARDLOG_BIN}"
