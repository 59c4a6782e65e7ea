"""The denial cache: after Redis denies a check, the same key, windows and a
cost at least as large are denied in the process until the reply's
``retry_after_ms`` has passed, without asking Redis again. A denial records
nothing, so until then the log can only admit such a call if entries leave
it some other way (a refund, a reset, a check with narrower windows, a
failover to a lagging replica, a step of the server's clock); a refund or
reset through the same client drops the key's entries, the others keep the
cache stricter than Redis for at most the cached wait. The cache never
admits. (The Rust crate's ``DenialCache``, in Python.)"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

from ._protocol import Verdict, Window

#: Denials cached for different windows of one key, at most: one limiter
#: uses one set of windows per key, so more is a sign of several.
PER_KEY = 4


def clock() -> int:
    """The cache's clock: monotonic nanoseconds (whole numbers, so that the
    waits it gives back are exact)."""
    return time.monotonic_ns()


@dataclasses.dataclass
class _Denial:
    #: The first window, then the others, as the call gave them.
    windows: Tuple[Window, ...]
    cost: int
    verdict: Verdict
    #: When the denied call could first be admitted, on :func:`clock`.
    until: int

    def at(self, now: int) -> Verdict:
        """The denial as it stands at ``now`` (before ``until``): the waits
        less the time since, the rest as Redis gave it."""
        left_ms = -(-max(0, self.until - now) // 1_000_000)
        elapsed = max(0, self.verdict.retry_after_ms - left_ms)
        return dataclasses.replace(
            self.verdict, retry_after_ms=left_ms,
            reset_after_ms=max(0, self.verdict.reset_after_ms - elapsed))


@dataclasses.dataclass
class _Entry:
    #: The forget count when the key was last forgotten (0: never).
    forgotten: int
    denials: List[_Denial]


class DenialCache:
    """Recent denials by key, for at most ``max_keys`` keys (the least
    recently used key is forgotten first; 0 caches nothing). Safe to share
    between threads and asyncio tasks: each operation holds a lock for a
    lookup and never waits on anything else.

    The ASGI :class:`~redis_swl.asgi.RateLimiter` has one by default
    (:attr:`DEFAULT_KEYS` keys); :class:`~redis_swl.SWL`,
    :class:`~redis_swl.AsyncSWL` and the ``limits`` storages have none
    unless given one. A check with ``penalize`` or ``now_ms`` neither uses
    nor fills it, and a denial that waiting cannot help
    (``retry_after_ms`` -1: a cost above a limit) is not cached.

    >>> cache = DenialCache()
    >>> len(cache)
    0
    """

    #: The number of keys the middleware's cache remembers by default.
    DEFAULT_KEYS = 10_000

    def __init__(self, max_keys: int = DEFAULT_KEYS) -> None:
        if not isinstance(max_keys, int) or max_keys < 0:
            raise ValueError(f"max_keys must be an integer of 0 or more, not {max_keys!r}")
        self.max_keys = max_keys
        self._lock = threading.Lock()
        #: Keys in order of use, the least recently used first.
        self._keys: "OrderedDict[str, _Entry]" = OrderedDict()
        #: Forgets so far: tickets are taken from it.
        self._forgets = 0
        #: The latest forget of a key no longer remembered: a ticket older
        #: than that may be from before its forget, so it keeps nothing.
        self._forgotten_before = 0

    def __len__(self) -> int:
        """Keys remembered (with denials, or forgotten lately)."""
        with self._lock:
            return len(self._keys)

    def __repr__(self) -> str:
        return f"DenialCache(max_keys={self.max_keys}, keys={len(self)})"

    def forget(self, key: str) -> None:
        """Drops ``key``'s denials: its log lost entries another way than
        the cache can see (the clients' own refunds and resets do this
        themselves). A check sent before and answered after does not put
        its denial back."""
        with self._lock:
            if self.max_keys == 0:
                self._forgets += 1
                self._forgotten_before = self._forgets
                return
            if key not in self._keys:
                # Kept, empty, so that checks already sent keep nothing.
                self._insert(key, _Entry(0, []))
            self._forget_locked(key)

    def clear(self) -> None:
        """Drops every key's denials (as :meth:`forget` does one's)."""
        with self._lock:
            self._forgets += 1
            self._forgotten_before = self._forgets
            self._keys.clear()

    def answer(self, key: str, windows: Sequence[Window], cost: int,
               now: Optional[int] = None) -> Optional[Verdict]:
        """The cached answer to a check of ``cost`` against ``windows`` (the
        first, then the others) on ``key``, if a denial of the same windows
        and at most that cost is still waiting at ``now`` (:func:`clock`)."""
        now = clock() if now is None else now
        wanted = tuple(windows)
        with self._lock:
            entry = self._keys.get(key)
            if entry is None:
                return None
            entry.denials = [d for d in entry.denials if now < d.until]
            verdict = next((d.at(now) for d in entry.denials
                            if d.windows == wanted and cost >= d.cost), None)
            if not entry.denials and entry.forgotten == 0:
                del self._keys[key]
            elif verdict is not None:
                self._keys.move_to_end(key)
            return verdict

    def ticket(self) -> int:
        """Taken before a check is sent, given back with its verdict to
        :meth:`keep`: a forget in between wins."""
        with self._lock:
            return self._forgets

    def keep(self, key: str, windows: Sequence[Window], cost: int, verdict: Verdict,
             ticket: int, sent: int) -> None:
        """Keeps ``verdict`` of a check of ``cost`` against ``windows`` on
        ``key`` if it is a denial that waiting ends; an admission drops the
        key's denials. ``sent`` is when the check was sent (:func:`clock`):
        Redis decided after it, so the wait counted from it ends no later
        than Redis's."""
        if verdict.allowed:
            # Entries were added: the key's denials still deny, but their
            # remaining and reset are of the log before.
            with self._lock:
                if key in self._keys:
                    self._forget_locked(key)
            return
        if verdict.retry_after_ms < 1:
            return
        denial = _Denial(tuple(windows), cost, verdict,
                         sent + verdict.retry_after_ms * 1_000_000)
        with self._lock:
            if self.max_keys == 0:
                return
            entry = self._keys.get(key)
            forgotten = self._forgotten_before if entry is None else entry.forgotten
            if forgotten > ticket:
                return
            if entry is None:
                self._insert(key, _Entry(0, [denial]))
                return
            # The newest denial of these windows replaces the one before.
            entry.denials = [d for d in entry.denials
                             if d.windows != denial.windows and sent < d.until]
            if len(entry.denials) == PER_KEY:
                entry.denials.pop(0)
            entry.denials.append(denial)
            self._keys.move_to_end(key)

    def _forget_locked(self, key: str) -> None:
        self._forgets += 1
        entry = self._keys[key]
        entry.denials.clear()
        entry.forgotten = self._forgets
        self._keys.move_to_end(key)

    def _insert(self, key: str, entry: _Entry) -> None:
        self._keys[key] = entry
        self._keys.move_to_end(key)
        while len(self._keys) > self.max_keys:
            _, oldest = self._keys.popitem(last=False)
            self._forgotten_before = max(self._forgotten_before, oldest.forgotten)
