"""Background loops that heal: a loop that raises or ends while the worker runs is logged
and started again with backoff, so one unexpected error cannot leave a live process that
no longer consumes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ..metrics import Metrics
from ..settings import LOOP_RESTART_MAX_SECONDS
from .backoff import grow

log = logging.getLogger("parley.worker")

Loop = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


async def supervise(name: str, loop: Loop, stopping: asyncio.Event, metrics: Metrics) -> None:
    """Run ``loop(stopping)`` until ``stopping`` is set, restarting it whenever it ends."""
    delay = 0.0
    while not stopping.is_set():
        try:
            await loop(stopping)
        except asyncio.CancelledError:
            # Only this task's own cancellation ends it: one the loop caught from something
            # it awaited (a shared future a cancelled caller failed) is a crash like any
            # other, or the loop would be gone for good while the worker runs on.
            current = asyncio.current_task()
            if current is None or current.cancelling():
                raise
            log.exception("%s crashed (a cancellation it did not ask for); restarting it", name)
        except Exception:
            log.exception("%s crashed; restarting it", name)
        else:
            if stopping.is_set():
                return
            log.error("%s ended while the worker runs; restarting it", name)
        metrics.loop_restarts.labels(name).inc()
        delay = grow(delay, LOOP_RESTART_MAX_SECONDS)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=delay)
