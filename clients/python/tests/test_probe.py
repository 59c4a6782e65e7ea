"""How a client learns whether the server has the module: one probe per
client (SWL.CHECK without arguments, refused for its arity or as unknown),
shared by every call made while it is out, so that each call goes where it
belongs from the first, once, and calls made together keep their order.
Under ACLs that grant only the commands the client sends, too. A proxy in
front of the real server writes down what the client sends."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest
import redis
import redis.asyncio

from conftest import DEBUG, Stall
from redis_swl import SWL, AsyncSWL, Verdict, library_source

CALLS = 5
PROBE = [b"SWL.CHECK"]


def sent_check(module: bool, key: str) -> List[bytes]:
    """A check of 3 per second at 1000 on `key`, as the client sends it."""
    args = [key.encode(), b"1000", b"3", b"1000"]
    return [b"SWL.CHECK", *args] if module else [b"FCALL", b"swl_check", b"1", *args]


def admitted(n: int, limit: int = 3) -> Verdict:
    """The n-th check (from 0) of `limit` per second, all at one time."""
    if n < limit:
        return Verdict(True, limit, limit - n - 1, -1, 1000, 1000)
    return Verdict(False, limit, 0, 1000, 1000, 1000)


def client_of(log, **options) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=log.port, **options)


def async_client_of(log, **options) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(host="127.0.0.1", port=log.port, **options)


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_threads_of_a_new_client_share_one_probe(start_server, command_log, module):
    server = start_server(module, args=DEBUG)
    if not module:
        server.client().function_load(library_source())
    log = command_log(server)
    limiter = SWL(client_of(log))
    barrier = threading.Barrier(CALLS + 1)
    verdicts = []

    def call(n: int) -> None:
        barrier.wait()
        verdicts.append(limiter.check(f"k{n}", 1000, 3, now_ms=1000))

    # Every thread calls while the server is stalled. Before, each sent
    # its check as SWL.CHECK, and without the module sent it again as
    # FCALL once the server answered "unknown command".
    stall = Stall(server.port)
    threads = [threading.Thread(target=call, args=(n,)) for n in range(CALLS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    stall.wait()
    for thread in threads:
        thread.join()
    assert verdicts == [admitted(0)] * CALLS
    sent = log.named("SWL.CHECK", "FCALL")
    assert sent[0] == PROBE
    # The threads' calls, each once, in whatever order the threads went.
    assert sorted(sent[1:]) == [sent_check(module, f"k{n}") for n in range(CALLS)]
    assert limiter.uses_library is not module


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
@pytest.mark.parametrize("single_connection", [False, True], ids=["pool", "single-connection"])
def test_asyncio_calls_of_a_new_client_share_one_probe(start_server, command_log, module,
                                                       single_connection):
    server = start_server(module)
    if not module:
        server.client().function_load(library_source())
    log = command_log(server)

    async def run():
        client = async_client_of(log, single_connection_client=single_connection)
        limiter = AsyncSWL(client)
        verdicts = await asyncio.gather(
            *[limiter.check(f"k{n}", 1000, 3, now_ms=1000) for n in range(CALLS)])
        await client.aclose()
        return verdicts

    assert asyncio.run(run()) == [admitted(0)] * CALLS
    sent = log.named("SWL.CHECK", "FCALL")
    expected = [sent_check(module, f"k{n}") for n in range(CALLS)]
    assert sent[0] == PROBE
    if single_connection:
        # One connection: the calls go in the order they were made.
        assert sent[1:] == expected
    else:
        # Each call on a connection of its own, which redis-py opens for
        # it: they race one another as any calls on new connections do.
        assert sorted(sent[1:]) == expected


def test_a_call_made_after_the_probe_answered_does_not_overtake_earlier_ones(start_server,
                                                                           command_log):
    server = start_server(False)
    server.client().function_load(library_source())
    log = command_log(server)

    async def run():
        client = async_client_of(log, single_connection_client=True)
        limiter = AsyncSWL(client)
        first = [asyncio.ensure_future(limiter.check("k", 1000, 3, now_ms=1000))
                 for _ in range(3)]
        # Once the client knows where calls go, a fourth is made: before,
        # it went straight to FCALL while the first three were still on
        # their way back from SWL.CHECK, and took one's place.
        while not limiter.uses_library:
            await asyncio.sleep(0)
        last = asyncio.ensure_future(limiter.check("k", 1000, 3, now_ms=1000))
        verdicts = await asyncio.gather(*first, last)
        await client.aclose()
        return verdicts

    assert asyncio.run(run()) == [admitted(n) for n in range(4)]
    assert log.named("SWL.CHECK", "FCALL") == [PROBE] + [sent_check(False, "k")] * 4


def test_a_probe_that_fails_is_sent_again_by_the_next_call(start_server, command_log):
    server = start_server(False, args=DEBUG)
    log = command_log(server)
    limiter = SWL(client_of(log, socket_timeout=0.2))
    assert limiter.client.ping()  # connected before the stall
    stall = Stall(server.port)
    # The probe is sent once, not retried: the call fails after one
    # timeout, having sent nothing else.
    with pytest.raises(redis.TimeoutError):
        limiter.check("k", 1000, 3, now_ms=1000)
    stall.wait()
    assert log.named("SWL.CHECK", "FCALL") == [PROBE]
    assert limiter.check("k", 1000, 3, now_ms=1000) == admitted(0)
    assert limiter.uses_library
    # The next call probed again, and the probe, finding no module, loaded
    # the library before the check went to it: the check was sent once.
    assert log.named("SWL.CHECK", "FCALL") == [PROBE, PROBE, sent_check(False, "k")]


@pytest.mark.parametrize("module", [True, False], ids=["module", "library"])
def test_the_probe_needs_no_permission_beyond_the_calls(start_server, module):
    server = start_server(module)
    admin = server.client()
    if module:
        rules = ["+swl.check", "+swl.peek", "+swl.refund"]
    else:
        admin.function_load(library_source())
        # What the library's functions call runs as the user too.
        rules = ["+fcall", "+@read", "+@write", "+time"]
    # No COMMAND, no MODULE, no INFO: only what the calls need.
    admin.execute_command("ACL", "SETUSER", "app", "on", ">secret", "~rl:*", "-@all", *rules)
    limiter = SWL(server.client(username="app", password="secret"))
    assert limiter.check("rl:k", 1000, 3, now_ms=1000) == admitted(0)
    assert limiter.peek("rl:k", 1000, 3, now_ms=1000) == admitted(1)
    assert limiter.uses_library is not module


def test_threads_waiting_for_a_probe_that_fails_fail_with_it(start_server, command_log):
    server = start_server(False, args=DEBUG)
    log = command_log(server)
    limiter = SWL(client_of(log, socket_timeout=0.2))
    assert limiter.client.ping()
    barrier = threading.Barrier(CALLS + 1)
    errors = []

    def call() -> None:
        barrier.wait()
        try:
            limiter.check("k", 1000, 3, now_ms=1000)
        except redis.RedisError as error:
            errors.append(error)

    stall = Stall(server.port)
    threads = [threading.Thread(target=call) for _ in range(CALLS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    for thread in threads:
        thread.join()
    stall.wait()
    # One probe, one timeout: the others did not probe again in turn.
    assert [type(error) for error in errors] == [redis.TimeoutError] * CALLS
    assert log.named("SWL.CHECK", "FCALL") == [PROBE]
