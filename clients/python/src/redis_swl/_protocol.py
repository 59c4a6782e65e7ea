"""What the sync and asyncio clients share: the arguments of a call, the
reply as a typed verdict, which errors mean "no module" or "no library",
and the function library's source."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import (
    TYPE_CHECKING, Any, Dict, Generic, List, NamedTuple, Optional, Sequence, Tuple, TypeVar,
    Union)

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

if TYPE_CHECKING:
    from .cache import DenialCache

#: A window given as (window_ms, limit).
Window = Tuple[int, int]

#: The commands of the module and the functions of the library that answer
#: them, with the same arguments and replies.
CHECK = ("SWL.CHECK", "swl_check")
PEEK = ("SWL.PEEK", "swl_peek")
REFUND = ("SWL.REFUND", "swl_refund")
ENTRIES = ("SWL.ENTRIES", "swl_entries")

#: The calls that change the log: sent once, never again after a timeout.
CHANGES = (CHECK, REFUND)

#: What a client sends once, before its first call, to learn whether the
#: server has the module: SWL.CHECK without its arguments. Redis refuses it
#: for its arity before it looks at ACLs or at the cluster's slots, so it
#: records nothing and needs no permission: "unknown command" without the
#: module, "wrong number of arguments" with it.
PROBE = ("SWL.CHECK",)

#: The most windows one call takes (the first and its WINDOW clauses), as
#: the module and the library take them.
MAX_WINDOWS = 100

#: A limit no log reaches, for counting what a log holds: 10^15 (the module
#: takes up to 2^53 - 1, but replies near that lose digits in some clients).
MAX_LIMIT = 10**15

#: The encodings of new logs the library takes: a sorted set, a compact log
#: (the newest format the library writes), or a compact log of format
#: version 1, which redis-swl 0.3 reads too (for a fleet part way through
#: an upgrade).
ENCODINGS = ("zset", "compact", "compact1")
_ENCODING_LINE = "\nlocal ENCODING = 'compact'\n"
_VERSION_LINE = re.compile(r"\nlocal VERSION = '([^'\n]*)'\n")

#: What a client asks a node before it loads or replaces the library there:
#: the loaded library's release. A library from before 0.4, or none, has no
#: such function.
VERSION_CHECK = ("FCALL_RO", "swl_version", 0)


class Usage(NamedTuple):
    """What a log holds in a window: its units, and when its newest entry
    leaves the window (0 when it holds none)."""

    units: int
    reset_after_ms: int


@dataclass(frozen=True)
class Verdict:
    """One reply of SWL.CHECK, SWL.PEEK or SWL.REFUND, by name.

    ``limit``, ``remaining`` and ``retry_after_ms`` describe the window
    named by ``window_ms``: the one with the least left, or the one that
    denied. ``retry_after_ms`` is -1 when admitted, or when waiting cannot
    help (a cost above the limit). ``reset_after_ms`` is when the log's
    newest entry leaves the widest window (0 for an empty log).
    ``oldest_after_ms`` is only given by a peek with ``oldest=True``: when
    the oldest entry in the reply's window leaves it.
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    window_ms: int
    oldest_after_ms: Optional[int] = None

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "Verdict":
        values = [int(v) for v in reply]
        if len(values) not in (6, 7):
            raise ValueError(f"not a redis-swl reply: {reply!r}")
        oldest = values[6] if len(values) == 7 else None
        return cls(values[0] == 1, *values[1:6], oldest_after_ms=oldest)

    @property
    def retry_after_seconds(self) -> Optional[int]:
        """Whole seconds for a ``Retry-After`` header (rounded up), or None
        when admitted or when waiting cannot help."""
        if self.retry_after_ms < 0:
            return None
        return -(-self.retry_after_ms // 1000)


def entries_of(reply: Sequence[Any]) -> List[int]:
    """SWL.ENTRIES's reply as whole milliseconds. A sorted set with a score
    another tool wrote that is not a whole number (which the reply gives as
    a string) is refused with ValueError."""
    try:
        return [v if isinstance(v, int) else int(v) for v in reply]
    except ValueError:
        raise ValueError(f"not whole milliseconds: {reply!r}") from None


def request_args(
    window_ms: int,
    limit: int,
    *,
    now_ms: Optional[int],
    cost: int,
    windows: Sequence[Window],
    penalize: bool = False,
    oldest: bool = False,
) -> List[Union[int, str]]:
    """The arguments after the key, as the module and the library take them."""
    args: List[Union[int, str]] = [window_ms, limit, "*" if now_ms is None else now_ms]
    if cost != 1:
        args += ["COST", cost]
    for extra_ms, extra_limit in windows:
        args += ["WINDOW", extra_ms, extra_limit]
    if penalize:
        args.append("PENALIZE")
    if oldest:
        args.append("OLDEST")
    return args


#: What a client's calls give: a Verdict, or an awaitable of one.
R = TypeVar("R")


class Commands(Generic[R]):
    """check, peek and refund, written once for both clients: each builds
    its arguments and hands them to ``_run``, which the sync client answers
    with a :class:`Verdict` and the asyncio one with an awaitable of one.
    (The clients' docstrings describe the arguments.)"""

    def __init__(self, client: Any, *, encoding: str = "compact",
                 denial_cache: Optional["DenialCache"] = None) -> None:
        library_source(encoding)  # refuses an unknown encoding now
        self.client = client
        self.encoding = encoding
        #: Answers checks after a denial without Redis (none by default).
        self.denial_cache = denial_cache
        #: True once the server answered that it has no module.
        self.uses_library = False
        #: Whether the probe (:data:`PROBE`) has answered: every call waits
        #: for it, so that each goes where it belongs from the first.
        self._probed = False

    def _library_nodes(self) -> List[Dict[str, Any]]:
        """Where the library is loaded, as options of ``execute_command``:
        the server, or each primary of a cluster (a load sent to all of
        them at once would stop at the first that has it)."""
        if not hasattr(self.client, "get_primaries"):
            return [{}]
        return [{"target_nodes": node} for node in self.client.get_primaries()]

    def _library_load(self, replace: bool, answer: Any) -> Optional[List[str]]:
        """The FUNCTION LOAD for a node whose :data:`VERSION_CHECK` gave
        ``answer`` (its reply, or the ``ResponseError`` it failed with), or
        None where the node's library stays as it is: one of any version
        unless ``replace``, and one newer than this package's always."""
        if isinstance(answer, Exception):
            if replace and not is_missing_function(answer):
                # Whether the loaded library is newer cannot be told.
                raise answer
            # None there, or one from before 0.4 (which FUNCTION LOAD
            # without REPLACE leaves as it is).
            loaded = None
        else:
            loaded = answer.decode() if isinstance(answer, bytes) else str(answer)
        if loaded is not None and (not replace or is_newer(loaded, library_version())):
            return None
        command = ["FUNCTION", "LOAD"] + (["REPLACE"] if replace else [])
        command.append(library_source(self.encoding))
        return command

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
    ) -> R:
        """Checks a request of ``cost`` units against ``limit`` per
        ``window_ms`` (and any further ``windows``) and records it if
        admitted. ``now_ms`` defaults to the server's clock.

        With a :attr:`denial_cache`, a check like one Redis denied (the same
        key and windows, at least its cost) is denied from the cache until
        the denial's wait has passed; one with ``penalize`` or ``now_ms``
        neither uses nor fills it."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, penalize=penalize
        )
        if self.denial_cache is None or penalize or now_ms is not None:
            return self._run(CHECK, key, args)
        every = [(window_ms, limit)] + [(ms, n) for ms, n in windows]
        return self._cached_check(self.denial_cache, key, every, cost, args)

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
    ) -> R:
        """What :meth:`check` would reply now, changing nothing. With
        ``oldest``, the verdict's ``oldest_after_ms`` is set too."""
        args = request_args(
            window_ms, limit, now_ms=now_ms, cost=cost, windows=windows, oldest=oldest
        )
        return self._run(PEEK, key, args)

    def refund(
        self,
        key: str,
        window_ms: int,
        limit: int,
        *,
        cost: int = 1,
        windows: Sequence[Window] = (),
        now_ms: Optional[int] = None,
    ) -> R:
        """Gives back up to ``cost`` of the newest recorded units (a request
        that should not count after all) and replies what :meth:`peek`
        replies then."""
        args = request_args(window_ms, limit, now_ms=now_ms, cost=cost, windows=windows)
        if self.denial_cache is None:
            return self._run(REFUND, key, args)
        return self._forgetting(self.denial_cache, key, lambda: self._run(REFUND, key, args))

    def reset(self, key: str) -> Any:
        """Deletes ``key``'s log (DEL), so that its next check is a new
        client's, and drops its denials from the :attr:`denial_cache`."""
        if self.denial_cache is None:
            return self._deleted(key)
        return self._forgetting(self.denial_cache, key, lambda: self._deleted(key))

    def _run(self, names: Tuple[str, str], key: str, args: List[Union[int, str]]) -> R:
        raise NotImplementedError

    def _cached_check(self, cache: "DenialCache", key: str, windows: List[Window], cost: int,
                      args: List[Union[int, str]]) -> R:
        """A check answered by ``cache``, or sent and its verdict kept."""
        raise NotImplementedError

    def _forgetting(self, cache: "DenialCache", key: str, call: Any) -> Any:
        """``call()``'s result, dropping ``key``'s denials once it is done
        (also when it failed: it may have been carried out)."""
        raise NotImplementedError

    def _deleted(self, key: str) -> Any:
        raise NotImplementedError


class UncertainOutcomeError(RedisConnectionError, RedisTimeoutError):
    """A check or refund was sent and no reply came: it timed out, or the
    connection was lost while waiting. The server may or may not have
    carried it out, so the request may or may not have been recorded (or
    given back). The client never sends it again by itself, as redis-py
    would: a second SWL.CHECK records a second request.

    It is the ``TimeoutError`` or ``ConnectionError`` redis-py raised (its
    ``__cause__``), so handlers of either catch it, as do ``limits``' and the
    frameworks' handlers of ``RedisError``. A peek never raises it: it
    changes nothing, and redis-py retries it as it retries any read."""


def uncertain(name: str, key: Any, error: Exception) -> UncertainOutcomeError:
    """The error for a check or refund (``name``: its command or function)
    on ``key`` that failed with ``error`` after it was sent."""
    return UncertainOutcomeError(
        f"{name} on {key!r} got no reply ({error}): it may or may not have been carried out")


def is_unknown_command(error: Exception) -> bool:
    """The server has no such command: the module is not loaded. (A cluster
    client says so itself, from the commands the nodes listed.)"""
    text = str(error).lower()
    return text.startswith("unknown command") or "command doesn't exist in redis commands" in text


def probe_finds_library(error: Exception) -> bool:
    """What the probe's refusal tells: the library (no module), or the
    module (anything else Redis refused it for)."""
    return is_unknown_command(error)


def is_missing_function(error: Exception) -> bool:
    """The server has no such function: the library is not loaded."""
    return "function not found" in str(error).lower()


def explained(error: Exception, args: Sequence[Any], uses_library: bool) -> Exception:
    """``error``, said plainly where the server is older than the call: a
    module or library from before 0.3.0 refuses OLDEST as a syntax error."""
    if "OLDEST" in args and "syntax error" in str(error).lower():
        if uses_library:
            where = "function library"
            fix = "replace it: load_library(replace=True)"
        else:
            where, fix = "module", "load redis-swl 0.3.0 or later"
        return type(error)(
            f"{error}: the redis-swl {where} on the server predates SWL.PEEK OLDEST "
            f"(0.3.0), which limits' test and get_window_stats need; {fix}")
    return error


def is_library_present(error: Exception) -> bool:
    """FUNCTION LOAD found the library already loaded (by another client)."""
    return "already exists" in str(error).lower()


def release(version: str) -> Optional[Tuple[int, int, int]]:
    """A release's major, minor and patch numbers, from the start of
    ``version`` (``"0.4.0"``, ``"1.2"``, ``"0.5.0-rc.1"``); None where it
    does not start with a number."""
    found = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version.strip())
    if found is None:
        return None
    major, minor, patch = (int(part or 0) for part in found.groups())
    return major, minor, patch


def is_newer(loaded: str, own: str) -> bool:
    """Whether the loaded library's release is newer than ``own``,
    comparing major, minor and patch as numbers. A version that does not
    start with a number is older than any."""
    ours, theirs = release(own), release(loaded)
    return theirs is not None and ours is not None and theirs > ours


@functools.lru_cache(maxsize=None)
def library_version() -> str:
    """The release of the function library this package carries: its
    VERSION line, which ``FCALL_RO swl_version 0`` replies."""
    found = _VERSION_LINE.search(library_source())
    if found is None:
        raise RuntimeError("the packaged swl.lua has no VERSION line")
    return found.group(1)


@functools.lru_cache(maxsize=None)
def library_source(encoding: str = "compact") -> str:
    """The function library shipped in this package (the repository's
    scripts/swl.lua), creating new logs in ``encoding``: ``"compact"`` (a
    compact log, the default), ``"compact1"`` (a compact log of format
    version 1, which redis-swl 0.3 reads) or ``"zset"`` (a sorted set)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, not {encoding!r}")
    source = resources.files("redis_swl").joinpath("swl.lua").read_text(encoding="utf-8")
    if _ENCODING_LINE not in source:
        raise RuntimeError("the packaged swl.lua has no ENCODING line")
    return source.replace(_ENCODING_LINE, f"\nlocal ENCODING = '{encoding}'\n", 1)
