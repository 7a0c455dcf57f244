"""The worker's deadline loop: fires due hook timeouts, sleeps and retry backoffs."""

from __future__ import annotations

import asyncio

from ..errors import StoreUnavailable
from ..metrics import Metrics
from ..store import DueReport, Store
from .backoff import Backoff


class DeadlineLoop:
    """Fires due deadlines every ``tick`` seconds, or sooner when the earliest pending one
    is due sooner. Every worker runs one; the store makes each deadline fire once."""

    def __init__(self, store: Store, metrics: Metrics, *, tick: float) -> None:
        self.store = store
        self.metrics = metrics
        self.tick = tick

    async def fire_due(self, limit: int = 500) -> int | None:
        """Fire every due deadline; returns the earliest deadline still pending (ms)."""
        return (await self._fire_all(limit)).next_due_ms

    async def _fire_all(self, limit: int = 500) -> DueReport:
        """Passes until none is left saturated; the last pass's report."""
        while True:
            report = await self.store.fire_due(limit)
            for late_ms in report.lateness_ms:
                self.metrics.deadline_lateness.observe(late_ms / 1000)
            if not report.saturated:
                return report

    async def run(self, stopping: asyncio.Event) -> None:
        backoff = Backoff("deadline loop")
        while not stopping.is_set():
            try:
                report = await self._fire_all()
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            delay = self.tick
            if report.next_due_ms is not None:
                # both on the store's clock: a machine whose clock is off neither
                # spins nor oversleeps
                delay = min(delay, max(0.0, (report.next_due_ms - report.now_ms) / 1000))
            await asyncio.sleep(delay)
