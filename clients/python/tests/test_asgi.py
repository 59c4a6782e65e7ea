"""redis_swl.asgi under uvicorn over HTTP, with the module and with the
function library the package loads itself, in both encodings: per-route
limits, exempt routes, the RateLimit headers, and failed responses given
back (SWL.REFUND) with refund_failed."""

from __future__ import annotations

import itertools

import pytest
from fastapi import FastAPI
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
        # Failed responses are given back: never a 429, the log empty.
        assert statuses(f"{base}/fail", 5) == [500] * 5
        assert client.exists("rl:127.0.0.1") == 0
        status, headers = get(f"{base}/")
        assert status == 200
        assert headers["ratelimit-policy"] == '"60000ms";q=3;w=60'
        assert headers["ratelimit"] == '"60000ms";r=2;t=60'
        assert headers["ratelimit-source"] == "redis"
        assert statuses(f"{base}/", 3) == [200, 200, 429]
        status, headers = get(f"{base}/")
        assert (status, headers["retry-after"]) == (429, "60")
        # A route of its own: its own log and limit.
        assert statuses(f"{base}/search", 2) == [200, 429]
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


def test_an_unknown_policy_and_no_windows_are_refused():
    with pytest.raises(ValueError, match='unknown policy "sometimes"'):
        RateLimiter("redis://127.0.0.1:1", windows=[(1000, 1)], policy="sometimes")
    with pytest.raises(ValueError, match="at least one"):
        RateLimiter("redis://127.0.0.1:1", windows=[])


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
