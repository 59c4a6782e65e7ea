"""Rate limiting for FastAPI and any ASGI app on redis-swl.

One SWL.CHECK per request, keyed by what the application's key function
returns for it (by default the client's address: the TCP peer, as the
server reports it), with RateLimit-Policy, RateLimit and Retry-After
headers. When Redis cannot answer within the timeout, for whatever reason
(refused, reset, timed out, any error reply), the configured policy answers
instead: "open" admits (and logs and counts it), "closed" refuses with 503,
"local" decides in this process for at most `max_local_clients` clients.
Redis is tried again after a backoff that doubles up to a second, so the
app returns to it by itself.

    limiter = RateLimiter(redis_url="redis://127.0.0.1:6379/",
                          windows=[(60_000, 100), (1_000, 10)], policy="open")
    app.add_middleware(RateLimitMiddleware, limiter=limiter)
    limiter.failures()  # requests the policy decided, for a health endpoint

docs/middleware.md shows key functions for an authenticated identity and
for clients behind a trusted proxy.
"""

import asyncio
import inspect
import logging
import math
import time
from collections import OrderedDict

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry
from starlette.requests import Request

log = logging.getLogger("ratelimit")

POLICIES = ("open", "closed", "local")


def client_address(request):
    """The default key: the client's address as the server reports it (the
    TCP peer; uvicorn replaces it with the forwarded address only for the
    proxies it trusts, see --forwarded-allow-ips). Never a header the
    client chose."""
    return request.client.host if request.client else "unknown"


class RateLimiter:
    """The limits, the Redis connection, the failure policy and its counter.

    `key(request)` names the client a request counts against; it gets a
    starlette Request (headers, client, state, user; not the body) and
    returns a string, or an awaitable of one.
    """

    def __init__(self, redis_url, windows, cost=1, policy="open", timeout=0.05,
                 max_local_clients=10_000, key_prefix="rl:", key=client_address):
        if policy not in POLICIES:
            raise ValueError(f'unknown policy "{policy}" (accepted: {", ".join(POLICIES)})')
        self.redis_url = redis_url
        self.windows = list(windows)
        self.cost = cost
        self.policy = policy
        self.timeout = timeout
        self.key_prefix = key_prefix
        self.key = key
        self.local = LocalLimiter(max_local_clients)
        self._failures = 0
        self._redis = None
        self._delay = 0.0
        self._retry_at = 0.0

    def failures(self):
        """Requests decided by the failure policy since start."""
        return self._failures

    def _client(self):
        if self._redis is None:
            self._redis = aioredis.Redis.from_url(
                self.redis_url, socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout, retry=Retry(NoBackoff(), 0),
                single_connection_client=False)
        return self._redis

    async def _drop_client(self):
        client, self._redis = self._redis, None
        if client is not None:
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass

    def _arguments(self, key):
        (window_ms, limit), rest = self.windows[0], self.windows[1:]
        args = ["SWL.CHECK", key, window_ms, limit, "*"]
        for window_ms, limit in rest:
            args += ["WINDOW", window_ms, limit]
        return args + ["COST", self.cost]

    async def check(self, key):
        """The reply of SWL.CHECK as a dict, or None when Redis did not decide."""
        now = time.monotonic()
        if now < self._retry_at:
            return None
        try:
            reply = await asyncio.wait_for(
                self._client().execute_command(*self._arguments(key)), self.timeout)
        except Exception as error:  # noqa: BLE001 - every failure goes to the policy
            if not isinstance(error, aioredis.ResponseError):
                await self._drop_client()
            self._delay = min(1.0, self._delay * 2 or 0.05)
            self._retry_at = time.monotonic() + self._delay
            log.warning("rate limit: Redis unavailable (%r)", error)
            return None
        self._delay, self._retry_at = 0.0, 0.0
        allowed, limit, remaining, retry, reset, window = (int(x) for x in reply)
        return dict(allowed=allowed == 1, limit=limit, remaining=remaining,
                    retry_after_ms=retry, reset_after_ms=reset, window_ms=window)

    async def decide(self, key):
        """(verdict, source): Redis's verdict, or the policy's when Redis did
        not decide. The verdict is None under "open" and "closed"."""
        verdict = await self.check(key)
        if verdict is not None:
            return verdict, "redis"
        self._failures += 1
        if self.policy == "local":
            return self.local.check(key, self.windows, self.cost, now_ms()), "local"
        if self.policy == "open":
            log.warning("rate limit: failing open for %s", key)
        return None, self.policy


class RateLimitMiddleware:
    """The ASGI middleware: app.add_middleware(RateLimitMiddleware, limiter=limiter).
    Every HTTP request through it is checked; mount it on the routes to limit."""

    def __init__(self, app, limiter):
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        client = self.limiter.key(Request(scope))
        if inspect.isawaitable(client):
            client = await client
        verdict, source = await self.limiter.decide(self.limiter.key_prefix + client)
        if source == "open":
            return await self.app(scope, receive, with_headers(send, [("ratelimit-source", "open")]))
        if source == "closed":
            return await respond(send, 503, [("retry-after", "1"), ("ratelimit-source", "closed")],
                                 b"rate limiter unavailable\n")
        extra = rate_limit_headers(verdict) + [("ratelimit-source", source)]
        if verdict["allowed"]:
            return await self.app(scope, receive, with_headers(send, extra))
        return await respond(send, 429, extra, b"too many requests\n")


def rate_limit_headers(verdict):
    """The draft's structured headers, all from the window the reply names
    (the reset is capped at that window: it is given for the widest)."""
    seconds = lambda ms: max(0, math.ceil(ms / 1000))  # noqa: E731
    window = verdict["window_ms"]
    name = f'"{window}ms"'
    headers = [
        ("ratelimit-policy", f"{name};q={verdict['limit']};w={seconds(window)}"),
        ("ratelimit", f"{name};r={verdict['remaining']};t={seconds(min(verdict['reset_after_ms'], window))}"),
    ]
    if not verdict["allowed"] and verdict["retry_after_ms"] >= 0:
        headers.append(("retry-after", str(max(1, seconds(verdict["retry_after_ms"])))))
    return headers


def with_headers(send, extra):
    encoded = [(name.encode(), value.encode()) for name, value in extra]

    async def send_with_headers(message):
        if message["type"] == "http.response.start":
            message = dict(message, headers=list(message.get("headers", [])) + encoded)
        await send(message)
    return send_with_headers


async def respond(send, status, headers, body):
    raw = [(n.encode(), v.encode()) for n, v in headers] + [
        (b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def now_ms():
    return int(time.time() * 1000)


class LocalLimiter:
    """A sliding-window log per client in this process, for at most
    `max_clients` clients: the least recently seen is forgotten first."""

    def __init__(self, max_clients):
        self.max_clients = max_clients
        self.logs = OrderedDict()

    def check(self, key, windows, cost, now):
        widest = max(w for w, _ in windows)
        log = [t for t in self.logs.pop(key, []) if t + widest > now]
        inside = lambda window: [t for t in log if t + window > now]  # noqa: E731
        allowed = all(len(inside(w)) + cost <= limit for w, limit in windows)
        if allowed:
            log += [now] * cost
        best = None
        for window, limit in windows:
            entries = inside(window)
            fits = len(entries) + cost <= limit
            retry = -1
            if not allowed and not fits and cost <= limit:
                retry = entries[len(entries) + cost - limit - 1] + window - now
            verdict = dict(allowed=allowed, limit=limit, remaining=max(0, limit - len(entries)),
                           retry_after_ms=retry,
                           reset_after_ms=(log[-1] + widest - now) if log else 0, window_ms=window)
            if best is None:
                better = allowed or not fits
            elif allowed:
                better = verdict["remaining"] < best["remaining"]
            else:
                better = not fits and best["retry_after_ms"] != -1 and (
                    retry == -1 or retry > best["retry_after_ms"])
            if better:
                best = verdict
        if log and self.max_clients > 0:
            self.logs[key] = log
            while len(self.logs) > self.max_clients:
                self.logs.popitem(last=False)
        return best or dict(allowed=allowed, limit=windows[0][1], remaining=0,
                            retry_after_ms=-1 if allowed else 1, reset_after_ms=0,
                            window_ms=windows[0][0])
