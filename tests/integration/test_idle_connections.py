"""connections.max.idle.ms (issue 24, point 5): a connection that sends nothing for that
long is closed by the broker; one that keeps sending requests is not. Both targets run
with connections.max.idle.ms=1500.
"""
from __future__ import annotations

import time

import kafkawire as w

IDLE_MS = 1500


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(broker_factory):
    b = broker_factory(settings={"connections.max.idle.ms": str(IDLE_MS)})
    idle = w.connect(b.bootstrap, timeout_s=60)
    busy = w.connect(b.bootstrap, timeout_s=60)
    try:
        # The busy connection sends a request every 300 ms for 3x the idle time and is
        # answered every time; the idle one sends nothing.
        deadline = time.monotonic() + 3 * IDLE_MS / 1000
        n = 0
        while time.monotonic() < deadline:
            n += 1
            busy.sendall(w.api_versions_request(0, n))
            corr, err, _ = w.parse_api_versions_v0(w.recv_frame(busy))
            assert (corr, err) == (n, 0)
            time.sleep(0.3)
        # The broker closed the idle connection (recv sees the end; 60 s safety net).
        assert w.closed_or_reply(idle, 60) == "closed"
    finally:
        idle.close()
        busy.close()
