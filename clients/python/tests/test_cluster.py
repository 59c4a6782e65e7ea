"""A three-node Redis Cluster: the clients and the limits storages route
each key to its node, with the module on every node and with the function
library loaded on every primary by the client, in both encodings."""

from __future__ import annotations

import asyncio
import itertools

import pytest
import redis.asyncio.cluster
import redis.cluster
from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

import redis_swl  # noqa: F401
from conftest import ENCODINGS, log_kind
from redis_swl import SWL, Verdict
from test_limits import drive

MODES = list(itertools.product([True, False], ENCODINGS))
IDS = [f"{'module' if m else 'library'}-{e}" for m, e in MODES]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def cluster_client(cluster) -> redis.cluster.RedisCluster:
    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_the_client_routes_every_key_to_its_node(start_cluster, module, encoding):
    cluster = start_cluster(module, encoding)
    client = cluster_client(cluster)
    limiter = SWL(client, encoding=encoding)
    for user in USERS:
        key = f"rl:{user}"
        assert limiter.check(key, 1000, 2, now_ms=1000) == Verdict(True, 2, 1, -1, 1000, 1000)
        assert limiter.check(key, 1000, 2, now_ms=1100) == Verdict(True, 2, 0, -1, 1000, 1000)
        assert limiter.check(key, 1000, 2, now_ms=1200) == Verdict(False, 2, 0, 800, 900, 1000)
        assert limiter.refund(key, 1000, 2, now_ms=1200) == Verdict(True, 2, 0, -1, 1000, 1000)
        assert log_kind(client, key) == encoding
    # The keys are spread over the nodes.
    holding = [node.client().dbsize() for node in cluster.nodes]
    assert sum(holding) == len(USERS) and holding.count(0) < 2, holding
    assert limiter.uses_library is not module


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_limits_on_the_cluster(start_cluster, module, encoding):
    cluster = start_cluster(module, encoding)
    uri = f"swl+redis+cluster://{cluster.hosts}"
    limiter = MovingWindowRateLimiter(storage_from_string(uri, swl_encoding=encoding))
    item = parse("5/hour")
    for user in USERS:
        asyncio.run(drive(limiter, item, user))
    client = cluster_client(cluster)
    for user in USERS:
        assert log_kind(client, f"LIMITS:{item.key_for(user)}:swl") == encoding
    # limits' own reset, on every node.
    limiter.storage.reset()
    assert [node.client().dbsize() for node in cluster.nodes] == [0, 0, 0]


@pytest.mark.parametrize("module,encoding", MODES, ids=IDS)
def test_asyncio_limits_on_the_cluster(start_cluster, module, encoding):
    cluster = start_cluster(module, encoding)

    async def run():
        uri = f"async+swl+redis+cluster://{cluster.hosts}"
        limiter = AsyncMovingWindow(storage_from_string(uri, swl_encoding=encoding))
        item = parse("2/hour")
        for user in USERS:
            hits = [await limiter.hit(item, user) for _ in range(3)]
            assert hits == [True, True, False]
            stats = await limiter.get_window_stats(item, user)
            assert stats.remaining == 0
        return item

    item = asyncio.run(run())
    client = cluster_client(cluster)
    for user in USERS:
        assert log_kind(client, f"LIMITS:{item.key_for(user)}:swl") == encoding


@pytest.mark.parametrize("asyncio_client", [False, True], ids=["sync", "asyncio"])
def test_the_library_is_loaded_where_a_primary_lacks_it(start_cluster, asyncio_client):
    # One primary has the library already (as one has after a shard is
    # added to a cluster): the client loads it on the others.
    cluster = start_cluster(False)
    cluster.nodes[0].client().function_load(redis_swl.library_source())
    if asyncio_client:
        async def run():
            client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1",
                                                        port=cluster.nodes[0].port)
            limiter = redis_swl.AsyncSWL(client)
            verdicts = [await limiter.check(f"rl:{user}", 1000, 2, now_ms=1000) for user in USERS]
            await client.aclose()
            return verdicts
        verdicts = asyncio.run(run())
    else:
        limiter = SWL(cluster_client(cluster))
        verdicts = [limiter.check(f"rl:{user}", 1000, 2, now_ms=1000) for user in USERS]
    assert verdicts == [Verdict(True, 2, 1, -1, 1000, 1000)] * len(USERS)
    for node in cluster.nodes:
        assert len(node.client().function_list()) == 1
