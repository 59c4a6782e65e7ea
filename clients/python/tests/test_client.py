"""SWL and AsyncSWL against real servers: the same exact verdicts from the
module and from the function library the client loads itself, in both
encodings, and the keys hold redis-swl logs."""

from __future__ import annotations

import asyncio
import itertools

import pytest
import redis.asyncio

from conftest import ENCODINGS, log_kind
import redis_swl
from redis_swl import SWL, AsyncSWL, Verdict

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]

# (method, now_ms, options, expected verdict) on one key, 3 per second.
SEQUENCE = [
    ("check", 1000, {}, Verdict(True, 3, 2, -1, 1000, 1000)),
    ("check", 1100, {}, Verdict(True, 3, 1, -1, 1000, 1000)),
    ("check", 1200, {}, Verdict(True, 3, 0, -1, 1000, 1000)),
    # The oldest (1000) frees a unit at 2000; the newest leaves at 2200.
    ("check", 1300, {}, Verdict(False, 3, 0, 700, 900, 1000)),
    ("peek", 1300, {"oldest": True}, Verdict(False, 3, 0, 700, 900, 1000, 700)),
    # The newest (1200) given back: a check would now fit.
    ("refund", 1300, {}, Verdict(True, 3, 0, -1, 1000, 1000)),
    ("check", 1300, {}, Verdict(True, 3, 0, -1, 1000, 1000)),
    ("check", 1400, {"cost": 2, "windows": [(100, 5)]}, Verdict(False, 3, 0, 700, 900, 1000)),
]
ENTRIES_AFTER = [1000, 1100, 1300]


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_the_client_gives_exact_verdicts_with_and_without_the_module(start_server, module, encoding):
    server = start_server(module, encoding)
    client = server.client()
    limiter = SWL(client, encoding=encoding)
    for method, now_ms, options, expected in SEQUENCE:
        verdict = getattr(limiter, method)("rl:k", 1000, 3, now_ms=now_ms, **options)
        assert verdict == expected, (method, now_ms, options)
    if module:
        assert client.execute_command("SWL.ENTRIES", "rl:k") == ENTRIES_AFTER
    else:
        assert client.fcall("swl_entries", 1, "rl:k") == ENTRIES_AFTER
    assert log_kind(client, "rl:k") == encoding
    assert limiter.uses_library is not module
    # RESP2: each library is a flat list of names and values.
    libraries = [dict(zip(lib[::2], lib[1::2]))[b"library_name"] for lib in client.function_list()]
    assert libraries == ([] if module else [b"swl"])


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_usage_counts_what_a_log_holds_in_a_window(start_server, module, encoding):
    server = start_server(module, encoding)

    async def asyncio_usage(key):
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            return await AsyncSWL(client, encoding=encoding).usage(key, 60_000)
        finally:
            await client.aclose()

    limiter = SWL(server.client(), encoding=encoding)
    assert limiter.usage("none", 60_000) == (0, 0)
    limiter.check("now", 60_000, 5, cost=2)
    limiter.check("now", 1_000, 5)
    usage = limiter.usage("now", 60_000)
    assert usage.units == 3
    assert 50_000 < usage.reset_after_ms <= 60_000
    assert limiter.units("now", 60_000) == 3
    assert asyncio.run(asyncio_usage("now")).units == 3
    assert asyncio.run(asyncio_usage("none")) == (0, 0)
    assert limiter.entries("none") == []
    assert limiter.entries("at") == []
    limiter.check("at", 60_000, 5, now_ms=1000, cost=2)
    assert limiter.entries("at") == [1000, 1000]


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_the_asyncio_client_gives_the_same_verdicts(start_server, module, encoding):
    server = start_server(module, encoding)

    async def run():
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        limiter = AsyncSWL(client, encoding=encoding)
        verdicts = []
        for method, now_ms, options, _ in SEQUENCE:
            verdicts.append(await getattr(limiter, method)("rl:k", 1000, 3, now_ms=now_ms, **options))
        await client.aclose()
        return verdicts, limiter.uses_library

    verdicts, uses_library = asyncio.run(run())
    assert verdicts == [expected for *_, expected in SEQUENCE]
    assert uses_library is not module
    assert log_kind(server.client(), "rl:k") == encoding


def test_a_library_loaded_elsewhere_is_used_as_it_is(start_server):
    server = start_server(False)
    client = server.client()
    SWL(client, encoding="compact").load_library()
    # Another client, set for sorted sets, finds the library loaded and
    # does not replace it: new logs are compact.
    limiter = SWL(client, encoding="zset")
    assert limiter.check("k", 1000, 3).allowed
    assert log_kind(client, "k") == "compact"
    limiter.load_library()  # loading again is not an error


def test_compact1_makes_compact_logs_of_format_version_1(start_server):
    """What redis-swl 0.3 reads, for a fleet part way through an upgrade."""
    assert "\nlocal ENCODING = 'compact1'\n" in redis_swl.library_source("compact1")
    server = start_server(False)
    client = server.client()
    limiter = SWL(client, encoding="compact1")
    assert limiter.check("rl:sync", 1000, 3).allowed
    assert client.getrange("rl:sync", 0, 4) == b"SWLc\x01"
    [library] = client.function_list(withcode=True)
    assert b"\nlocal ENCODING = 'compact1'\n" in dict(zip(library[::2], library[1::2]))[b"library_code"]

    server = start_server(False)

    async def run():
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        limiter = AsyncSWL(client, encoding="compact1")
        assert (await limiter.check("rl:async", 1000, 3)).allowed
        await client.aclose()

    asyncio.run(run())
    assert server.client().getrange("rl:async", 0, 4) == b"SWLc\x01"


def test_errors_name_the_bad_argument_and_change_nothing(start_server):
    for module in (True, False):
        client = start_server(module).client()
        limiter = SWL(client)
        with pytest.raises(redis.ResponseError, match="window_ms must be an integer"):
            limiter.check("k", 0, 3)
        with pytest.raises(redis.ResponseError, match="cost must be an integer"):
            limiter.check("k", 1000, 3, cost=100_001)
        assert client.exists("k") == 0


def test_an_unknown_encoding_is_refused_at_once():
    with pytest.raises(ValueError, match="encoding must be one of"):
        SWL(object(), encoding="list")


def test_retry_after_seconds_rounds_up():
    assert Verdict(False, 3, 0, 700, 900, 1000).retry_after_seconds == 1
    assert Verdict(False, 3, 0, 2000, 900, 1000).retry_after_seconds == 2
    assert Verdict(True, 3, 2, -1, 1000, 1000).retry_after_seconds is None


def test_a_library_from_before_oldest_is_named_and_can_be_replaced(start_server):
    server = start_server(False)
    client = server.client()
    # The library as 0.2.0 had it: no OLDEST.
    older = redis_swl.library_source().replace("option == 'OLDEST'", "option == 'NOT-YET'")
    client.function_load(older)
    limiter = SWL(client)
    assert limiter.check("k", 1000, 3, now_ms=1000).allowed
    with pytest.raises(redis.ResponseError, match=r"predates SWL.PEEK OLDEST .*load_library\(replace=True\)"):
        limiter.peek("k", 1000, 3, now_ms=1000, oldest=True)
    limiter.load_library(replace=True)
    assert limiter.peek("k", 1000, 3, now_ms=1000, oldest=True) == Verdict(True, 3, 1, -1, 1000, 1000, 1000)
