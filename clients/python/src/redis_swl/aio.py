"""The client over redis-py's ``redis.asyncio.Redis`` and ``RedisCluster``."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Optional, Tuple, TypeVar, Union

from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from .cache import DenialCache, clock
from ._protocol import (
    CHECK,
    CHANGES,
    ENTRIES,
    MAX_LIMIT,
    PROBE,
    VERSION_CHECK,
    Commands,
    Usage,
    Verdict,
    entries_of,
    explained,
    is_library_present,
    is_missing_function,
    is_unknown_command,
    probe_finds_library,
    uncertain,
)

T = TypeVar("T")


class _Probe:
    """One probe of the server (see :meth:`AsyncSWL._uses_library`): the
    calls made while it is out wait for ``answered``."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.answered = asyncio.Event()
        self.library = False
        self.error: Optional[BaseException] = None
        self.task: Optional["asyncio.Task[None]"] = None


class AsyncSWL(Commands[Awaitable[Verdict]]):
    """:class:`redis_swl.SWL` for asyncio: the same methods, awaited.

    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new logs.
    :param denial_cache: as :class:`redis_swl.SWL`'s (none by default).

    As :class:`redis_swl.SWL`, it sends a check or refund once and raises
    :class:`~redis_swl.UncertainOutcomeError` where it failed after it was
    sent. A call cancelled while its command is out (``asyncio.wait_for``,
    a task cancelled) raises ``CancelledError`` as it is: it, too, may or
    may not have been recorded.

    Calls made before the client knows whether the server has the module
    (one probe, shared) wait for it and then go on in the order they were
    made: none goes ahead of an earlier one (on connections of their own
    that redis-py opens for them, they race as any such calls do).
    """

    def __init__(self, client: Any, *, encoding: str = "compact",
                 denial_cache: Optional[DenialCache] = None) -> None:
        super().__init__(client, encoding=encoding, denial_cache=denial_cache)
        self._probe: Optional[_Probe] = None
        #: Calls that waited for the probe and have not gone on yet.
        self._waiting = 0

    def _run(
        self, names: Tuple[str, str], key: str, args: List[Union[int, str]]
    ) -> Awaitable[Verdict]:
        return self._explained(names, key, args)

    async def _cached_check(self, cache: DenialCache, key: str, windows: List[Tuple[int, int]],
                            cost: int, args: List[Union[int, str]]) -> Verdict:
        cached = cache.answer(key, windows, cost)
        if cached is not None:
            return cached
        ticket, sent = cache.ticket(), clock()
        verdict = await self._explained(CHECK, key, args)
        cache.keep(key, windows, cost, verdict, ticket, sent)
        return verdict

    async def _forgetting(self, cache: DenialCache, key: str,
                          call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        finally:
            cache.forget(key)

    async def _deleted(self, key: str) -> None:
        await self.client.delete(key)

    async def _explained(
        self, names: Tuple[str, str], key: str, args: List[Union[int, str]]
    ) -> Verdict:
        try:
            return Verdict.from_reply(await self._call(names, key, args))
        except ResponseError as error:
            plain = explained(error, args, self.uses_library)
            if plain is error:
                raise
            raise plain from error

    async def _call(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Any:
        """See :meth:`redis_swl.SWL._call`."""
        command, function = names
        send = self._once if names in CHANGES else self._retried
        if not await self._uses_library(key):
            try:
                return await send(key, command, key, *args)
            except RedisError as error:
                # The module went away (unknown commands are not carried out).
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return await send(key, "FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        await self.load_library()
        try:
            return await send(key, "FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        # See SWL._call: an older library that lacks the function.
        await self.load_library(replace=True)
        return await send(key, "FCALL", function, 1, key, *args)

    async def _uses_library(self, key: str) -> bool:
        """Whether calls go to the library: asked of the server once, by
        one probe in a task of its own (a caller cancelled while waiting
        does not cancel it for the others). The calls made meanwhile wait
        for it and are woken in the order they came; a call made once it
        has answered, while some of those have not gone on yet, lets them
        go first."""
        if self._probed:
            if self._waiting:
                await asyncio.sleep(0)
            return self.uses_library
        probe = self._probe
        if probe is None or probe.loop is not asyncio.get_running_loop():
            probe = self._probe = _Probe()
            probe.task = asyncio.ensure_future(self._run_probe(probe, key))
        self._waiting += 1
        try:
            await probe.answered.wait()
        finally:
            self._waiting -= 1
        if probe.error is not None:
            raise probe.error
        return probe.library

    async def _run_probe(self, probe: _Probe, key: str) -> None:
        """See :meth:`redis_swl.SWL._probe`: a failure goes to each waiting
        call, and the next call probes again."""
        try:
            try:
                await self._once(key, *PROBE, probe=True)
            except ResponseError as error:
                probe.library = probe_finds_library(error)
            if probe.library:
                # See SWL._prepare_library.
                try:
                    await self.load_library()
                except ResponseError:
                    pass
            self.uses_library = probe.library
            self._probed = True
        except (Exception, asyncio.CancelledError) as error:  # each waiting call raises it
            probe.error = error
            self._probe = None
        finally:
            probe.answered.set()

    async def entries(self, key: str) -> List[int]:
        """See :meth:`redis_swl.SWL.entries`."""
        return entries_of(await self._call(ENTRIES, key, []))

    async def units(self, key: str, window_ms: int) -> int:
        """See :meth:`redis_swl.SWL.units`."""
        return MAX_LIMIT - 1 - (await self.peek(key, window_ms, MAX_LIMIT)).remaining

    async def usage(self, key: str, window_ms: int) -> Usage:
        """See :meth:`redis_swl.SWL.usage`: the two peeks, sent together."""
        counted, log = await asyncio.gather(
            self.peek(key, window_ms, MAX_LIMIT), self.peek(key, window_ms, 0))
        return Usage(MAX_LIMIT - 1 - counted.remaining, log.reset_after_ms)

    async def _retried(self, key: str, *command: Any) -> Any:
        return await self.client.execute_command(*command)

    async def _once(self, key: str, *command: Any, probe: bool = False) -> Any:
        """See :meth:`redis_swl.SWL._once`."""
        client = self.client
        await client.initialize()
        if hasattr(client, "get_node_from_key"):
            try:
                return await client.execute_command(
                    *command, target_nodes=client.get_node_from_key(key))
            except (ConnectionError, TimeoutError) as error:
                if probe:
                    raise
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
                if probe:
                    raise
                raise uncertain(command[0], key, error) from error
        finally:
            if lock is not None:
                lock.release()
            if not single:
                await client.connection_pool.release(connection)

    async def load_library(self, replace: bool = False) -> None:
        """See :meth:`redis_swl.SWL.load_library`: it never replaces a
        library newer than the one this package carries."""
        for options in self._library_nodes():
            try:
                answer: Any = await self.client.execute_command(*VERSION_CHECK, **options)
            except ResponseError as error:
                answer = error
            command = self._library_load(replace, answer)
            if command is None:
                continue
            try:
                await self.client.execute_command(*command, **options)
            except ResponseError as error:
                if not is_library_present(error):
                    raise
