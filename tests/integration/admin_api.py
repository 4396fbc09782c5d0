"""The broker's HTTP admin listener as tests read it: /metrics parsed with Prometheus's own
OpenMetrics parser (so a format mistake fails the scrape), and /v1/status/*."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


class Metrics:
    """One scrape: samples by name, each with its labels."""

    def __init__(self, text: str):
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        self.families: dict[str, str] = {}
        for fam in text_string_to_metric_families(text):
            self.families[fam.name] = fam.type
            for s in fam.samples:
                self.samples.append((s.name, dict(s.labels), s.value))

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
        return sum(v for n, ls, v in self.samples
                   if n == name and all(ls.get(k) == want for k, want in labels.items()))

    def has(self, name: str, **labels: str) -> bool:
        return any(n == name and all(ls.get(k) == want for k, want in labels.items())
                   for n, ls, _ in self.samples)

    def labelled(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(ls, v) for n, ls, v in self.samples if n == name]


def get(url: str, timeout_s: float = 10) -> tuple[int, str]:
    """(status, body); an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(admin_url: str) -> Metrics:
    status, body = get(admin_url + "/metrics")
    assert status == 200, (status, body[:500])
    return Metrics(body)


def ready(admin_url: str) -> tuple[bool, str]:
    """(ready, reason) from /v1/status/ready (200 with ready=true, else 503 with a reason)."""
    status, body = get(admin_url + "/v1/status/ready")
    doc = json.loads(body)
    assert (status == 200) == doc["ready"], (status, body)
    return doc["ready"], doc.get("reason", "")
