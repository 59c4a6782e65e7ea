"""limits' MovingWindowRateLimiter on the swl+redis:// storages, sync and
asyncio, against a model of a moving window: hit, test, get_window_stats,
clear and reset, with the module and with the function library, in both
encodings; each call one command, and the keys redis-swl logs."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from typing import List, Tuple

import pytest
from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)

import redis_swl  # noqa: F401  (registers the schemes)
from conftest import ENCODINGS, log_kind

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]
# Clocks here and in the server agree to well within this (seconds).
SLACK = 0.05


class Model:
    """A moving window as limits defines it: a hit that fits records `cost`
    entries at its time, one that does not records nothing. A time is known
    as the interval the call took."""

    def __init__(self, amount: int, expiry: int):
        self.amount, self.expiry = amount, expiry
        self.times: List[Tuple[float, float]] = []

    def hit(self, during: Tuple[float, float], cost: int) -> bool:
        if len(self.times) + cost > self.amount:
            return False
        self.times += [during] * cost
        return True

    def test(self, cost: int) -> bool:
        return len(self.times) <= self.amount - cost

    def remaining(self) -> int:
        return self.amount - len(self.times)

    def resets(self, during: Tuple[float, float], reset: float) -> bool:
        """Whether `reset` is the oldest entry's time plus the window (now,
        as `during` bounds it, for an empty one), within SLACK."""
        low, high = self.times[0] if self.times else during
        return low + self.expiry - SLACK <= reset <= high + self.expiry + SLACK


# (operation, cost) on one item of 5 per hour: nothing leaves the window
# while the test runs, so the model needs no clock of its own. The wait
# sets the oldest entry well apart from the newer ones, so that a window
# started at any other entry than the oldest shows in the reset.
STEPS = [("hit", 1), ("wait", 0), ("stats", 0), ("hit", 2), ("test", 2), ("test", 3), ("hit", 3),
         ("stats", 0), ("hit", 2), ("hit", 1), ("hit", 6), ("stats", 0), ("clear", 0),
         ("test", 5), ("stats", 0), ("hit", 5), ("test", 1), ("stats", 0)]


def command_calls(client, module: bool) -> int:
    stats = client.info("commandstats")
    names = ["cmdstat_swl.check", "cmdstat_swl.peek"] if module else ["cmdstat_fcall"]
    return sum(stats.get(name, {}).get("calls", 0) for name in names)


async def settled(value) -> object:
    """A sync limiter's result as it is, an asyncio one's awaited."""
    return await value if inspect.isawaitable(value) else value


async def drive(limiter, item, user: str) -> None:
    """Runs STEPS through a sync or asyncio MovingWindowRateLimiter and
    compares every answer with the model."""
    model = Model(item.amount, item.get_expiry())
    for n, (operation, cost) in enumerate(STEPS):
        before = time.time()
        context = (user, n, operation, cost)
        if operation == "hit":
            hit = await settled(limiter.hit(item, user, cost=cost))
            assert hit == model.hit((before, time.time()), cost), context
        elif operation == "test":
            assert await settled(limiter.test(item, user, cost=cost)) == model.test(cost), context
        elif operation == "clear":
            await settled(limiter.clear(item, user))
            model.times = []
        elif operation == "wait":
            await asyncio.sleep(4 * SLACK)
        else:
            stats = await settled(limiter.get_window_stats(item, user))
            assert stats.remaining == model.remaining(), context
            assert model.resets((before, time.time()), stats.reset_time), (context, stats)


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_the_moving_window_is_limits_own(start_server, module, encoding):
    server = start_server(module, encoding)
    storage = storage_from_string(f"swl+redis://127.0.0.1:{server.port}", swl_encoding=encoding)
    limiter = MovingWindowRateLimiter(storage)
    item = parse("5/hour")
    asyncio.run(drive(limiter, item, "alice"))
    client = server.client()
    # Each call is one command.
    calls = command_calls(client, module)
    limiter.hit(item, "alice")
    limiter.test(item, "alice")
    limiter.get_window_stats(item, "alice")
    assert command_calls(client, module) - calls == 3
    key = f"LIMITS:{item.key_for('alice')}:swl"
    assert log_kind(client, key) == encoding
    assert client.ttl(key) > 3500
    storage.reset()
    assert client.keys("LIMITS:*") == []


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_the_asyncio_moving_window_is_the_same(start_server, module, encoding):
    server = start_server(module, encoding)

    async def run():
        storage = storage_from_string(f"async+swl+redis://127.0.0.1:{server.port}",
                                      swl_encoding=encoding)
        item = parse("5/hour")
        await drive(AsyncMovingWindow(storage), item, "bob")
        assert log_kind(server.client(), f"LIMITS:{item.key_for('bob')}:swl") == encoding
        await storage.reset()

    asyncio.run(run())
    assert server.client().keys("LIMITS:*") == []


def test_other_strategies_keep_working_on_the_same_storage(start_server):
    server = start_server(True)
    storage = storage_from_string(f"swl+redis://127.0.0.1:{server.port}")
    fixed = FixedWindowRateLimiter(storage)
    item = parse("2/hour")
    assert [fixed.hit(item, "carol") for _ in range(3)] == [True, True, False]
    assert fixed.get_window_stats(item, "carol").remaining == 0
    counter = SlidingWindowCounterRateLimiter(storage)
    assert [counter.hit(item, "erin") for _ in range(3)] == [True, True, False]
    assert counter.get_window_stats(item, "erin").remaining == 0
    # limits' own fixed-window counter, which counts the denied hit too.
    assert server.client().get(f"LIMITS:{item.key_for('carol')}") == b"3"


def test_a_hit_above_the_limit_fits_nothing_and_above_the_cap_is_refused(start_server):
    server = start_server(True)
    limiter = MovingWindowRateLimiter(storage_from_string(f"swl+redis://127.0.0.1:{server.port}"))
    assert not limiter.hit(parse("3/hour"), "dave", cost=4)
    # A hit of nothing fits and records nothing, as in limits' own.
    assert limiter.hit(parse("3/hour"), "dave", cost=0)
    assert server.client().keys("LIMITS:*") == []
    with pytest.raises(ValueError, match="at most 100000 units"):
        limiter.hit(parse("1000000/hour"), "dave", cost=100_001)
    assert limiter.hit(parse("1000000/hour"), "dave", cost=100_000)


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_a_test_above_the_cap_is_refused_as_a_hit_is(start_server, module):
    server = start_server(module)
    item = parse("1000000/hour")
    for scheme in ("swl+redis", "async+swl+redis"):
        # wrap_exceptions turns Redis errors into StorageError, not this.
        storage = storage_from_string(f"{scheme}://127.0.0.1:{server.port}",
                                      wrap_exceptions=True)
        limiter = (AsyncMovingWindow if scheme.startswith("async") else MovingWindowRateLimiter)(
            storage)

        async def run():
            for call in (limiter.hit, limiter.test):
                with pytest.raises(ValueError, match="at most 100000 units per hit, not 100001"):
                    await settled(call(item, "erin", cost=100_001))
            # Within the cap, or above the limit, the answers are limits' own.
            assert await settled(limiter.test(item, "erin", cost=100_000))
            assert not await settled(limiter.test(parse("3/hour"), "erin", cost=200_000))

        asyncio.run(run())
    assert server.client().keys("*") == []


def test_other_storages_test_as_before():
    # The refusal is for the swl storages only: limits' memory storage
    # answers a test of any cost.
    limiter = MovingWindowRateLimiter(storage_from_string("memory://"))
    assert limiter.test(parse("1000000/hour"), "frank", cost=999_999)
