"""Tiered storage (issue 30) under object-store faults, against a real S3-compatible server
(SeaweedFS, started here):
- wrong credentials: the store refuses every upload; each failure is logged and counted,
  nothing leaves the local disk whatever local.retention.bytes says, the copy lag shows
  the backlog; restarted with the right credentials, the broker uploads the backlog and
  trims its local log, and a consumer gets every record;
- a remote segment damaged in the bucket (one byte changed) or missing: a consumer fetch
  there gets UNKNOWN_SERVER_ERROR at once, never the damaged bytes and never a hang, and
  it counts as a remote fetch error; the intact segments still serve. The fetches here
  are v4 (topics by name, as older clients send): remote reads find the partition's
  remote log by the topic id the broker looks up;
- S3's throttling reply (503 SlowDown) to every third request, from a proxy in front of
  the store: uploads, reads and deletions retry with back-off and nothing is lost.
"""

from __future__ import annotations

import uuid

from admin_api import scrape
from clients import Rec, consume_confluent, produce_confluent
from conftest import LOG_ROOT, skip_unless_shardlog, wait_for
from kafkawire import batches_in, fetch_v4_request, parse_fetch_v4, roundtrip
from object_store import ObjectStore
from test_tiered_storage import SEGMENT_BYTES, create, list_offsets_flex, remote_logs

UNKNOWN_SERVER_ERROR = -1
DEADLINE_S = 120


def tiered_settings(store: ObjectStore, prefix: str) -> dict[str, str]:
    return {**store.broker_settings(prefix), "remote.log.manager.task.interval.ms": "300", "log.retention.check.interval.ms": "500",
            "rsm.config.storage.s3.api.call.timeout": "5000"}


def produce_history(bootstrap: str, topic: str, n: int) -> list[bytes]:
    create(bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                              "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(n)]
    assert len(produce_confluent(bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})) == n
    return values


def fetch_at(bootstrap: str, topic: str, offset: int) -> dict:
    """A consumer's Fetch v4 of partition 0 at `offset` (the socket times out in 10 s: a
    hang fails)."""
    _, parts = parse_fetch_v4(roundtrip(bootstrap, fetch_v4_request(1, topic, [(0, offset, 1 << 20)], 1 << 20)))
    return parts[0]


def test_wrong_credentials_keep_everything_local_until_they_are_right(broker_factory, tmp_path_factory):
    skip_unless_shardlog("tiered storage against SeaweedFS")
    store = ObjectStore(tmp_path_factory.mktemp("creds-store"), LOG_ROOT / f"weed-creds-{uuid.uuid4().hex[:6]}.log").start()
    try:
        right = tiered_settings(store, "creds/")
        b = broker_factory(settings={**right, "rsm.config.storage.aws.secret.access.key": "not-the-secret"})
        topic = f"creds-{uuid.uuid4().hex[:6]}"
        values = produce_history(b.bootstrap, topic, 5000)
        wait_for("refused uploads counted",
                 lambda: scrape(b.admin_url).total("shardlog_remote_copy_requests_total", result="error") >= 2, DEADLINE_S)
        assert "remote copy failed" in b.log_tail(400)
        assert store.keys("creds/") == [], "nothing reached the bucket"
        assert list_offsets_flex(b.bootstrap, topic, -4) == (0, 0), "nothing left the local disk"
        assert list_offsets_flex(b.bootstrap, topic, -5) == (0, -1)
        assert scrape(b.admin_url).total("shardlog_remote_copy_lag_bytes") >= 3 * SEGMENT_BYTES
        b.settings.update(right)
        b.restart()
        wait_for("the backlog uploaded and deleted locally",
                 lambda: (lambda r: r[0] == 0 and r[1] > 3000)(list_offsets_flex(b.bootstrap, topic, -4)), DEADLINE_S)
        got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
        assert [c.value for c in got] == values
    finally:
        store.stop()


def test_a_damaged_or_missing_remote_segment_is_an_error_not_a_hang(broker_factory, tmp_path_factory):
    skip_unless_shardlog("tiered storage against SeaweedFS")
    store = ObjectStore(tmp_path_factory.mktemp("damage-store"), LOG_ROOT / f"weed-damage-{uuid.uuid4().hex[:6]}.log").start()
    try:
        prefix = "damage/"
        # No chunk cache: every fetch reads the store (a chunk read before the damage would
        # still serve the bytes as they were uploaded, CRC-checked).
        b = broker_factory(settings={**tiered_settings(store, prefix), "rsm.config.fetch.chunk.cache.size": "0"})
        topic = f"damage-{uuid.uuid4().hex[:6]}"
        produce_history(b.bootstrap, topic, 6000)
        wait_for("history uploaded and deleted locally",
                 lambda: (lambda r: r[0] == 0 and r[1] > 4000)(list_offsets_flex(b.bootstrap, topic, -4)), DEADLINE_S)
        starts = remote_logs(store, prefix, topic)
        assert len(starts) >= 3 and starts[0] == 0, starts
        # Every segment serves before the damage.
        for start in starts[:3]:
            part = fetch_at(b.bootstrap, topic, start)
            assert part["error_code"] == 0 and batches_in(part["records"])[0][0] == start, (start, part["error_code"])
        logs = {int(k.rsplit("/", 1)[1].split("-", 1)[0]): k for k in store.keys(f"{prefix}{topic}-") if k.endswith(".log")}
        # One byte changed inside the first batch's records (its CRC no longer matches),
        # the second segment's batches gone.
        c = store.client()
        data = bytearray(store.get(logs[starts[0]]))
        data[200] ^= 0xFF
        c.put_object(Bucket=store.bucket, Key=logs[starts[0]], Body=bytes(data))
        c.delete_object(Bucket=store.bucket, Key=logs[starts[1]])
        errors_before = scrape(b.admin_url).total("shardlog_remote_fetch_requests_total", result="error")
        for start in starts[:2]:
            part = fetch_at(b.bootstrap, topic, start)
            assert part["error_code"] == UNKNOWN_SERVER_ERROR and part["records"] == b"", (start, part["error_code"], len(part["records"]))
        assert scrape(b.admin_url).total("shardlog_remote_fetch_requests_total", result="error") >= errors_before + 2
        part = fetch_at(b.bootstrap, topic, starts[2])
        assert part["error_code"] == 0 and batches_in(part["records"])[0][0] == starts[2], "the intact segment still serves"
    finally:
        store.stop()


class SlowDownProxy:
    """An HTTP proxy in front of the S3 server answering every `every`-th request with an
    S3 error instead of passing it on, by turns the throttling reply (503 SlowDown) and a
    server fault (500 InternalError); the others go through with their headers as signed
    (Host included: the signature is the client's)."""

    REPLIES = [(503, b"SlowDown", b"Please reduce your request rate."),
               (500, b"InternalError", b"We encountered an internal error. Please try again.")]

    HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}

    def __init__(self, upstream_port: int, every: int = 3):
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        proxy = self
        self.count = 0
        self.injected = 0
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def relay(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    proxy.count += 1
                    fail = proxy.count % every == 0
                    proxy.injected += fail
                if fail:
                    status, code, message = SlowDownProxy.REPLIES[proxy.injected % 2]
                    reply = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + code + b"</Code>"
                             b"<Message>" + message + b"</Message></Error>")
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in SlowDownProxy.HOP}
                    upstream.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST") else None, headers=headers)
                    resp = upstream.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in SlowDownProxy.HOP and not (k.lower() == "content-length" and self.command != "HEAD"):
                            self.send_header(k, v)
                    if self.command != "HEAD":
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_slowdown_and_500_replies_are_retried_and_lose_nothing(broker_factory, tmp_path_factory):
    """Every third request to the store answered 503 SlowDown or 500 InternalError, by
    turns: uploads, reads and deletes retry with back-off; the history is uploaded whole,
    trimmed locally and read back."""
    skip_unless_shardlog("tiered storage against SeaweedFS")
    store = ObjectStore(tmp_path_factory.mktemp("slow-store"), LOG_ROOT / f"weed-slow-{uuid.uuid4().hex[:6]}.log").start()
    proxy = SlowDownProxy(store.ports["s3"], every=3)
    try:
        prefix = "slow/"
        b = broker_factory(settings={**tiered_settings(store, prefix), "rsm.config.storage.s3.endpoint.url": proxy.endpoint,
                                     "rsm.config.storage.s3.api.call.timeout": "30000"})
        topic = f"slow-{uuid.uuid4().hex[:6]}"
        values = produce_history(b.bootstrap, topic, 6000)
        wait_for("history uploaded and deleted locally",
                 lambda: (lambda r: r[0] == 0 and r[1] > 4000)(list_offsets_flex(b.bootstrap, topic, -4)), DEADLINE_S)
        got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
        assert [c.value for c in got] == values
        assert proxy.injected >= 10, f"only {proxy.injected} error replies: the fault did not happen"
        logs = [k for k in store.keys(f"{prefix}{topic}-") if k.endswith(".log")]
        assert logs and all(k[:-4] + ".indexes" in store.keys(f"{prefix}{topic}-") for k in logs), "whole segments only"
    finally:
        proxy.close()
        store.stop()
