"""The client over redis-py's ``redis.Redis`` and ``redis.cluster.RedisCluster``."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from redis.exceptions import RedisError, ResponseError

from ._protocol import (
    CHECK,
    PEEK,
    REFUND,
    Verdict,
    Window,
    is_library_present,
    is_missing_function,
    is_unknown_command,
    library_source,
    request_args,
)


class SWL:
    """Sliding-window-log rate limiting on one Redis (or Redis Cluster).

    Each call is one command: SWL.CHECK, SWL.PEEK or SWL.REFUND where the
    server has the module, otherwise ``FCALL`` of the function library,
    which the client loads itself (``FUNCTION LOAD``, once) where it is
    missing. The replies are the same either way.

    :param client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new
        logs: ``"zset"`` (sorted sets, as the module's default) or
        ``"compact"``. The module's own setting is ``swl.encoding``.

    >>> limiter = SWL(redis.Redis())                      # doctest: +SKIP
    >>> limiter.check("rl:alice", 60_000, 100).allowed    # doctest: +SKIP
    True
    """

    def __init__(self, client: Any, *, encoding: str = "zset") -> None:
        library_source(encoding)  # refuses an unknown encoding now
        self.client = client
        self.encoding = encoding
        #: True once the server answered that it has no module.
        self.uses_library = False

    def check(
        self,
        key: str,
        window_ms: int,
        limit: int,
        *,
        cost: int = 1,
        windows: Sequence[Window] = (),
        penalize: bool = False,
        now_ms: Optional[int] = None,
    ) -> Verdict:
        """Checks a request of ``cost`` units against ``limit`` per
        ``window_ms`` (and any further ``windows``) and records it if
        admitted. ``now_ms`` defaults to the server's clock."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, penalize=penalize
        )
        return Verdict.from_reply(self._call(CHECK, key, args))

    def peek(
        self,
        key: str,
        window_ms: int,
        limit: int,
        *,
        cost: int = 1,
        windows: Sequence[Window] = (),
        oldest: bool = False,
        now_ms: Optional[int] = None,
    ) -> Verdict:
        """What :meth:`check` would reply now, changing nothing. With
        ``oldest``, the verdict's ``oldest_after_ms`` is set too."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, oldest=oldest
        )
        return Verdict.from_reply(self._call(PEEK, key, args))

    def refund(
        self,
        key: str,
        window_ms: int,
        limit: int,
        *,
        cost: int = 1,
        windows: Sequence[Window] = (),
        now_ms: Optional[int] = None,
    ) -> Verdict:
        """Gives back up to ``cost`` of the newest recorded units (a request
        that should not count after all) and replies what :meth:`peek`
        replies then."""
        args = request_args(window_ms, limit, now_ms=now_ms, cost=cost, windows=windows)
        return Verdict.from_reply(self._call(REFUND, key, args))

    def _call(self, names: Tuple[str, str], key: str, args: list) -> Any:
        command, function = names
        if not self.uses_library:
            try:
                return self.client.execute_command(command, key, *args)
            except RedisError as error:
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return self.client.execute_command("FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        self.load_library()
        return self.client.execute_command("FCALL", function, 1, key, *args)

    def load_library(self) -> None:
        """Loads the function library (on every primary of a cluster),
        unless it is there already."""
        try:
            self.client.function_load(library_source(self.encoding))
        except ResponseError as error:
            if not is_library_present(error):
                raise
