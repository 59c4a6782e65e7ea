"""A check or refund is never sent twice: redis-py retries a command after a
timeout by default, and a server that was only slow has then recorded the
request twice. Each test stalls a real server (DEBUG SLEEP 0.6) while a
client with a 0.2 s timeout and redis-py's default retries sends, and reads
the log: a call that completed is recorded once, one that timed out at
most once, and raised UncertainOutcomeError."""

from __future__ import annotations

import asyncio
from typing import List

import pytest
import redis
import redis.asyncio
import redis.cluster
from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from conftest import DEBUG, Stall
from redis_swl import SWL, AsyncSWL, UncertainOutcomeError, Verdict

TIMEOUT = 0.2
T = 1_700_000_000_000
MODES = [True, False]
IDS = ["module", "library"]


def entries(server, module: bool, key: str) -> List[int]:
    client = server.client()
    if module:
        return client.execute_command("SWL.ENTRIES", key)
    return client.fcall("swl_entries", 1, key)


async def a_session(limiter, server, module: bool) -> None:
    """Checks and a refund on one key, two of them while the server is
    stalled; `limiter` is an SWL or AsyncSWL, its calls awaited either way.
    Each stall finds the connection open: one opened during a stall would
    time out before the call is sent (redis-py retries that)."""

    async def call(method, *args, **options):
        result = getattr(limiter, method)("k", 60_000, 10, *args, **options)
        return await result if asyncio.iscoroutine(result) else result

    # A completed check, recorded once (it also opens the connection, and
    # loads the library where the server has no module).
    assert await call("check", cost=3, now_ms=T) == Verdict(True, 10, 7, -1, 60_000, 60_000)
    assert entries(server, module, "k") == [T] * 3

    stall = Stall(server.port)
    with pytest.raises(UncertainOutcomeError, match="may or may not have been carried out"):
        await call("check", now_ms=T + 1)
    stall.wait()
    after_check = entries(server, module, "k")
    assert after_check in ([T] * 3, [T] * 3 + [T + 1])

    # The client goes on, on a new connection.
    verdict = await call("check", now_ms=T + 2)
    assert verdict.allowed and verdict.remaining == 10 - len(after_check) - 1
    before_refund = after_check + [T + 2]
    assert entries(server, module, "k") == before_refund

    stall = Stall(server.port)
    with pytest.raises(UncertainOutcomeError):
        await call("refund", now_ms=T + 3)
    stall.wait()
    assert entries(server, module, "k") in (before_refund, before_refund[:-1])


@pytest.mark.parametrize("module", MODES, ids=IDS)
def test_the_client_sends_a_check_or_refund_once(start_server, module):
    server = start_server(module, args=DEBUG)
    limiter = SWL(server.client(socket_timeout=TIMEOUT))
    asyncio.run(a_session(limiter, server, module))


@pytest.mark.parametrize("module", MODES, ids=IDS)
def test_the_asyncio_client_sends_a_check_or_refund_once(start_server, module):
    server = start_server(module, args=DEBUG)

    async def run():
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, socket_timeout=TIMEOUT)
        await a_session(AsyncSWL(client), server, module)
        await client.aclose()

    asyncio.run(run())


def test_a_peek_is_retried_as_the_client_is_set_to(start_server):
    # A peek changes nothing: redis-py's retries carry it through the stall.
    server = start_server(True, args=DEBUG)
    limiter = SWL(server.client(socket_timeout=TIMEOUT))
    assert limiter.check("k", 60_000, 10, now_ms=T).allowed
    stall = Stall(server.port)
    assert limiter.peek("k", 60_000, 10, now_ms=T + 1) == Verdict(True, 10, 8, -1, 60_000, 60_000)
    stall.wait()
    assert entries(server, True, "k") == [T]


@pytest.mark.parametrize("asyncio_storage", [False, True], ids=["sync", "asyncio"])
def test_a_limits_hit_is_sent_once(start_server, asyncio_storage):
    server = start_server(True, args=DEBUG)
    scheme = "async+swl+redis" if asyncio_storage else "swl+redis"
    # The storage makes its own redis-py client, with redis-py's retries.
    storage = storage_from_string(f"{scheme}://127.0.0.1:{server.port}", socket_timeout=TIMEOUT)
    limiter = (AsyncMovingWindow if asyncio_storage else MovingWindowRateLimiter)(storage)
    item = parse("100/minute")
    key = f"LIMITS:{item.key_for('alice')}:swl"

    async def hit() -> bool:
        result = limiter.hit(item, "alice")
        return await result if asyncio_storage else result

    async def run():
        assert await hit()
        assert len(entries(server, True, key)) == 1
        stall = Stall(server.port)
        with pytest.raises(UncertainOutcomeError):
            await hit()
        stall.wait()
        recorded = len(entries(server, True, key))
        assert recorded in (1, 2)
        assert await hit()
        assert len(entries(server, True, key)) == recorded + 1

    asyncio.run(run())


def test_the_cluster_client_sends_a_check_once(start_cluster):
    cluster = start_cluster(True, args=DEBUG)
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port,
                                        socket_timeout=TIMEOUT)
    limiter = SWL(client)
    owner = next(node for node in cluster.nodes
                 if node.port == client.get_node_from_key("k").port)
    assert limiter.check("k", 60_000, 10, now_ms=T).allowed
    stall = Stall(owner.port)
    with pytest.raises(UncertainOutcomeError):
        limiter.check("k", 60_000, 10, now_ms=T + 1)
    stall.wait()
    after = entries(owner, True, "k")
    assert after in ([T], [T, T + 1])
    assert limiter.check("k", 60_000, 10, now_ms=T + 2).allowed
    assert entries(owner, True, "k") == after + [T + 2]
