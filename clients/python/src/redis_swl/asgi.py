"""Rate limiting for FastAPI, Starlette and any ASGI app on redis-swl.

One check per request (SWL.CHECK, or the function library's FCALL where the
server has no module), keyed by what the application's key function returns
for it (by default the client's address: the TCP peer, as the server reports
it), with RateLimit-Policy, RateLimit and Retry-After headers. When Redis
cannot answer within the timeout, for whatever reason (refused, reset, timed
out, any error reply), the policy answers instead: "open" admits (and logs
it), "closed" refuses with 503, "local" decides in this process for at most
``max_local_clients`` clients, exactly as Redis would have. Every request a
policy decided is counted in ``limiter.failures``. Redis is tried again
after a backoff that doubles up to a second, so the app returns to it by
itself.

After Redis denies a request, the key's next requests are denied by the
process until the denial's wait has passed, without a call to Redis (the
denial cache, ``RateLimit-Source: cache``; ``denial_cache_keys=0`` turns it
off). Where prometheus_client is installed (``redis-swl[prometheus]``),
every decision is counted in ``redis_swl_decisions_total`` and timed in
``redis_swl_decision_seconds``, labelled by the limiter's ``name``.

    limiter = RateLimiter("redis://127.0.0.1:6379/", windows=[(60_000, 100), (1_000, 10)],
                          routes={"/search": [(60_000, 10)], "/health": []},
                          policy="local", refund_failed=True)
    app.add_middleware(RateLimitMiddleware, limiter=limiter)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from typing import Any, Awaitable, Callable, List, Mapping, Optional, Sequence, Tuple, Union

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import ReadOnlyError
from redis.retry import Retry

from ._protocol import MAX_WINDOWS, Verdict, Window
from .aio import AsyncSWL
from .cache import DenialCache, clock
from .local import LocalLimiter
from .metrics import decision_metrics

log = logging.getLogger("redis_swl.asgi")

POLICIES = ("open", "closed", "local")

#: What a request counts against: a string, or an awaitable of one.
KeyFunction = Callable[[Any], Union[str, Awaitable[str]]]


def client_address(request: Any) -> str:
    """The default key: the client's address as the server reports it (the
    TCP peer; uvicorn replaces it with the forwarded address only for the
    proxies it trusts, see --forwarded-allow-ips). Never a header the
    client chose."""
    return request.client.host if request.client else "unknown"


def failed_response(status: int) -> bool:
    """A response that, with ``refund_failed``, does not count: 4xx and 5xx."""
    return status >= 400


class RateLimiter:
    """The limits, the connection to Redis, the failure policy and its count.

    :param redis: a ``redis.asyncio`` client, or a URL to make one from
        (with ``timeout`` for connecting and reading, and no retries).
    :param windows: ``(window_ms, limit)`` pairs every request is held to
        (at most 100, as one call takes).
    :param routes: per-route limits: a path prefix to the windows of the
        requests under it (the longest prefix wins; an empty list exempts
        them). Each route keeps logs of its own.
    :param key: names the client a request counts against, from a starlette
        ``Request`` (headers, client, state, user; not the body).
    :param refund_failed: give back the units of a request whose response
        ``failed`` (4xx or 5xx by default), through SWL.REFUND.
    :param encoding: how the function library, where the limiter loads it,
        stores new logs: ``"compact"``, ``"compact1"`` or ``"zset"``, as
        :class:`~redis_swl.SWL` takes them.
    :param denial_cache_keys: keys whose denials the denial cache remembers
        (the least recently used forgotten first); 0 turns it off.
    :param name: the limiter's label in its metrics: a fixed name (``api``,
        ``login``), never a path or a key.
    :param metrics: ``True`` counts into prometheus_client's default
        registry where prometheus_client is installed; ``False`` counts
        nothing; or a ``CollectorRegistry`` to count into.
    """

    def __init__(
        self,
        redis: Union[str, Any],
        windows: Sequence[Window],
        *,
        cost: int = 1,
        policy: str = "open",
        timeout: float = 0.05,
        max_local_clients: int = 10_000,
        key_prefix: str = "rl:",
        key: KeyFunction = client_address,
        routes: Optional[Mapping[str, Sequence[Window]]] = None,
        refund_failed: bool = False,
        failed: Callable[[int], bool] = failed_response,
        encoding: str = "compact",
        denial_cache_keys: int = DenialCache.DEFAULT_KEYS,
        name: str = "default",
        metrics: Any = True,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f'unknown policy "{policy}" (accepted: {", ".join(POLICIES)})')
        if not windows:
            raise ValueError("windows: at least one (window_ms, limit)")
        if not isinstance(cost, int) or not 1 <= cost <= 100_000:
            raise ValueError(f"cost must be an integer from 1 to 100000, not {cost!r}")
        self.windows = _checked(windows, "windows")
        self.routes = {prefix: _checked(ws, f"routes[{prefix!r}]") if ws else []
                       for prefix, ws in (routes or {}).items()}
        self.cost = cost
        self.policy = policy
        self.timeout = timeout
        self.key_prefix = key_prefix
        self.key = key
        self.refund_failed = refund_failed
        self.failed = failed
        self.encoding = encoding
        self.local = LocalLimiter(max_local_clients)
        #: Recent denials by Redis, repeated without asking it (None: off).
        self.denials = DenialCache(denial_cache_keys) if denial_cache_keys else None
        self.name = name
        self.metrics = decision_metrics(name, metrics)
        #: Requests the failure policy decided since start.
        self.failures = 0
        self._url = redis if isinstance(redis, str) else None
        self._swl: Optional[AsyncSWL] = None if self._url else AsyncSWL(redis, encoding=encoding)
        self._delay = 0.0
        self._retry_at = 0.0

    def limits_for(self, path: str) -> Tuple[str, List[Window]]:
        """The route (its prefix, or "" for none) and the windows a path
        within the app is held to. A prefix covers itself and the paths
        below it: "/search" covers "/search/x", not "/searchable"."""
        matching = [prefix for prefix in self.routes
                    if path == prefix or path.startswith(prefix.rstrip("/") + "/")]
        if not matching:
            return "", self.windows
        prefix = max(matching, key=len)
        return prefix, self.routes[prefix]

    def _client(self) -> AsyncSWL:
        if self._swl is None:
            client = aioredis.Redis.from_url(
                self._url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0))
            self._swl = AsyncSWL(client, encoding=self.encoding)
        return self._swl

    async def _drop_client(self) -> None:
        if self._url is None or self._swl is None:
            return
        swl, self._swl = self._swl, None
        close = getattr(swl.client, "aclose", None) or swl.client.close  # redis-py < 5.0.1
        try:
            await close()
        except Exception:  # noqa: BLE001 - a broken connection may fail to close
            pass

    async def _redis(self, call: Callable[[AsyncSWL], Awaitable[Verdict]],
                     refund: bool = False) -> Optional[Verdict]:
        """A call's verdict, or None when Redis did not decide in time. A
        refund that fails is only logged: it does not make other requests'
        checks skip Redis."""
        if not refund and time.monotonic() < self._retry_at:
            return None
        failure: Optional[Exception] = None
        try:
            verdict = await asyncio.wait_for(call(self._client()), self.timeout)
        except aioredis.ResponseError as error:
            if not _about_the_server(error):
                # An error reply about this call (a key of another type): the
                # policy decides it, and Redis stays in use for the others.
                log.warning("rate limit: Redis refused the call (%s)", error)
                return None
            failure = error
        except Exception as error:  # noqa: BLE001 - unreachable, in any way: the policy
            failure = error
        if failure is not None and refund:
            if not isinstance(failure, aioredis.ResponseError) or _about_the_server(failure):
                await self._drop_client()
            log.warning("rate limit: refund failed (%r)", failure)
            return None
        if failure is not None:
            # Requests failing together back off once, not once each.
            if time.monotonic() >= self._retry_at:
                await self._drop_client()
                self._delay = min(1.0, self._delay * 2 or 0.05)
                self._retry_at = time.monotonic() + self._delay
            log.warning("rate limit: Redis unavailable (%r)", failure)
            return None
        self._delay, self._retry_at = 0.0, 0.0
        return verdict

    async def decide(self, key: str, windows: Sequence[Window]) -> Tuple[Optional[Verdict], str]:
        """(verdict, source): a cached denial of Redis's, Redis's verdict, or
        the policy's when Redis did not decide. The verdict is None under
        "open" and "closed"."""
        denials = self.denials
        if denials is not None:
            cached = denials.answer(key, windows, self.cost)
            if cached is not None:
                return cached, "cache"
            ticket, sent = denials.ticket(), clock()
        verdict = await self._redis(
            lambda swl: swl.check(key, *windows[0], cost=self.cost, windows=windows[1:]))
        if verdict is not None:
            if denials is not None:
                denials.keep(key, windows, self.cost, verdict, ticket, sent)
            return verdict, "redis"
        self.failures += 1
        if self.policy == "local":
            return self.local.check(key, windows, now_ms(), self.cost), "local"
        if self.policy == "open":
            log.warning("rate limit: failing open for %s", key)
        return None, self.policy

    async def refund(self, key: str, windows: Sequence[Window], source: str,
                     decided: float) -> None:
        """Gives a request's units back where they were recorded, if it
        ended within the narrowest window (``decided`` is its
        ``time.monotonic()``): a refund removes the newest entries, which
        after that may be another request's."""
        if time.monotonic() - decided >= min(ms for ms, _ in windows) / 1000:
            return
        if source == "local":
            self.local.refund(key, windows, now_ms(), self.cost)
            return
        try:
            await self._redis(
                lambda swl: swl.refund(key, *windows[0], cost=self.cost, windows=windows[1:]),
                refund=True)
        finally:
            # Once Redis answered, or failed (the refund may be carried out).
            if self.denials is not None:
                self.denials.forget(key)

    async def reset(self, client: str) -> None:
        """Deletes the logs of ``client`` (what the key function returned for
        its requests, before the prefix), each route's too, so that its next
        request is admitted as a new client's; drops their denials from this
        process's cache and their local logs. Raises what Redis raised, or
        ``asyncio.TimeoutError`` after four timeouts."""
        keys = [self.key_prefix + client] + [
            f"{self.key_prefix}{route}:{client}" for route, ws in self.routes.items() if ws]

        async def delete() -> None:
            redis = self._client().client
            for key in keys:  # one by one: in a cluster they may be on different nodes
                await redis.delete(key)

        try:
            await asyncio.wait_for(delete(), self.timeout * 4)
        finally:
            for key in keys:
                if self.denials is not None:
                    self.denials.forget(key)
                self.local.forget(key)

    def count(self, verdict: Optional[Verdict], source: str, seconds: float) -> None:
        """Counts a decision in the metrics, if any: admitted (a verdict
        that admits, or "open") or denied, by who decided."""
        if self.metrics is not None:
            admitted = source == "open" or (verdict is not None and verdict.allowed)
            self.metrics.count(admitted, source, seconds)


class RateLimitMiddleware:
    """The ASGI middleware: ``app.add_middleware(RateLimitMiddleware,
    limiter=limiter)``. Every HTTP request through it is checked."""

    def __init__(self, app: Any, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request  # starlette comes with the ASGI app

        limiter = self.limiter
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]  # the path within the app, as routes name it
        route, windows = limiter.limits_for(path)
        if not windows:
            return await self.app(scope, receive, send)
        client = limiter.key(Request(scope))
        if inspect.isawaitable(client):
            client = await client
        key = limiter.key_prefix + (f"{route}:" if route else "") + client
        decided = time.monotonic()
        started = time.perf_counter()
        verdict, source = await limiter.decide(key, windows)
        limiter.count(verdict, source, time.perf_counter() - started)
        if source == "open":
            return await self.app(scope, receive, with_headers(send, [("ratelimit-source", "open")]))
        if source == "closed":
            return await respond(send, 503, [("retry-after", "1"), ("ratelimit-source", "closed")],
                                 b"rate limiter unavailable\n")
        assert verdict is not None
        extra = rate_limit_headers(verdict) + [("ratelimit-source", source)]
        if not verdict.allowed:
            return await respond(send, 429, extra, b"too many requests\n")
        status: List[int] = []
        try:
            await self.app(scope, receive, with_headers(send, extra, status))
        except Exception:
            # The app raised: the server answers 500, a failed response.
            if limiter.refund_failed and limiter.failed(500):
                await limiter.refund(key, windows, source, decided)
            raise
        if limiter.refund_failed and status and limiter.failed(status[0]):
            await limiter.refund(key, windows, source, decided)


#: Error replies about the server's state rather than the call: after a
#: failover the address may lead elsewhere, so the connection is replaced.
_SERVER_STATE = ("READONLY", "LOADING", "MASTERDOWN", "BUSY", "CLUSTERDOWN", "TRYAGAIN",
                 "NOREPLICAS")


def _about_the_server(error: Exception) -> bool:
    return isinstance(error, ReadOnlyError) or str(error).startswith(_SERVER_STATE)


def _checked(windows: Sequence[Window], what: str) -> List[Window]:
    """Windows as (window_ms, limit) of integers the commands accept, at
    most MAX_WINDOWS of them."""
    if len(windows) > MAX_WINDOWS:
        raise ValueError(f"{what}: at most {MAX_WINDOWS} (window_ms, limit) pairs, not {len(windows)}")
    checked = []
    for window in windows:
        window_ms, limit = window
        if not (isinstance(window_ms, int) and isinstance(limit, int)
                and 1 <= window_ms and 0 <= limit):
            raise ValueError(f"{what}: (window_ms >= 1, limit >= 0) as integers, not {window!r}")
        checked.append((window_ms, limit))
    return checked


def rate_limit_headers(verdict: Verdict) -> List[Tuple[str, str]]:
    """The IETF draft's structured headers, all from the window the reply
    names (the reset is capped at that window: it is given for the widest)."""

    def seconds(ms: int) -> int:
        return max(0, math.ceil(ms / 1000))

    window = verdict.window_ms
    name = f'"{window}ms"'
    headers = [
        ("ratelimit-policy", f"{name};q={verdict.limit};w={seconds(window)}"),
        ("ratelimit", f"{name};r={verdict.remaining};t={seconds(min(verdict.reset_after_ms, window))}"),
    ]
    if not verdict.allowed and verdict.retry_after_ms >= 0:
        headers.append(("retry-after", str(max(1, seconds(verdict.retry_after_ms)))))
    return headers


def with_headers(send, extra: List[Tuple[str, str]], status: Optional[List[int]] = None):
    """``send`` adding ``extra`` headers to the response, and noting its
    status in ``status``."""
    encoded = [(name.encode(), value.encode()) for name, value in extra]

    async def send_with_headers(message):
        if message["type"] == "http.response.start":
            if status is not None:
                status.append(message["status"])
            message = dict(message, headers=list(message.get("headers", [])) + encoded)
        await send(message)

    return send_with_headers


async def respond(send, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
    raw = [(n.encode(), v.encode()) for n, v in headers] + [
        (b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def now_ms() -> int:
    return int(time.time() * 1000)
