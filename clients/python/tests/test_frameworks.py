"""The example apps, as users run them: Flask with Flask-Limiter under a
real WSGI server and FastAPI with slowapi under uvicorn, asked over real
HTTP, with the module and with the function library the package loads
itself, in both encodings: exactly the expected 429s and headers, and the
keys are redis-swl logs."""

from __future__ import annotations

import itertools
import sys
import threading
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
import uvicorn
from werkzeug.serving import make_server

from conftest import ENCODINGS, free_port, log_kind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import flask_app  # noqa: E402
import slowapi_app  # noqa: E402

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]

# The status and the headers (looked up in any case).
Response = Tuple[int, Message]


def get(url: str) -> Response:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def serve_wsgi(app) -> Tuple[str, Callable[[], None]]:
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        thread.join()

    return f"http://127.0.0.1:{server.server_port}", stop


def serve_asgi(app) -> Tuple[str, Callable[[], None]]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)

    def stop():
        server.should_exit = True
        thread.join()

    return f"http://127.0.0.1:{port}", stop


def statuses(url: str, n: int) -> List[int]:
    return [get(url)[0] for _ in range(n)]


def burst(base: str, client, n: int = 8) -> List[int]:
    """n requests to /burst (5/second) within one second: a machine too
    busy to send them in time gets another try on an emptied server."""
    for _ in range(3):
        client.flushall()
        started = time.monotonic()
        seen = statuses(f"{base}/burst", n)
        if time.monotonic() - started < 0.9:
            return seen
    pytest.fail("could not send 8 requests within a second")


def assert_keys_are_logs(client, encoding: str) -> None:
    keys = client.keys("LIMITS:*")
    assert keys, "no keys"
    assert {log_kind(client, k.decode()) for k in keys} == {encoding}


# Each framework: its example app's factory, the server that runs it, and
# how it writes X-RateLimit-Reset (Flask-Limiter whole seconds, slowapi the
# float limits gives).
FRAMEWORKS = {
    "flask-limiter": (flask_app.create_app, serve_wsgi, int),
    "slowapi": (slowapi_app.create_app, serve_asgi, float),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_an_example_app_limits_exactly(start_server, module, encoding, framework):
    create, serve, reset_of = FRAMEWORKS[framework]
    server = start_server(module, encoding)
    client = server.client()
    app = create(f"swl+redis://127.0.0.1:{server.port}",
                 storage_options={"swl_encoding": encoding})
    base, stop = serve(app)
    try:
        # 3 per minute;10 per hour: three pass, then 429s.
        first = get(f"{base}/")
        assert first[0] == 200
        assert (first[1]["X-RateLimit-Limit"], first[1]["X-RateLimit-Remaining"]) == ("3", "2")
        reset = reset_of(first[1]["X-RateLimit-Reset"])
        assert time.time() + 58 <= reset <= time.time() + 61
        assert statuses(f"{base}/", 2) == [200, 200]
        denied = get(f"{base}/")
        assert (denied[0], denied[1]["X-RateLimit-Remaining"]) == (429, "0")
        assert 58 <= int(denied[1]["Retry-After"]) <= 60
        assert statuses(f"{base}/", 8) == [429] * 8
        assert_keys_are_logs(client, encoding)
        # 5/second on /burst.
        assert burst(base, client) == [200] * 5 + [429] * 3
        if framework == "flask-limiter":
            # deduct_when: failed lookups are tested, never counted.
            assert statuses(f"{base}/lookup/missing", 4) == [404] * 4
            assert statuses(f"{base}/lookup/known", 3) == [200, 200, 429]
        assert_keys_are_logs(client, encoding)
    finally:
        stop()
