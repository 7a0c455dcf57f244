"""How an execution's buffered writes reach the store.

:class:`Writer` is a base class of :class:`~runtime.engine.execution.Execution` (through
:class:`~runtime.engine.endings.Endings`): events are recorded in the replay index and the
buffered :class:`~runtime.store.Writes` at once, and sent in one fenced store call
(APPLY) at each durable point, one call at a time per execution.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .._codec import dumps
from ..errors import EventLimitExceeded, LeaseLost, StoreUnavailable
from ..models import Event, EventType
from ..settings import Limits
from ..store import ApplyOutcome, Finish, Store, Writes
from .replay import ReplayIndex
from .signals import Abort, Interrupted, ReplayEnded


class Writer:
    store: Store
    run_id: str
    fence: str
    limits: Limits
    retention_seconds: int
    dry_run: bool
    index: ReplayIndex
    writes: Writes
    last_id: str
    event_count: int  # events in the log up to last_id
    data_bytes: int  # of those events' data (bounds what the worker remembers of the run)
    refused: bool
    flush_before_step: bool
    # One APPLY at a time. Race closed: two writes of one execution in flight at once
    # (parallel branches each flushing, e.g. two hooks asked in one turn of the loop) both
    # sent the same `after` and event count; the second read back the first's own events
    # as arrivals, so the execution over-counted its log, and the APPLY that skips its read
    # when the run's count equals the execution's then missed an answer: the run suspended
    # on a hook already answered. (Class defaults: an instance sets them when it writes.)
    _writing: bool = False
    _turn: asyncio.Future[None] | None = None  # awaited by writes waiting their turn
    # Writes taken from the buffer (their events already in the index) that the store has
    # not confirmed: one that failed leaves the index ahead of the log, so the execution's
    # index must not outlive it even if it goes on to suspend cleanly (user code catching
    # EventLimitExceeded; a branch of first() that unwound). See Execution.remembered.
    unconfirmed_writes: int = 0
    # What ended the execution (an Abort raised by one of its writes). Race closed: the
    # Abort unwound only the task whose write met it (a step's flush in a task a branch
    # started); the workflow's own task went on to suspend, with a decision in its index
    # that the refused write had held, and the run replayed past a first() the log never
    # decided.
    _aborted: Exception | None = None
    # Steps whose result (or final failure) is buffered: when the write holding it is
    # applied, the id of its last event dates them (one script appends a write's events,
    # nobody's between them: the same order against others' events as their own ids), for
    # first()'s scoring.
    undated_steps: list[str]

    def record(self, event_type: EventType, data: dict[str, Any]) -> None:
        """Buffer an event and apply it to the index at once (replay sees our own writes)."""
        self.index.add(event_type, data)
        self.writes.event(event_type, dumps(data))

    def record_encoded(self, event_type: EventType, encoded: bytes, data: dict[str, Any]) -> None:
        """Like :meth:`record`, for an event whose JSON is already encoded."""
        self.index.add(event_type, data)
        self.writes.event(event_type, encoded)

    async def flush(self) -> Sequence[Event]:
        """Make everything recorded so far durable: send the buffered writes, or wait for
        the write in flight that took them; returns the events others appended meanwhile.
        Race closed: with its writes taken by another task's write still in flight, a
        flush returned at once, and cleared ``flush_before_step`` only once its own write
        came back, over a decision recorded meanwhile; a step's side effects then ran
        before the write that could be refused with them (a first() decided as an answer
        came in: the step ran again)."""
        # (what is recorded from here on asks for a flush of its own)
        self.flush_before_step = False
        if not self.writes and not self._writing:
            return ()
        arrived = await self._apply()
        # Answers/expiries that landed while we ran: known now, since last_id has
        # moved past them.
        self.index.add_all(arrived)
        return arrived

    async def _apply(
        self,
        *,
        suspension: Writes | None = None,
        finish: Finish | None = None,
        event_slack: int = 0,
    ) -> Sequence[Event]:
        """Send the buffered writes (with a suspension or the end of the run); returns the
        events others appended meanwhile and sets :attr:`refused`."""
        if self.dry_run:
            raise ReplayEnded("the recorded history matched up to the run's next write")
        if self._writing:
            await self._wait_turn()
        if self._aborted is not None:  # (also by the write this one waited for)
            raise Abort(self._aborted)
        # (a flag, not an asyncio.Lock: the lock's coroutines cost 3 % of a worker's
        # instructions per lifecycle, for a wait that parallel branches alone need)
        self._writing = True
        try:
            return await self._apply_now(suspension, finish, event_slack)
        except Abort as abort:
            self._aborted = abort.error  # (no task of this execution writes again)
            raise
        finally:
            self._writing = False
            turn, self._turn = self._turn, None
            if turn is not None:
                turn.set_result(None)

    @property
    def writing(self) -> bool:
        """Whether a write of this execution is in flight."""
        return self._writing

    async def _wait_turn(self) -> None:
        """Wait while another write of this execution is in flight."""
        while self._writing:
            if self._turn is None:
                self._turn = asyncio.get_running_loop().create_future()
            # shielded: a waiter cancelled (a step's timeout) leaves the others waiting
            await asyncio.shield(self._turn)

    async def _apply_now(
        self, suspension: Writes | None, finish: Finish | None, event_slack: int
    ) -> Sequence[Event]:
        writes = self.writes.take()
        if not writes and suspension is None and finish is None:
            return []  # the write in flight before this one sent them
        dating = self.undated_steps
        if dating:
            self.undated_steps = []
        self.unconfirmed_writes += 1
        try:
            applied = await self.store.apply(
                self.run_id,
                self.fence,
                self.last_id,
                writes,
                suspension=suspension,
                finish=finish,
                max_events=self.limits.max_events + event_slack,
                retention_seconds=self.retention_seconds,
                known_count=self.event_count,
            )
        except StoreUnavailable as exc:
            # The store is unreachable: this is not the step's failure. Unwind past user
            # code (a BaseException) and leave the task pending; it is retried after the
            # outage.
            raise Abort(exc) from exc
        except asyncio.CancelledError:
            # Interrupted mid-write (a step timeout, a cancel): whether the write happened
            # is unknown while the index already holds it, so neither can be trusted.
            # Start over from the log (the worker re-dispatches the task).
            raise Abort(
                Interrupted(
                    "a write was interrupted; the run restarts from its log", run_id=self.run_id
                )
            ) from None
        if applied.outcome is ApplyOutcome.LOST:
            raise Abort(LeaseLost("another worker or a cancel took over", run_id=self.run_id))
        if applied.outcome is ApplyOutcome.STALE:
            # Nothing was written, and this execution's index holds a decision the log
            # will not: start over from the log, where the answer that came decides.
            raise Abort(
                Interrupted(
                    "an answer came in while a first() was decided; the run restarts from its log",
                    run_id=self.run_id,
                )
            )
        if applied.outcome is ApplyOutcome.LIMIT:
            raise EventLimitExceeded(
                f"the run reached its limit of {self.limits.max_events} events",
                run_id=self.run_id,
            )
        self.unconfirmed_writes -= 1
        self.event_count += len(applied.arrived) + writes.event_count
        self.data_bytes += applied.arrived_bytes + writes.data_bytes
        if suspension is not None and applied.outcome is ApplyOutcome.OK:
            self.event_count += suspension.event_count
            self.data_bytes += suspension.data_bytes
        if applied.last_id:
            self.last_id = applied.last_id
            for step_id in dating:
                self.index.step_ends[step_id] = applied.last_id
        elif applied.arrived:
            self.last_id = applied.arrived[-1].id
        self.refused = applied.outcome is ApplyOutcome.REFUSED
        return applied.arrived
