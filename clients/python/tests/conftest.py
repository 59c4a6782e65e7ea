"""Real redis-server processes for the tests: each on a free loopback port,
in a temporary directory, with or without the redis-swl module (its path in
SWL_MODULE, as `make test` sets it), stopped when the test ends."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Iterator, List, Optional

import pytest
import redis

from servers import MODULE, ROOT, RedisServer, free_port  # noqa: F401  (for the tests)

ENCODINGS = ("zset", "compact")
#: What a server needs for DEBUG SLEEP (Redis 7 refuses DEBUG by default).
DEBUG = ["--enable-debug-command", "yes"]


@pytest.fixture
def start_server() -> Iterator:
    """Starts servers on demand; all are stopped after the test."""
    servers: List[RedisServer] = []

    def start(module: bool, encoding: str = "zset", args: Optional[List[str]] = None) -> RedisServer:
        server = RedisServer(module, encoding, args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


class Cluster:
    """A Redis Cluster of three primaries, every slot assigned."""

    def __init__(self, start, module: bool, encoding: str, args: Optional[List[str]] = None):
        self.nodes = []
        for _ in range(3):
            node_args = ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                         "--cluster-node-timeout", "5000"] + (args or [])
            self.nodes.append(start(module, encoding, node_args))
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        done = subprocess.run(["redis-cli", "--cluster", "create", *addresses,
                               "--cluster-replicas", "0", "--cluster-yes"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        deadline = time.monotonic() + 30
        while not all(self.ready(node) for node in self.nodes):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.05)

    @staticmethod
    def ready(node: RedisServer) -> bool:
        info = node.client().execute_command("CLUSTER", "INFO").decode()
        return "cluster_state:ok" in info and "cluster_known_nodes:3" in info

    @property
    def hosts(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)


@pytest.fixture
def start_cluster(start_server):
    """Starts three-node clusters on demand; stopped after the test."""

    def start(module: bool, encoding: str = "zset", args: Optional[List[str]] = None) -> Cluster:
        return Cluster(start_server, module, encoding, args)

    return start


def log_kind(client: redis.Redis, key: str) -> str:
    """What a key holds: "zset", "compact" (a compact log), or its TYPE."""
    kind = client.type(key).decode()
    if kind == "string" and client.getrange(key, 0, 4) == b"SWLc\x01":
        return "compact"
    return kind


class Stall:
    """The server stalled for `seconds` by DEBUG SLEEP, sent on a connection
    of its own before anything the test sends next: it then reads nothing
    and answers nothing, as a server busy with a long command or paused by
    its host. :meth:`wait` returns once it has woken and handled what
    arrived meanwhile."""

    def __init__(self, port: int, seconds: float = 0.6):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.replies = self.sock.makefile("rb")
        # Once it has answered, the server reads this connection as it reads
        # the others: a command sent on it now is read before one sent next
        # on another (a connection not yet accepted would be read later).
        self.sock.sendall(b"PING\r\n")
        assert self.replies.readline() == b"+PONG\r\n"
        self.sock.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())

    def wait(self) -> None:
        assert self.replies.readline() == b"+OK\r\n"
        # Commands that came from other connections during the sleep were
        # read before this PING, which came after them.
        self.sock.sendall(b"PING\r\n")
        assert self.replies.readline() == b"+PONG\r\n"
        self.replies.close()
        self.sock.close()
