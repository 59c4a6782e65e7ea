"""The client over redis-py's ``redis.asyncio.Redis`` and ``RedisCluster``."""

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


class AsyncSWL:
    """:class:`redis_swl.SWL` for asyncio: the same methods, awaited.

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new logs.
    """

    def __init__(self, client: Any, *, encoding: str = "zset") -> None:
        library_source(encoding)
        self.client = client
        self.encoding = encoding
        self.uses_library = False

    async def check(
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
        """See :meth:`redis_swl.SWL.check`."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, penalize=penalize
        )
        return Verdict.from_reply(await self._call(CHECK, key, args))

    async def peek(
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
        """See :meth:`redis_swl.SWL.peek`."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, oldest=oldest
        )
        return Verdict.from_reply(await self._call(PEEK, key, args))

    async def refund(
        self,
        key: str,
        window_ms: int,
        limit: int,
        *,
        cost: int = 1,
        windows: Sequence[Window] = (),
        now_ms: Optional[int] = None,
    ) -> Verdict:
        """See :meth:`redis_swl.SWL.refund`."""
        args = request_args(window_ms, limit, now_ms=now_ms, cost=cost, windows=windows)
        return Verdict.from_reply(await self._call(REFUND, key, args))

    async def _call(self, names: Tuple[str, str], key: str, args: list) -> Any:
        command, function = names
        if not self.uses_library:
            try:
                return await self.client.execute_command(command, key, *args)
            except RedisError as error:
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return await self.client.execute_command("FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        await self.load_library()
        return await self.client.execute_command("FCALL", function, 1, key, *args)

    async def load_library(self) -> None:
        """See :meth:`redis_swl.SWL.load_library`."""
        try:
            await self.client.function_load(library_source(self.encoding))
        except ResponseError as error:
            if not is_library_present(error):
                raise
