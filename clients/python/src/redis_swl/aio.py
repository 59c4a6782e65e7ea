"""The client over redis-py's ``redis.asyncio.Redis`` and ``RedisCluster``."""

from __future__ import annotations

from typing import Any, Awaitable, List, Tuple, Union

from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from ._protocol import (
    CHANGES,
    Commands,
    Verdict,
    explained,
    is_library_present,
    is_missing_function,
    is_unknown_command,
    uncertain,
)


class AsyncSWL(Commands[Awaitable[Verdict]]):
    """:class:`redis_swl.SWL` for asyncio: the same methods, awaited.

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new logs.

    As :class:`redis_swl.SWL`, it sends a check or refund once and raises
    :class:`~redis_swl.UncertainOutcomeError` where it failed after it was
    sent. A call cancelled while its command is out (``asyncio.wait_for``,
    a task cancelled) raises ``CancelledError`` as it is: it, too, may or
    may not have been recorded.
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
        send = self._once if names in CHANGES else self._retried
        if not self.uses_library:
            try:
                return Verdict.from_reply(await send(key, command, key, *args))
            except RedisError as error:
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return Verdict.from_reply(await send(key, "FCALL", function, 1, key, *args))
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        await self.load_library()
        return Verdict.from_reply(await send(key, "FCALL", function, 1, key, *args))

    async def _retried(self, key: str, *command: Any) -> Any:
        return await self.client.execute_command(*command)

    async def _once(self, key: str, *command: Any) -> Any:
        """See :meth:`redis_swl.SWL._once`."""
        client = self.client
        await client.initialize()
        if hasattr(client, "get_node_from_key"):
            try:
                return await client.execute_command(
                    *command, target_nodes=client.get_node_from_key(key))
            except (ConnectionError, TimeoutError) as error:
                raise uncertain(command[0], key, error) from error
        single = client.connection is not None
        connection = client.connection if single else await client.connection_pool.get_connection()
        lock = getattr(client, "_single_conn_lock", None) if single else None
        if lock is not None:
            await lock.acquire()
        try:
            await connection.connect()
            await connection.check_health()
            try:
                await connection.send_command(*command, check_health=False)
                return await client.parse_response(connection, command[0])
            except (ConnectionError, TimeoutError) as error:
                await connection.disconnect()
                raise uncertain(command[0], key, error) from error
        finally:
            if lock is not None:
                lock.release()
            if not single:
                await client.connection_pool.release(connection)

    async def load_library(self, replace: bool = False) -> None:
        """See :meth:`redis_swl.SWL.load_library`."""
        for command, options in self._library_loads(replace):
            try:
                await self.client.execute_command(*command, **options)
            except ResponseError as error:
                if not is_library_present(error):
                    raise
