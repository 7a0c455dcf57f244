"""Test helpers shared by several test modules."""

from __future__ import annotations

import asyncio
from types import TracebackType

from runtime import Worker


class running:
    """Run a worker in the background for the duration of an ``async with`` block."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Worker:
        self.task = asyncio.create_task(self.worker.run())
        return self.worker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task
