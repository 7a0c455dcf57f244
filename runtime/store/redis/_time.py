"""Redis' clock, as every process of a deployment reads it: leases, deadlines and the
run's timestamps are compared on this one clock, whatever the clocks of the machines the
workers and servers run on say.

Redis' ``TIME`` is read once and then every :data:`RESYNC_SECONDS`, and carried forward
in between with this process's monotonic clock, which a wall-clock step (NTP, a
suspended VM) does not move. Reading ``TIME`` inside every script would cost each call
more Redis CPU than the script's own work on the hot path (measured: a claim 35 → 50 µs),
and a monotonic clock drifts from Redis' by parts per million over a few seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable

RESYNC_SECONDS = 5.0


class RedisTime:
    """``now_ms()``: Redis' clock now, in ms. ``read_time`` returns Redis' ``TIME``."""

    def __init__(self, read_time: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._read_time = read_time
        self._base_ms = 0
        self._base_mono: float | None = None  # when Redis said _base_ms; None: not yet read
        self._syncing: asyncio.Task[None] | None = None

    def fresh_ms(self) -> int | None:
        """Redis' clock now, if the last reading is recent enough to carry forward (no round
        trip, no await: every claim and write asks); else None."""
        if self._base_mono is None:
            return None
        elapsed = time.monotonic() - self._base_mono
        if elapsed > RESYNC_SECONDS:
            return None
        return self._base_ms + int(elapsed * 1000)

    async def now_ms(self) -> int:
        now = self.fresh_ms()
        if now is not None:
            return now
        await self._sync()
        assert self._base_mono is not None
        return self._base_ms + int((time.monotonic() - self._base_mono) * 1000)

    async def _sync(self) -> None:
        # One TIME for all the callers that found the reading stale at once, read in a task
        # of its own that each caller awaits through a shield. Race closed: the caller that
        # started the read being cancelled while the others wait (an execution stopped, a
        # step's timeout): the read went on in its task, its cancellation reached every
        # waiter, and a worker's heartbeat loop among them ended for good. The task runs in
        # a context of its own, so no execution adopts it (runtime/engine/tasks.py).
        if self._syncing is None:
            loop = asyncio.get_running_loop()
            self._syncing = contextvars.Context().run(loop.create_task, self._read())
            # retrieved even when every caller was cancelled: no "never retrieved" report
            self._syncing.add_done_callback(_retrieve)
        await asyncio.shield(self._syncing)

    async def _read(self) -> None:
        try:
            before = time.monotonic()
            seconds, micros = await self._read_time()
            after = time.monotonic()
            # Redis read its clock somewhere in the round trip: take the middle.
            self._base_ms = seconds * 1000 + micros // 1000
            self._base_mono = (before + after) / 2
        finally:
            self._syncing = None


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
