"""The denial cache: on its own with a clock of the test's, against the
shared test vectors (every answer is the module's denial), and in SWL and
AsyncSWL against real servers, where a cached answer sends nothing and
PENALIZE, a caller's now_ms, refunds and resets behave as without it."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading

import pytest
import redis.asyncio

from conftest import ENCODINGS, ROOT
from redis_swl import SWL, AsyncSWL, DenialCache, Verdict

MS = 1_000_000  # the cache's clock counts nanoseconds
MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]
WINDOWS = [(1_000, 5)]


def denial(retry: int, reset: int) -> Verdict:
    return Verdict(False, 5, 0, retry, reset, 1_000)


def test_a_denial_is_answered_with_the_wait_left_until_it_ends():
    cache = DenialCache(10)
    cache.keep("k", WINDOWS, 1, denial(300, 900), cache.ticket(), 0)
    assert cache.answer("k", WINDOWS, 1, 100 * MS) == denial(200, 800)
    assert cache.answer("k", WINDOWS, 1, 299_500_000) == denial(1, 601)
    assert cache.answer("k", WINDOWS, 1, 300 * MS) is None
    assert len(cache) == 0


def test_only_the_same_windows_and_a_cost_at_least_the_denied_one_are_answered():
    cache = DenialCache(10)
    two = [(1_000, 5), (60_000, 50)]
    cache.keep("k", two, 2, denial(300, 900), 0, 0)
    assert cache.answer("k", two, 2, MS) == denial(299, 899)
    assert cache.answer("k", two, 3, MS) == denial(299, 899)
    assert cache.answer("k", two, 1, MS) is None
    assert cache.answer("k", two[:1], 2, MS) is None
    assert cache.answer("k", [(1_000, 6), (60_000, 50)], 2, MS) is None
    assert cache.answer("other", two, 2, MS) is None


def test_admissions_and_denials_that_waiting_cannot_end_are_not_cached():
    cache = DenialCache(10)
    cache.keep("k", WINDOWS, 1, Verdict(True, 5, 4, -1, 1_000, 1_000), 0, 0)
    cache.keep("k", WINDOWS, 6, Verdict(False, 5, 5, -1, 0, 1_000), 0, 0)
    assert len(cache) == 0


def test_an_admission_drops_the_keys_denials():
    cache = DenialCache(10)
    cache.keep("k", WINDOWS, 1, denial(300, 900), 0, 0)
    cache.keep("k", [(60_000, 50)], 1, Verdict(True, 50, 49, -1, 60_000, 60_000), 0, 0)
    assert cache.answer("k", WINDOWS, 1, MS) is None


def test_a_forget_drops_the_key_and_wins_over_checks_sent_before_it():
    cache = DenialCache(10)
    cache.keep("k", WINDOWS, 1, denial(300, 900), cache.ticket(), 0)
    sent_before = cache.ticket()
    cache.forget("k")
    assert cache.answer("k", WINDOWS, 1, 0) is None
    cache.keep("k", WINDOWS, 1, denial(300, 900), sent_before, 0)
    assert cache.answer("k", WINDOWS, 1, 0) is None
    cache.keep("k", WINDOWS, 1, denial(300, 900), cache.ticket(), 0)
    assert cache.answer("k", WINDOWS, 1, 0) == denial(300, 900)


def test_clear_drops_every_key_and_wins_over_checks_sent_before_it():
    cache = DenialCache(10)
    cache.keep("a", WINDOWS, 1, denial(300, 900), 0, 0)
    sent_before = cache.ticket()
    cache.clear()
    assert len(cache) == 0
    cache.keep("b", WINDOWS, 1, denial(300, 900), sent_before, 0)
    assert cache.answer("b", WINDOWS, 1, 0) is None


def test_the_least_recently_used_key_is_dropped_first_and_forgets_stay_safe():
    cache = DenialCache(2)

    def keep(key: str, ticket: int) -> None:
        cache.keep(key, WINDOWS, 1, denial(300, 900), ticket, 0)

    keep("a", 0)
    keep("b", 0)
    assert cache.answer("a", WINDOWS, 1, 0) is not None  # a is the newest
    keep("c", 0)
    assert len(cache) == 2
    assert cache.answer("b", WINDOWS, 1, 0) is None
    assert cache.answer("a", WINDOWS, 1, 0) is not None
    # A forgotten key pushed out still refuses a check sent before.
    sent_before = cache.ticket()
    cache.forget("a")
    keep("d", cache.ticket())
    keep("e", cache.ticket())
    keep("a", sent_before)
    assert cache.answer("a", WINDOWS, 1, 0) is None
    nothing = DenialCache(0)
    nothing.keep("a", WINDOWS, 1, denial(300, 900), 0, 0)
    assert len(nothing) == 0


def test_threads_sharing_a_cache_keep_it_within_its_bound():
    cache = DenialCache(50)

    def work(n: int) -> None:
        for i in range(2_000):
            key = f"k{(n * 7 + i) % 120}"
            if i % 5 == 0:
                cache.forget(key)
            cache.keep(key, WINDOWS, 1, denial(300, 900), cache.ticket(), 0)
            cache.answer(key, WINDOWS, 1, MS)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50


VECTORS = json.loads((ROOT / "clients" / "vectors" / "local-limiter.json").read_text())


def test_every_answer_from_the_cache_is_the_modules_denial():
    """The shared vectors (the module's replies, in time order) through the
    cache: a check it answers is one the module denied, with the module's
    reply at that time where the cost is the cached one (but for fewer
    remaining where it is above 1), and never a longer wait where it is
    larger."""
    cache = DenialCache()
    answered = asked = 0
    for n, case in enumerate(VECTORS["cases"]):
        windows = [tuple(window) for window in case["windows"]]
        key, cached_cost = f"case{n}", None
        for call in case["calls"]:
            now, cost = call["now_ms"] * MS, call["cost"]
            module = Verdict.from_reply(call["reply"])
            if call["op"] == "refund":
                cache.forget(key)
                cached_cost = None
                continue
            ticket = cache.ticket()
            cached = cache.answer(key, windows, cost, now)
            if cached is None:
                asked += 1
                cache.keep(key, windows, cost, module, ticket, now)
                if module.allowed:
                    cached_cost = None
                elif module.retry_after_ms > 0:
                    cached_cost = cost
                continue
            answered += 1
            assert not module.allowed and not cached.allowed, (n, call)
            if cost == cached_cost:
                # Of a cost above 1, entries may leave before the wait
                # ends: more remain than the cache says.
                remaining = max(cached.remaining, module.remaining)
                assert Verdict(False, cached.limit, remaining, cached.retry_after_ms,
                               cached.reset_after_ms, cached.window_ms) == module, (n, call)
                assert cost > 1 or cached.remaining == module.remaining
            else:
                assert cached.reset_after_ms == module.reset_after_ms, (n, call)
                # -1: waiting cannot help, longer than any wait.
                assert module.retry_after_ms == -1 or cached.retry_after_ms <= module.retry_after_ms
    assert answered > 20, answered
    assert asked > answered, asked


def checks(server) -> int:
    """SWL.CHECK and FCALL calls the server has carried out (or refused)."""
    stats = server.client().info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0)
               for name in ("swl.check", "fcall"))


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_a_clients_cache_answers_a_denied_key_without_redis(start_server, module, encoding):
    server = start_server(module, encoding)
    limiter = SWL(server.client(), encoding=encoding, denial_cache=DenialCache())
    assert [limiter.check("k", 60_000, 2).allowed for _ in range(3)] == [True, True, False]
    before = checks(server)
    cached = [limiter.check("k", 60_000, 2) for _ in range(5)]
    assert checks(server) == before
    assert all(not v.allowed and v.limit == 2 and v.remaining == 0 and v.window_ms == 60_000
               and 0 < v.retry_after_ms <= 60_000 for v in cached)
    # A larger cost is answered too; a smaller one, other windows, other
    # keys go to Redis.
    assert not limiter.check("k", 60_000, 2, cost=2).allowed
    assert checks(server) == before
    limiter.check("k", 60_000, 3)
    limiter.check("other", 60_000, 2)
    assert checks(server) == before + 2


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_penalize_and_a_callers_now_ms_go_to_redis_as_without_the_cache(
        start_server, module, encoding):
    server = start_server(module, encoding)
    cached = SWL(server.client(), encoding=encoding, denial_cache=DenialCache())
    plain = SWL(server.client(), encoding=encoding)
    for limiter, key in ((cached, "a"), (plain, "b")):
        assert [limiter.check(key, 60_000, 1).allowed for _ in range(2)] == [True, False]
    # Later than any entry, on the caller's clock.
    later = int(server.client().time()[0]) * 1000 + 10_000_000
    for limiter, key in ((cached, "a"), (plain, "b")):
        before = checks(server)
        penalized = limiter.check(key, 60_000, 1, penalize=True)
        replayed = [limiter.check(key, 60_000, 1, now_ms=t) for t in (later, later, later + 60_000)]
        assert checks(server) == before + 4
        # The penalized entry, recorded by Redis (capped to the limit: one
        # entry), is in both logs alike.
        assert limiter.peek(key, 60_000, 5).remaining == 3
        assert not penalized.allowed
        assert [v.allowed for v in replayed] == [True, False, True]
        assert replayed[1] == Verdict(False, 1, 0, 60_000, 60_000, 60_000)


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_a_refund_or_reset_through_the_client_lets_the_next_check_in(start_server, module):
    server = start_server(module)
    limiter = SWL(server.client(), denial_cache=DenialCache())
    assert [limiter.check("k", 60_000, 1).allowed for _ in range(2)] == [True, False]
    limiter.refund("k", 60_000, 1)
    assert limiter.check("k", 60_000, 1).allowed
    assert not limiter.check("k", 60_000, 1).allowed
    limiter.reset("k")
    assert server.client().exists("k") == 0
    assert limiter.check("k", 60_000, 1).allowed


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_the_asyncio_client_uses_its_cache_as_the_sync_one(start_server, module):
    server = start_server(module)

    async def run():
        client = redis.asyncio.Redis(port=server.port)
        limiter = AsyncSWL(client, denial_cache=DenialCache())
        first = [(await limiter.check("k", 60_000, 1)).allowed for _ in range(2)]
        before = checks(server)
        again = await limiter.check("k", 60_000, 1)
        sent = checks(server) - before
        await limiter.refund("k", 60_000, 1)
        refunded = await limiter.check("k", 60_000, 1)
        denied = await limiter.check("k", 60_000, 1)
        await limiter.reset("k")
        reset = await limiter.check("k", 60_000, 1)
        await client.aclose()
        return first, again, sent, refunded, denied, reset

    first, again, sent, refunded, denied, reset = asyncio.run(run())
    assert first == [True, False]
    assert not again.allowed and sent == 0
    assert refunded.allowed and not denied.allowed
    assert reset.allowed


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_a_limits_storage_caches_denied_hits_only_when_asked(start_server, module):
    from limits import RateLimitItemPerMinute
    from limits.storage import storage_from_string
    from limits.strategies import MovingWindowRateLimiter

    server = start_server(module)
    uri = f"swl+redis://127.0.0.1:{server.port}"
    item = RateLimitItemPerMinute(2)
    plain = MovingWindowRateLimiter(storage_from_string(uri))
    cached = MovingWindowRateLimiter(storage_from_string(uri, swl_denial_cache=100))
    assert plain.storage.swl.denial_cache is None
    for limiter, who in ((plain, "p"), (cached, "c")):
        assert [limiter.hit(item, who) for _ in range(3)] == [True, True, False]
    before = checks(server)
    assert [plain.hit(item, "p"), cached.hit(item, "c"), cached.hit(item, "c", cost=2)] == [
        False, False, False]
    assert checks(server) == before + 1
    # test and get_window_stats ask Redis (a peek), as without the cache.
    assert not cached.test(item, "c")
    assert cached.get_window_stats(item, "c").remaining == 0
    cached.clear(item, "c")
    assert cached.hit(item, "c")
    assert [cached.hit(item, "c"), cached.hit(item, "c")] == [True, False]
    cached.storage.reset()
    assert cached.hit(item, "c")
