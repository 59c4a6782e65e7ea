"""limits' own Redis moving window beside swl+redis://, through the same
MovingWindowRateLimiter calls on one server (with the module) in one run:
server time per call (INFO commandstats) for admitted hits, denied hits and
get_window_stats, memory per tracked request (MEMORY USAGE) at limits of
100 and 10,000, and the costliest single hit each allows. One unpipelined
client, as an application calls. The ratios, measured in the same run, are
what carries over to other machines.

    make bench        (or: python clients/python/bench/limits_bench.py)
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from limits import parse  # noqa: E402
from limits.storage import storage_from_string  # noqa: E402
from limits.strategies import MovingWindowRateLimiter  # noqa: E402

import redis_swl  # noqa: E402,F401  (registers swl+redis://)
from servers import RedisServer  # noqa: E402

# (name, URI scheme, swl.encoding, the commands one call is)
STORAGES = [
    ("limits (LIST)", "redis", "zset", ["evalsha"]),
    ("swl sorted set", "swl+redis", "zset", ["swl.check", "swl.peek"]),
    ("swl compact", "swl+redis", "compact", ["swl.check", "swl.peek"]),
]
LIMITS = [100, 10_000]
DENIED = 1_000
STATS = 1_000
LARGEST = 100_000  # the module's cap on COST; limits allows any cost up to the limit
# The costliest hit is timed on this many new keys of a running server:
# the median, and the worst (the first large write after a FLUSHALL also
# pays for memory the allocator gave back).
LARGEST_RUNS = 5


def server_usec(client, commands: Sequence[str]) -> float:
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("usec", 0) for name in commands)


def measure(client, commands: Sequence[str], calls: int, run) -> float:
    """Server microseconds per call of `run` (called `calls` times)."""
    client.config_resetstat()
    for _ in range(calls):
        run()
    return server_usec(client, commands) / calls


def main() -> None:
    server = RedisServer(True)
    client = server.client()
    rows: List[Tuple[str, int, float, float, float, float]] = []
    largest: Dict[str, Tuple[float, float]] = {}
    try:
        for name, scheme, encoding, commands in STORAGES:
            client.config_set("swl.encoding", encoding)
            limiter = MovingWindowRateLimiter(
                storage_from_string(f"{scheme}://127.0.0.1:{server.port}"))
            for limit in LIMITS:
                client.flushall()
                item = parse(f"{limit}/hour")
                admitted = measure(client, commands, limit, lambda: limiter.hit(item, "u"))
                # redis-swl's log sits beside limits' name (limits_storage.KEY_SUFFIX).
                suffix = ":swl" if scheme.startswith("swl+") else ""
                key = f"LIMITS:{item.key_for('u')}{suffix}"
                per_request = client.memory_usage(key, samples=0) / limit
                denied = measure(client, commands, DENIED, lambda: limiter.hit(item, "u"))
                stats = measure(client, commands, STATS,
                                lambda: limiter.get_window_stats(item, "u"))
                rows.append((name, limit, admitted, denied, stats, per_request))
            item = parse(f"{LARGEST}/hour")
            runs = []
            client.flushall()
            for run in range(LARGEST_RUNS):
                hit = lambda: limiter.hit(item, f"big{run}", cost=LARGEST)  # noqa: E731
                runs.append(measure(client, commands, 1, hit) / 1000)
            largest[name] = (statistics.median(runs), max(runs))
    finally:
        server.stop()

    print("limits' moving window through MovingWindowRateLimiter, one client, one server "
          "(server microseconds per call; bytes per tracked request)")
    print(f"{'storage':<16} {'limit':>7} {'hit admitted':>13} {'hit denied':>11} "
          f"{'window stats':>13} {'bytes/request':>14}")
    for name, limit, admitted, denied, stats, per_request in rows:
        print(f"{name:<16} {limit:>7} {admitted:>13.2f} {denied:>11.2f} {stats:>13.2f} "
              f"{per_request:>14.1f}")
    print(f"costliest single hit (cost {LARGEST:,} on a limit of {LARGEST:,}; median and worst "
          f"of {LARGEST_RUNS} new keys): " + ", ".join(
              f"{name} {median:.2f} ms (worst {worst:.2f})"
              for name, (median, worst) in largest.items()))

    def ratio(storage: str, column: int, limit: int) -> float:
        mine = next(r for r in rows if r[0] == storage and r[1] == limit)
        theirs = next(r for r in rows if r[0] == "limits (LIST)" and r[1] == limit)
        return theirs[column] / mine[column]

    for storage, target in (("swl sorted set", 1.5), ("swl compact", 2.0)):
        parts = [f"{what} {ratio(storage, column, limit):.2f}x"
                 for limit in LIMITS
                 for what, column in ((f"hit admitted@{limit}", 2), (f"hit denied@{limit}", 3),
                                      (f"stats@{limit}", 4))]
        print(f"limits / {storage} (target >= {target}x less): " + ", ".join(parts))
    print(f"memory at 10000, limits / swl compact: {ratio('swl compact', 5, 10_000):.1f}x "
          f"(target >= 4x); limits / swl sorted set: {ratio('swl sorted set', 5, 10_000):.2f}x")
    median, worst = largest["swl compact"]
    print(f"costliest compact hit: {median:.2f} ms, worst {worst:.2f} ms (target <= 1 ms)")


if __name__ == "__main__":
    main()
