"""A real S3-compatible object store for the tiered-storage tests: SeaweedFS's `weed mini`
(master, volume, filer and S3 gateway in one process) on loopback ports of this worker,
with one bucket and one access key. scripts/test.sh builds `weed` and exports its path as
SHARDLOG_WEED. No in-process fake: the broker talks S3 over HTTP to a separate server.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from cluster_harness import free_port

ACCESS_KEY = "shardlog-tests"
SECRET_KEY = "shardlog-tests-secret"
REGION = "us-east-1"


def weed_binary() -> str:
    path = os.environ.get("SHARDLOG_WEED") or shutil.which("weed")
    if not path:
        raise RuntimeError("no SeaweedFS `weed`: run the tests through scripts/test.sh, which builds it and sets SHARDLOG_WEED")
    return path


class ObjectStore:
    """One SeaweedFS server; `stop()`/`start()` keep its data (an outage, not a wipe)."""

    def __init__(self, data_dir: Path, log_path: Path, bucket: str = "tiered"):
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.bucket = bucket
        self.ports = {name: free_port() for name in (
            "master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc", "admin", "admin.grpc")}
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def _cmd(self) -> list[str]:
        p = self.ports
        return [
            weed_binary(), "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-bucket={self.bucket}",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume.grpc']}",
            f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer.grpc']}",
            f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3.grpc']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-admin.port={p['admin']}", f"-admin.port.grpc={p['admin.grpc']}", "-admin.port.legacy=0", "-admin.ui=false",
            "-webdav=false", "-metricsPort=0", "-s3.metricsPort=0", "-master.telemetry=false",
        ]

    def start(self, timeout_s: float = 60) -> "ObjectStore":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # The S3 gateway makes its admin identity from these (no other identity exists).
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self._cmd(), cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}; see {self.log_path}")
            try:
                self.client().head_bucket(Bucket=self.bucket)
                return self
            except Exception as e:  # not up yet, or the bucket not created yet
                last = e
                time.sleep(0.3)
        raise TimeoutError(f"the object store did not serve bucket {self.bucket} within {timeout_s} s: {last}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open, nothing is answered (a hung store)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def client(self):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            region_name=REGION, config=Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30))

    def keys(self, prefix: str = "") -> list[str]:
        out, token = [], None
        c = self.client()
        while True:
            kw = {"Bucket": self.bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = c.list_objects_v2(**kw)
            out += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return sorted(out)
            token = page["NextContinuationToken"]

    def get(self, key: str) -> bytes:
        return self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def broker_settings(self, key_prefix: str = "") -> dict[str, str]:
        """The broker settings of tiered storage against this store, by Kafka name (the
        Aiven S3 plugin's rsm.config.* names)."""
        return {
            "remote.log.storage.system.enable": "true",
            "rsm.config.storage.s3.bucket.name": self.bucket,
            "rsm.config.storage.s3.region": REGION,
            "rsm.config.storage.s3.endpoint.url": self.endpoint,
            "rsm.config.storage.aws.access.key.id": ACCESS_KEY,
            "rsm.config.storage.aws.secret.access.key": SECRET_KEY,
            "rsm.config.key.prefix": key_prefix,
        }

    def broker_args(self, key_prefix: str, settings: dict[str, str]) -> list[str]:
        """`broker_settings(key_prefix)` and `settings` as shardlog's command-line flags."""
        args = []
        for k, v in {**self.broker_settings(key_prefix), **settings}.items():
            args += ["--" + k.replace(".", "-"), v]
        return args
