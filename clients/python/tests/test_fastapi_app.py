"""examples/fastapi/app.py run as a user runs it, over HTTP: with the denial
cache a client far over its limit gets the statuses and headers it gets
without it while Redis sees only the checks it needs, and /metrics counts
each decision."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import ROOT, free_port

APP = ROOT / "examples" / "fastapi" / "app.py"


class App:
    """The example app in a process of its own, ready once /failures answers."""

    def __init__(self, redis_port: int, **settings: str):
        self.port = free_port()
        env = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{redis_port}/", PORT=str(self.port),
                   TIMEOUT_MS="1000", **settings)
        self.process = subprocess.Popen([sys.executable, str(APP)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, self.process.stderr.read().decode()
            try:
                if self.get("/failures")[0] == 200:
                    return
            except OSError:
                assert time.monotonic() < deadline, "the app did not start"
                time.sleep(0.02)

    def get(self, path: str, source: str = "127.0.0.1") -> Tuple[int, Dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10,
                                                source_address=(source, 0))
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            return response.status, headers, response.read()
        finally:
            connection.close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def start_app():
    apps: List[App] = []

    def start(redis_port: int, **settings: str) -> App:
        app = App(redis_port, **settings)
        apps.append(app)
        return app

    yield start
    for app in apps:
        app.stop()


def checks(server) -> int:
    """The checks a server carried out: SWL.CHECK, or FCALL without the module."""
    stats = server.client().info("commandstats")
    return stats.get("cmdstat_swl.check" if server.module else "cmdstat_fcall", {}).get("calls", 0)


def reset_seconds(headers: Dict[str, str]) -> Tuple[int, int]:
    """RateLimit's r= and t=."""
    fields = dict(part.split("=") for part in headers["ratelimit"].split(";")[1:])
    return int(fields["r"]), int(fields["t"])


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_a_client_at_twenty_times_its_limit_sees_what_it_sees_without_the_cache(
        start_server, start_app, module):
    cached_redis, plain_redis = start_server(module), start_server(module)
    cached = start_app(cached_redis.port, WINDOWS="2000:2")
    plain = start_app(plain_redis.port, WINDOWS="2000:2", DENIAL_CACHE="off")
    # The first request of each app loads the library, if it must: from
    # another client, before counting.
    for app in (cached, plain):
        assert app.get("/", source="127.0.0.9")[0] == 200
    bursts = 0
    for attempt in range(6):
        # 40 requests (20 times the limit), alternating between the apps,
        # all within the window of the first admitted one: no entry leaves
        # during a burst, so both apps see the same log at every request.
        before = checks(cached_redis), checks(plain_redis)
        started = time.monotonic()
        seen = [(cached.get("/"), plain.get("/")) for _ in range(40)]
        if time.monotonic() - started >= 1.5:
            # Too slow for the window: wait for it to pass and try again.
            time.sleep(2.1)
            continue
        assert [c[0] for c, _ in seen] == [p[0] for _, p in seen] == [200, 200] + [429] * 38
        assert [c[1]["ratelimit-source"] for c, _ in seen] == ["redis"] * 3 + ["cache"] * 37
        for (_, c, _), (_, p, _) in seen:
            assert c["ratelimit-policy"] == p["ratelimit-policy"] == '"2000ms";q=2;w=2'
            (cr, ct), (pr, pt) = reset_seconds(c), reset_seconds(p)
            assert cr == pr and abs(ct - pt) <= 1
            if "retry-after" in p:
                assert abs(int(c["retry-after"]) - int(p["retry-after"])) <= 1
            else:
                assert "retry-after" not in c
        # Redis saw the two admitted requests and one denial with the
        # cache, every request without it.
        assert (checks(cached_redis) - before[0], checks(plain_redis) - before[1]) == (3, 40)
        bursts += 1
        if bursts == 3:
            break
        # Until both admitted entries have left the window.
        time.sleep(max(0.0, started + 2.1 - time.monotonic()))
    assert bursts == 3


def metric_lines(app: App) -> List[str]:
    """The /metrics lines of the decisions, but the histogram's buckets and sums."""
    status, headers, body = app.get("/metrics")
    assert status == 200
    assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return sorted(line for line in body.decode().splitlines()
                  if line.startswith(("redis_swl_decisions_total", "redis_swl_decision_seconds_count")))


@pytest.mark.parametrize("cache", ["on", "off"])
def test_metrics_count_each_decision_by_who_decided(start_server, start_app, cache):
    server = start_server(True)
    app = start_app(server.port, WINDOWS="60000:3", DENIAL_CACHE=cache)
    assert [app.get("/")[0] for _ in range(8)] == [200] * 3 + [429] * 5
    # /metrics and /failures are outside the limit.
    assert app.get("/failures")[2] == b"0\n"
    if cache == "on":
        expected = [
            'redis_swl_decision_seconds_count{limiter="default",source="cache"} 4.0',
            'redis_swl_decision_seconds_count{limiter="default",source="redis"} 4.0',
            'redis_swl_decisions_total{decision="admitted",limiter="default",source="redis"} 3.0',
            'redis_swl_decisions_total{decision="denied",limiter="default",source="cache"} 4.0',
            'redis_swl_decisions_total{decision="denied",limiter="default",source="redis"} 1.0',
        ]
    else:
        expected = [
            'redis_swl_decision_seconds_count{limiter="default",source="redis"} 8.0',
            'redis_swl_decisions_total{decision="admitted",limiter="default",source="redis"} 3.0',
            'redis_swl_decisions_total{decision="denied",limiter="default",source="redis"} 5.0',
        ]
    assert metric_lines(app) == expected
    # Redis stopped: another client's two requests, admitted by the policy.
    server.kill()
    assert [app.get("/", source="127.0.0.2")[0] for _ in range(2)] == [200, 200]
    assert 'redis_swl_decisions_total{decision="admitted",limiter="default",source="open"} 2.0' \
        in metric_lines(app)


def test_an_unknown_denial_cache_setting_stops_the_app():
    env = dict(os.environ, DENIAL_CACHE="sometimes", PORT=str(free_port()))
    done = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == \
        'DENIAL_CACHE: unknown setting "sometimes" (accepted: on, off)'
