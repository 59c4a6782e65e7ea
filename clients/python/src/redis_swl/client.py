"""The client over redis-py's ``redis.Redis`` and ``redis.cluster.RedisCluster``."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

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


class SWL(Commands[Verdict]):
    """Sliding-window-log rate limiting on one Redis (or Redis Cluster):
    :meth:`check`, :meth:`peek` and :meth:`refund`, each returning a
    :class:`Verdict`.

    Each call is one command: SWL.CHECK, SWL.PEEK or SWL.REFUND where the
    server has the module, otherwise ``FCALL`` of the function library,
    which the client loads itself (``FUNCTION LOAD``, once) where it is
    missing. The replies are the same either way. Which it is, the client
    learns once, before its first call, from SWL.CHECK sent without
    arguments (refused for its arity, or as unknown); calls made from
    other threads meanwhile wait for that answer (and fail with its error
    if it failed: the next call probes again).

    A check or refund is sent once: not again after a timeout or a lost
    connection, as redis-py's retries (on by default since redis-py 6)
    would send it, recording the request twice. Such a failure raises
    :class:`~redis_swl.UncertainOutcomeError`: it may or may not have been
    recorded. The client's own settings are left as they are, and its
    other commands (a peek among them) are retried as it is set to.

    :param client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``.
    :param encoding: how the library, if this client loads it, stores new
        logs: ``"compact"`` (compact logs, as the module's default),
        ``"compact1"`` (compact logs of format version 1, which redis-swl
        0.3 reads too: while 0.3 still serves the keys) or ``"zset"``
        (sorted sets, for keys the usual Lua script still writes). The
        module's own setting is ``swl.encoding``.
    :param denial_cache: a :class:`~redis_swl.DenialCache` answering checks
        after a denial without Redis (none by default; one cache may serve
        several clients of a process). :meth:`refund` and :meth:`reset`
        drop the key's denials.

    >>> limiter = SWL(redis.Redis())                      # doctest: +SKIP
    >>> limiter.check("rl:alice", 60_000, 100).allowed    # doctest: +SKIP
    True
    """

    def _run(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Verdict:
        try:
            return Verdict.from_reply(self._call(names, key, args))
        except ResponseError as error:
            plain = explained(error, args, self.uses_library)
            if plain is error:
                raise
            raise plain from error

    def __init__(self, client: Any, *, encoding: str = "compact",
                 denial_cache: Optional[DenialCache] = None) -> None:
        super().__init__(client, encoding=encoding, denial_cache=denial_cache)
        self._probe_lock = threading.Lock()
        #: Probes that failed, and the last one's error: the threads that
        #: waited for it fail with it rather than each probing in turn.
        self._probes_failed = 0
        self._probe_error: Optional[Exception] = None

    def _cached_check(self, cache: DenialCache, key: str, windows: List[Tuple[int, int]],
                      cost: int, args: List[Union[int, str]]) -> Verdict:
        cached = cache.answer(key, windows, cost)
        if cached is not None:
            return cached
        ticket, sent = cache.ticket(), clock()
        verdict = self._run(CHECK, key, args)
        cache.keep(key, windows, cost, verdict, ticket, sent)
        return verdict

    def _forgetting(self, cache: DenialCache, key: str, call: Callable[[], T]) -> T:
        try:
            return call()
        finally:
            cache.forget(key)

    def entries(self, key: str) -> List[int]:
        """``key``'s log: its entries' times, oldest first, as Unix
        milliseconds (SWL.ENTRIES); none for no key."""
        return entries_of(self._call(ENTRIES, key, []))

    def units(self, key: str, window_ms: int) -> int:
        """The units ``key``'s log holds in the last ``window_ms``: a peek
        against a limit no log reaches, whose remaining counts them."""
        return MAX_LIMIT - 1 - self.peek(key, window_ms, MAX_LIMIT).remaining

    def usage(self, key: str, window_ms: int) -> Usage:
        """The units ``key``'s log holds in the last ``window_ms``, and when
        its newest entry leaves that window (0 when it holds none)."""
        return Usage(self.units(key, window_ms), self.peek(key, window_ms, 0).reset_after_ms)

    def _deleted(self, key: str) -> None:
        self.client.delete(key)

    def _call(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Any:
        """The call's reply, from the module or the library (see
        clients/spec/protocol.md)."""
        command, function = names
        send = self._once if names in CHANGES else self._retried
        if not self._probed:
            self._wait_for_probe(key)
        if not self.uses_library:
            try:
                return send(key, command, key, *args)
            except RedisError as error:
                # The module went away (unknown commands are not carried out).
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return send(key, "FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        self.load_library()
        try:
            return send(key, "FCALL", function, 1, key, *args)
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        # A library from an older release that lacks the function: replaced
        # (never by an older one than it), and the call sent a last time.
        self.load_library(replace=True)
        return send(key, "FCALL", function, 1, key, *args)

    def _wait_for_probe(self, key: str) -> None:
        """Probes, or waits for the probe another thread is sending."""
        failed = self._probes_failed
        with self._probe_lock:
            if self._probed:
                return
            if self._probes_failed != failed and self._probe_error is not None:
                raise self._probe_error
            try:
                self.uses_library = self._probe(key)
            except Exception as error:
                self._probe_error = error
                self._probes_failed += 1
                raise
            self._probed = True

    def _probe(self, key: str) -> bool:
        """Whether the server lacks the module, by :data:`PROBE`, sent once
        (to ``key``'s node of a cluster) so that a stalled server costs one
        timeout; a failure is raised as it is, and the next call probes
        again."""
        try:
            self._once(key, *PROBE, probe=True)
        except ResponseError as error:
            if probe_finds_library(error):
                self._prepare_library()
                return True
        return False

    def _prepare_library(self) -> None:
        """Loads the library where the probe found no module, before any
        call goes to it, so that calls keep their order. A server that
        refuses the version check or the load is left to the call: it
        loads the library, if it can, when FCALL finds it missing."""
        try:
            self.load_library()
        except ResponseError:
            pass

    def _retried(self, key: str, *command: Any) -> Any:
        return self.client.execute_command(*command)

    def _once(self, key: str, *command: Any, probe: bool = False) -> Any:
        """Sends a check or refund once, raising UncertainOutcomeError where
        it failed after it was sent (the probe's own error, as it is)."""
        client = self.client
        if hasattr(client, "get_node_from_key"):
            # A cluster: given the node, redis-py follows MOVED and ASK (the
            # command was not carried out) but sends nothing again after a
            # timeout or a lost connection. Those may come before the
            # command was sent, which the cluster client does not tell.
            try:
                return client.execute_command(
                    *command, target_nodes=client.get_node_from_key(key))
            except (ConnectionError, TimeoutError) as error:
                if probe:
                    raise
                raise uncertain(command[0], key, error) from error
        # One server: the command on a connection of the client's pool, as
        # redis-py sends it, without its Retry around it.
        single = client.connection is not None
        connection = client.connection if single else client.connection_pool.get_connection()
        lock = getattr(client, "single_connection_lock", None) if single else None
        if lock is not None:
            lock.acquire()
        try:
            connection.connect()
            connection.check_health()
            try:
                connection.send_command(*command, check_health=False)
                return client.parse_response(connection, command[0])
            except (ConnectionError, TimeoutError) as error:
                connection.disconnect()
                if probe:
                    raise
                raise uncertain(command[0], key, error) from error
        finally:
            if lock is not None:
                lock.release()
            if not single:
                client.connection_pool.release(connection)

    def load_library(self, replace: bool = False) -> None:
        """Loads the function library where it is missing: on the server,
        or on each primary of a cluster (one that has it, such as all but a
        shard just added, is left as it is, unless ``replace``: a library
        from an older redis-swl is replaced so).

        Before it loads anything on a node, it asks the node which release
        its library is (``FCALL_RO swl_version 0``): a library newer than
        the one this package carries is never replaced, ``replace`` or not,
        and is used as it is. One from before 0.4, which cannot say, counts
        as older. Where ``replace`` is given and the node answers neither a
        version nor "function not found", its error is raised and nothing
        is replaced."""
        for options in self._library_nodes():
            try:
                answer: Any = self.client.execute_command(*VERSION_CHECK, **options)
            except ResponseError as error:
                answer = error
            command = self._library_load(replace, answer)
            if command is None:
                continue
            try:
                self.client.execute_command(*command, **options)
            except ResponseError as error:
                if not is_library_present(error):
                    raise
