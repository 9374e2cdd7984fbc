"""Prometheus metrics for one service instance (its own registry, so tests can build many).

Exposed at ``GET /metrics`` in the Prometheus text format: requests and latency per
endpoint, pipeline stage latency, passages removed per defense, throttle verdicts,
budget refusals, authentication failures (``key``, ``scope``, ``throttled``), audit rows
lost and the number of currently blocked keys.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# Seconds; extractive answers take tens of ms, an LLM on a CPU tens of seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, blocked_keys: Callable[[], float] | None = None) -> None:
        disable_created_metrics()  # *_created series only add noise to a scrape
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "ragshield_requests",
            "HTTP requests by endpoint and status code.",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "ragshield_request_seconds",
            "HTTP request latency by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "ragshield_stage_seconds",
            "Pipeline stage latency (retrieve, filter, generate).",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.removed = Counter(
            "ragshield_removed",
            "Passages or sentences removed, by defense and unit.",
            ["defense", "unit"],
            registry=r,
        )
        self.throttled = Counter(
            "ragshield_throttled",
            "Extraction-throttle verdicts other than allow.",
            ["kind", "action"],
            registry=r,
        )
        self.rate_limited = Counter(
            "ragshield_rate_limited",
            "Requests refused by a per-key budget.",
            ["window"],
            registry=r,
        )
        self.auth_failures = Counter(
            "ragshield_auth_failures",
            "Requests refused for a missing/invalid key or scope.",
            ["reason"],
            registry=r,
        )
        self.audit_dropped = Counter(
            "ragshield_audit_dropped",
            "Audit rows of rejected requests lost (queue full or database down).",
            registry=r,
        )
        self.blocked = Gauge(
            "ragshield_blocked_keys",
            "Keys currently blocked by the extraction throttle.",
            registry=r,
        )
        if blocked_keys is not None:
            self.blocked.set_function(blocked_keys)

    def render(self) -> bytes:
        return generate_latest(self.registry)
