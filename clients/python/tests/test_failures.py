"""Redis stalled, stopped and restarted under the example apps: with each
fail-open setting Flask-Limiter and slowapi document (swallow_errors, the
in-memory fallback), every request is answered within the storage's
timeout plus a margin, and the app goes back to Redis by itself."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from test_frameworks import flask_app, get, serve_asgi, serve_wsgi, slowapi_app

# The storage's socket timeouts (long enough that the first request, which
# must be recorded in Redis, is on a busy machine), and what an answer may
# take beyond them there (a request may wait on Redis more than once).
TIMEOUT = 0.5
MARGIN = 1.5
FRAMEWORKS = {
    "flask": (flask_app.create_app, serve_wsgi),
    "slowapi": (slowapi_app.create_app, serve_asgi),
}
# Each setting as the app passes it. The fallback gets limits of its own,
# loose enough for every request here.
SETTINGS = {
    "swallow_errors": {"swallow_errors": True},
    "in_memory_fallback": {"in_memory_fallback_enabled": True,
                           "in_memory_fallback": ["100/minute"]},
}


def answered_in_time(url: str) -> int:
    started = time.monotonic()
    status, _ = get(url)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT + MARGIN, f"{url} took {elapsed:.2f} s"
    return status


def entries_in_redis(server) -> int:
    """Entries recorded by the app in the server, over all its keys."""
    client = server.client(socket_timeout=5)
    return sum(len(client.execute_command("SWL.ENTRIES", key)) for key in client.keys("LIMITS:*"))


def until(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("setting", SETTINGS)
def test_an_app_fails_open_and_returns_to_redis(start_server, framework, setting):
    create, serve = FRAMEWORKS[framework]
    server = start_server(True)
    options = {"socket_timeout": TIMEOUT, "socket_connect_timeout": TIMEOUT}
    app = create(f"swl+redis://127.0.0.1:{server.port}", storage_options=options,
                 **SETTINGS[setting])
    base, stop = serve(app)
    url = f"{base}/burst"
    try:
        assert answered_in_time(url) == 200
        assert entries_in_redis(server) == 1

        server.pause()
        assert [answered_in_time(url) for _ in range(3)] == [200] * 3
        server.resume()

        # Back to Redis: a request records in it again.
        def recorded() -> bool:
            before = entries_in_redis(server)
            return answered_in_time(url) == 200 and entries_in_redis(server) > before

        until(recorded, "the app did not return to Redis after a stall")

        server.kill()
        assert [answered_in_time(url) for _ in range(3)] == [200] * 3
        server.restart()
        until(recorded, "the app did not return to a restarted Redis")
    finally:
        stop()
