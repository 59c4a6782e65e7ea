"""The local limiter against the shared test vectors: for every call, the
reply the module gave (clients/vectors/local-limiter.json, written and
checked by tests/vectors.rs against the module)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from redis_swl import Verdict
from redis_swl.local import LocalLimiter

VECTORS = json.loads((ROOT / "clients" / "vectors" / "local-limiter.json").read_text())


def test_the_local_limiter_replies_as_the_module_did():
    assert len(VECTORS["cases"]) >= 40
    limiter = LocalLimiter()
    for n, case in enumerate(VECTORS["cases"]):
        windows = [tuple(window) for window in case["windows"]]
        for call in case["calls"]:
            decide = limiter.check if call["op"] == "check" else limiter.refund
            verdict = decide(f"case{n}", windows, call["now_ms"], call["cost"])
            assert verdict == Verdict.from_reply(call["reply"]), (n, call)


def test_the_local_limiter_takes_as_many_windows_as_the_module():
    most = VECTORS["windows_at_most"]
    windows = [(1000 + n, 5) for n in range(most + 1)]
    limiter = LocalLimiter()
    assert limiter.check("k", windows[:most], 1000) == Verdict(True, 5, 4, -1, 1000 + most - 1, 1000)
    assert limiter.refund("k", windows[:most], 1001) == Verdict(True, 5, 4, -1, 1000 + most - 1, 1000)
    for call in (limiter.check, limiter.refund):
        with pytest.raises(ValueError, match=f"^windows: at most {most} per call, not {most + 1}$"):
            call("k", windows, 1002)
    # Refused before anything changed: the log still holds nothing.
    assert limiter.check("k", windows[:1], 1003) == Verdict(True, 5, 4, -1, 1000, 1000)


def test_the_least_recently_used_client_is_forgotten_first():
    limiter = LocalLimiter(max_clients=2)
    window = [(60_000, 1)]
    for key in ("a", "b"):
        assert limiter.check(key, window, 1000).allowed
    assert not limiter.check("a", window, 1001).allowed  # a is now the most recent
    assert limiter.check("c", window, 1002).allowed      # b is forgotten
    assert limiter.check("b", window, 1003).allowed
    assert not limiter.check("c", window, 1004).allowed
