"""Switching an application from limits' own redis:// moving window to
swl+redis:// while both run on one server (a rolling deploy): each keeps
answering, without WRONGTYPE, because a redis-swl log sits beside the name
limits gives its LIST (":swl" added). Each counts its own requests. clear,
reset and the window's stats use the same names; key_suffix="" keeps the
names of redis-swl 0.3."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Dict, List

import pytest
from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

import redis_swl  # noqa: F401  (registers the schemes)
from conftest import ENCODINGS, log_kind
from test_frameworks import flask_app, serve_wsgi, statuses

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]
ROUNDS = 12


def run_side_by_side(limiters: Dict[str, MovingWindowRateLimiter], item, user: str):
    """Each limiter in a thread of its own, all at once: ROUNDS of hit,
    test and get_window_stats on the same item and user. Returns each
    one's answers and any error raised."""
    barrier = threading.Barrier(len(limiters))
    answers: Dict[str, List] = {name: [] for name in limiters}
    errors: List[BaseException] = []

    def run(name: str) -> None:
        limiter = limiters[name]
        barrier.wait()
        try:
            for _ in range(ROUNDS):
                hit = limiter.hit(item, user)
                answers[name].append((hit, limiter.test(item, user),
                                      limiter.get_window_stats(item, user).remaining))
        except BaseException as error:  # noqa: B902  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(name,)) for name in limiters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers, errors


def expected_answers(amount: int) -> List:
    """One limiter alone on an item of `amount` per hour: (hit, test,
    remaining) per round."""
    return [(n < amount, n + 1 < amount, max(amount - n - 1, 0)) for n in range(ROUNDS)]


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
@pytest.mark.parametrize("prefix", [None, "myapp"])
def test_limits_own_moving_window_and_ours_answer_side_by_side(start_server, module, encoding,
                                                                prefix):
    server = start_server(module, encoding)
    options = {} if prefix is None else {"key_prefix": prefix}
    ours = storage_from_string(f"swl+redis://127.0.0.1:{server.port}", swl_encoding=encoding,
                               **options)
    theirs = storage_from_string(f"redis://127.0.0.1:{server.port}", **options)
    item = parse("5/hour")
    answers, errors = run_side_by_side(
        {"ours": MovingWindowRateLimiter(ours), "theirs": MovingWindowRateLimiter(theirs)},
        item, "alice")
    assert errors == []
    # Each counts its own requests: 5 each, 10 in all while both run.
    assert answers == {"ours": expected_answers(5), "theirs": expected_answers(5)}
    client = server.client()
    name = f"{prefix or 'LIMITS'}:{item.key_for('alice')}"
    assert client.type(name) == b"list" and client.llen(name) == 5
    assert log_kind(client, f"{name}:swl") == encoding
    assert len(client.execute_command("SWL.ENTRIES", f"{name}:swl") if module
               else client.fcall("swl_entries", 1, f"{name}:swl")) == 5
    # Our clear takes the key for every strategy: limits' name and the log.
    ours.clear(item.key_for("alice"))
    assert client.exists(name, f"{name}:swl") == 0


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_asyncio_storages_answer_side_by_side(start_server, module):
    server = start_server(module)
    item = parse("3/hour")

    async def run():
        ours = AsyncMovingWindow(storage_from_string(f"async+swl+redis://127.0.0.1:{server.port}"))
        theirs = AsyncMovingWindow(storage_from_string(
            f"async+redis://127.0.0.1:{server.port}", implementation="redispy"))

        async def hits(limiter):
            return [await limiter.hit(item, "bob") for _ in range(5)]

        both = await asyncio.gather(hits(ours), hits(theirs))
        stats = [(await limiter.get_window_stats(item, "bob")).remaining
                 for limiter in (ours, theirs)]
        await ours.clear(item, "bob")
        return both, stats

    both, stats = asyncio.run(run())
    assert both == [[True] * 3 + [False] * 2] * 2
    assert stats == [0, 0]
    assert server.client().keys("LIMITS:*") == []


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_two_flask_apps_one_on_each_storage_share_a_server(start_server, module):
    # A rolling deploy: instances still on redis:// and instances on
    # swl+redis://, one Redis, the same limits ("3 per minute" on /).
    server = start_server(module)
    old_base, stop_old = serve_wsgi(flask_app.create_app(f"redis://127.0.0.1:{server.port}"))
    new_base, stop_new = serve_wsgi(flask_app.create_app(f"swl+redis://127.0.0.1:{server.port}"))
    try:
        seen = [statuses(f"{base}/", 1)[0] for _ in range(5) for base in (old_base, new_base)]
    finally:
        stop_old()
        stop_new()
    # Each fleet lets 3 through: up to the sum of both limits while both run.
    assert seen == [200, 200] * 3 + [429, 429] * 2


@pytest.mark.parametrize("asyncio_storage", [False, True], ids=["sync", "asyncio"])
def test_the_log_sits_beside_limits_name_and_clear_and_reset_find_it(start_server,
                                                                      asyncio_storage):
    server = start_server(True)
    client = server.client()
    scheme = "async+swl+redis" if asyncio_storage else "swl+redis"
    storage = storage_from_string(f"{scheme}://127.0.0.1:{server.port}")
    limiter = (AsyncMovingWindow if asyncio_storage else MovingWindowRateLimiter)(storage)
    item = parse("2/hour")
    log = f"LIMITS:{item.key_for('carol')}:swl"

    async def settle(value):
        return await value if asyncio_storage else value

    async def run():
        assert await settle(limiter.hit(item, "carol"))
        assert client.keys("LIMITS:*") == [log.encode()]
        assert client.execute_command("SWL.ENTRIES", log) != []
        assert (await settle(limiter.get_window_stats(item, "carol"))).remaining == 1
        await settle(limiter.clear(item, "carol"))
        assert client.keys("LIMITS:*") == []
        assert (await settle(limiter.get_window_stats(item, "carol"))).remaining == 2
        assert await settle(limiter.hit(item, "carol"))
        await settle(storage.reset())
        assert client.keys("LIMITS:*") == []

    asyncio.run(run())


@pytest.mark.parametrize("scheme", ["swl+redis", "async+swl+redis"])
def test_an_empty_suffix_keeps_the_names_of_0_3(start_server, scheme):
    server = start_server(True)
    storage = storage_from_string(f"{scheme}://127.0.0.1:{server.port}", key_suffix="")
    item = parse("2/hour")

    async def run():
        limiter = (AsyncMovingWindow if scheme.startswith("async") else MovingWindowRateLimiter)(
            storage)
        hit = limiter.hit(item, "dave")
        assert await hit if scheme.startswith("async") else hit

    asyncio.run(run())
    key = f"LIMITS:{item.key_for('dave')}"
    assert server.client().keys("LIMITS:*") == [key.encode()]
    assert log_kind(server.client(), key) == "zset"
