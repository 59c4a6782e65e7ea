"""redis_swl.asgi under uvicorn over HTTP, with the module and with the
function library the package loads itself, in both encodings: per-route
limits, exempt routes, the RateLimit headers, and failed responses given
back (SWL.REFUND) with refund_failed."""

from __future__ import annotations

import asyncio
import itertools
import time
import urllib.error
import urllib.request

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from conftest import ENCODINGS, log_kind
from redis_swl.asgi import RateLimiter, RateLimitMiddleware
from test_frameworks import get, serve_asgi, statuses

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]


def entries(client, module: bool, key: str) -> list:
    if module:
        return client.execute_command("SWL.ENTRIES", key)
    return client.fcall("swl_entries", 1, key)


def make_app(limiter: RateLimiter) -> FastAPI:
    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, limiter=limiter)

    @app.get("/", response_class=PlainTextResponse)
    def index():
        return "hello\n"

    @app.get("/search", response_class=PlainTextResponse)
    def search():
        return "results\n"

    @app.get("/health", response_class=PlainTextResponse)
    def health():
        return "ok\n"

    @app.get("/fail", response_class=PlainTextResponse)
    def fail():
        return PlainTextResponse("failed\n", status_code=500)

    @app.get("/boom", response_class=PlainTextResponse)
    def boom():
        raise RuntimeError("the app failed")

    @app.get("/searchable", response_class=PlainTextResponse)
    def searchable():
        return "not the search route\n"

    return app


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_routes_headers_and_refunds(start_server, module, encoding):
    server = start_server(module, encoding)
    limiter = RateLimiter(server.url, windows=[(60_000, 3)], timeout=2.0,
                          routes={"/search": [(60_000, 1)], "/health": []},
                          refund_failed=True, encoding=encoding)
    base, stop = serve_asgi(make_app(limiter))
    client = server.client()
    try:
        # Failed responses are given back, as are requests the app raised
        # on: never a 429, the log empty.
        assert statuses(f"{base}/fail", 5) == [500] * 5
        assert statuses(f"{base}/boom", 4) == [500] * 4
        assert client.exists("rl:127.0.0.1") == 0
        status, headers = get(f"{base}/")
        assert status == 200
        assert headers["ratelimit-policy"] == '"60000ms";q=3;w=60'
        assert headers["ratelimit"] == '"60000ms";r=2;t=60'
        assert headers["ratelimit-source"] == "redis"
        assert statuses(f"{base}/", 3) == [200, 200, 429]
        status, headers = get(f"{base}/")
        assert (status, headers["retry-after"]) == (429, "60")
        # A route of its own: its own log and limit; a path that merely
        # starts with its name is not under it.
        assert statuses(f"{base}/search", 2) == [200, 429]
        assert get(f"{base}/searchable")[0] == 429
        assert log_kind(client, "rl:/search:127.0.0.1") == encoding
        assert log_kind(client, "rl:127.0.0.1") == encoding
        assert len(entries(client, module, "rl:/search:127.0.0.1")) == 1
        assert len(entries(client, module, "rl:127.0.0.1")) == 3
        # An exempt route: no limit, no headers.
        for _ in range(5):
            status, headers = get(f"{base}/health")
            assert (status, headers["ratelimit"]) == (200, None)
        assert limiter.failures == 0
    finally:
        stop()


def test_settings_the_commands_would_refuse_are_refused_at_once():
    url = "redis://127.0.0.1:1"
    with pytest.raises(ValueError, match='unknown policy "sometimes"'):
        RateLimiter(url, windows=[(1000, 1)], policy="sometimes")
    with pytest.raises(ValueError, match="at least one"):
        RateLimiter(url, windows=[])
    with pytest.raises(ValueError, match="cost must be an integer from 1 to 100000"):
        RateLimiter(url, windows=[(1000, 1)], cost=0)
    with pytest.raises(ValueError, match=r"windows: \(window_ms >= 1"):
        RateLimiter(url, windows=[(0, 1)])
    with pytest.raises(ValueError, match=r"routes\['/a'\]"):
        RateLimiter(url, windows=[(1000, 1)], routes={"/a": [(1000, 1.5)]})
    # At most 100 windows, as one call takes.
    windows = [(1000 + n, 5) for n in range(101)]
    assert RateLimiter(url, windows=windows[:100]).windows == windows[:100]
    with pytest.raises(ValueError, match=r"^windows: at most 100 \(window_ms, limit\) pairs, not 101$"):
        RateLimiter(url, windows=windows)
    with pytest.raises(ValueError, match=r"^routes\['/a'\]: at most 100 \(window_ms, limit\) pairs, not 101$"):
        RateLimiter(url, windows=[(1000, 1)], routes={"/a": windows})


def test_a_key_redis_refuses_is_the_policys_and_the_others_stay_on_redis(start_server):
    server = start_server(True)
    server.client().set("rl:mallory", "not a log")
    # Keyed by a header for this test only: never trust one in an app.
    limiter = RateLimiter(server.url, windows=[(60_000, 5)], policy="closed", timeout=2.0,
                          key=lambda request: request.headers["x-user"])
    base, stop = serve_asgi(make_app(limiter))

    def as_user(user):
        request = urllib.request.Request(f"{base}/", headers={"x-user": user})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers["ratelimit-source"]
        except urllib.error.HTTPError as error:
            return error.code, error.headers["ratelimit-source"]

    try:
        assert as_user("mallory") == (503, "closed")
        assert [as_user("alice") for _ in range(2)] == [(200, "redis")] * 2
        assert limiter.failures == 1
    finally:
        stop()


def test_the_local_policy_refunds_in_process(start_server):
    server = start_server(True)
    server.kill()
    limiter = RateLimiter(server.url, windows=[(60_000, 2)], policy="local",
                          refund_failed=True, timeout=0.2)
    base, stop = serve_asgi(make_app(limiter))
    try:
        assert statuses(f"{base}/fail", 3) == [500] * 3
        assert statuses(f"{base}/", 3) == [200, 200, 429]
        assert get(f"{base}/")[1]["ratelimit-source"] == "local"
        # Every request was the policy's to decide; refunds are not counted.
        assert limiter.failures == 7
    finally:
        stop()


def test_a_request_slower_than_its_window_is_not_refunded(start_server):
    server = start_server(True)
    limiter = RateLimiter(server.url, windows=[(60_000, 10), (1_000, 5)], timeout=2.0,
                          refund_failed=True)
    app = make_app(limiter)

    @app.get("/slow", response_class=PlainTextResponse)
    async def slow():
        await asyncio.sleep(1.2)
        return PlainTextResponse("late\n", status_code=502)

    base, stop = serve_asgi(app)
    client = server.client()
    try:
        assert get(f"{base}/slow")[0] == 502
        # Its entry may have left the 1 s window, so a refund could take
        # another request's: it keeps its own. A fast failure after it is
        # refunded (after its response: polled), and what is left is then
        # the slow request's entry, not the fast one's.
        seconds, micros = client.time()
        fast_started_ms = seconds * 1000 + micros // 1000
        assert get(f"{base}/fail")[0] == 500
        deadline = time.monotonic() + 5
        while not (len(left := entries(client, True, "rl:127.0.0.1")) == 1
                   and left[0] < fast_started_ms):
            assert time.monotonic() < deadline, f"left: {left}"
            time.sleep(0.005)
    finally:
        stop()


def cache_app(limiter: RateLimiter, release) -> FastAPI:
    """An app whose /slow fails once ``release`` (a threading.Event) is set,
    and whose /reset resets the caller."""
    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, limiter=limiter)

    @app.get("/", response_class=PlainTextResponse)
    def index():
        return "hello\n"

    @app.get("/slow", response_class=PlainTextResponse)
    async def slow():
        await asyncio.to_thread(release.wait)
        return PlainTextResponse("failed\n", status_code=500)

    @app.post("/reset", response_class=PlainTextResponse)
    async def reset(request: Request):
        await limiter.reset(request.client.host)
        return "reset\n"

    return app


def post(url: str) -> int:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as r:
        return r.status


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_a_refund_or_reset_through_the_limiter_lets_the_next_request_in(
        start_server, module, cache):
    import threading

    server = start_server(module)
    limiter = RateLimiter(server.url, windows=[(60_000, 2)], timeout=2.0, refund_failed=True,
                          routes={"/reset": []}, denial_cache_keys=10 if cache else 0,
                          metrics=False)
    release = threading.Event()
    base, stop = serve_asgi(cache_app(limiter, release))
    client = server.client()
    slow = {}
    try:
        assert get(f"{base}/")[0] == 200
        waiting = threading.Thread(target=lambda: slow.update(status=get(f"{base}/slow")[0]))
        waiting.start()
        # /slow is admitted (its entry is in the log) and waits.
        while len(entries(client, module, "rl:127.0.0.1")) < 2:
            time.sleep(0.01)
        sources = [get(f"{base}/")[1]["ratelimit-source"] for _ in range(2)]
        assert sources == (["redis", "cache"] if cache else ["redis", "redis"])
        release.set()
        waiting.join()
        assert slow["status"] == 500
        # Once the refund is done (the log and the cache both say so).
        while len(entries(client, module, "rl:127.0.0.1")) != 1 or (
                cache and limiter.denials.answer("rl:127.0.0.1", [(60_000, 2)], 1)):
            time.sleep(0.01)
        assert get(f"{base}/")[0] == 200
        status, headers = get(f"{base}/")
        assert (status, headers["ratelimit-source"]) == (429, "redis")
        assert get(f"{base}/")[1]["ratelimit-source"] == ("cache" if cache else "redis")
        assert post(f"{base}/reset") == 200
        assert client.exists("rl:127.0.0.1") == 0
        assert [get(f"{base}/")[0] for _ in range(3)] == [200, 200, 429]
    finally:
        release.set()
        stop()


def test_metrics_count_into_the_registry_given_by_limiter_name(start_server):
    from prometheus_client import CollectorRegistry

    server = start_server(True)
    registry = CollectorRegistry()
    api = RateLimiter(server.url, windows=[(60_000, 1)], timeout=2.0, name="api",
                      metrics=registry)
    login = RateLimiter(server.url, windows=[(60_000, 1)], timeout=2.0, name="login",
                        metrics=registry, denial_cache_keys=0)
    for limiter in (api, login):
        base, stop = serve_asgi(make_app(limiter))
        try:
            assert statuses(f"{base}/", 3) == [200, 429, 429]
        finally:
            stop()
        server.client().flushall()

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    total = "redis_swl_decisions_total"
    assert [value(total, limiter="api", decision=d, source=s)
            for d, s in (("admitted", "redis"), ("denied", "redis"), ("denied", "cache"))] == [1, 1, 1]
    assert [value(total, limiter="login", decision=d, source=s)
            for d, s in (("admitted", "redis"), ("denied", "redis"), ("denied", "cache"))] == [1, 2, 0]
    assert value("redis_swl_decision_seconds_count", limiter="api", source="cache") == 1
    assert value("redis_swl_decision_seconds_count", limiter="login", source="redis") == 3
    assert RateLimiter(server.url, windows=[(1, 1)], metrics=False).metrics is None
