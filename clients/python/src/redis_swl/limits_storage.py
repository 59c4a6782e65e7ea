"""``limits`` storages whose moving window is redis-swl.

Importing :mod:`redis_swl` registers them, so that a storage URI is the
only change an application makes::

    Limiter(get_remote_address, app=app, storage_uri="swl+redis://localhost:6379",
            strategy="moving-window")

===============================  ===========================================
scheme                           class
===============================  ===========================================
``swl+redis://``, ``swl+rediss://``, ``swl+redis+unix://``
                                 :class:`SWLRedisStorage`
``swl+redis+cluster://``         :class:`SWLRedisClusterStorage`
``async+swl+redis://`` (and the ``rediss``, ``redis+unix`` forms)
                                 :class:`AsyncSWLRedisStorage`
``async+swl+redis+cluster://``   :class:`AsyncSWLRedisClusterStorage`
===============================  ===========================================

The moving window (``MovingWindowRateLimiter.hit``, ``test`` and
``get_window_stats``) is one SWL.CHECK or SWL.PEEK each, or the function
library's FCALL where the server has no module. Every other strategy runs
``limits``' own Redis code on the same connection: these classes are its
Redis storages with the moving window replaced.

A log lives at the key ``limits`` would give the same moving window, plus
``key_suffix`` (``":swl"``): ``limits``' own ``redis://`` moving window keeps
a LIST at that name, which a redis-swl log must never meet (each would fail
on the other with WRONGTYPE). ``key_suffix=""`` keeps the names of redis-swl
0.3, for an application that runs no ``redis://`` moving window beside.

With ``swl_denial_cache`` (a number of keys, or a
:class:`~redis_swl.DenialCache`; off by default), a hit like one Redis
denied is denied in the process until the denial's wait has passed, without
a call to Redis (see the :class:`~redis_swl.DenialCache`). ``test`` and
``get_window_stats`` (a peek) always ask Redis, so they stay exact;
``clear`` and ``reset`` through the storage drop the cached denials.

Importing this module also makes ``limits``' ``MovingWindowRateLimiter.test``
(sync and asyncio) refuse, on these storages only, a cost that ``hit`` would
refuse: the storage is not told the cost of a test.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Awaitable, Callable, Optional, Tuple, TypeVar, Union

from limits.aio import strategies as _async_strategies

from limits.aio.storage import RedisClusterStorage as _AsyncRedisClusterStorage
from limits.aio.storage import RedisStorage as _AsyncRedisStorage
from limits.storage import RedisClusterStorage as _RedisClusterStorage
from limits.storage import RedisStorage as _RedisStorage
from limits import strategies as _strategies

from ._protocol import Verdict
from .aio import AsyncSWL
from .cache import DenialCache
from .client import SWL

#: The most units one call records (the module's cap on COST).
MAX_COST = 100_000

#: What a log's key adds to the name ``limits`` gives the moving window.
KEY_SUFFIX = ":swl"


def _cost_fits(limit: int, amount: int) -> bool:
    """Whether a hit of ``amount`` is for Redis to decide: as in ``limits``,
    one above the limit never fits (and one of nothing always does, see
    the callers); one above the module's cap on COST is refused loudly
    rather than counted as a denial. The refusal is a ``ValueError``, not
    one of the storage's ``base_exceptions``, so ``wrap_exceptions`` does
    not turn it into a ``StorageError``."""
    if amount > limit:
        return False
    if amount > MAX_COST:
        raise ValueError(f"redis-swl records at most {MAX_COST} units per hit, not {amount}")
    return True


def _moving_window(verdict: Verdict, now: float, expiry: int) -> Tuple[float, int]:
    """``limits``' (start, count) of a moving window, from a peek of one
    unit with OLDEST: the count is what the peek left unspent (a peek that
    admits counts its own unit), capped at the limit as ``limits`` caps its
    lists; the start is the oldest entry in the window, on this machine's
    clock (the reply's waits are relative, so the clocks need not agree),
    or now for an empty window."""
    if verdict.allowed:
        count = verdict.limit - verdict.remaining - 1
    else:
        count = verdict.limit
    oldest_after_ms = verdict.oldest_after_ms or 0
    if count == 0 or oldest_after_ms == 0:
        return now, count
    return now + oldest_after_ms / 1000 - expiry, count


def _denial_cache(setting: Union[int, DenialCache, None]) -> Optional[DenialCache]:
    """The storage's denial cache: none for 0 or None (the default), one of
    that many keys for a number, or the one given."""
    if isinstance(setting, DenialCache):
        return setting
    if not setting:
        return None
    return DenialCache(setting)


def _sync_uri(uri: str) -> str:
    return uri.replace("swl+", "", 1)


class _SWLMovingWindow:
    """The moving window of a ``limits`` Redis storage, by redis-swl."""

    swl: SWL
    key_suffix: str
    prefixed_key: Any  # limits' RedisStorage.prefixed_key
    get_connection: Any

    def log_key(self, key: str) -> str:
        """The key of the log for ``limits``' ``key``."""
        return self.prefixed_key(key) + self.key_suffix

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount <= 0:
            return True  # records nothing, as limits' own does
        if not _cost_fits(limit, amount):
            return False
        return self.swl.check(self.log_key(key), expiry * 1000, limit, cost=amount).allowed

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        now = time.time()
        verdict = self.swl.peek(self.log_key(key), expiry * 1000, limit, oldest=True)
        return _moving_window(verdict, now, expiry)

    def clear(self, key: str) -> None:
        """Clears ``key`` for every strategy: ``limits``' own counter and
        the log (a cluster client deletes each on its node), and drops the
        log's cached denials."""
        try:
            self.get_connection().delete(*_names(self.prefixed_key(key), self.key_suffix))
        finally:
            if self.swl.denial_cache is not None:
                self.swl.denial_cache.forget(self.log_key(key))

    def reset(self) -> Optional[int]:
        """``limits``' reset (every key under the prefix), dropping every
        cached denial."""
        try:
            return super().reset()  # type: ignore[misc]
        finally:
            if self.swl.denial_cache is not None:
                self.swl.denial_cache.clear()


def _names(prefixed: str, suffix: str) -> Tuple[str, ...]:
    return (prefixed, prefixed + suffix) if suffix else (prefixed,)


class SWLRedisStorage(_SWLMovingWindow, _RedisStorage):
    """``limits``' :class:`~limits.storage.RedisStorage`, its moving window
    by redis-swl. ``swl_encoding`` is how the function library, where this
    storage loads it, stores new logs (``"compact"``, the default,
    ``"compact1"`` or ``"zset"``, as :class:`~redis_swl.SWL` takes them);
    ``key_suffix`` what a log's key adds to ``limits``' name (``""``: the
    name itself, as in redis-swl 0.3); ``swl_denial_cache`` the keys of a
    denial cache for hits (0, the default: none), or a
    :class:`~redis_swl.DenialCache`."""

    STORAGE_SCHEME = ["swl+redis", "swl+rediss", "swl+redis+unix"]

    def __init__(self, uri: str, *args: Any, swl_encoding: str = "compact",
                 key_suffix: str = KEY_SUFFIX,
                 swl_denial_cache: Union[int, DenialCache, None] = 0, **options: Any) -> None:
        super().__init__(_sync_uri(uri), *args, **options)
        self.swl = SWL(self.storage, encoding=swl_encoding,
                   denial_cache=_denial_cache(swl_denial_cache))
        self.key_suffix = key_suffix


class SWLRedisClusterStorage(_SWLMovingWindow, _RedisClusterStorage):
    """``limits``' :class:`~limits.storage.RedisClusterStorage`, its moving
    window by redis-swl."""

    STORAGE_SCHEME = ["swl+redis+cluster"]

    def __init__(self, uri: str, *args: Any, swl_encoding: str = "compact",
                 key_suffix: str = KEY_SUFFIX,
                 swl_denial_cache: Union[int, DenialCache, None] = 0, **options: Any) -> None:
        super().__init__(_sync_uri(uri), *args, **options)
        self.swl = SWL(self.storage, encoding=swl_encoding,
                   denial_cache=_denial_cache(swl_denial_cache))
        self.key_suffix = key_suffix


class _AsyncSWLMovingWindow:
    """The moving window of a ``limits`` asyncio Redis storage, by redis-swl."""

    swl: AsyncSWL
    key_suffix: str
    bridge: Any

    def log_key(self, key: str) -> str:
        """The key of the log for ``limits``' ``key``."""
        return self.bridge.prefixed_key(key) + self.key_suffix

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount <= 0:
            return True
        if not _cost_fits(limit, amount):
            return False
        verdict = await self.swl.check(self.log_key(key), expiry * 1000, limit, cost=amount)
        return verdict.allowed

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        now = time.time()
        verdict = await self.swl.peek(self.log_key(key), expiry * 1000, limit, oldest=True)
        return _moving_window(verdict, now, expiry)

    async def clear(self, key: str) -> None:
        """See :meth:`SWLRedisStorage.clear`."""
        names = _names(self.bridge.prefixed_key(key), self.key_suffix)
        try:
            await self.bridge.get_connection().delete(*names)
        finally:
            if self.swl.denial_cache is not None:
                self.swl.denial_cache.forget(self.log_key(key))

    async def reset(self) -> Optional[int]:
        """See :meth:`SWLRedisStorage.reset`."""
        try:
            return await super().reset()  # type: ignore[misc]
        finally:
            if self.swl.denial_cache is not None:
                self.swl.denial_cache.clear()


class AsyncSWLRedisStorage(_AsyncSWLMovingWindow, _AsyncRedisStorage):
    """``limits``' asyncio :class:`~limits.aio.storage.RedisStorage` over
    redis-py's asyncio client, its moving window by redis-swl."""

    STORAGE_SCHEME = ["async+swl+redis", "async+swl+rediss", "async+swl+redis+unix"]

    def __init__(self, uri: str, *args: Any, swl_encoding: str = "compact",
                 key_suffix: str = KEY_SUFFIX,
                 swl_denial_cache: Union[int, DenialCache, None] = 0, **options: Any) -> None:
        options["implementation"] = "redispy"
        super().__init__(_sync_uri(uri), *args, **options)
        self.swl = AsyncSWL(self.bridge.get_connection(), encoding=swl_encoding,
                        denial_cache=_denial_cache(swl_denial_cache))
        self.key_suffix = key_suffix


class AsyncSWLRedisClusterStorage(_AsyncSWLMovingWindow, _AsyncRedisClusterStorage):
    """``limits``' asyncio :class:`~limits.aio.storage.RedisClusterStorage`
    over redis-py's asyncio cluster client, its moving window by redis-swl."""

    STORAGE_SCHEME = ["async+swl+redis+cluster"]

    def __init__(self, uri: str, *args: Any, swl_encoding: str = "compact",
                 key_suffix: str = KEY_SUFFIX,
                 swl_denial_cache: Union[int, DenialCache, None] = 0, **options: Any) -> None:
        options["implementation"] = "redispy"
        super().__init__(_sync_uri(uri), *args, **options)
        self.swl = AsyncSWL(self.bridge.get_connection(), encoding=swl_encoding,
                        denial_cache=_denial_cache(swl_denial_cache))
        self.key_suffix = key_suffix


F = TypeVar("F", bound=Callable[..., Any])


def _refusing_costs_above_the_cap(test: F) -> F:
    """``limits``' ``MovingWindowRateLimiter.test``, refusing on these
    storages a cost that ``hit`` refuses (the storage's
    ``get_moving_window`` is not given the cost); unchanged on any other."""
    if getattr(test, "_swl_refuses_costs", False):
        return test

    @functools.wraps(test)
    def refusing(self: Any, item: Any, *identifiers: str, cost: int = 1) -> Any:
        if isinstance(self.storage, (_SWLMovingWindow, _AsyncSWLMovingWindow)):
            _cost_fits(item.amount, cost)
        return test(self, item, *identifiers, cost=cost)

    refusing._swl_refuses_costs = True  # type: ignore[attr-defined]
    return refusing  # type: ignore[return-value]


def _async_refusing_costs_above_the_cap(test: F) -> F:
    """:func:`_refusing_costs_above_the_cap` for ``limits.aio``."""
    if getattr(test, "_swl_refuses_costs", False):
        return test

    @functools.wraps(test)
    async def refusing(self: Any, item: Any, *identifiers: str, cost: int = 1) -> Any:
        if isinstance(self.storage, (_SWLMovingWindow, _AsyncSWLMovingWindow)):
            _cost_fits(item.amount, cost)
        return await test(self, item, *identifiers, cost=cost)

    refusing._swl_refuses_costs = True  # type: ignore[attr-defined]
    return refusing  # type: ignore[return-value]


_strategies.MovingWindowRateLimiter.test = _refusing_costs_above_the_cap(  # type: ignore[method-assign]
    _strategies.MovingWindowRateLimiter.test)
_async_strategies.MovingWindowRateLimiter.test = _async_refusing_costs_above_the_cap(  # type: ignore[method-assign]
    _async_strategies.MovingWindowRateLimiter.test)
