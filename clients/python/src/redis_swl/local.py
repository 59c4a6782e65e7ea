"""A sliding-window log in process memory, for deciding while Redis cannot
answer (the middleware's "local" policy). It gives SWL.CHECK's and
SWL.REFUND's replies for the same calls: the clients' shared test vectors
(clients/vectors/local-limiter.json, the module's own replies) hold it to
that. Calls are expected in time order, as a clock gives them. Each costs
O(log n) plus the entries it trims or records, so a client at a large
limit cannot slow the process while Redis is down."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence

from ._protocol import MAX_WINDOWS, Verdict, Window

__all__ = ["LocalLimiter", "MAX_WINDOWS"]


class _Log:
    """One client's entries, ascending. The head is dropped by moving
    ``start``, and the list is compacted only when half of it is dropped,
    so trimming costs O(1) amortised rather than a copy of the log."""

    __slots__ = ("times", "start")

    def __init__(self) -> None:
        self.times: List[int] = []
        self.start = 0

    def __len__(self) -> int:
        return len(self.times) - self.start

    def __getitem__(self, index: int) -> int:
        return self.times[self.start + index]

    def count_through(self, time_ms: int) -> int:
        """How many entries are at or before ``time_ms``."""
        return bisect.bisect_right(self.times, time_ms, self.start) - self.start

    def drop_through(self, time_ms: int) -> None:
        self.start = bisect.bisect_right(self.times, time_ms, self.start)
        if self.start > 1024 and self.start * 2 > len(self.times):
            del self.times[:self.start]
            self.start = 0

    def drop_newest(self, n: int) -> None:
        del self.times[max(self.start, len(self.times) - n):]

    def add(self, time_ms: int, cost: int) -> None:
        at = bisect.bisect_right(self.times, time_ms, self.start)
        self.times[at:at] = [time_ms] * cost


def _until_left(time_ms: int, window_ms: int, now_ms: int) -> int:
    """Milliseconds until an entry at `time_ms` leaves a window: 0 if out."""
    return max(0, time_ms + window_ms - now_ms)


class LocalLimiter:
    """Logs for at most ``max_clients`` keys; the least recently used key
    is forgotten first (a forgotten client starts afresh)."""

    def __init__(self, max_clients: int = 10_000) -> None:
        self.max_clients = max_clients
        self._logs: "OrderedDict[str, _Log]" = OrderedDict()

    def check(self, key: str, windows: Sequence[Window], now_ms: int, cost: int = 1) -> Verdict:
        """SWL.CHECK: trim, count, record if every window has room. More than
        :data:`MAX_WINDOWS` windows raise ``ValueError``, as the module
        refuses them."""
        log = self._trimmed(key, windows, now_ms)
        counts = self._counts(log, windows, now_ms)
        allowed = all(count + cost <= limit for count, (_, limit) in zip(counts, windows))
        if allowed:
            log.add(now_ms, cost)
            counts = [count + cost for count in counts]
        verdict = self._verdict(log, windows, counts, now_ms, cost, allowed, pending=False)
        self._keep(key, log)
        return verdict

    def refund(self, key: str, windows: Sequence[Window], now_ms: int, cost: int = 1) -> Verdict:
        """SWL.REFUND: trim, give back up to ``cost`` newest entries, and
        reply what a peek replies then."""
        log = self._trimmed(key, windows, now_ms)
        log.drop_newest(cost)
        counts = self._counts(log, windows, now_ms)
        allowed = all(count + cost <= limit for count, (_, limit) in zip(counts, windows))
        if allowed:
            counts = [count + cost for count in counts]
        verdict = self._verdict(log, windows, counts, now_ms, cost, allowed, pending=allowed)
        self._keep(key, log)
        return verdict

    def forget(self, key: str) -> None:
        """Drops ``key``'s log (a reset)."""
        self._logs.pop(key, None)

    def _trimmed(self, key: str, windows: Sequence[Window], now_ms: int) -> _Log:
        if len(windows) > MAX_WINDOWS:
            # As the module refuses the call, before anything changes.
            raise ValueError(f"windows: at most {MAX_WINDOWS} per call, not {len(windows)}")
        widest = max(ms for ms, _ in windows)
        log = self._logs.pop(key, None) or _Log()
        log.drop_through(now_ms - widest)
        return log

    def _keep(self, key: str, log: _Log) -> None:
        if log and self.max_clients > 0:
            self._logs[key] = log
            while len(self._logs) > self.max_clients:
                self._logs.popitem(last=False)

    @staticmethod
    def _counts(log: _Log, windows: Sequence[Window], now_ms: int) -> List[int]:
        return [len(log) - log.count_through(now_ms - ms) for ms, _ in windows]

    @staticmethod
    def _verdict(log: _Log, windows: Sequence[Window], counts: List[int], now_ms: int,
                 cost: int, allowed: bool, pending: bool) -> Verdict:
        """As the module's: the window with the least left when admitted,
        the one that waits longest (-1, never, the longest) when denied."""
        widest = max(ms for ms, _ in windows)
        binding: Optional[Dict[str, int]] = None
        for (window_ms, limit), count in zip(windows, counts):
            described = {"limit": limit, "remaining": max(0, limit - count), "retry": -1,
                         "window_ms": window_ms}
            if allowed:
                if binding is None or described["remaining"] < binding["remaining"]:
                    binding = described
                continue
            if count + cost <= limit:
                continue
            if cost > limit:
                described["retry"] = -1
            else:
                rank = len(log) - (limit - cost + 1)
                described["retry"] = max(1, _until_left(log[rank], window_ms, now_ms)) \
                    if 0 <= rank < len(log) else 1
            if binding is None or _waits_longer(described["retry"], binding["retry"]):
                binding = described
        if binding is None:
            (window_ms, limit), count = windows[0], counts[0]
            binding = {"limit": limit, "remaining": max(0, limit - count),
                       "retry": -1 if allowed else 1, "window_ms": window_ms}
        last = log[len(log) - 1] if len(log) else None
        newest: Optional[int] = last if last is not None and last > now_ms - widest else None
        if pending:
            newest = now_ms if newest is None else max(newest, now_ms)
        reset = 0 if newest is None else _until_left(newest, widest, now_ms)
        return Verdict(allowed, binding["limit"], binding["remaining"], binding["retry"],
                       reset, binding["window_ms"])


def _waits_longer(retry: int, than: int) -> bool:
    """-1 (waiting cannot help) outranks any wait; otherwise the longer."""
    if than == -1:
        return False
    if retry == -1:
        return True
    return retry > than
