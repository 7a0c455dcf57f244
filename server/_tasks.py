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
