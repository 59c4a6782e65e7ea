"""The ASGI middleware's metrics, through prometheus_client (the
``redis-swl[prometheus]`` extra), with the Rust crate's names: every
decision counted by limiter, decision and source, and its latency by
limiter and source. Without prometheus_client installed nothing is counted
and nothing else changes."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional, Tuple

DECISIONS = "redis_swl_decisions"  # exposed as redis_swl_decisions_total
DECISION_SECONDS = "redis_swl_decision_seconds"
#: From 0.1 ms (an answer of the cache) to 250 ms (past any timeout worth
#: setting), as the Rust example app sets them.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)

_lock = threading.Lock()
#: One counter and one histogram per registry, shared by its limiters
#: (prometheus_client refuses a name registered twice).
_registered: "weakref.WeakKeyDictionary[Any, Tuple[Any, Any]]" = weakref.WeakKeyDictionary()


class DecisionMetrics:
    """What a limiter counts its decisions into."""

    def __init__(self, name: str, registry: Any) -> None:
        from prometheus_client import Counter, Histogram

        with _lock:
            found = _registered.get(registry)
            if found is None:
                found = (
                    Counter(DECISIONS, "Requests decided by a redis-swl limiter, by limiter, "
                            "decision (admitted, denied) and source (redis, cache, local, open, "
                            "closed)", ["limiter", "decision", "source"], registry=registry),
                    Histogram(DECISION_SECONDS, "Time a redis-swl limiter took to decide a "
                              "request, by limiter and source", ["limiter", "source"],
                              buckets=BUCKETS, registry=registry),
                )
                _registered[registry] = found
        self.name = name
        self.decisions, self.seconds = found

    def count(self, admitted: bool, source: str, seconds: float) -> None:
        decision = "admitted" if admitted else "denied"
        self.decisions.labels(self.name, decision, source).inc()
        self.seconds.labels(self.name, source).observe(seconds)


def decision_metrics(name: str, metrics: Any) -> Optional[DecisionMetrics]:
    """The metrics of the limiter ``name``: in prometheus_client's default
    registry for ``True`` (none where prometheus_client is not installed),
    none for ``False``, or in the registry given."""
    if metrics is False or metrics is None:
        return None
    if metrics is True:
        try:
            from prometheus_client import REGISTRY
        except ImportError:
            return None
        metrics = REGISTRY
    return DecisionMetrics(name, metrics)
