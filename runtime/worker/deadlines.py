"""The worker's deadline loop: fires due hook timeouts, sleeps and retry backoffs.

An idle worker costs Redis a few commands a second whatever the number of partitions: a
pass over the deadlines is one script per group of partitions (all of a single Redis at
once), and between passes the loop sleeps until the earliest pending deadline is due,
waiting on the partitions' wake streams, where the script that schedules a deadline that
becomes its partition's earliest leaves a notice (``lua/lib.lua``'s ``schedule_deadline``).
The loop knows each partition's earliest deadline (from the passes and the notices), so a
pass at a due time covers only the partitions due: its cost does not grow with the number
of partitions. A pass over every partition every ``scan`` seconds is a safety net for a
notice that was lost (a Redis that came back from an older snapshot), not how deadlines
are found.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

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
        self._offset_ms = 0.0  # Redis' clock minus this process's monotonic one (ms)

    async def fire_due(self, limit: int = 500) -> int | None:
        """Fire every due deadline; returns the earliest deadline still pending (ms)."""
        return (await self._fire_all(limit)).next_due_ms

    async def _fire_all(
        self, limit: int = 500, partitions: Collection[int] | None = None
    ) -> DueReport:
        """Passes until none is left saturated; the last pass's report."""
        while True:
            report = await self.store.fire_due(limit, partitions=partitions)
            for late_ms in report.lateness_ms:
                self.metrics.deadline_lateness.observe(late_ms / 1000)
            if not report.saturated:
                return report

    async def run(self, stopping: asyncio.Event) -> None:
        backoff = Backoff("deadline loop")
        # The blocking reads of the notices, one per group of partitions; kept across
        # passes (a read in flight is not cancelled: that would drop its connection).
        reads: _Reads = {}
        # Per partition, its earliest pending deadline (Redis' clock, ms) as last seen; a
        # pass covers only the partitions due (a pass over all of them costs Redis ~12 µs
        # per partition), and all of them every ``scan`` seconds.
        due: dict[int, int] = {}
        scan_at = 0.0  # monotonic: the next pass over every partition
        try:
            while not stopping.is_set():
                try:
                    if time.monotonic() >= scan_at or not due:
                        scan_at = time.monotonic() + self.scan
                        report = await self._fire_all()
                        due = dict(report.next_due)
                        self._marks = dict(report.marks)
                    else:
                        ripe = self._ripe(due)
                        report = await self._fire_all(partitions=ripe)
                        for partition in ripe:
                            due.pop(partition, None)
                        due.update(report.next_due)
                        for partition, mark in report.marks.items():
                            if _newer(mark, self._marks.get(partition, "0-0")):
                                self._marks[partition] = mark
                    # Redis' clock on this process's monotonic one: the pass read TIME
                    # before its reply left, so this estimate is never ahead of Redis'
                    # (a wake-up is late by the reply's way back, never early)
                    self._offset_ms = report.now_ms - time.monotonic() * 1000
                    await self._sleep(due, scan_at, reads)
                except StoreUnavailable as exc:
                    _cancel(reads)
                    scan_at = 0.0  # after an outage: every partition
                    await backoff.wait(exc)
                    continue
                backoff.reset()
        finally:
            _cancel(reads)

    def _ripe(self, due: dict[int, int]) -> list[int]:
        """The partitions whose earliest deadline is due now (by the estimate; the pass
        fires only what is due by Redis' clock), at least the one due first."""
        if not due:
            return []
        now = time.monotonic() * 1000 + self._offset_ms
        first = min(due.values())
        return [p for p, at in due.items() if at <= max(now, first)]

    async def _sleep(self, due: dict[int, int], scan_at: float, reads: _Reads) -> None:
        """Until the earliest pending deadline is due (including those of the notices that
        come meanwhile) or the next pass over every partition."""
        while True:
            wake_at = scan_at
            if due:
                # both on Redis' clock: a machine whose clock is off neither spins nor
                # oversleeps
                wake_at = min(wake_at, (min(due.values()) - self._offset_ms) / 1000)
            remaining = wake_at - time.monotonic()
            if remaining <= 0:
                return
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
            for group in [g for g, read in reads.items() if read in done]:
                notices = reads.pop(group).result()  # StoreUnavailable: the caller's backoff
                for partition, notice in notices.items():
                    # A read started before the last pass can bring a notice that pass
                    # already saw (its deadline fired or counted in ``due``): skipped.
                    if not _newer(notice.mark, self._marks.get(partition, "0-0")):
                        continue
                    self._marks[partition] = notice.mark
                    due[partition] = min(due.get(partition, notice.due_ms), notice.due_ms)


def _cancel(reads: _Reads) -> None:
    for read in reads.values():
        if read.done() and not read.cancelled():
            read.exception()  # retrieved: the pass that follows meets the same outage
        read.cancel()
    reads.clear()
