"""Real redis-server processes on free loopback ports in temporary
directories, with or without the redis-swl module (its path in SWL_MODULE,
as `make test` and `make bench` set it): for the tests and the bench."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("SWL_MODULE") or str(ROOT / "target/release/libredis_swl.so")


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
        # REDIS_SERVER runs the tests on another server build (see the README).
        command = [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(self.port),
                   "--bind", "127.0.0.1",
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
