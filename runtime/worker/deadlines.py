"""The worker's deadline loop: fires due hook timeouts, sleeps and retry backoffs.

An idle worker costs Redis a few commands a second whatever the number of partitions: a
pass over the deadlines is one script per group of partitions (all of a single Redis at
once), and between passes the loop sleeps until the earliest pending deadline is due,
waiting on the partitions' wake streams, where the script that schedules a deadline that
becomes its partition's earliest leaves a notice (``lua/lib.lua``'s ``schedule_deadline``).
A pass every ``scan`` seconds at the least is a safety net for a notice that was lost (a
Redis that came back from an older snapshot), not how deadlines are found.
"""

from __future__ import annotations

import asyncio
import time

from ..errors import StoreUnavailable
from ..metrics import Metrics
from ..settings import MAX_BLOCK_SECONDS
from ..store import DueReport, Notice, Store
from .backoff import Backoff

_Reads = dict[tuple[int, ...], "asyncio.Task[dict[int, Notice]]"]


def _newer(a: str, b: str) -> bool:
    """Whether stream id ``a`` is after ``b``."""
    ams, _, aseq = a.partition("-")
    bms, _, bseq = b.partition("-")
    return (int(ams), int(aseq or 0)) > (int(bms), int(bseq or 0))


class DeadlineLoop:
    """Fires due deadlines when they are due (woken by the notice of a deadline earlier
    than the one it sleeps towards), and every ``scan`` seconds at the least. Every worker
    runs one; the store makes each deadline fire once."""

    def __init__(self, store: Store, metrics: Metrics, *, scan: float) -> None:
        self.store = store
        self.metrics = metrics
        self.scan = scan
        # Per partition, the last deadline notice seen: a wait reads those after it.
        self._marks: dict[int, str] = {}

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
        # The blocking reads of the notices, one per group of partitions; kept across
        # passes (a read in flight is not cancelled: that would drop its connection).
        reads: _Reads = {}
        try:
            while not stopping.is_set():
                try:
                    report = await self._fire_all()
                    self._marks = dict(report.marks)
                    await self._sleep(report, reads)
                except StoreUnavailable as exc:
                    _cancel(reads)
                    await backoff.wait(exc)
                    continue
                backoff.reset()
        finally:
            _cancel(reads)

    async def _sleep(self, report: DueReport, reads: _Reads) -> None:
        """Until the earliest pending deadline is due, an earlier one is scheduled and due,
        or ``scan`` seconds have passed."""
        start = time.monotonic()
        wake_at = start + self.scan
        if report.next_due_ms is not None:
            # both on Redis' clock, read in the pass: a machine whose clock is off neither
            # spins nor oversleeps
            wake_at = min(wake_at, start + max(0.0, report.next_due_ms - report.now_ms) / 1000)
        while (remaining := wake_at - time.monotonic()) > 0:
            for group in self.store.task_sources():
                if group not in reads:
                    # The longest block: the read outlives this sleep, into the next ones
                    marks = {p: self._marks.get(p, "0-0") for p in group}
                    reads[group] = asyncio.create_task(
                        self.store.deadline_notices(marks, int(MAX_BLOCK_SECONDS * 1000)),
                        name="parley-deadline-notices",
                    )
            done, _ = await asyncio.wait(
                reads.values(), timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            earliest: int | None = None
            for group in [g for g, read in reads.items() if read in done]:
                notices = reads.pop(group).result()  # StoreUnavailable: the caller's backoff
                for partition, notice in notices.items():
                    # A read started before the last pass can bring a notice that pass
                    # already saw (its deadline fired or counted in next_due_ms): skipped.
                    if not _newer(notice.mark, self._marks.get(partition, "0-0")):
                        continue
                    self._marks[partition] = notice.mark
                    earliest = notice.due_ms if earliest is None else min(earliest, notice.due_ms)
            if earliest is not None:
                now = await self.store.now_ms()
                wake_at = min(wake_at, time.monotonic() + max(0, earliest - now) / 1000)


def _cancel(reads: _Reads) -> None:
    for read in reads.values():
        if read.done() and not read.cancelled():
            read.exception()  # retrieved: the pass that follows meets the same outage
        read.cancel()
    reads.clear()
