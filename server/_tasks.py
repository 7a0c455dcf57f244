"""Stopping background tasks reliably.

redis-py 8.1's asyncio client can swallow a cancellation that lands while a command is in
flight: the task stays "cancelling" and its loop goes on. A single ``task.cancel()`` then
``await task`` can hang for ever, so these helpers cancel again until the task ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("parley.server")

# The background loops of runtime.Worker.run (named there).
WORKER_LOOP_NAMES = frozenset({"parley-tasks", "parley-deadlines", "parley-reclaim",
                               "parley-heartbeat"})


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[Any]], *, every: float = 0.2, give_up: float = 10.0
) -> bool:
    """Cancel ``tasks`` (again every ``every`` seconds) until all have ended; False when
    some are still running after ``give_up`` seconds (logged, left behind)."""
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every)
        if pending and loop.time() > deadline:
            log.error("tasks did not stop: %s", sorted(t.get_name() for t in pending))
            return False
    return True


async def stop_worker(stop: Any, task: asyncio.Task[None], *, grace: float = 2.0) -> None:
    """``Worker.stop()`` and wait for its ``run()`` task. When the worker's own
    cancellation of its loops was swallowed, cancel those loops again (by name)."""
    stop()
    done, _ = await asyncio.wait({task}, timeout=grace)
    if done:
        return
    loops = [t for t in asyncio.all_tasks() if t.get_name() in WORKER_LOOP_NAMES]
    await cancel_and_wait(loops)
    await cancel_and_wait([task])
