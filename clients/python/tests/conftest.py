"""Real redis-server processes for the tests: each on a free loopback port,
in a temporary directory, with or without the redis-swl module (its path in
SWL_MODULE, as `make test` sets it), stopped when the test ends."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest
import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("SWL_MODULE") or str(ROOT / "target/release/libredis_swl.so")
ENCODINGS = ("zset", "compact")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server, with the module (creating new logs in
    `encoding`) or without it."""

    def __init__(self, module: bool, encoding: str = "zset", args: Optional[List[str]] = None):
        self.module = module
        self.encoding = encoding
        self.dir = tempfile.mkdtemp(prefix="redis-swl-py-")
        self.port = free_port()
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", self.dir]
        if module:
            if not Path(MODULE).is_file():
                raise RuntimeError(f"no module at {MODULE}: build it (make build)")
            command += ["--loadmodule", MODULE, "--swl.encoding", encoding]
        command += args or []
        self.command = command
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.wait_ready()

    def pause(self) -> None:
        """Stalls the server: it keeps its connections and answers nothing."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Stops the server, keeping its directory for a restart."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Starts the server again, on the same port and directory."""
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.wait_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self, **options) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **options)

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited ({self.process.returncode})")
            try:
                if self.client(socket_timeout=1).ping():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING")
            time.sleep(0.02)

    def stop(self) -> None:
        self.resume()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


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

    def __init__(self, start, module: bool, encoding: str):
        self.nodes = []
        for _ in range(3):
            args = ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                    "--cluster-node-timeout", "5000"]
            self.nodes.append(start(module, encoding, args))
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

    def start(module: bool, encoding: str = "zset") -> Cluster:
        return Cluster(start_server, module, encoding)

    return start


def log_kind(client: redis.Redis, key: str) -> str:
    """What a key holds: "zset", "compact" (a compact log), or its TYPE."""
    kind = client.type(key).decode()
    if kind == "string" and client.getrange(key, 0, 4) == b"SWLc\x01":
        return "compact"
    return kind
