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
