"""Where ``parley demo`` keeps its conversations: a private ``redis-server`` it starts with
a data directory (AOF on; on a free loopback port, with a random password), so a restarted
demo still has every conversation and pending prompt. Without the ``redis-server`` binary
the demo falls back to the volatile embedded ``memory://`` store and says so once.

The private server dies with the demo: a normal stop shuts it down (it writes its AOF), and
the kernel sends it SIGTERM if the demo itself is killed (``PR_SET_PDEATHSIG``). A lock
file keeps two demos off one data directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

START_TIMEOUT_SECONDS = 30.0
PR_SET_PDEATHSIG = 1

VOLATILE_WARNING = (
    "redis-server was not found, so the demo runs on the embedded memory:// store: "
    "conversations are LOST when it stops. Install redis-server (or give --redis URL / "
    "REDIS_URL) to keep them."
)


class DemoStoreError(RuntimeError):
    """The private redis-server could not be started (the message says why)."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int, password: str) -> bytes:
    """The reply to PING after AUTH (b"+PONG", or b"-LOADING ..." while loading)."""
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
        sock.sendall(f"AUTH {password}\r\nPING\r\n".encode())
        replies = b""
        while replies.count(b"\r\n") < 2:
            chunk = sock.recv(256)
            if not chunk:
                break
            replies += chunk
        return replies.split(b"\r\n")[1] if replies.count(b"\r\n") >= 2 else b""


class PrivateRedis:
    """A ``redis-server`` keeping its data in ``data_dir``, on a free loopback port, with a
    random password for this run."""

    def __init__(self, data_dir: Path, binary: str) -> None:
        self.data_dir = data_dir
        self.binary = binary
        self.port = 0
        self.password = secrets.token_urlsafe(24)
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> str:
        """Start it and wait until it has loaded its data; returns its store URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = (self.data_dir / "demo.lock").open("wb")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise DemoStoreError(
                f"another parley demo is using {self.data_dir}; stop it, or set "
                "PARLEY_DEMO_DATA_DIR (or --data-dir) to another directory"
            ) from None
        self._lock = lock
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--requirepass", self.password, "--dir", str(self.data_dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--stream-node-max-bytes", "512", "--logfile", str(self.data_dir / "redis.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # only prctl: safe between fork and exec
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if self.proc.poll() is not None:
                self._unlock()
                raise DemoStoreError(
                    f"redis-server exited with status {self.proc.returncode}; see "
                    f"{self.data_dir / 'redis.log'}"
                )
            with contextlib.suppress(OSError):
                if _ping(self.port, self.password) == b"+PONG":
                    return self.url
            if time.monotonic() > deadline:
                self.stop()
                raise DemoStoreError(
                    f"redis-server did not answer within {START_TIMEOUT_SECONDS:g}s; see "
                    f"{self.data_dir / 'redis.log'}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM: redis-server writes its AOF and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None
