"""Real processes for testing and benchmarking Parley applications: a private
``redis-server`` on a free loopback port, and ``parley worker`` processes that are ready
(consuming) before the constructor returns — or, with ``wait=False``, once
:meth:`WorkerProcess.wait_ready` returns, so several can start in parallel.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import redis

from ._faults import POINTS as CRASH_POINTS

__all__ = ["CRASH_POINTS", "RedisServer", "WorkerProcess", "free_port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A redis-server on a free loopback port (or ``port``), its files in a private
    directory; ``extra`` are more redis-server arguments (``"--appendonly", "yes"``)."""

    def __init__(self, *extra: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="parley-redis-"))
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        """Start (again, after :meth:`kill`: same port, same files) and wait until it
        answers with its data loaded."""
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--save", "", "--logfile", str(self.dir / "redis.log"),
             *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    # with AOF, wait until the file has been loaded
                    if client.ping() and client.info("persistence").get("loading", 0) == 0:
                        return
                except (redis.ConnectionError, redis.BusyLoadingError):
                    pass
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server on {self.port} did not start")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync beyond what the config guarantees."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class WorkerProcess:
    """``parley worker --app ...`` in its own process (its log in a temporary file)."""

    def __init__(
        self,
        redis_url: str,
        apps: str | Iterable[str],
        *,
        partitions: int = 16,
        lease: float = 30.0,
        concurrency: int = 64,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        log_level: str = "INFO",
        cwd: str | Path | None = None,
        wait: bool = True,
    ) -> None:
        names = [apps] if isinstance(apps, str) else list(apps)
        app_args = [arg for name in names for arg in ("--app", name)]
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="parley-worker-", suffix=".log"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "worker", *app_args, "--redis", redis_url,
             "--partitions", str(partitions), "--lease", str(lease),
             "--concurrency", str(concurrency), "--log-level", log_level, *extra_args],
            cwd=cwd,
            env=dict(os.environ if env is None else env),
            stdout=subprocess.PIPE,
            stderr=self.log_file,
        )  # fmt: skip
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the worker printed its ready line (connected, announced, consuming)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline().decode()
                if line.startswith("parley worker ready"):
                    return
                if not line and self.proc.poll() is not None:
                    break
        raise RuntimeError(f"worker did not become ready; log:\n{self.log()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def wait_exit(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL if it does not end in 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log_file.close()
