"""Real worker processes for crash, zombie and scale tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from runtime import testing

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


class WorkerProcess(testing.WorkerProcess):
    """A test worker: the test Redis in ``PARLEY_TEST_REDIS`` (the apps count side effects
    there), a short lease, and optionally a crash point (``runtime._faults``)."""

    def __init__(
        self,
        redis_url: str,
        app: str,
        *,
        crash_at: str | None = None,
        lease: float = 1.0,
        concurrency: int = 16,
        extra_env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        env = {**os.environ, "PARLEY_TEST_REDIS": redis_url, **(extra_env or {})}
        env.pop("PARLEY_CRASH_AT", None)
        if crash_at:
            env["PARLEY_CRASH_AT"] = crash_at
        super().__init__(
            redis_url,
            app,
            partitions=PARTITIONS,
            lease=lease,
            concurrency=concurrency,
            env=env,
            extra_args=extra_args,
            cwd=ROOT,
        )


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll a cheap condition until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on loopback TCP ``port``.

    A 200 from the port is not enough to say a freshly started server is up: while a test
    had its server stopped, another test's free port may have been this one, and that
    stranger answers. The kernel says whose socket it is (Linux: /proc)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except FileNotFoundError:
        return False  # the process has exited
    listening = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == listening and int(local.rsplit(":", 1)[1], 16) == port and inode in inodes:
                return True
    return False
