"""The client protocol (clients/spec/protocol.md) against its vectors
(clients/vectors/protocol.json): for each case, the commands the sync and
asyncio clients send and what they make of the replies. The stand-in is
the one thing a client sends commands with, redis-py's ``execute_command``
(as a cluster client offers it, keyed to a node), answering as the vectors
say; the vectors are the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any, List

import pytest
from redis._parsers.base import BaseParser
from redis.exceptions import TimeoutError as RedisTimeoutError

from conftest import ROOT
from redis_swl import AsyncSWL, SWL, UncertainOutcomeError, library_source

VECTORS = json.loads((ROOT / "clients" / "vectors" / "protocol.json").read_text())
CASES = VECTORS["cases"]


class Script:
    """The exchanges a step must cause, in order: each command sent is
    compared with the next one, and answered with its reply."""

    def __init__(self) -> None:
        self.expected: List[dict] = []
        self.sent: List[List[str]] = []

    def answer(self, command: Any) -> Any:
        sent = [a.decode() if isinstance(a, bytes) else str(a) for a in command]
        sent = ["$LIBRARY" if a == library_source() else a for a in sent]
        self.sent.append(sent)
        assert self.expected, f"sent {sent} after the step's last exchange"
        exchange = self.expected.pop(0)
        assert sent == exchange["send"]
        if "error" in exchange:
            # As redis-py parses an error reply (ERR dropped, NOPERM a class).
            raise BaseParser.parse_error(exchange["error"])
        if exchange.get("timeout"):
            raise RedisTimeoutError("Timeout reading from socket")
        return exchange["reply"]


class Server:
    """redis-py's sending, as a cluster client offers it."""

    def __init__(self, script: Script) -> None:
        self.script = script

    def get_node_from_key(self, key: str) -> str:
        return "node"

    def get_primaries(self) -> List[str]:
        return ["node"]

    def execute_command(self, *command: Any, **options: Any) -> Any:
        return self.script.answer(command)


class AsyncServer(Server):
    """redis-py's asyncio cluster client, as far as sending goes."""

    async def initialize(self) -> "AsyncServer":
        return self

    async def execute_command(self, *command: Any, **options: Any) -> Any:
        return self.script.answer(command)


def run(client: Any, call: dict) -> Any:
    if call["op"] == "load_library":
        return client.load_library(replace=call["replace"])
    method = getattr(client, call["op"])
    return method(call["key"], call["window_ms"], call["limit"], now_ms=call["now_ms"])


def replay(case: dict, make, settle) -> None:
    script = Script()
    client = make(script)
    for number, step in enumerate(case["steps"]):
        script.expected = list(step["exchanges"])
        where = f"{case['name']}, step {number + 1}"
        result = step["result"]
        try:
            answer = settle(run(client, step["call"]))
        except Exception as error:  # noqa: BLE001 - compared with the vector below
            assert "verdict" not in result and "ok" not in result, f"{where}: {error!r}"
            if result.get("uncertain"):
                assert isinstance(error, UncertainOutcomeError), f"{where}: {error!r}"
            else:
                assert not isinstance(error, UncertainOutcomeError), where
                assert result["error"].lower() in str(error).lower(), f"{where}: {error!r}"
        else:
            if "verdict" in result:
                allowed, *rest = result["verdict"]
                assert (answer.allowed, answer.limit, answer.remaining, answer.retry_after_ms,
                        answer.reset_after_ms, answer.window_ms) == (allowed == 1, *rest), where
            else:
                assert result == {"ok": True}, f"{where}: {answer!r}"
        assert script.expected == [], f"{where}: not sent: {script.expected}"


def test_the_vectors_cover_every_part_of_the_protocol():
    names = " ".join(case["name"] for case in CASES)
    for part in ("probe", "Function not found", "newer", "ACL", "redirection", "times out",
                 "unloaded", "loads it first"):
        assert part.lower() in names.lower(), part


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_sync_client_speaks_the_protocol(case):
    replay(case, lambda script: SWL(Server(script)), lambda answer: answer)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_asyncio_client_speaks_the_protocol(case):
    loop = asyncio.new_event_loop()
    try:
        replay(case, lambda script: AsyncSWL(AsyncServer(script)),
               lambda answer: loop.run_until_complete(answer))
    finally:
        loop.close()
