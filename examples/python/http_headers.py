"""Rate-limiting HTTP requests with SWL.CHECK from Python (redis-py).

Maps each reply to response headers: RateLimit-Policy and RateLimit as in
the IETF httpapi rate-limit headers draft, and Retry-After in whole seconds,
rounded up. When Redis cannot be reached the handler either fails open,
admitting through a small in-process limiter (a looser, per-instance
limit), or fails closed, refusing with 503.

    pip install redis
    python3 http_headers.py redis://127.0.0.1:6379/ alice 5 3 60000 open

prints one line per request: the status and the headers it would send.
"""

import collections
import math
import sys
import time

import redis


def seconds_rounded_up(ms):
    return math.ceil(ms / 1000)


def response(verdict, window_ms):
    allowed, limit, remaining, retry_after_ms, reset_after_ms = verdict
    line = '%d RateLimit-Policy: "default";q=%d;w=%d | RateLimit: "default";r=%d;t=%d' % (
        200 if allowed else 429,
        limit,
        seconds_rounded_up(window_ms),
        remaining,
        seconds_rounded_up(reset_after_ms),
    )
    # -1 means waiting cannot help (the cost exceeds the limit): no hint.
    if not allowed and retry_after_ms >= 0:
        line += " | Retry-After: %d" % seconds_rounded_up(retry_after_ms)
    return line


class LocalLimiter:
    """The fail-open fallback: the same sliding-window log, in this process."""

    def __init__(self):
        self.logs = collections.defaultdict(collections.deque)

    def check(self, client, limit, window_ms):
        now = int(time.time() * 1000)
        log = self.logs[client]
        while log and log[0] <= now - window_ms:
            log.popleft()
        allowed = len(log) < limit
        if allowed:
            log.append(now)
        retry = max(1, log[0] + window_ms - now) if not allowed and limit > 0 and log else -1
        reset = log[-1] + window_ms - now if log else 0
        return (allowed, limit, max(0, limit - len(log)), retry, reset)


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: http_headers.py <redis-url> <client> <requests> <limit> <window_ms> <open|closed>")
    url, client, requests, limit, window_ms, mode = sys.argv[1:]
    requests, limit, window_ms = int(requests), int(limit), int(window_ms)
    r = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    local = LocalLimiter()
    for _ in range(requests):
        try:
            reply = r.execute_command("SWL.CHECK", "rl:" + client, window_ms, limit, "*")
            print(response((reply[0] == 1,) + tuple(reply[1:5]), window_ms))
        except redis.exceptions.ConnectionError:
            # Redis is unreachable: keep serving, or refuse.
            if mode == "open":
                print(response(local.check(client, limit, window_ms), window_ms) + " (local)")
            else:
                print("503 Retry-After: 1")


if __name__ == "__main__":
    main()
