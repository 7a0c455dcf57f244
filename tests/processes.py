"""Real worker processes for crash, zombie and scale tests."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


class WorkerProcess:
    """``parley worker`` in its own process; started ready (it printed its ready line)."""

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
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="parley-worker-", suffix=".log"
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runtime.cli",
                "worker",
                "--app",
                app,
                "--redis",
                redis_url,
                "--lease",
                str(lease),
                "--partitions",
                str(PARTITIONS),
                "--concurrency",
                str(concurrency),
                "--log-level",
                "INFO",
                *extra_args,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log_file,
        )
        self._wait_ready(timeout=20)

    def _wait_ready(self, timeout: float) -> None:
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
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log_file.close()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll a cheap condition until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
