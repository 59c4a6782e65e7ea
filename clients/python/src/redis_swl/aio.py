"""The client over redis-py's ``redis.asyncio.Redis`` and ``RedisCluster``."""

from __future__ import annotations

from typing import Awaitable, List, Tuple, Union

from redis.exceptions import RedisError, ResponseError

from ._protocol import (
    Commands,
    Verdict,
    explained,
    is_library_present,
    is_missing_function,
    is_unknown_command,
)


class AsyncSWL(Commands[Awaitable[Verdict]]):
    """:class:`redis_swl.SWL` for asyncio: the same methods, awaited.

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new logs.
    """

    def _run(
        self, names: Tuple[str, str], key: str, args: List[Union[int, str]]
    ) -> Awaitable[Verdict]:
        return self._explained(names, key, args)

    async def _explained(
        self, names: Tuple[str, str], key: str, args: List[Union[int, str]]
    ) -> Verdict:
        try:
            return await self._call(names, key, args)
        except ResponseError as error:
            plain = explained(error, args, self.uses_library)
            if plain is error:
                raise
            raise plain from error

    async def _call(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Verdict:
        command, function = names
        if not self.uses_library:
            try:
                return Verdict.from_reply(await self.client.execute_command(command, key, *args))
            except RedisError as error:
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return Verdict.from_reply(await self.client.fcall(function, 1, key, *args))
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        await self.load_library()
        return Verdict.from_reply(await self.client.fcall(function, 1, key, *args))

    async def load_library(self, replace: bool = False) -> None:
        """See :meth:`redis_swl.SWL.load_library`."""
        for command, options in self._library_loads(replace):
            try:
                await self.client.execute_command(*command, **options)
            except ResponseError as error:
                if not is_library_present(error):
                    raise
