"""Real redis-server processes for the tests: each on a free loopback port,
in a temporary directory, with or without the redis-swl module (its path in
SWL_MODULE, as `make test` sets it), stopped when the test ends."""

from __future__ import annotations

import socket
import subprocess
import threading
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
    """What a key holds: "zset", "compact" (a compact log of format version
    2), "compact1" (format version 1), or its TYPE."""
    kind = client.type(key).decode()
    if kind == "string":
        head = client.getrange(key, 0, 4)
        if head == b"SWLc\x02":
            return "compact"
        if head == b"SWLc\x01":
            return "compact1"
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


class CommandLog:
    """A loopback proxy in front of a real server that writes down every
    command clients send through it, in the order it receives them, before
    passing them on. Clients connect to `port`."""

    def __init__(self, server_port: int):
        self.server_port = server_port
        self.commands: List[List[bytes]] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def named(self, *names: str) -> List[List[bytes]]:
        """The commands whose name is one of `names`, in order."""
        wanted = {name.upper().encode() for name in names}
        with self.lock:
            return [command for command in self.commands if command[0].upper() in wanted]

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        buffer = b""
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                upstream.close()
                return
            buffer += data
            while True:
                parsed = self._parse(buffer)
                if parsed is None:
                    break
                command, buffer = parsed
                with self.lock:
                    self.commands.append(command)
            try:
                upstream.sendall(data)
            except OSError:
                client.close()
                return

    @staticmethod
    def _parse(buffer: bytes):
        """One RESP array of bulk strings from the front of `buffer`, and
        the rest; None while it is incomplete."""
        if not buffer.startswith(b"*"):
            return None
        end = buffer.find(b"\r\n")
        if end < 0:
            return None
        count, at, parts = int(buffer[1:end]), end + 2, []
        for _ in range(count):
            end = buffer.find(b"\r\n", at)
            if end < 0:
                return None
            size = int(buffer[at + 1:end])
            if len(buffer) < end + 2 + size + 2:
                return None
            parts.append(buffer[end + 2:end + 2 + size])
            at = end + 2 + size + 2
        return parts, buffer[at:]

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                sink.close()
                return
            try:
                sink.sendall(data)
            except OSError:
                source.close()
                return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def command_log() -> Iterator:
    """Starts CommandLog proxies on demand; closed after the test."""
    logs: List[CommandLog] = []

    def start(server: RedisServer) -> CommandLog:
        log = CommandLog(server.port)
        logs.append(log)
        return log

    yield start
    for log in logs:
        log.close()
