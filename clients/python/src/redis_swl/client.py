"""The client over redis-py's ``redis.Redis`` and ``redis.cluster.RedisCluster``."""

from __future__ import annotations

from typing import List, Tuple, Union

from redis.exceptions import RedisError, ResponseError

from ._protocol import (
    Commands,
    Verdict,
    explained,
    is_library_present,
    is_missing_function,
    is_unknown_command,
)


class SWL(Commands[Verdict]):
    """Sliding-window-log rate limiting on one Redis (or Redis Cluster):
    :meth:`check`, :meth:`peek` and :meth:`refund`, each returning a
    :class:`Verdict`.

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

    def _run(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Verdict:
        try:
            return self._call(names, key, args)
        except ResponseError as error:
            plain = explained(error, args, self.uses_library)
            if plain is error:
                raise
            raise plain from error

    def _call(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> Verdict:
        command, function = names
        if not self.uses_library:
            try:
                return Verdict.from_reply(self.client.execute_command(command, key, *args))
            except RedisError as error:
                if not is_unknown_command(error):
                    raise
                self.uses_library = True
        try:
            return Verdict.from_reply(self.client.fcall(function, 1, key, *args))
        except ResponseError as error:
            if not is_missing_function(error):
                raise
        self.load_library()
        return Verdict.from_reply(self.client.fcall(function, 1, key, *args))

    def load_library(self, replace: bool = False) -> None:
        """Loads the function library where it is missing: on the server,
        or on each primary of a cluster (one that has it, such as all but a
        shard just added, is left as it is, unless ``replace``: a library
        from an older redis-swl is replaced so)."""
        for command, options in self._library_loads(replace):
            try:
                self.client.execute_command(*command, **options)
            except ResponseError as error:
                if not is_library_present(error):
                    raise
