"""Which library a client leaves loaded: it asks each node for its
library's release (FCALL_RO swl_version 0) before it loads or replaces it
there, never replaces one newer than its own copy, and replaces an older
one (or one from before 0.4, without swl_version) only when asked to."""

from __future__ import annotations

import asyncio
import re

import redis.asyncio
import redis.cluster

from redis_swl import SWL, AsyncSWL, library_source
from redis_swl._protocol import is_newer, library_version, release

OWN = library_version()


def library_of(version: str) -> str:
    """The packaged library, saying it is ``version``."""
    source, count = re.subn(r"\nlocal VERSION = '[^']*'\n", f"\nlocal VERSION = '{version}'\n",
                            library_source())
    assert count == 1
    return source


def without_swl_version() -> str:
    """The packaged library as one from before 0.4: no swl_version."""
    source = library_source()
    line = re.search(r"\nredis\.register_function \{ function_name = 'swl_version'[^\n]*\n", source)
    assert line is not None
    return source.replace(line.group(0), "\n", 1)


def loaded_code(client) -> bytes:
    [library] = client.function_list(withcode=True)
    return dict(zip(library[::2], library[1::2]))[b"library_code"]


def loaded_version(client) -> bytes:
    return client.fcall_ro("swl_version", 0)


def test_versions_compare_as_numbers():
    assert release("0.10.0") == (0, 10, 0) and release("1.2") == (1, 2, 0)
    assert release("0.5.0-rc.1") == (0, 5, 0) and release("dev") is None
    assert is_newer("0.10.0", "0.9.9") and not is_newer("0.9.9", "0.10.0")
    assert not is_newer("0.4.0", "0.4.0") and not is_newer("dev", "0.4.0")
    assert re.fullmatch(r"\d+\.\d+\.\d+", OWN)


def test_a_newer_library_is_never_replaced(start_server):
    server = start_server(False)
    client = server.client()
    newer = library_of("9.9.9")
    client.function_load(newer)
    limiter = SWL(client)
    # The check uses it as it is.
    assert limiter.check("k", 1000, 3, now_ms=1000).allowed
    limiter.load_library()
    limiter.load_library(replace=True)
    assert loaded_code(client) == newer.encode()
    assert loaded_version(client) == b"9.9.9"
    assert limiter.check("k", 1000, 3, now_ms=1000).remaining == 1


def test_the_version_is_asked_before_anything_is_loaded(start_server, command_log):
    server = start_server(False)
    log = command_log(server)
    limiter = SWL(redis.Redis(host="127.0.0.1", port=log.port))
    assert limiter.check("k", 1000, 3).allowed
    limiter.load_library(replace=True)
    asked = [command[:2] for command in log.named("FCALL_RO", "FUNCTION")]
    assert asked == [[b"FCALL_RO", b"swl_version"], [b"FUNCTION", b"LOAD"],
                     [b"FCALL_RO", b"swl_version"], [b"FUNCTION", b"LOAD"]]
    assert log.named("FUNCTION")[1][2] == b"REPLACE"


def test_an_asyncio_client_never_replaces_a_newer_library(start_server):
    server = start_server(False)
    client = server.client()
    newer = library_of("9.9.9")
    client.function_load(newer)

    async def run():
        connection = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        limiter = AsyncSWL(connection)
        verdict = await limiter.check("k", 1000, 3)
        await limiter.load_library(replace=True)
        await connection.aclose()
        return verdict

    assert asyncio.run(run()).allowed
    assert loaded_code(client) == newer.encode()
    assert loaded_version(client) == b"9.9.9"


def test_an_older_library_is_used_and_replaced_on_request(start_server):
    for older, answer in [(library_of("0.0.1"), b"0.0.1"), (without_swl_version(), None)]:
        server = start_server(False)
        client = server.client()
        client.function_load(older)
        limiter = SWL(client)
        # Used as it is, as any library loaded already.
        assert limiter.check("k", 1000, 3).allowed
        limiter.load_library()
        assert loaded_code(client) == older.encode()
        if answer is not None:
            assert loaded_version(client) == answer
        # Replaced on request, as after an upgrade.
        limiter.load_library(replace=True)
        assert loaded_code(client) == library_source().encode()
        assert loaded_version(client) == OWN.encode()
        assert limiter.check("k", 1000, 3).remaining == 1


def test_each_primary_of_a_cluster_is_asked_on_its_own(start_cluster):
    cluster = start_cluster(False)
    newer, older = library_of("9.9.9"), library_of("0.0.1")
    first, second, third = (node.client() for node in cluster.nodes)
    first.function_load(newer)
    second.function_load(older)
    limiter = SWL(redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port))
    # Loaded where it is missing; the others left as they are.
    limiter.load_library()
    assert [loaded_version(node) for node in (first, second, third)] == [
        b"9.9.9", b"0.0.1", OWN.encode()]
    # The older one replaced, the newer one kept.
    limiter.load_library(replace=True)
    assert [loaded_version(node) for node in (first, second, third)] == [
        b"9.9.9", OWN.encode(), OWN.encode()]
    assert loaded_code(first) == newer.encode()
    # Checks go to each node's library, the newer one included.
    for user in range(12):
        key = f"rl:user{user}"
        assert limiter.check(key, 1000, 1).allowed
        assert not limiter.check(key, 1000, 1).allowed
    assert all(node.dbsize() for node in (first, second, third))
